// VS Code's diff editor for the agent's edits: both sides are read-only virtual documents (scheme warpcode-diff)
// holding the edit's old and new text, so the view shows exactly that change, also before it is made.

import * as path from "node:path";
import * as vscode from "vscode";
import type { DiffView } from "../core/diff-model.js";

export const DIFF_SCHEME = "warpcode-diff";
const KEPT_TEXTS = 100; // the newest diffs stay openable; older ones are dropped

export class DiffDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private next = 0;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.query) ?? "(this diff is no longer kept: open it again from the chat view)";
  }

  async open(diff: DiffView): Promise<void> {
    const name = path.basename(diff.path);
    const left = this.keep(diff.path, diff.oldText);
    const right = this.keep(diff.path, diff.newText);
    const what = diff.isNew ? "new file" : diff.excerpt ? `warpcode's edit, from line ${diff.excerpt.oldStartLine}` : "warpcode's edit";
    const title = `${name} (${what})`;
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true });
  }

  private keep(file: string, text: string): vscode.Uri {
    const key = String(this.next++);
    this.texts.set(key, text);
    if (this.texts.size > KEPT_TEXTS) this.texts.delete(this.texts.keys().next().value!);
    return vscode.Uri.from({ scheme: DIFF_SCHEME, path: file, query: key }); // the path: the file's language mode
  }
}
