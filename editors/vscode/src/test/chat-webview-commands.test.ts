// The prompt box's slash-command completion, the config-option pickers and the session list's delete buttons in a
// real browser (headless Chromium, the webview's own page and bundle), on the ACP 1.21 spec's examples: typing
// `/` lists the agent's commands, ↓ and Tab or Enter complete one (Enter sends only a whole name of a command
// without input while the list is open), its input hint follows, Escape closes the list; a picker posts set-config, a delete button delete-session.
// Skipped, saying so, where Chromium is not installed (`apt-get install chromium`).

import assert from "node:assert/strict";
import { test } from "node:test";
import { configChoices } from "../core/config-options.js";
import { commandChoices } from "../core/slash-commands.js";
import { emptyTranscript, type ChatViewState } from "../core/view-state.js";
import { findChromium, renderInChromium } from "./support/chromium.js";
import { SPEC_COMMANDS, SPEC_NEW_SESSION } from "./support/spec-examples.js";

const chromium = await findChromium();

function state(): ChatViewState {
  const transcript = { ...emptyTranscript(), commands: commandChoices(SPEC_COMMANDS.availableCommands), configOptions: configChoices(SPEC_NEW_SESSION.configOptions) };
  return {
    connection: { state: "connected", url: "ws://127.0.0.1:8765/acp", agent: "warpcode" },
    session: { sessionId: SPEC_NEW_SESSION.sessionId, cwd: "/repo", transcript, modes: [{ id: "ask", name: "Ask (legacy)", description: "" }], running: false, stopReason: null, error: null },
    permissions: [],
    sessions: [{ sessionId: "old", title: "Fix add", cwd: "/repo", updatedAt: null }],
    canDeleteSessions: true,
  };
}

test("slash commands complete in the prompt box; pickers and delete post their messages", { skip: chromium === null && "chromium is not installed (apt-get install chromium)" }, async () => {
  const { probed, posted } = await renderInChromium(chromium!, state(), { width: 460, height: 800 }, {
    screenshot: false,
    afterRender: `
      const prompt = document.getElementById("prompt");
      const list = document.getElementById("completions");
      const type = (text) => { prompt.value = text; prompt.dispatchEvent(new Event("input")); };
      const key = (name) => prompt.dispatchEvent(new KeyboardEvent("keydown", { key: name, bubbles: true, cancelable: true }));
      const shown = () => list.hidden ? null : [...list.children].map((item) => item.textContent + (item.classList.contains("selected") ? " *" : ""));
      const seen = {};
      seen.before = shown();
      type("/"); seen.slash = shown();
      key("ArrowDown"); seen.down = shown();
      key("Tab"); seen.tabbed = prompt.value; seen.testHint = shown();
      type("/pl"); seen.pl = shown();
      key("Enter"); seen.entered = prompt.value; seen.planHint = shown();
      type("/w"); key("Escape"); seen.escaped = shown();
      type("/we"); seen.again = shown();
      type("/plan the release"); seen.typing = shown();
      key("Enter"); seen.sent = prompt.value;
      type("/test"); seen.whole = shown();
      key("Enter"); seen.sentWhole = prompt.value;
      seen.pickers = [...document.querySelectorAll("select")].map((s) => s.dataset.action + ":" + (s.dataset.config ?? "") + "=" + s.value);
      const model = document.querySelector("select[data-config=model]");
      model.value = "model-2";
      model.dispatchEvent(new Event("change", { bubbles: true }));
      document.querySelector("[data-action=delete-session]").click();
      return seen;`,
  });
  assert.deepEqual(probed, {
    before: null,
    slash: ["/web query to search forSearch the web for information *", "/testRun tests for the current project", "/plan description of what to planCreate a detailed implementation plan"],
    down: ["/web query to search forSearch the web for information", "/testRun tests for the current project *", "/plan description of what to planCreate a detailed implementation plan"],
    tabbed: "/test ",
    testHint: null, // no input: nothing to hint
    pl: ["/plan description of what to planCreate a detailed implementation plan *"],
    entered: "/plan ",
    planHint: ["description of what to plan"],
    escaped: null,
    again: ["/web query to search forSearch the web for information *"],
    typing: null,
    sent: "",
    whole: ["/testRun tests for the current project *"],
    sentWhole: "", // a command without input, typed out: Enter sends it at once
    pickers: ["set-config:mode=ask", "set-config:model=model-1"], // the config options, not the legacy modes
  });
  assert.deepEqual(posted, [
    { type: "prompt", text: "/plan the release" },
    { type: "prompt", text: "/test" },
    { type: "set-config", configId: "model", value: "model-2" },
    { type: "delete-session", sessionId: "old", title: "Fix add" },
  ]);
});
