// Timing the chat webview's renders in headless Chromium: the real page, bundle and stylesheet; the states, as
// the extension posts them (ViewPosts: only the changed transcript items), are handed to the webview's message
// handler one after another, each timed from the message to the end of the style and layout it causes (read
// back, so the browser must do them). Then the last state is drawn anew, as a reference for the updated view. Synchronous inside the page's scripts, so
// the clock is the real one (no virtual time), and the DOM is dumped once every state is rendered.

import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { ViewPosts } from "../../core/view-posts.js";
import type { ChatViewState } from "../../core/view-state.js";
import { json, testPageHtml, unescapeHtml } from "./chromium.js";

const run = promisify(execFile);
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=460,1000"];

export interface Timed {
  times: number[]; // the milliseconds each state took to render, in order
  chat: string; // the chat region's HTML after the last one
  fresh: string; // the same after no session, then the last state drawn anew (everything posted again)
}

export async function timeRenders(chromium: string, states: ChatViewState[]): Promise<Timed> {
  const posts = new ViewPosts();
  const dir = await mkdtemp(path.join(os.tmpdir(), "warpcode-timing-"));
  try {
    const page = path.join(dir, "timing.html");
    // The states in a script of their own, so that the DOM dumped at the end does not hold them again.
    const posted = states.map((state) => posts.next(state));
    const last = { ...states.at(-1)!, session: null };
    await writeFile(path.join(dir, "states.js"), `window.states = ${json(posted)}; window.redraw = ${json([last, states.at(-1)!])};`);
    await writeFile(page, testPageHtml(`
window.acquireVsCodeApi = () => ({ postMessage(message) {
  if (message.type !== "ready") return;
  const chat = document.getElementById("chat");
  const errors = [];
  window.addEventListener("error", (event) => errors.push(String(event.error && event.error.stack || event.message)));
  const times = states.map((state) => {
    const start = performance.now();
    window.dispatchEvent(new MessageEvent("message", { data: { type: "state", state } }));
    chat.getBoundingClientRect(); void chat.scrollHeight; void document.body.offsetHeight;
    return performance.now() - start;
  });
  const updated = chat.innerHTML;
  for (const state of redraw) window.dispatchEvent(new MessageEvent("message", { data: { type: "state", state } }));
  const result = document.createElement("pre");
  result.id = "timings"; result.hidden = true; result.textContent = JSON.stringify({ times, chat: updated, fresh: chat.innerHTML, errors });
  document.body.append(result);
} });`, [pathToFileURL(path.join(dir, "states.js")).href]));
    const { stdout } = await run(chromium, [...FLAGS, `--user-data-dir=${path.join(dir, "profile")}`, "--dump-dom", pathToFileURL(page).href], { maxBuffer: 256 * 2 ** 20, timeout: 300_000 });
    const timings = /<pre id="timings"[^>]*>([^<]*)<\/pre>/.exec(stdout);
    if (timings === null) throw new Error("the page did not finish rendering (no timings in the DOM)");
    const { errors, ...timed } = JSON.parse(unescapeHtml(timings[1]!)) as Timed & { errors: string[] };
    if (errors.length > 0) throw new Error(`the webview threw while rendering: ${errors.join("; ")}`);
    return timed;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
