// The extension's settings, read into the client's options from the user's settings only (core/client-settings.ts
// says why); a workspace that sets one of them is told that it was ignored, and an MCP server left out says why.

import * as vscode from "vscode";
import { clientSettings, type ClientSettings } from "../core/client-settings.js";

export function readSettings(): ClientSettings["options"] {
  const { options, ignored, problems } = clientSettings(vscode.workspace.getConfiguration("warpcode"));
  for (const problem of problems) void vscode.window.showWarningMessage(`warpcode: ${problem}`);
  if (ignored.length > 0) {
    void vscode.window.showWarningMessage(
      `warpcode: ignored ${ignored.join(", ")} from this workspace's settings: a repository may not choose the server ` +
        `command or where the token goes. Set them in your user settings.`,
    );
  }
  return options;
}
