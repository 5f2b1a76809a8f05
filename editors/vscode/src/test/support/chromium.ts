// Rendering the chat webview in headless Chromium (Debian's `chromium`): the page built by page.ts with the real
// bundle (dist/webview.js) and stylesheet, a stand-in for VS Code's webview API that posts one state, and a probe
// that writes where the regions landed into the DOM. One run dumps the DOM, one takes the screenshot.

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

export interface Rendered {
  dom: string; // the document after the render
  regions: Record<keyof typeof REGIONS, Rect | null>;
  screenshot: Buffer; // PNG
}

export async function findChromium(): Promise<string | null> {
  for (const candidate of CANDIDATES.filter(Boolean)) {
    if (await access(candidate).then(() => true, () => false)) return candidate;
  }
  return null;
}

export async function renderInChromium(chromium: string, state: ChatViewState, size: { width: number; height: number }): Promise<Rendered> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "warpcode-webview-"));
  try {
    const page = path.join(dir, "chat.html");
    await writeFile(page, testPage(state));
    const common = [...FLAGS, `--user-data-dir=${path.join(dir, "profile")}`, `--window-size=${size.width},${size.height}`];
    const { stdout: dom } = await run(chromium, [...common, "--dump-dom", pathToFileURL(page).href], { maxBuffer: 16 * 2 ** 20, timeout: 60_000 });
    const screenshotFile = path.join(dir, "chat.png");
    await run(chromium, [...common, `--screenshot=${screenshotFile}`, pathToFileURL(page).href], { timeout: 60_000 });
    const layout = /<pre id="layout"[^>]*>([^<]*)<\/pre>/.exec(dom);
    if (layout === null) throw new Error(`the page did not render (no layout probe in the DOM):\n${dom.slice(0, 2000)}`);
    return { dom, regions: JSON.parse(layout[1]!), screenshot: await readFile(screenshotFile) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function testPage(state: ChatViewState): string {
  const nonce = "test";
  const html = chatPageHtml({
    cspSource: "file:",
    nonce,
    scriptUri: pathToFileURL(path.join(extensionRoot, "dist", "webview.js")).href,
    styleUri: pathToFileURL(path.join(extensionRoot, "media", "chat.css")).href,
  });
  const standIn = `<script nonce="${nonce}">
window.acquireVsCodeApi = () => ({ postMessage(message) { if (message.type === "ready") window.postMessage({ type: "state", state: ${JSON.stringify(state).replaceAll("<", "\\u003c")} }, "*"); } });
window.addEventListener("message", () => setTimeout(() => {
  const rect = (selector) => { const found = document.querySelector(selector); if (!found) return null; const r = found.getBoundingClientRect(); return { x: r.x, y: r.y, width: r.width, height: r.height }; };
  const probe = document.createElement("pre");
  probe.id = "layout"; probe.hidden = true;
  probe.textContent = JSON.stringify(Object.fromEntries(Object.entries(${JSON.stringify(REGIONS)}).map(([name, selector]) => [name, rect(selector)])));
  document.body.append(probe);
}));
</script>`;
  return html.replace("</head>", `${standIn}\n</head>`);
}
