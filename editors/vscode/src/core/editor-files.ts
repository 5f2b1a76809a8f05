// fs/read_text_file and fs/write_text_file: the agent reads and writes files through the editor, so unsaved
// buffers win over the disk and edits land where the user can undo them. `BufferProvider` is what an editor
// implements (VS Code: open documents and WorkspaceEdit; the tests: a map). `EditorFiles` answers the requests,
// confining every path to its session's directory.

import * as path from "node:path";
import type { ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest } from "@agentclientprotocol/sdk";
import { RequestError } from "@agentclientprotocol/sdk";

export interface BufferProvider {
  // The file's text as the editor has it: the open buffer (unsaved changes included), else the disk.
  readText(absolutePath: string): Promise<string>;
  // Replace (or create) the file's text as an undoable edit, saved so that commands the agent runs see it.
  writeText(absolutePath: string, text: string): Promise<void>;
}

export class EditorFiles {
  constructor(
    private readonly buffers: BufferProvider,
    private readonly cwdOf: (sessionId: string) => string | undefined,
  ) {}

  async read(request: ReadTextFileRequest): Promise<ReadTextFileResponse> {
    const text = await this.buffers.readText(this.confined(request.sessionId, request.path));
    return { content: sliceLines(text, request.line ?? null, request.limit ?? null) };
  }

  async write(request: WriteTextFileRequest): Promise<Record<string, never>> {
    await this.buffers.writeText(this.confined(request.sessionId, request.path), request.content);
    return {};
  }

  private confined(sessionId: string, requested: string): string {
    const cwd = this.cwdOf(sessionId);
    if (cwd === undefined) throw RequestError.invalidParams({ sessionId }, `no session ${sessionId} is open in this editor`);
    const resolved = path.resolve(cwd, requested);
    const relative = path.relative(cwd, resolved);
    if (relative.startsWith("..") || path.isAbsolute(relative)) {
      throw RequestError.invalidParams({ path: requested }, `${requested} is outside the session's folder ${cwd}`);
    }
    return resolved;
  }
}

// ACP's optional window: `line` is 1-based, `limit` a number of lines.
export function sliceLines(text: string, line: number | null, limit: number | null): string {
  if (line === null && limit === null) return text;
  const lines = text.split("\n");
  const start = Math.max(0, (line ?? 1) - 1);
  return lines.slice(start, limit === null ? undefined : start + limit).join("\n");
}
