// The session features of ACP 1.21 the chat view uses, on the spec's own examples (support/spec-examples.ts): the
// agent's slash commands as the prompt box completes them, its config options as pickers (groups kept, a boolean
// option left out as ACP asks of a client that did not advertise it), both surviving a replay, and how a stored
// session is reopened (load when offered, else resume).

import assert from "node:assert/strict";
import { test } from "node:test";
import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import { configChoices } from "../core/config-options.js";
import { SessionState } from "../core/session-state.js";
import { completedText, matchingCommands, pendingHint } from "../core/slash-commands.js";
import { reduceUpdate } from "../core/update-reducer.js";
import { emptyTranscript } from "../core/view-state.js";
import { reopenMethod } from "../core/warpcode-client.js";
import { SPEC_COMMAND_PROMPT_TEXT, SPEC_COMMANDS, SPEC_NEW_SESSION } from "./support/spec-examples.js";

test("the spec's commands: listed in its order on `/`, narrowed as the name is typed, completed, then their hint", () => {
  const { commands } = reduceUpdate(emptyTranscript(), SPEC_COMMANDS);
  assert.deepEqual(commands, [
    { name: "web", description: "Search the web for information", hint: "query to search for" },
    { name: "test", description: "Run tests for the current project", hint: null },
    { name: "plan", description: "Create a detailed implementation plan", hint: "description of what to plan" },
  ]);
  assert.deepEqual(matchingCommands("/", commands).map((c) => c.name), ["web", "test", "plan"]);
  assert.deepEqual(matchingCommands("/p", commands).map((c) => c.name), ["plan"]);
  for (const text of ["", "web", "/web ", "/web agent", " /web", "/x"]) assert.deepEqual(matchingCommands(text, commands), [], text);
  const web = matchingCommands("/we", commands)[0]!;
  assert.equal(completedText(web), "/web ");
  assert.equal(pendingHint("/web ", commands), "query to search for");
  assert.equal(pendingHint("/test ", commands), null);
  assert.equal(pendingHint(SPEC_COMMAND_PROMPT_TEXT, commands), null); // the input is typed: the hint has gone
  assert.ok(SPEC_COMMAND_PROMPT_TEXT.startsWith(completedText(web))); // what is sent is what the spec's prompt is
});

test("the spec's config options become pickers; config_option_update replaces them all; a replay keeps them", () => {
  const session = new SessionState(SPEC_NEW_SESSION.sessionId, "/repo", SPEC_NEW_SESSION);
  const [mode, model] = session.transcript.configOptions;
  assert.deepEqual([mode!.id, mode!.category, mode!.currentValue, mode!.values.map((v) => v.value)], ["mode", "mode", "ask", ["ask", "code"]]);
  assert.deepEqual(model, {
    id: "model", name: "Model", description: "", category: "model", currentValue: "model-1",
    values: [{ value: "model-1", name: "Model 1", description: "The fastest model", group: null }, { value: "model-2", name: "Model 2", description: "The most powerful model", group: null }],
  });
  const changed = SPEC_NEW_SESSION.configOptions!.map((option): SessionConfigOption => (option.id === "model" && option.type === "select" ? { ...option, currentValue: "model-2" } : option));
  session.apply({ sessionUpdate: "config_option_update", configOptions: changed });
  session.apply(SPEC_COMMANDS);
  session.startReplay();
  assert.equal(session.transcript.configOptions[1]!.currentValue, "model-2");
  assert.equal(session.transcript.commands.length, 3);
});

test("grouped values keep their group; a boolean option is not shown", () => {
  const options: SessionConfigOption[] = [
    { id: "model", name: "Model", type: "select", currentValue: "b", options: [
      { group: "fast", name: "Fast", options: [{ value: "a", name: "A" }] },
      { group: "big", name: "Big", options: [{ value: "b", name: "B", description: "the big one" }] },
    ] },
    { id: "brave", name: "Brave", type: "boolean", currentValue: true },
  ];
  assert.deepEqual(configChoices(options).map((c) => [c.id, c.values.map((v) => `${v.group}/${v.value}`)]), [["model", ["Fast/a", "Big/b"]]]);
});

test("a stored session reopens with session/load when offered, else session/resume", () => {
  assert.equal(reopenMethod({ load: true, resume: true, close: false, delete: false }), "load");
  assert.equal(reopenMethod({ load: false, resume: true, close: false, delete: false }), "resume");
  assert.equal(reopenMethod({ load: false, resume: false, close: true, delete: true }), null);
});
