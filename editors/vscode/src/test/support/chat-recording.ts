// A chat view state recorded from a real session: in mode ask, the scripted model thinks, reads calc.py, edits it
// (allowed once: the diff is in the transcript), plans, and asks to run the tests: recorded while that question
// waits. The chat view check and the README's screenshot both render it.

import * as path from "node:path";
import type { ChatViewState } from "../../core/view-state.js";
import { WarpcodeClient } from "../../core/warpcode-client.js";
import { makeSandbox, serve } from "./serve.js";
import { until } from "./until.js";

export const RECORDED_PROMPT = "The add test fails: fix it and run the tests.";
export const RECORDED_TEST_COMMAND = "python3 -m unittest test_calc";

export async function recordChatState(): Promise<ChatViewState> {
  const sandbox = await makeSandbox({ "calc.py": "def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n    return a - b\n" }, [
    { thought: "add subtracts: the test expects 5 for add(2, 3).", text: "Let me look at `calc.py`.", tool_calls: [{ name: "read_file", arguments: { path: "calc.py" } }] },
    { text: "`add` returns `a - b`; it should be **`a + b`**.", tool_calls: [{ name: "edit_file", arguments: { path: "calc.py", old_text: "return a - b", new_text: "return a + b" } }] },
    {
      text: "Fixed. Now the tests:",
      tool_calls: [
        { name: "update_plan", arguments: { entries: [{ content: "Fix the sign in add", status: "completed", priority: "high" }, { content: "Run the tests", status: "in_progress", priority: "high" }] } },
        { name: "run_tests", arguments: { command: RECORDED_TEST_COMMAND } },
      ],
    },
  ]);
  const server = await serve(sandbox);
  const client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null });
  try {
    const session = await client.newSession(sandbox.workspace);
    const turn = client.prompt(session.sessionId, RECORDED_PROMPT);
    const edit = await until(client, "the edit's question", () => client.permissions.views(session.sessionId)[0]);
    client.permissions.answer(edit.requestId, "allow_once");
    await until(client, "the test command's question", () => client.permissions.views(session.sessionId)[0]?.command !== null && client.permissions.views(session.sessionId)[0]);
    const state = client.viewState(session.sessionId, null);
    await client.cancel(session.sessionId);
    await turn;
    return JSON.parse(JSON.stringify(state).replaceAll(sandbox.workspace + path.sep, "")); // short paths, as in a workspace
  } finally {
    await client.dispose();
    await server.stop();
    await sandbox.remove();
  }
}
