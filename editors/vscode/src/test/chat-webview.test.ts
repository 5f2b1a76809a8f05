// The chat webview in a real browser: a recorded session state rendered by the webview's own page, bundle and
// stylesheet in headless Chromium. The DOM must show the transcript, the edit's diff and the permission question;
// the screenshot must show them too (each region drawn, the diff's added and removed lines in their colours).
// Skipped, saying so, where Chromium is not installed (`apt-get install chromium`).

import assert from "node:assert/strict";
import { test } from "node:test";
import { PNG } from "pngjs";
import { findChromium, renderInChromium, type Rect } from "./support/chromium.js";
import { RECORDED_PROMPT, RECORDED_TEST_COMMAND, recordChatState } from "./support/chat-recording.js";

const BACKGROUND = [0x18, 0x18, 0x18]; // --bg's fallback: the sidebar of VS Code's Dark Modern

const chromium = await findChromium();

test("the chat view shows the transcript, a diff and a permission prompt", { skip: chromium === null && "chromium is not installed (apt-get install chromium)" }, async () => {
  const state = await recordChatState();
  const { dom, regions, screenshot } = await renderInChromium(chromium!, state, { width: 460, height: 1100 });

  // The DOM: what the user reads.
  assert.match(dom, new RegExp(`<div class="who">You</div><div class="text">${RECORDED_PROMPT}</div>`));
  assert.match(dom, /<details class="thought"[^>]*><summary>Thought<\/summary>/); // collapsed
  assert.match(dom, /<p>Let me look at <code>calc\.py<\/code>\.<\/p>/); // markdown
  assert.match(dom, /data-action="open-file" data-path="calc\.py"[^>]*>Read calc\.py<\/button><span class="tool-status">completed<\/span>/);
  assert.match(dom, /data-action="open-file" data-path="calc\.py"[^>]*>Edit calc\.py<\/button><span class="tool-status">completed<\/span>/);
  assert.match(dom, /<span class="tool-title">Run tests python3 -m unittest test_calc<\/span><span class="tool-status">pending<\/span>/);
  assert.match(dom, /Context: [\d,]+ of 32,768 tokens/);
  assert.match(dom, /<div class="line removed"><span class="sign">−<\/span> {4}return a - b<\/div><div class="line added"><span class="sign">\+<\/span> {4}return a \+ b<\/div>/);
  assert.match(dom, /<li class="plan-completed"><span class="plan-icon">✓<\/span>Fix the sign in add<\/li>/);
  assert.match(dom, new RegExp(`Allow <b>Run tests ${RECORDED_TEST_COMMAND}</b>\\?</div><pre class="command">\\$ ${RECORDED_TEST_COMMAND}</pre>`));
  for (const answer of ["Allow once", "Always allow", "Reject once", "Always reject"]) assert.match(dom, new RegExp(`data-action="answer"[^>]*>${answer}`));

  // The pixels: each region drawn where the layout put it, inside the window, the diff in colour.
  const png = PNG.sync.read(screenshot!);
  assert.deepEqual([png.width, png.height], [460, 1100]);
  for (const name of ["transcript", "diff", "permission", "plan"] as const) {
    const rect = regions[name];
    assert.ok(rect !== null && rect.width > 100 && rect.height > 20, `${name} is laid out: ${JSON.stringify(rect)}`);
    assert.ok(rect.y + rect.height <= png.height, `${name} is inside the screenshot`);
    assert.ok(inkShare(png, rect) > 0.02, `${name} is drawn (not blank)`);
  }
  const diff = regions.diff!;
  assert.ok(countPixels(png, diff, ([r, g, b]) => g > r + 12 && g > b + 6) > 200, "the added line's green is drawn");
  assert.ok(countPixels(png, diff, ([r, g, b]) => r > g + 12 && r > b + 12) > 200, "the removed line's red is drawn");
  assert.ok(regions.permission!.y > regions.transcript!.y, "the question comes after the transcript");
});

function countPixels(png: PNG, rect: Rect, matches: (rgb: [number, number, number]) => boolean): number {
  let count = 0;
  for (let y = Math.floor(rect.y); y < Math.min(png.height, rect.y + rect.height); y++) {
    for (let x = Math.floor(rect.x); x < Math.min(png.width, rect.x + rect.width); x++) {
      const at = (y * png.width + x) * 4;
      if (matches([png.data[at]!, png.data[at + 1]!, png.data[at + 2]!])) count++;
    }
  }
  return count;
}

function inkShare(png: PNG, rect: Rect): number {
  const differs = ([r, g, b]: [number, number, number]) => Math.abs(r - BACKGROUND[0]!) + Math.abs(g - BACKGROUND[1]!) + Math.abs(b - BACKGROUND[2]!) > 24;
  return countPixels(png, rect, differs) / (rect.width * rect.height);
}
