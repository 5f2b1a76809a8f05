// The tests' editor: unsaved buffers in a map over the disk, every call recorded. A write lands in the buffer and
// is saved, as the VS Code layer's WorkspaceEdit + save does.

import { readFile, writeFile } from "node:fs/promises";
import type { BufferProvider } from "../../core/editor-files.js";

export class MemoryBuffers implements BufferProvider {
  readonly unsaved = new Map<string, string>();
  readonly reads: string[] = [];
  readonly writes: string[] = [];

  async readText(absolutePath: string): Promise<string> {
    this.reads.push(absolutePath);
    return this.unsaved.get(absolutePath) ?? (await readFile(absolutePath, "utf8"));
  }

  async writeText(absolutePath: string, text: string): Promise<void> {
    this.writes.push(absolutePath);
    this.unsaved.delete(absolutePath);
    await writeFile(absolutePath, text);
  }
}
