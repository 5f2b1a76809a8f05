// The states posted to the chat webview carry only the transcript items it does not have yet. The update reducer
// never mutates an item and keeps every unchanged one the same object, so an item that is the very object posted
// last time at the same place is sent as null: an update costs what changed (one tool call, the growing message),
// not the length of the session, in the post and in the webview's render. A reloaded webview has nothing: after
// its "ready", everything is sent again.

import type { ChatViewState, TranscriptItem } from "./view-state.js";

export type PostedState = ChatViewState<TranscriptItem | null>; // null: as in the last post

export class ViewPosts {
  private sessionId: string | null = null; // of the last post; null also before the first
  private items: readonly TranscriptItem[] = [];

  // The webview was (re)loaded and has no items.
  reset(): void {
    this.sessionId = null;
    this.items = [];
  }

  next(state: ChatViewState): PostedState {
    const session = state.session;
    const before = session !== null && session.sessionId === this.sessionId ? this.items : [];
    this.sessionId = session?.sessionId ?? null;
    this.items = session?.transcript.items ?? [];
    if (session === null) return state;
    const items = session.transcript.items.map((item, index) => (before[index] === item ? null : item));
    return { ...state, session: { ...session, transcript: { ...session.transcript, items } } };
  }
}
