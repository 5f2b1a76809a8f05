// What the extension posts to the chat view: the transcript items the webview does not have yet, found by identity
// (the update reducer keeps every unchanged item the same object), and everything after a reload or a switch of
// session. Driven by the real reducer through a SessionState.

import assert from "node:assert/strict";
import { test } from "node:test";
import { SessionState } from "../core/session-state.js";
import { ViewPosts, type PostedState } from "../core/view-posts.js";
import type { ChatViewState } from "../core/view-state.js";

function state(session: SessionState | null): ChatViewState {
  return { connection: { state: "connected", url: "ws://x", agent: "a" }, session: session?.view() ?? null, permissions: [], sessions: null, canDeleteSessions: false };
}

function sent(posted: PostedState): (string | null)[] {
  return posted.session!.transcript.items.map((item) => (item === null ? null : item.kind));
}

test("only the items that changed since the last post are sent; all of them after a reset or another session", () => {
  const session = new SessionState("s1", "/repo", {});
  session.startTurn("fix it");
  session.apply({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Reading" } });
  session.apply({ sessionUpdate: "tool_call", toolCallId: "t1", title: "Read a.py", kind: "read", status: "pending" });
  session.apply({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Now" } });
  const posts = new ViewPosts();
  assert.deepEqual(sent(posts.next(state(session))), ["user", "agent", "tool", "agent"]);
  assert.deepEqual(sent(posts.next(state(session))), [null, null, null, null]);

  session.apply({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: " editing" } });
  const grown = posts.next(state(session));
  assert.deepEqual(sent(grown), [null, null, null, "agent"]);
  assert.deepEqual(grown.session!.transcript.items[3], { kind: "agent", text: "Now editing" });

  session.apply({ sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed" });
  session.apply({ sessionUpdate: "plan", entries: [{ content: "Edit", status: "pending", priority: "high" }] });
  const posted = posts.next(state(session));
  assert.deepEqual(sent(posted), [null, null, "tool", null]);
  assert.deepEqual(posted.session!.transcript.plan, [{ content: "Edit", status: "pending", priority: "high" }]);

  posts.reset(); // the webview reloaded
  assert.deepEqual(sent(posts.next(state(session))), ["user", "agent", "tool", "agent"]);

  const other = new SessionState("s2", "/repo", {});
  other.startTurn("hello");
  assert.deepEqual(sent(posts.next(state(other))), ["user"]);
  assert.equal(posts.next(state(null)).session, null);
  assert.deepEqual(sent(posts.next(state(session))), ["user", "agent", "tool", "agent"]); // back: the webview redrew it

  session.startReplay(); // session/load replays the history into new items
  session.startTurn("fix it");
  assert.deepEqual(sent(posts.next(state(session))), ["user"]);
});
