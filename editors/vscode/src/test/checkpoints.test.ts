// "Undo last turn" and "Restore checkpoint…" over `_warpcode/checkpoints` / `_warpcode/restore`: two turns edit a
// file; undo restores it turn by turn, and restoring a listed checkpoint brings back that state.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { CheckpointActions } from "../core/checkpoints.js";
import type { StartedServer } from "../core/server-process.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, serve, type Sandbox } from "./support/serve.js";

let sandbox: Sandbox;
let server: StartedServer;
let client: WarpcodeClient;

const edit = (from: string, to: string) => ({ name: "edit_file", arguments: { path: "version.txt", old_text: from, new_text: to } });

before(async () => {
  sandbox = await makeSandbox({ "version.txt": "one\n" }, [
    { text: "To two.", tool_calls: [edit("one", "two")] },
    { text: "Done." },
    { text: "To three.", tool_calls: [edit("two", "three")] },
    { text: "Done." },
  ]);
  server = await serve(sandbox, 0, "--mode", "auto");
  client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null });
});

after(async () => {
  await client?.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("undo last turn, turn by turn, then restore a chosen checkpoint", async () => {
  const file = path.join(sandbox.workspace, "version.txt");
  const version = async () => (await readFile(file, "utf8")).trim();
  const session = await client.newSession(sandbox.workspace);
  const checkpoints = new CheckpointActions(client);
  await client.prompt(session.sessionId, "make it two");
  await client.prompt(session.sessionId, "make it three");
  assert.equal(await version(), "three");
  assert.equal((await checkpoints.list(session.sessionId)).length, 2); // one before each turn's first edit

  const undone = await checkpoints.undoLastTurn(session.sessionId);
  assert.deepEqual(undone?.changed, ["M version.txt"]);
  assert.equal(await version(), "two");
  await checkpoints.undoLastTurn(session.sessionId);
  assert.equal(await version(), "one");
  assert.equal(await checkpoints.undoLastTurn(session.sessionId), null); // nothing left to undo

  // The list now also holds what each undo replaced: restoring the newest brings "two" back.
  const [newest] = await checkpoints.list(session.sessionId);
  await checkpoints.restore(session.sessionId, newest!.id);
  assert.equal(await version(), "two");
});
