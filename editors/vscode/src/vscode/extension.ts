// The VS Code extension's entry point: builds the client (settings, editor buffers, auto-start) and the chat
// controller, registers the chat view, the diff documents and the commands, and rebuilds the client when a
// warpcode setting changes. Everything else lives in the core (src/core/), which never imports vscode.

import * as vscode from "vscode";
import { ChatController, type EditorHost } from "../core/chat-controller.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { ChatViewProvider } from "./chat-view-provider.js";
import { registerCheckpointCommands } from "./checkpoint-commands.js";
import { DIFF_SCHEME, DiffDocuments } from "./diff-documents.js";
import { EditorBuffers } from "./editor-buffers.js";
import { readSettings } from "./settings.js";

let controller: ChatController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const diffs = new DiffDocuments();
  const host: EditorHost = {
    workspaceFolder: () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
    openDiff: (diff) => void diffs.open(diff),
    openFile: (absolutePath) => void vscode.window.showTextDocument(vscode.Uri.file(absolutePath), { preview: true }),
    openExternal: (url) => void vscode.env.openExternal(vscode.Uri.parse(url, true)),
    showError: (message) => void vscode.window.showErrorMessage(`warpcode: ${message}`),
    confirm: async (message, action) => (await vscode.window.showWarningMessage(message, { modal: true }, action)) === action,
  };
  const view = new ChatViewProvider(context.extensionUri, () => controller!);
  const build = () => {
    const client = new WarpcodeClient({ ...readSettings(), buffers: new EditorBuffers() });
    controller = new ChatController(client, host);
    controller.onChange(() => view.refresh());
  };
  build();
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, diffs),
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, view, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand("warpcode.newSession", () => controller!.receive({ type: "new-session" })),
    ...registerCheckpointCommands(() => controller!),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("warpcode")) return;
      await controller?.client.dispose();
      build();
      view.refresh();
      await controller!.receive({ type: "connect" });
    }),
  );
}

export async function deactivate(): Promise<void> {
  await controller?.client.dispose(); // and the server it started, if it started one
}
