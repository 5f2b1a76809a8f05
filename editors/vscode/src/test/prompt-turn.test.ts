// A whole prompt turn against a real `warpcode serve` in mode ask: the scripted model reads a file (through the
// editor's unsaved buffer), plans, edits it (a permission question with the diff, allowed once), runs the tests
// (a question naming the command, allowed always), and answers. The streamed updates reduce to the view state
// below, the edit is on disk, and the server used the editor's buffers for both the read and the write.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { after, before, test } from "node:test";
import type { StartedServer } from "../core/server-process.js";
import type { PermissionView, ToolItem } from "../core/view-state.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { MemoryBuffers } from "./support/memory-buffers.js";
import { makeSandbox, serve, type Sandbox } from "./support/serve.js";

const CALC = "def add(a, b):\n    return a - b\n";
const TESTS = "import unittest\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n";
const UNSAVED = "# unsaved: the editor's buffer wins\n" + CALC;
const TEST_COMMAND = "python3 -m unittest test_calc";

let sandbox: Sandbox;
let server: StartedServer;
let buffers: MemoryBuffers;
let client: WarpcodeClient;

before(async () => {
  sandbox = await makeSandbox({ "calc.py": CALC, "test_calc.py": TESTS }, [
    { thought: "The test expects add to add.", text: "Reading calc.py.", tool_calls: [{ name: "read_file", arguments: { path: "calc.py" } }] },
    {
      text: "Planning.",
      tool_calls: [{ name: "update_plan", arguments: { entries: [{ content: "Fix add", status: "completed", priority: "high" }, { content: "Run the tests", status: "in_progress", priority: "medium" }] } }],
    },
    { text: "Fixing the sign.", tool_calls: [{ name: "edit_file", arguments: { path: "calc.py", old_text: "a - b", new_text: "a + b" } }] },
    { text: "Running the tests.", tool_calls: [{ name: "run_tests", arguments: { command: TEST_COMMAND } }] },
    { text: "Fixed: `add` now **adds**." },
  ]);
  server = await serve(sandbox);
  buffers = new MemoryBuffers();
  buffers.unsaved.set(path.join(sandbox.workspace, "calc.py"), UNSAVED);
  client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers, serverCommand: null });
});

after(async () => {
  await client?.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("initialize, new session in mode ask, a turn that reads, edits and runs the tests", async () => {
  const connection = await client.connect();
  assert.equal(connection.info.protocolVersion, 1);
  assert.equal(connection.info.agentCapabilities?.loadSession, true);
  assert.deepEqual(client.status, { state: "connected", url: server.url, agent: connection.agentName });
  assert.match(connection.agentName, /^warpcode /);

  const session = await client.newSession(sandbox.workspace);
  assert.equal(session.transcript.modeId, "ask");
  assert.deepEqual(session.modes.map((m) => m.id), ["ask", "accept-edits", "auto"]);

  const asked: PermissionView[] = [];
  const answers = ["allow_once", "allow_always"];
  client.permissions.onChange(() => {
    const [question] = client.permissions.views(session.sessionId);
    if (question === undefined) return;
    asked.push(question);
    client.permissions.answer(question.requestId, answers[asked.length - 1]!);
  });

  const stopReason = await client.prompt(session.sessionId, "Fix add so that the tests pass.");
  assert.equal(stopReason, "end_turn");

  // The questions: the edit with its exact diff, then the test command; each with the four answers.
  assert.deepEqual(asked.map((q) => [q.toolKind, q.title, q.command]), [
    ["edit", "Edit calc.py", null],
    ["execute", `Run tests ${TEST_COMMAND}`, TEST_COMMAND],
  ]);
  assert.deepEqual(asked[0]!.options.map((o) => o.optionId), ["allow_once", "allow_always", "reject_once", "reject_always"]);
  assert.deepEqual(asked[0]!.diffs[0]!.hunks[0]!.lines.slice(-2), [
    { type: "removed", text: "    return a - b" },
    { type: "added", text: "    return a + b" },
  ]);

  // The view state the updates reduced to.
  const view = session.view();
  assert.equal(view.running, false);
  assert.equal(view.stopReason, "end_turn");
  assert.equal(view.error, null);
  const summary = view.transcript.items.map((item) => (item.kind === "tool" ? `${item.kind}:${item.toolKind}:${item.title}:${item.status}` : `${item.kind}:${item.text}`));
  assert.deepEqual(summary, [
    "user:Fix add so that the tests pass.",
    "thought:The test expects add to add.",
    "agent:Reading calc.py.",
    "tool:read:Read calc.py:completed",
    "agent:Planning.",
    "tool:think:Update plan:completed",
    "agent:Fixing the sign.",
    "tool:edit:Edit calc.py:completed",
    "agent:Running the tests.",
    `tool:execute:Run tests ${TEST_COMMAND}:completed`,
    "agent:Fixed: `add` now **adds**.",
  ]);
  const tools = view.transcript.items.filter((item): item is ToolItem => item.kind === "tool");
  assert.match(tools[0]!.output, /unsaved: the editor's buffer wins/); // read through the editor
  assert.deepEqual(tools[0]!.paths, [path.join(sandbox.workspace, "calc.py")]);
  const [edit] = tools[2]!.diffs;
  assert.equal(edit!.path, path.join(sandbox.workspace, "calc.py"));
  assert.deepEqual([edit!.added, edit!.removed, edit!.isNew], [1, 1, false]);
  assert.match(tools[3]!.output, /^unittest: 1 passed, 0 failed, 0 errors, 0 skipped \(exit code 0,/);
  assert.deepEqual(view.transcript.plan, [
    { content: "Fix add", status: "completed", priority: "high" },
    { content: "Run the tests", status: "in_progress", priority: "medium" },
  ]);
  assert.ok(view.transcript.usage !== null && view.transcript.usage.used > 0);
  assert.deepEqual(client.permissions.views(session.sessionId), []);

  // The edit went through the editor's buffer and was saved: on disk, with the unsaved line the agent saw.
  const calc = path.join(sandbox.workspace, "calc.py");
  assert.equal(await readFile(calc, "utf8"), UNSAVED.replace("a - b", "a + b"));
  assert.ok(buffers.reads.includes(calc), "the server read calc.py through fs/read_text_file");
  assert.deepEqual(buffers.writes, [calc]);
});
