// The ACP 1.21 session features against a real `warpcode serve`, through the chat controller as the webview drives
// it: the agent's slash commands reach the prompt box's list, the model and mode pickers (config options) switch,
// a stored session is deleted from the list after the user confirms. Each part runs when the server offers the
// feature and is skipped, saying so, when it does not (a server from before issue 47's server side).

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ChatController, type EditorHost } from "../core/chat-controller.js";
import type { StartedServer } from "../core/server-process.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, serve, type Sandbox } from "./support/serve.js";
import { until } from "./support/until.js";

let sandbox: Sandbox;
let server: StartedServer;
let chat: ChatController;
const errors: string[] = [];
const asked: string[] = [];
let agree = false;

before(async () => {
  sandbox = await makeSandbox({ "notes.md": "hello\n" }, [{ text: "Hello." }]);
  server = await serve(sandbox);
  const host: EditorHost = {
    workspaceFolder: () => sandbox.workspace,
    openDiff: () => undefined,
    openFile: () => undefined,
    openExternal: () => undefined,
    showError: (message) => errors.push(message),
    confirm: async (message) => (asked.push(message), agree),
  };
  chat = new ChatController(new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null }), host);
  await chat.receive({ type: "new-session" });
});

after(async () => {
  await chat?.client.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("the agent's slash commands reach the prompt box", async () => {
  await until(chat.client, "available_commands_update", () => chat.state().session!.transcript.commands.length > 0 || undefined, 3000);
  const names = chat.state().session!.transcript.commands.map((c) => c.name);
  for (const name of ["undo", "model"]) assert.ok(names.includes(name), `/${name} in ${names.join(", ")}`);
  assert.deepEqual(errors, []);
});

test("the model and mode pickers switch through session/set_config_option", async () => {
  const pickers = () => new Map(chat.state().session!.transcript.configOptions.map((o) => [o.id, o]));
  const model = pickers().get("model");
  assert.ok(model !== undefined, "the server sent no model config option");
  await chat.receive({ type: "set-config", configId: "model", value: model.values.at(-1)!.value });
  assert.equal(pickers().get("model")!.currentValue, model.values.at(-1)!.value);
  await chat.receive({ type: "set-config", configId: "mode", value: "accept-edits" });
  assert.equal(pickers().get("mode")!.currentValue, "accept-edits");
  await chat.receive({ type: "set-config", configId: "mode", value: "yolo" });
  assert.equal(errors.length, 1, "an unknown value is refused in words");
  assert.equal(pickers().get("mode")!.currentValue, "accept-edits");
  errors.length = 0;
});

test("a stored session is deleted from the list once the user agrees", async () => {
  assert.ok((await chat.client.connect()).sessionCapabilities.delete, "the server offers no session/delete");
  await chat.receive({ type: "prompt", text: "hello" }); // stored with a turn
  const sessionId = chat.currentSessionId!;
  await chat.receive({ type: "list-sessions" });
  assert.ok(chat.state().sessions!.some((s) => s.sessionId === sessionId));
  assert.equal(chat.state().canDeleteSessions, true);

  await chat.receive({ type: "delete-session", sessionId, title: "hello" });
  assert.equal(asked.length, 1);
  assert.match(asked[0]!, /^Delete the session "hello"\?/);
  assert.ok(chat.state().sessions!.some((s) => s.sessionId === sessionId), "nothing deleted without a yes");

  agree = true;
  await chat.receive({ type: "delete-session", sessionId, title: "hello" });
  assert.deepEqual(chat.state().sessions!.map((s) => s.sessionId), []);
  assert.equal(chat.currentSessionId, null);
  assert.equal(chat.client.session(sessionId), undefined);
  assert.deepEqual(errors, []);
});
