// The extension's settings (package.json `contributes.configuration`), read into the client's options.

import * as vscode from "vscode";
import type { ClientOptions } from "../core/warpcode-client.js";

export const DEFAULT_URL = "ws://127.0.0.1:8765/acp";

export function readSettings(workspaceFolder: string | undefined): Pick<ClientOptions, "url" | "token" | "serverCommand"> {
  const settings = vscode.workspace.getConfiguration("warpcode");
  const command = settings.get<string>("serverCommand", "").trim();
  return {
    url: settings.get<string>("url", DEFAULT_URL).trim() || DEFAULT_URL,
    token: { token: settings.get<string>("token", ""), tokenFile: settings.get<string>("tokenFile", "").trim() },
    serverCommand: command ? { command, shell: true, ...(workspaceFolder ? { cwd: workspaceFolder } : {}) } : null,
  };
}
