// Rendering the chat webview in headless Chromium (Debian's `chromium`): the page built by page.ts with the real
// bundle (dist/webview.js) and stylesheet, a stand-in for VS Code's webview API that posts one state and keeps
// what the webview posts back, and a probe that writes where the regions landed into the DOM. One run dumps the
// DOM, one takes the screenshot.

import { execFile } from "node:child_process";
import { access, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import type { ChatViewState } from "../../core/view-state.js";
import { chatPageHtml } from "../../webview/page.js";

const run = promisify(execFile);
const extensionRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CANDIDATES = [process.env.CHROMIUM ?? "", "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
// As root in a closed network: no sandbox, no GPU, and none of the background connections Chromium makes.
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1", "--virtual-time-budget=5000"];
const REGIONS = { transcript: "[data-region=transcript]", diff: ".transcript .diff", permission: "[data-region=permission]", plan: "[data-region=plan]" };

export type Rect = { x: number; y: number; width: number; height: number };

export interface RenderOptions {
  afterRender?: string; // a function body run once the state is rendered: its JSON-able result comes back as `probed`
  screenshot?: boolean; // default true
  flags?: string[]; // more Chromium flags
}

export interface Rendered {
  dom: string; // the document after the render
  regions: Record<keyof typeof REGIONS, Rect | null>;
  // What the webview posted to the extension after its "ready", and, as { type: "navigate" }, each link click it
  // left to the browser (VS Code's webview host would have opened that link).
  posted: Record<string, unknown>[];
  probed: unknown;
  screenshot: Buffer | null; // PNG
}

export async function findChromium(): Promise<string | null> {
  for (const candidate of CANDIDATES.filter(Boolean)) {
    if (await access(candidate).then(() => true, () => false)) return candidate;
  }
  return null;
}

export async function renderInChromium(
  chromium: string,
  state: ChatViewState,
  size: { width: number; height: number },
  { afterRender = "", screenshot = true, flags = [] }: RenderOptions = {},
): Promise<Rendered> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "warpcode-webview-"));
  try {
    const page = path.join(dir, "chat.html");
    await writeFile(page, testPage(state, afterRender));
    const common = [...FLAGS, ...flags, `--user-data-dir=${path.join(dir, "profile")}`, `--window-size=${size.width},${size.height}`];
    const { stdout: dom } = await run(chromium, [...common, "--dump-dom", pathToFileURL(page).href], { maxBuffer: 64 * 2 ** 20, timeout: 60_000 });
    const layout = /<pre id="layout"[^>]*>([^<]*)<\/pre>/.exec(dom);
    if (layout === null) throw new Error(`the page did not render (no layout probe in the DOM):\n${dom.slice(0, 2000)}`);
    const probe = JSON.parse(unescapeHtml(layout[1]!)) as Pick<Rendered, "regions" | "posted" | "probed">;
    if (!screenshot) return { dom, ...probe, screenshot: null };
    const screenshotFile = path.join(dir, "chat.png");
    await run(chromium, [...common, `--screenshot=${screenshotFile}`, pathToFileURL(page).href], { timeout: 60_000 });
    return { dom, ...probe, screenshot: await readFile(screenshotFile) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// The chat page with a stand-in script (and, before it, the scripts at `scriptUris`) in its head.
export function testPageHtml(standIn: string, scriptUris: string[] = []): string {
  const nonce = "test";
  const html = chatPageHtml({
    cspSource: "file:",
    nonce,
    scriptUri: pathToFileURL(path.join(extensionRoot, "dist", "webview.js")).href,
    styleUri: pathToFileURL(path.join(extensionRoot, "media", "chat.css")).href,
  });
  const scripts = scriptUris.map((uri) => `<script nonce="${nonce}" src="${uri}"></script>\n`).join("");
  return html.replace("</head>", `${scripts}<script nonce="${nonce}">\n${standIn}\n</script>\n</head>`);
}

function testPage(state: ChatViewState, afterRender: string): string {
  return testPageHtml(`
const posted = [];
window.acquireVsCodeApi = () => ({ postMessage(message) {
  if (message.type === "ready") window.postMessage({ type: "state", state: ${json(state)} }, "*");
  else posted.push(message);
} });
window.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a[href]");
  if (link === null || event.defaultPrevented) return;
  event.preventDefault();
  posted.push({ type: "navigate", href: link.href });
});
window.addEventListener("message", () => setTimeout(() => {
  const probed = (() => { ${afterRender} })();
  const rect = (selector) => { const found = document.querySelector(selector); if (!found) return null; const r = found.getBoundingClientRect(); return { x: r.x, y: r.y, width: r.width, height: r.height }; };
  const probe = document.createElement("pre");
  probe.id = "layout"; probe.hidden = true;
  const regions = Object.fromEntries(Object.entries(${JSON.stringify(REGIONS)}).map(([name, selector]) => [name, rect(selector)]));
  probe.textContent = JSON.stringify({ regions, posted, probed: probed === undefined ? null : probed });
  document.body.append(probe);
}));`);
}

// A value as a JavaScript literal inside an inline <script>.
export function json(value: unknown): string {
  return JSON.stringify(value).replaceAll("<", "\\u003c");
}

// A text node's content as --dump-dom wrote it.
export function unescapeHtml(text: string): string {
  return text.replace(/&(lt|gt|quot|#39|amp|nbsp);/g, (_, name: string) => ({ lt: "<", gt: ">", quot: '"', "#39": "'", amp: "&", nbsp: "\u00a0" })[name]!);
}
