// One live ACP v1 connection to `warpcode serve`: the SDK's client app over its WebSocket stream, initialized,
// with typed calls for the agent methods this extension uses (warpcode's `_warpcode/*` extensions included).
// The socket is opened first (socket.ts) so that a refused upgrade becomes a clear error, then handed to the SDK.

import {
  client,
  PROTOCOL_VERSION,
  type ClientConnection,
  type InitializeRequest,
  type InitializeResponse,
  type ListSessionsResponse,
  type LoadSessionResponse,
  type McpServer,
  type NewSessionResponse,
  type PromptResponse,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type ResumeSessionResponse,
  type SessionConfigOption,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import { createWebSocketStream, type WebSocketConstructor } from "@agentclientprotocol/sdk/experimental/ws-client";
import type WebSocket from "ws";
import type { EditorFiles } from "./editor-files.js";
import { openSocket, type SocketOptions } from "./socket.js";

export const CLIENT_INFO = { name: "warpcode-vscode", title: "warpcode for VS Code", version: "0.1.0" };

export interface ClientHandlers {
  onUpdate(notification: SessionNotification): void;
  askPermission(request: RequestPermissionRequest): Promise<RequestPermissionResponse>;
  files: EditorFiles | null; // null: the agent reads and writes the disk itself
}

export interface Checkpoint {
  id: string;
  message: string;
  time: string;
}

export interface Restored {
  restored: string;
  undoCheckpointId: string;
  changed: string[];
}

export interface SessionCapabilities {
  load: boolean; // session/load: reopen with the history replayed
  resume: boolean; // session/resume: reopen without it
  close: boolean;
  delete: boolean;
}

export class AgentConnection {
  private constructor(
    private readonly connection: ClientConnection,
    readonly info: InitializeResponse,
  ) {}

  static async open(options: SocketOptions, handlers: ClientHandlers): Promise<AgentConnection> {
    const socket = await openSocket(options);
    const app = client({ name: CLIENT_INFO.name })
      .onNotification("session/update", ({ params }) => handlers.onUpdate(params))
      .onRequest("session/request_permission", ({ params }) => handlers.askPermission(params));
    const files = handlers.files;
    if (files !== null) {
      app.onRequest("fs/read_text_file", ({ params }) => files.read(params));
      app.onRequest("fs/write_text_file", ({ params }) => files.write(params));
    }
    const connection = app.connect(createWebSocketStream(options.url, { WebSocket: adopt(socket), cookies: "omit" }));
    try {
      const request: InitializeRequest = {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: files !== null, writeTextFile: files !== null } },
        clientInfo: CLIENT_INFO,
      };
      const info = await connection.agent.request("initialize", request);
      if (info.protocolVersion !== PROTOCOL_VERSION) {
        throw new Error(`the agent speaks ACP v${info.protocolVersion}, this extension v${PROTOCOL_VERSION}: update one of them`);
      }
      return new AgentConnection(connection, info);
    } catch (error) {
      connection.close();
      throw error;
    }
  }

  get closed(): Promise<void> {
    return this.connection.closed;
  }

  get isOpen(): boolean {
    return !this.connection.signal.aborted;
  }

  get agentName(): string {
    const agent = this.info.agentInfo;
    return agent ? `${agent.title ?? agent.name} ${agent.version}` : "an ACP agent";
  }

  // What the agent offers beyond the basics (ACP 1.21 advertises resume, close and delete here).
  get sessionCapabilities(): SessionCapabilities {
    const offered = this.info.agentCapabilities;
    const sessions = offered?.sessionCapabilities;
    return { load: offered?.loadSession === true, resume: !!sessions?.resume, close: !!sessions?.close, delete: !!sessions?.delete };
  }

  newSession(cwd: string, mcpServers: McpServer[]): Promise<NewSessionResponse> {
    return this.connection.agent.request("session/new", { cwd, mcpServers });
  }

  loadSession(sessionId: string, cwd: string, mcpServers: McpServer[]): Promise<LoadSessionResponse> {
    return this.connection.agent.request("session/load", { sessionId, cwd, mcpServers });
  }

  resumeSession(sessionId: string, cwd: string, mcpServers: McpServer[]): Promise<ResumeSessionResponse> {
    return this.connection.agent.request("session/resume", { sessionId, cwd, mcpServers });
  }

  async closeSession(sessionId: string): Promise<void> {
    await this.connection.agent.request("session/close", { sessionId });
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.connection.agent.request("session/delete", { sessionId });
  }

  async setConfigOption(sessionId: string, configId: string, value: string): Promise<SessionConfigOption[]> {
    return (await this.connection.agent.request("session/set_config_option", { sessionId, configId, value })).configOptions;
  }

  listSessions(cwd: string | null, cursor: string | null): Promise<ListSessionsResponse> {
    return this.connection.agent.request("session/list", { cwd, cursor });
  }

  prompt(sessionId: string, text: string): Promise<PromptResponse> {
    return this.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  }

  cancel(sessionId: string): Promise<void> {
    return this.connection.agent.notify("session/cancel", { sessionId });
  }

  async setMode(sessionId: string, modeId: string): Promise<void> {
    await this.connection.agent.request("session/set_mode", { sessionId, modeId });
  }

  async checkpoints(sessionId: string): Promise<Checkpoint[]> {
    const answer = await this.connection.agent.request<{ checkpoints: Checkpoint[] }>("_warpcode/checkpoints", { sessionId });
    return answer.checkpoints;
  }

  restore(sessionId: string, checkpointId: string): Promise<Restored> {
    return this.connection.agent.request<Restored>("_warpcode/restore", { sessionId, checkpointId });
  }

  close(): void {
    this.connection.close();
  }
}

// The SDK's stream opens its own socket through the constructor it is given: this one hands over ours, already open.
function adopt(socket: WebSocket): WebSocketConstructor {
  return function AdoptedSocket() {
    return socket;
  } as unknown as WebSocketConstructor;
}
