// The diff model: exact line diffs (both texts rebuilt from the lines), hunks with three lines of context.

import assert from "node:assert/strict";
import { test } from "node:test";
import { diffFromContent, diffLines, diffView, splitLines } from "../core/diff-model.js";

function rebuilt(lines: ReturnType<typeof diffLines>) {
  return {
    before: lines.filter((l) => l.type !== "added").map((l) => l.text),
    after: lines.filter((l) => l.type !== "removed").map((l) => l.text),
  };
}

test("random edits: the diff holds both texts and is minimal for a single change", () => {
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  for (let round = 0; round < 200; round++) {
    const a = Array.from({ length: random(30) }, () => "abcde"[random(5)]!);
    const b = a.flatMap((line) => (random(4) === 0 ? [] : random(4) === 0 ? [line, "x"] : [line]));
    const lines = diffLines(a, b);
    assert.deepEqual(rebuilt(lines), { before: a, after: b });
  }
  const lines = diffLines(["a", "b", "c"], ["a", "B", "c"]);
  assert.deepEqual(lines.map((l) => `${l.type[0]}${l.text}`), ["ca", "rb", "aB", "cc"]);
});

test("hunks keep three lines of context and number lines like a unified diff", () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";
  const after = before.replace("line 3\n", "line three\n").replace("line 17\n", "");
  const view = diffView("/w/f.txt", before, after);
  assert.equal(view.hunks.length, 2);
  assert.deepEqual([view.hunks[0]!.oldStart, view.hunks[0]!.newStart, view.hunks[0]!.lines.length], [1, 1, 7]);
  assert.deepEqual([view.hunks[1]!.oldStart, view.hunks[1]!.newStart], [14, 14]);
  assert.deepEqual(view.hunks[1]!.lines.map((l) => l.type), ["context", "context", "context", "removed", "context", "context", "context"]);
  assert.deepEqual([view.added, view.removed, view.isNew], [1, 2, false]);
});

test("a new file is all added; CRLF and a missing final newline split the same way", () => {
  const view = diffView("/w/new.py", null, "print(1)\nprint(2)\n");
  assert.equal(view.isNew, true);
  assert.deepEqual(view.hunks[0]!.lines, [{ type: "added", text: "print(1)" }, { type: "added", text: "print(2)" }]);
  assert.deepEqual(splitLines("a\r\nb"), ["a", "b"]);
  assert.deepEqual(splitLines(""), []);
});

test("past the edit-distance cap the middle is replaced whole, still exact", () => {
  const a = Array.from({ length: 1500 }, (_, i) => `a${i}`);
  const b = Array.from({ length: 1500 }, (_, i) => `b${i}`);
  const lines = diffLines(a, b);
  assert.deepEqual(rebuilt(lines), { before: a, after: b });
});

test("a warpcode excerpt of a big file: hunks numbered as lines of the whole file", () => {
  const view = diffFromContent({ path: "/w/big.py", oldText: "a\nb\nc\n", newText: "a\nB\nc\n", _meta: { "warpcode/excerpt": { oldStartLine: 501, newStartLine: 498, oldLines: 9000, newLines: 8997, cut: false } } });
  assert.deepEqual(view.excerpt, { oldStartLine: 501, newStartLine: 498, cut: false });
  assert.deepEqual([view.hunks[0]!.oldStart, view.hunks[0]!.newStart], [501, 498]);
  assert.equal(diffFromContent({ path: "/w/small.py", oldText: "a\n", newText: "b\n" }).excerpt, null);
});
