// The extension's client of `warpcode serve`: one connection at a time, the sessions opened on it, and the
// permission queue. When the connection drops it reconnects with `initialize` + `session/load` for every open
// session (the server replays each history, which rebuilds the transcripts; an agent that can only resume is
// resumed, the transcript kept as it was); when nothing answers and a server command is configured, it starts
// `warpcode serve` itself. Every session is opened with the MCP servers of the user's settings.

import type { McpServer } from "@agentclientprotocol/sdk";
import { AgentConnection, type Checkpoint, type Restored, type SessionCapabilities } from "./agent-connection.js";
import { EditorFiles, type BufferProvider } from "./editor-files.js";
import { PermissionQueue } from "./permission-queue.js";
import { startServer, type ServerCommand, type StartedServer } from "./server-process.js";
import { SessionState } from "./session-state.js";
import { ConnectError } from "./socket.js";
import { resolveToken, TokenError, type TokenSource } from "./token.js";
import type { ChatViewState, ConnectionStatus, SessionSummary } from "./view-state.js";

const RECONNECT_DELAYS_MS = [200, 500, 1000, 2000, 5000]; // then every 5 s
const SESSION_ALREADY_OPEN = /already open on a connection/; // the server has not yet released the dropped one

export interface ClientOptions {
  url: string;
  token: TokenSource;
  headers?: Record<string, string>; // extra upgrade headers
  buffers: BufferProvider | null; // null: the agent uses the disk directly
  serverCommand: ServerCommand | null; // started when nothing answers at `url`
  mcpServers?: McpServer[]; // sent in session/new, load and resume (warpcode.mcpServers)
}

export class WarpcodeClient {
  readonly permissions = new PermissionQueue();
  status: ConnectionStatus;
  private connection: AgentConnection | null = null;
  private connecting: Promise<AgentConnection> | null = null;
  private readonly sessions = new Map<string, SessionState>();
  private readonly listeners = new Set<() => void>();
  private server: StartedServer | null = null;
  private url: string;
  private token: TokenSource;
  private disposed = false;
  private reconnecting = false;

  constructor(private readonly options: ClientOptions) {
    this.url = options.url;
    this.token = options.token;
    this.status = { state: "disconnected", url: this.url, error: "Not connected yet." };
    this.permissions.onChange(() => this.changed());
  }

  // Connects (once; concurrent callers share the attempt) and throws a ConnectError or token error in words.
  connect(): Promise<AgentConnection> {
    if (this.connection?.isOpen) return Promise.resolve(this.connection);
    this.connecting ??= this.firstConnect().finally(() => (this.connecting = null));
    return this.connecting;
  }

  session(sessionId: string): SessionState | undefined {
    return this.sessions.get(sessionId);
  }

  async newSession(cwd: string): Promise<SessionState> {
    const answer = await (await this.connect()).newSession(cwd, this.mcpServers);
    const session = new SessionState(answer.sessionId, cwd, answer);
    this.sessions.set(session.sessionId, session);
    this.changed();
    return session;
  }

  // Opens a stored session (its history replays into the transcript; an agent without session/load resumes it,
  // without the history); one already open here is just returned.
  async loadSession(sessionId: string, cwd: string): Promise<SessionState> {
    const open = this.sessions.get(sessionId);
    if (open !== undefined) return open;
    const connection = await this.connect();
    const session = new SessionState(sessionId, cwd, {});
    this.sessions.set(sessionId, session);
    try {
      await this.reopen(connection, session);
    } catch (error) {
      this.sessions.delete(sessionId);
      throw error;
    }
    return session;
  }

