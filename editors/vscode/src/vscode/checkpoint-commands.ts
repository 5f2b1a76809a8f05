// The commands "warpcode: Undo last turn" and "warpcode: Restore checkpoint…" for the session the chat view shows.

import * as vscode from "vscode";
import type { ChatController } from "../core/chat-controller.js";
import { errorText } from "../core/warpcode-client.js";

export function registerCheckpointCommands(controller: () => ChatController): vscode.Disposable[] {
  const current = () => {
    const chat = controller();
    if (chat.currentSessionId === null) throw new Error("No warpcode session is open: start one in the warpcode chat view.");
    return { sessionId: chat.currentSessionId, checkpoints: chat.checkpoints };
  };
  return [
    vscode.commands.registerCommand("warpcode.undoLastTurn", () =>
      reportErrors(async () => {
        const { sessionId, checkpoints } = current();
        const restored = await checkpoints.undoLastTurn(sessionId);
        void vscode.window.showInformationMessage(
          restored === null
            ? "Nothing to undo: no edits since the session began, or all of them undone."
            : `Undid the last turn's edits (${describe(restored.changed)}). "Restore checkpoint…" brings them back.`,
        );
      }),
    ),
    vscode.commands.registerCommand("warpcode.restoreCheckpoint", () =>
      reportErrors(async () => {
        const { sessionId, checkpoints } = current();
        const found = await checkpoints.list(sessionId);
        if (found.length === 0) {
          void vscode.window.showInformationMessage("No checkpoints yet: one is taken before each turn's first edit.");
          return;
        }
        const picked = await vscode.window.showQuickPick(
          found.map((c) => ({ label: c.message, description: new Date(c.time).toLocaleString(), detail: c.id.slice(0, 12), id: c.id })),
          { title: "Restore the workspace to a checkpoint (newest first)", placeHolder: "The files go back to how they were then" },
        );
        if (picked === undefined) return;
        const restored = await checkpoints.restore(sessionId, picked.id);
        void vscode.window.showInformationMessage(`Restored "${picked.label}" (${describe(restored.changed)}).`);
      }),
    ),
  ];
}

function describe(changed: string[]): string {
  if (changed.length === 0) return "no file changed";
  const shown = changed.slice(0, 5).join(", ");
  return changed.length > 5 ? `${shown} and ${changed.length - 5} more` : shown;
}

async function reportErrors(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    void vscode.window.showErrorMessage(`warpcode: ${errorText(error)}`);
  }
}
