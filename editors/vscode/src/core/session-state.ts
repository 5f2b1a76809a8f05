// One session as the editor knows it: its transcript (built by the update reducer), its modes, and the lifecycle
// of its prompt turns (running, the stop reason, a failure in words).

import type { SessionModeState, SessionUpdate } from "@agentclientprotocol/sdk";
import { reduceUpdate } from "./update-reducer.js";
import { emptyTranscript, type ChatViewState, type ModeChoice, type Transcript } from "./view-state.js";

export class SessionState {
  transcript: Transcript = emptyTranscript();
  modes: ModeChoice[];
  running = false;
  stopReason: string | null = null;
  error: string | null = null;

  constructor(
    readonly sessionId: string,
    readonly cwd: string,
    modes: SessionModeState | null | undefined,
  ) {
    this.modes = [];
    this.setModes(modes);
  }

  setModes(modes: SessionModeState | null | undefined): void {
    if (!modes) return;
    this.modes = modes.availableModes.map(({ id, name, description }) => ({ id, name, description: description ?? "" }));
    this.transcript = { ...this.transcript, modeId: modes.currentModeId };
  }

  apply(update: SessionUpdate): void {
    this.transcript = reduceUpdate(this.transcript, update);
  }

  // session/load replays the whole history: it replaces what was shown.
  startReplay(): void {
    const modeId = this.transcript.modeId;
    this.transcript = { ...emptyTranscript(), modeId };
  }

  startTurn(text: string): void {
    this.apply({ sessionUpdate: "user_message_chunk", content: { type: "text", text } });
    this.running = true;
    this.stopReason = null;
    this.error = null;
  }

  endTurn(outcome: { stopReason: string } | { error: string }): void {
    this.running = false;
    if ("stopReason" in outcome) this.stopReason = outcome.stopReason;
    else this.error = outcome.error;
  }

  setMode(modeId: string): void {
    this.transcript = { ...this.transcript, modeId };
  }

  view(): NonNullable<ChatViewState["session"]> {
    const { sessionId, cwd, transcript, modes, running, stopReason, error } = this;
    return { sessionId, cwd, transcript, modes, running, stopReason, error };
  }
}