  async listSessions(cwd: string | null): Promise<SessionSummary[]> {
    const connection = await this.connect();
    const found: SessionSummary[] = [];
    let cursor: string | null = null;
    do {
      const page = await connection.listSessions(cwd, cursor);
      for (const s of page.sessions) found.push({ sessionId: s.sessionId, title: s.title ?? null, cwd: s.cwd, updatedAt: s.updatedAt ?? null });
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
    return found;
  }

  // Runs one prompt turn; resolves with its stop reason once every update of the turn has been applied.
  async prompt(sessionId: string, text: string): Promise<string> {
    const session = this.known(sessionId);
    const connection = await this.connect();
    session.startTurn(text);
    this.changed();
    try {
      const { stopReason } = await connection.prompt(sessionId, text);
      session.endTurn({ stopReason });
      return stopReason;
    } catch (error) {
      session.endTurn({ error: connection.isOpen ? errorText(error) : "The connection to warpcode serve was lost: the turn was cancelled." });
      throw error;
    } finally {
      this.changed();
    }
  }

  // session/cancel, and the session's unanswered permission questions answered `cancelled`.
  async cancel(sessionId: string): Promise<void> {
    this.permissions.cancelSession(sessionId);
    await this.connection?.cancel(sessionId);
  }

  async setMode(sessionId: string, modeId: string): Promise<void> {
    const session = this.known(sessionId);
    await (await this.connect()).setMode(sessionId, modeId);
    session.setMode(modeId);
    this.changed();
  }

  // session/set_config_option: the answer is the full set of options, the new value in it.
  async setConfigOption(sessionId: string, configId: string, value: string): Promise<void> {
    const session = this.known(sessionId);
    session.setConfigOptions(await (await this.connect()).setConfigOption(sessionId, configId, value));
    this.changed();
  }

  // Removes a stored session from the agent's list (session/delete). Open here, it is closed first: its turn
  // cancelled, its questions answered `cancelled`, and session/close sent where the agent offers it.
  async deleteSession(sessionId: string): Promise<void> {
    const connection = await this.connect();
    const offered = connection.sessionCapabilities;
    if (!offered.delete) throw new Error(`${connection.agentName} cannot delete sessions (it does not offer session/delete).`);
    if (this.sessions.has(sessionId)) {
      await this.cancel(sessionId);
      if (offered.close) await connection.closeSession(sessionId);
      this.sessions.delete(sessionId);
    }
    await connection.deleteSession(sessionId);
    this.changed();
  }

  async checkpoints(sessionId: string): Promise<Checkpoint[]> {
    return (await this.connect()).checkpoints(this.known(sessionId).sessionId);
  }

  async restore(sessionId: string, checkpointId: string): Promise<Restored> {
    return (await this.connect()).restore(this.known(sessionId).sessionId, checkpointId);
  }

  // What the chat view shows for one session (null: none yet), and the stored sessions when that list is open.
  viewState(sessionId: string | null, sessions: SessionSummary[] | null): ChatViewState {
    const session = sessionId === null ? undefined : this.sessions.get(sessionId);
    return {
      connection: this.status,
      session: session?.view() ?? null,
      permissions: session ? this.permissions.views(session.sessionId) : [],
      sessions,
      canDeleteSessions: this.connection?.sessionCapabilities.delete ?? false,
    };
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.permissions.cancelAll();
    this.connection?.close();
    await this.server?.stop();
  }

  private async firstConnect(): Promise<AgentConnection> {
    this.setStatus({ state: "connecting", url: this.url });
    let failure: unknown;
    try {
      return this.connected(await this.open());
    } catch (error) {
      failure = error;
    }
    // Nothing answers (or no token yet: a first start creates it): start the configured server, once.
    const startable = (failure instanceof ConnectError && failure.failure === "unreachable") || failure instanceof TokenError;
    if (startable && this.options.serverCommand && !this.server) {
      try {
        this.server = await startServer(this.options.serverCommand);
        this.url = this.server.url;
        if (this.server.tokenFile !== null) this.token = { token: "", tokenFile: this.server.tokenFile };
        return this.connected(await this.open());
      } catch (error) {
        failure = new Error(`${errorText(failure)} Starting warpcode.serverCommand did not help: ${errorText(error)}`);
      }
    }
    this.setStatus({ state: "disconnected", url: this.url, error: errorText(failure) });
    throw failure;
  }

  private async open(): Promise<AgentConnection> {
    const token = await resolveToken(this.token);
    const buffers = this.options.buffers;
    const connection = await AgentConnection.open(
      { url: this.url, token, ...(this.options.headers ? { headers: this.options.headers } : {}) },
      {
        onUpdate: ({ sessionId, update }) => {
          this.sessions.get(sessionId)?.apply(update);
          this.changed();
        },
        askPermission: (request) => this.permissions.ask(request),
        files: buffers ? new EditorFiles(buffers, (sessionId) => this.sessions.get(sessionId)?.cwd) : null,
      },
    );
    this.connection = connection;
    void connection.closed.then(() => this.dropped(connection));
    return connection;
  }

  private connected(connection: AgentConnection): AgentConnection {
    this.setStatus({ state: "connected", url: this.url, agent: connection.agentName });
    return connection;
  }

  private dropped(connection: AgentConnection): void {
    // Closed on purpose, replaced, or lost while a reconnect restores it (that loop tries again).
    if (this.disposed || this.connection !== connection || this.reconnecting) return;
    this.connection = null;
    this.permissions.cancelAll(); // their requests died with the connection
    this.reconnecting = true;
    this.connecting = this.reconnect().finally(() => {
      this.connecting = null;
      this.reconnecting = false;
    });
    this.connecting.catch(() => undefined); // the loop only ends when disposed
  }

  private async reconnect(): Promise<AgentConnection> {
    let error = "the connection was lost";
    for (let attempt = 1; ; attempt++) {
      this.setStatus({ state: "reconnecting", url: this.url, attempt, error });
      await sleep(RECONNECT_DELAYS_MS[Math.min(attempt, RECONNECT_DELAYS_MS.length) - 1]!);
      if (this.disposed) throw new Error("the extension was shut down");
      try {
        const reopened = await this.open();
        for (const session of this.sessions.values()) await this.reopen(reopened, session);
        return this.connected(reopened);
      } catch (failure) {
        error = errorText(failure);
        const halfRestored = this.connection;
        this.connection = null; // before closing, so that its end is not taken for another drop
        halfRestored?.close();
      }
    }
  }

  private async reopen(connection: AgentConnection, session: SessionState): Promise<void> {
    const how = reopenMethod(connection.sessionCapabilities);
    if (how === null) throw new Error(`${connection.agentName} cannot reopen stored sessions (it offers neither session/load nor session/resume).`);
    for (let attempt = 1; ; attempt++) {
      if (how === "load") session.startReplay();
      try {
        const { sessionId, cwd } = session;
        session.opened(how === "load" ? await connection.loadSession(sessionId, cwd, this.mcpServers) : await connection.resumeSession(sessionId, cwd, this.mcpServers));
        this.changed();
        return;
      } catch (error) {
        if (!SESSION_ALREADY_OPEN.test(errorText(error)) || attempt === RECONNECT_DELAYS_MS.length) throw error;
        await sleep(RECONNECT_DELAYS_MS[attempt - 1]!);
      }
    }
  }

  private get mcpServers(): McpServer[] {
    return this.options.mcpServers ?? [];
  }

  private known(sessionId: string): SessionState {
    const session = this.sessions.get(sessionId);
    if (session === undefined) throw new Error(`Session ${sessionId} is not open: open it from the session list first.`);
    return session;
  }

  private setStatus(status: ConnectionStatus): void {
    this.status = status;
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

// How a stored session is reopened: session/load when the agent offers it (the history replays, so the transcript
// is exactly the agent's), else session/resume (the session goes on; what the editor shows is what it had).
export function reopenMethod(offered: SessionCapabilities): "load" | "resume" | null {
  return offered.load ? "load" : offered.resume ? "resume" : null;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
