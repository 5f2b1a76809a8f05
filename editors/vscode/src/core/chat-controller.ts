// The chat view's controller: which session the view shows, whether the stored-session list is open, and what
// each message from the webview does (prompt, stop, mode and config pickers, answers, diffs, links, sessions). The
// editor-specific parts (the workspace folder, the diff editor, pop-ups) come in through `EditorHost`.

import type { ToExtension } from "./chat-messages.js";
import { CheckpointActions } from "./checkpoints.js";
import type { DiffView } from "./diff-model.js";
import { externalLink } from "./external-links.js";
import type { SessionState } from "./session-state.js";
import type { ChatViewState, SessionSummary } from "./view-state.js";
import { errorText, type WarpcodeClient } from "./warpcode-client.js";

export interface EditorHost {
  workspaceFolder(): string | undefined; // where new sessions work
  openDiff(diff: DiffView): void;
  openFile(absolutePath: string): void;
  openExternal(url: string): void; // outside VS Code, after the editor's own confirmation for untrusted domains
  showError(message: string): void;
  confirm(message: string, action: string): Promise<boolean>; // a modal question: true when `action` was chosen
}

export class ChatController {
  currentSessionId: string | null = null;
  readonly checkpoints: CheckpointActions; // "Undo last turn" remembers what it undid, per session
  private sessionList: SessionSummary[] | null = null; // null: the list is closed
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly client: WarpcodeClient,
    private readonly host: EditorHost,
  ) {
    this.checkpoints = new CheckpointActions(client);
    client.onChange(() => this.changed());
  }

  state(): ChatViewState {
    return this.client.viewState(this.currentSessionId, this.sessionList);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // Runs what the webview asked for; failures are shown to the user, never thrown back at the webview.
  async receive(message: ToExtension): Promise<void> {
    try {
      await this.handle(message);
    } catch (error) {
      const session = this.currentSessionId === null ? undefined : this.client.session(this.currentSessionId);
      if (message.type === "prompt" && session?.error) return; // already shown under the transcript
      this.host.showError(errorText(error));
    }
  }

  async newSession(): Promise<SessionState> {
    const folder = this.host.workspaceFolder();
    if (folder === undefined) throw new Error("Open a folder first: a warpcode session works in a workspace folder.");
    const session = await this.client.newSession(folder);
    this.show(session.sessionId);
    return session;
  }

  private async handle(message: ToExtension): Promise<void> {
    switch (message.type) {
      case "ready":
      case "connect":
        await this.client.connect().catch(() => undefined); // the status line says why it failed
        return;
      case "prompt": {
        const sessionId = this.currentSessionId ?? (await this.newSession()).sessionId;
        await this.client.prompt(sessionId, message.text);
        return;
      }
      case "stop":
        if (this.currentSessionId !== null) await this.client.cancel(this.currentSessionId);
        return;
      case "set-mode":
        if (this.currentSessionId !== null) await this.client.setMode(this.currentSessionId, message.modeId);
        return;
      case "set-config":
        if (this.currentSessionId !== null) await this.client.setConfigOption(this.currentSessionId, message.configId, message.value);
        return;
      case "answer":
        this.client.permissions.answer(message.requestId, message.optionId);
        return;
      case "open-diff":
        return this.openToolDiff(message.toolCallId, message.index);
      case "open-file":
        this.host.openFile(message.path);
        return;
      case "open-link": {
        const url = externalLink(message.url);
        if (url === null) throw new Error(`Not opening ${message.url}: only web and mail links open from the chat.`);
        this.host.openExternal(url);
        return;
      }
      case "open-permission-diff": {
        const question = this.client.permissions.views(this.currentSessionId ?? "").find((q) => q.requestId === message.requestId);
        const diff = question?.diffs[message.index];
        if (diff !== undefined) this.host.openDiff(diff);
        return;
      }
      case "new-session":
        await this.newSession();
        return;
      case "list-sessions":
        return this.listSessions();
      case "delete-session": {
        const question = `Delete the session "${message.title}"? It leaves the agent's session list for good; the files it changed stay as they are.`;
        if (!(await this.host.confirm(question, "Delete"))) return;
        await this.client.deleteSession(message.sessionId);
        if (this.currentSessionId === message.sessionId) this.currentSessionId = null;
        return this.listSessions();
      }
      case "close-sessions":
        this.sessionList = null;
        this.changed();
        return;
      case "open-session":
        await this.client.loadSession(message.sessionId, message.cwd);
        this.sessionList = null;
        this.show(message.sessionId);
        return;
    }
  }

  private async listSessions(): Promise<void> {
    this.sessionList = await this.client.listSessions(this.host.workspaceFolder() ?? null);
    this.changed();
  }

  private openToolDiff(toolCallId: string, index: number): void {
    const session = this.currentSessionId === null ? undefined : this.client.session(this.currentSessionId);
    const tool = session?.transcript.items.find((item) => item.kind === "tool" && item.id === toolCallId);
    const diff = tool?.kind === "tool" ? tool.diffs[index] : undefined;
    if (diff !== undefined) this.host.openDiff(diff);
  }

  private show(sessionId: string): void {
    this.currentSessionId = sessionId;
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
