// The diff model: an ACP `diff` content (path, oldText, newText) as line hunks for the chat view, with the texts
// kept for the editor's diff view. Lines are compared with Myers' O(ND) algorithm after trimming the common head
// and tail; past MAX_EDIT_DISTANCE differing lines the middle is shown as removed-then-added, still exact.
// warpcode sends a big file's change as excerpts, one per changed region (`_meta["warpcode/excerpt"]` says where
// each starts): their hunks are numbered as lines of the whole file.

import type { Diff } from "@agentclientprotocol/sdk";

export interface DiffLine {
  type: "context" | "added" | "removed";
  text: string;
}

export interface DiffHunk {
  oldStart: number; // 1-based, like a unified diff's @@ header
  newStart: number;
  lines: DiffLine[];
}

export interface Excerpt {
  oldStartLine: number; // 1-based
  newStartLine: number;
  cut: boolean; // the region itself was too big to show whole
}

export interface DiffView {
  path: string;
  isNew: boolean; // no old text: the file is created
  excerpt: Excerpt | null; // null: the texts are the whole file
  oldText: string;
  newText: string;
  hunks: DiffHunk[];
  added: number;
  removed: number;
}

const CONTEXT_LINES = 3;
const MAX_EDIT_DISTANCE = 1000; // the trace holds (2D + 3) integers per step

const EXCERPT_META = "warpcode/excerpt";

export function diffFromContent(diff: Diff): DiffView {
  const meta = diff._meta?.[EXCERPT_META] as Partial<Excerpt> | undefined;
  const excerpt = typeof meta?.oldStartLine === "number" && typeof meta.newStartLine === "number"
    ? { oldStartLine: meta.oldStartLine, newStartLine: meta.newStartLine, cut: meta.cut === true }
    : null;
  return diffView(diff.path, diff.oldText, diff.newText, excerpt);
}

export function diffView(path: string, oldText: string | null | undefined, newText: string, excerpt: Excerpt | null = null): DiffView {
  const before = oldText ?? "";
  const lines = diffLines(splitLines(before), splitLines(newText));
  const hunks = toHunks(lines, CONTEXT_LINES).map((hunk) =>
    excerpt === null ? hunk : { ...hunk, oldStart: hunk.oldStart + excerpt.oldStartLine - 1, newStart: hunk.newStart + excerpt.newStartLine - 1 },
  );
  return {
    path,
    isNew: oldText === null || oldText === undefined,
    excerpt,
    oldText: before,
    newText,
    hunks,
    added: lines.filter((l) => l.type === "added").length,
    removed: lines.filter((l) => l.type === "removed").length,
  };
}

export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === "") lines.pop(); // a final newline ends the last line, it starts none
  return lines;
}

export function diffLines(a: string[], b: string[]): DiffLine[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const middle = myers(a.slice(head, a.length - tail), b.slice(head, b.length - tail));
  const context = (text: string): DiffLine => ({ type: "context", text });
  return [...a.slice(0, head).map(context), ...middle, ...a.slice(a.length - tail).map(context)];
}

function myers(a: string[], b: string[]): DiffLine[] {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, MAX_EDIT_DISTANCE);
  const offset = max + 1;
  const frontier = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(frontier.slice());
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && frontier[offset + k - 1]! < frontier[offset + k + 1]!);
      let x = down ? frontier[offset + k + 1]! : frontier[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      frontier[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, offset, d);
    }
  }
  return [...a.map((text) => ({ type: "removed" as const, text })), ...b.map((text) => ({ type: "added" as const, text }))];
}

function backtrack(trace: Int32Array[], a: string[], b: string[], offset: number, last: number): DiffLine[] {
  const out: DiffLine[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = last; d >= 0; d--) {
    const frontier = trace[d]!; // as it was before step d
    const k = x - y;
    const down = k === -d || (k !== d && frontier[offset + k - 1]! < frontier[offset + k + 1]!);
    const prevK = d === 0 ? 0 : down ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : frontier[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      out.push({ type: "context", text: a[x]! });
    }
    if (d === 0) break;
    if (down) out.push({ type: "added", text: b[--y]! });
    else out.push({ type: "removed", text: a[--x]! });
  }
  return out.reverse();
}

export function toHunks(lines: DiffLine[], context: number): DiffHunk[] {
  const shown = new Array<boolean>(lines.length).fill(false);
  lines.forEach((line, index) => {
    if (line.type === "context") return;
    for (let i = Math.max(0, index - context); i <= Math.min(lines.length - 1, index + context); i++) shown[i] = true;
  });
  const hunks: DiffHunk[] = [];
  let current: DiffHunk | null = null;
  let oldLine = 1;
  let newLine = 1;
  lines.forEach((line, index) => {
    if (!shown[index]) current = null;
    else {
      if (current === null) {
        current = { oldStart: oldLine, newStart: newLine, lines: [] };
        hunks.push(current);
      }
      current.lines.push(line);
    }
    if (line.type !== "added") oldLine++;
    if (line.type !== "removed") newLine++;
  });
  return hunks;
}
