// What the chat view shows, as plain data: the reducer builds it from session/update notifications, the session
// state adds the turn's lifecycle, and the webview renders it. Serialisable (it crosses into the webview as JSON).

import type { ConfigChoice } from "./config-options.js";
import type { DiffView } from "./diff-model.js";
import type { CommandChoice } from "./slash-commands.js";

export type ToolStatus = "pending" | "in_progress" | "completed" | "failed";

export type TranscriptItem =
  | { kind: "user"; text: string }
  | { kind: "agent"; text: string } // markdown
  | { kind: "thought"; text: string }
  | ToolItem;

export interface ToolItem {
  kind: "tool";
  id: string;
  title: string;
  toolKind: string; // ACP's ToolKind: read, edit, execute, think...
  status: ToolStatus;
  output: string; // the text content: command output, a read's excerpt, an error
  diffs: DiffView[];
  paths: string[]; // the locations the call touches
}

export interface PlanItem {
  content: string;
  status: "pending" | "in_progress" | "completed";
  priority: "high" | "medium" | "low";
}

export interface ModeChoice {
  id: string;
  name: string;
  description: string;
}

// What the agent streamed: rebuilt exactly by replaying the history (session/load). `Item` is TranscriptItem but
// in what is posted to the webview, where an item it already has is null (view-posts.ts).
export interface Transcript<Item = TranscriptItem> {
  items: Item[];
  plan: PlanItem[];
  usage: { used: number; size: number } | null;
  title: string | null;
  modeId: string | null;
  commands: CommandChoice[]; // the agent's slash commands, as last advertised
  configOptions: ConfigChoice[]; // the agent's pickers (mode, model), as last sent; empty: the modes picker
}

export interface PermissionView {
  requestId: number;
  title: string;
  toolKind: string;
  command: string | null; // for commands and tests: what would run
  diffs: DiffView[]; // for edits: the exact change, before it is made
  options: { optionId: string; name: string; kind: string }[];
}

export type ConnectionStatus =
  | { state: "connecting"; url: string }
  | { state: "connected"; url: string; agent: string }
  | { state: "reconnecting"; url: string; attempt: number; error: string }
  | { state: "disconnected"; url: string; error: string };

export interface SessionSummary {
  sessionId: string;
  title: string | null;
  cwd: string;
  updatedAt: string | null;
}

// Everything the webview needs for one render.
export interface ChatViewState<Item = TranscriptItem> {
  connection: ConnectionStatus;
  session: {
    sessionId: string;
    cwd: string;
    transcript: Transcript<Item>;
    modes: ModeChoice[];
    running: boolean;
    stopReason: string | null; // of the last turn; null while one runs or before the first
    error: string | null; // the last prompt's failure, in words
  } | null;
  permissions: PermissionView[]; // of the shown session, oldest first
  sessions: SessionSummary[] | null; // the stored sessions, when the list is open
  canDeleteSessions: boolean; // the agent offers session/delete
}

export function emptyTranscript(): Transcript {
  return { items: [], plan: [], usage: null, title: null, modeId: null, commands: [], configOptions: [] };
}
