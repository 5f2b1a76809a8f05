// One session as the editor knows it: its transcript (built by the update reducer), its modes and config options,
// and the lifecycle of its prompt turns (running, the stop reason, a failure in words).

import type { SessionConfigOption, SessionModeState, SessionUpdate } from "@agentclientprotocol/sdk";
import { configChoices } from "./config-options.js";
import { reduceUpdate } from "./update-reducer.js";
import { emptyTranscript, type ChatViewState, type ModeChoice, type Transcript } from "./view-state.js";

export interface Opened {
  modes?: SessionModeState | null;
  configOptions?: SessionConfigOption[] | null;
}

export class SessionState {
  transcript: Transcript = emptyTranscript();
  modes: ModeChoice[];
  running = false;
  stopReason: string | null = null;
  error: string | null = null;

  constructor(
    readonly sessionId: string,
    readonly cwd: string,
    opened: Opened,
  ) {
    this.modes = [];
    this.opened(opened);
  }

  // What session/new, load or resume answered: the modes and the config options, when the agent sends them.
  opened({ modes, configOptions }: Opened): void {
    this.setModes(modes);
    if (configOptions) this.setConfigOptions(configOptions);
  }

  setConfigOptions(options: SessionConfigOption[]): void {
    this.transcript = { ...this.transcript, configOptions: configChoices(options) };
  }

  private setModes(modes: SessionModeState | null | undefined): void {
    if (!modes) return;
    this.modes = modes.availableModes.map(({ id, name, description }) => ({ id, name, description: description ?? "" }));
    this.transcript = { ...this.transcript, modeId: modes.currentModeId };
  }

  apply(update: SessionUpdate): void {
    this.transcript = reduceUpdate(this.transcript, update);
  }

  // session/load replays the whole history: it replaces what was shown (the pickers and commands stay).
  startReplay(): void {
    const { modeId, commands, configOptions } = this.transcript;
    this.transcript = { ...emptyTranscript(), modeId, commands, configOptions };
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
