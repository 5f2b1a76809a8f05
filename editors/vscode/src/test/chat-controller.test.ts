// The chat controller driven by the webview's messages, against a real `warpcode serve`: a prompt without a
// session starts one in the workspace folder, the permission question is answered from the view, "Open diff"
// reaches the editor, the mode picker and the stored-session list work, and failures reach the user in words.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ChatController, type EditorHost } from "../core/chat-controller.js";
import type { DiffView } from "../core/diff-model.js";
import type { StartedServer } from "../core/server-process.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, serve, type Sandbox } from "./support/serve.js";
import { until } from "./support/until.js";

let sandbox: Sandbox;
let server: StartedServer;
let chat: ChatController;
let folder: string | undefined;
const opened: DiffView[] = [];
const files: string[] = [];
const links: string[] = [];
const errors: string[] = [];

before(async () => {
  sandbox = await makeSandbox({ "hello.txt": "hello\n" }, [
    { text: "Editing.", tool_calls: [{ name: "edit_file", arguments: { path: "hello.txt", old_text: "hello", new_text: "hello, world" } }] },
    { text: "Done." },
  ]);
  server = await serve(sandbox);
  folder = sandbox.workspace;
  const host: EditorHost = { workspaceFolder: () => folder, openDiff: (diff) => opened.push(diff), openFile: (file) => files.push(file), openExternal: (url) => links.push(url), showError: (message) => errors.push(message), confirm: async () => true };
  chat = new ChatController(new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null }), host);
});

after(async () => {
  await chat?.client.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("prompt, answer, open the diff, switch mode, reopen from the session list", async () => {
  await chat.receive({ type: "ready" });
  assert.equal(chat.state().connection.state, "connected");
  assert.equal(chat.state().session, null);

  const turn = chat.receive({ type: "prompt", text: "greet the world" });
  const question = await until(chat.client, "the edit's question", () => chat.state().permissions[0]);
  await chat.receive({ type: "open-permission-diff", requestId: question.requestId, index: 0 });
  await chat.receive({ type: "answer", requestId: question.requestId, optionId: "allow_once" });
  await turn;
  const session = chat.state().session!;
  assert.equal(session.stopReason, "end_turn");
  assert.equal(session.cwd, sandbox.workspace);

  const edit = session.transcript.items.find((item) => item.kind === "tool")!;
  assert.ok(edit.kind === "tool");
  await chat.receive({ type: "open-diff", toolCallId: edit.id, index: 0 });
  assert.deepEqual(opened.map((diff) => [diff.oldText, diff.newText]), [["hello\n", "hello, world\n"], ["hello\n", "hello, world\n"]]);

  await chat.receive({ type: "open-file", path: edit.paths[0]! });
  assert.deepEqual(files, [`${sandbox.workspace}/hello.txt`]);

  await chat.receive({ type: "open-link", url: "https://example.com/docs?q=1" });
  assert.deepEqual(links, ["https://example.com/docs?q=1"]);

  await chat.receive({ type: "set-mode", modeId: "accept-edits" });
  assert.equal(chat.state().session!.transcript.modeId, "accept-edits");

  await chat.receive({ type: "list-sessions" });
  assert.deepEqual(chat.state().sessions!.map((s) => s.sessionId), [session.sessionId]);
  await chat.receive({ type: "open-session", sessionId: session.sessionId, cwd: session.cwd });
  assert.equal(chat.state().sessions, null);
  assert.equal(chat.state().session!.sessionId, session.sessionId);
  assert.deepEqual(errors, []);
});

test("failures are shown in words: no folder open, a mode the server does not know, a link that is not a web link", async () => {
  for (const url of ["javascript:alert(1)", "file:///etc/passwd", "command:workbench.action.terminal.new", "not a url"]) {
    await chat.receive({ type: "open-link", url });
    assert.equal(errors.at(-1), `Not opening ${url}: only web and mail links open from the chat.`);
  }
  assert.deepEqual(links, ["https://example.com/docs?q=1"]);
  await chat.receive({ type: "set-mode", modeId: "yolo" });
  assert.match(errors.at(-1)!, /Unknown mode 'yolo': use one of ask, accept-edits, auto/);
  folder = undefined;
  await chat.receive({ type: "new-session" });
  assert.equal(errors.at(-1), "Open a folder first: a warpcode session works in a workspace folder.");
});
