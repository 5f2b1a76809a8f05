// The agent's file reads and writes through VS Code: an open document's text (unsaved changes included) wins over
// the disk; a write is a WorkspaceEdit (so Ctrl+Z undoes it), then saved so that the commands and tests the agent
// runs next see it.

import * as vscode from "vscode";
import type { BufferProvider } from "../core/editor-files.js";

export class EditorBuffers implements BufferProvider {
  async readText(absolutePath: string): Promise<string> {
    const open = openDocument(absolutePath);
    if (open !== undefined) return open.getText();
    return new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.file(absolutePath)));
  }

  async writeText(absolutePath: string, text: string): Promise<void> {
    const uri = vscode.Uri.file(absolutePath);
    const edit = new vscode.WorkspaceEdit();
    if (await exists(uri)) {
      const document = openDocument(absolutePath) ?? (await vscode.workspace.openTextDocument(uri));
      edit.replace(uri, document.validateRange(new vscode.Range(0, 0, document.lineCount, 0)), text);
    } else {
      edit.createFile(uri, { ignoreIfExists: true });
      edit.insert(uri, new vscode.Position(0, 0), text);
    }
    if (!(await vscode.workspace.applyEdit(edit))) throw new Error(`VS Code refused the edit of ${absolutePath}`);
    const document = openDocument(absolutePath) ?? (await vscode.workspace.openTextDocument(uri));
    if (!(await document.save())) throw new Error(`VS Code could not save ${absolutePath}`);
  }
}

function openDocument(absolutePath: string): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((document) => document.uri.scheme === "file" && document.uri.fsPath === absolutePath);
}

async function exists(uri: vscode.Uri): Promise<boolean> {
  try {
    await vscode.workspace.fs.stat(uri);
    return true;
  } catch {
    return false;
  }
}
