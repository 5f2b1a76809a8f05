// fs/read_text_file and fs/write_text_file answered from the buffer provider: confined to the session's folder,
// ACP's line window applied.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { BufferProvider } from "../core/editor-files.js";
import { EditorFiles, sliceLines } from "../core/editor-files.js";

const buffers = (): BufferProvider & { texts: Map<string, string> } => {
  const texts = new Map([["/w/a.txt", "1\n2\n3\n4\n"]]);
  return { texts, readText: async (p) => texts.get(p) ?? "", writeText: async (p, t) => void texts.set(p, t) };
};

test("reads and writes inside the session's folder; anything else is refused", async () => {
  const memory = buffers();
  const files = new EditorFiles(memory, (sessionId) => (sessionId === "s" ? "/w" : undefined));
  assert.deepEqual(await files.read({ sessionId: "s", path: "/w/a.txt", line: 2, limit: 2 }), { content: "2\n3" });
  assert.deepEqual(await files.write({ sessionId: "s", path: "/w/sub/b.txt", content: "new" }), {});
  assert.equal(memory.texts.get("/w/sub/b.txt"), "new");
  await assert.rejects(files.read({ sessionId: "s", path: "/etc/passwd" }), /\/etc\/passwd is outside the session's folder \/w/);
  await assert.rejects(files.write({ sessionId: "s", path: "/w/../x", content: "" }), /outside the session's folder/);
  await assert.rejects(files.read({ sessionId: "other", path: "/w/a.txt" }), /no session other is open in this editor/);
});

test("the line window: 1-based start, a count of lines", () => {
  assert.equal(sliceLines("a\nb\nc", null, null), "a\nb\nc");
  assert.equal(sliceLines("a\nb\nc", 3, null), "c");
  assert.equal(sliceLines("a\nb\nc", null, 1), "a");
});
