// `npm run screenshot`: the README's picture of the chat view, media/chat-view.png, rendered from the recorded
// session in headless Chromium exactly as the chat view check renders it.

import { writeFile } from "node:fs/promises";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { recordChatState } from "./chat-recording.js";
import { findChromium, renderInChromium } from "./chromium.js";

const chromium = await findChromium();
if (chromium === null) {
  console.error("chromium is not installed: apt-get install chromium (or set $CHROMIUM to a Chrome or Chromium binary)");
  process.exit(1);
}
const target = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../media/chat-view.png");
const screenshot = (await renderInChromium(chromium, await recordChatState(), { width: 420, height: 860 })).screenshot!;
await writeFile(target, screenshot);
console.log(`wrote ${target} (${Math.round(screenshot.length / 1024)} KiB)`);
