// Cancelling a turn: while a permission question waits (it is answered `cancelled`, the command never runs), and
// in mode auto while the command runs (`sleep 30`: the prompt returns `cancelled` and the process is killed).

import assert from "node:assert/strict";
import { access, readFile } from "node:fs/promises";
import * as path from "node:path";
import { after, before, test } from "node:test";
import type { StartedServer } from "../core/server-process.js";
import type { SessionState } from "../core/session-state.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, serve, type Sandbox } from "./support/serve.js";
import { until } from "./support/until.js";

let sandbox: Sandbox;
let server: StartedServer;
let client: WarpcodeClient;
let session: SessionState;

before(async () => {
  sandbox = await makeSandbox({}, [
    { text: "Running it.", tool_calls: [{ name: "run_command", arguments: { command: "echo ran > ran.txt; sleep 30" } }] },
    { text: "Sleeping.", tool_calls: [{ name: "run_command", arguments: { command: "echo $$ > sleep.pid; exec sleep 30" } }] },
  ]);
  server = await serve(sandbox);
  client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null });
  session = await client.newSession(sandbox.workspace);
});

after(async () => {
  await client?.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("cancel while a permission question waits: answered cancelled, the command never runs", async () => {
  const turn = client.prompt(session.sessionId, "run it");
  const [question] = await until(client, "the permission question", () => client.permissions.views(session.sessionId).length > 0 && client.permissions.views(session.sessionId));
  assert.equal(question!.command, "echo ran > ran.txt; sleep 30");

  await client.cancel(session.sessionId);
  assert.deepEqual(client.permissions.views(session.sessionId), []);
  assert.equal(await turn, "cancelled");
  assert.equal(session.view().stopReason, "cancelled");
  await assert.rejects(access(path.join(sandbox.workspace, "ran.txt")), { code: "ENOENT" });
});

test("cancel mid-command in mode auto: the turn stops cancelled and the command is killed", async () => {
  await client.setMode(session.sessionId, "auto");
  assert.equal(session.transcript.modeId, "auto");

  const started = Date.now();
  const turn = client.prompt(session.sessionId, "sleep");
  const pidFile = path.join(sandbox.workspace, "sleep.pid");
  const pid = Number(await until(client, "the command to start", () => {
    const tool = session.transcript.items.findLast((item) => item.kind === "tool");
    return tool?.kind === "tool" && tool.status === "in_progress" && tool.title.includes("sleep 30");
  }).then(() => pollFile(pidFile)));

  assert.ok(alive(pid), "the command runs");
  await client.cancel(session.sessionId);
  assert.equal(await turn, "cancelled");
  assert.ok(Date.now() - started < 15_000, "the turn ended long before the sleep would have");
  await pollUntil(() => !alive(pid), `process ${pid} (sleep 30) to be killed`);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function pollFile(file: string): Promise<string> {
  let text = "";
  await pollUntil(async () => (text = (await readFile(file, "utf8").catch(() => "")).trim()) !== "", `${file} to be written`);
  return text;
}

async function pollUntil(probe: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
