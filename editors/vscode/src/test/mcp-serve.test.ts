// warpcode.mcpServers reach a real `warpcode serve`: the extension sends the setting's stdio server in session/new
// (the command found on PATH, its env as ACP's list), the server starts it, and the scripted model's call of its
// tool comes back with the value the setting gave the server's environment. Skipped, saying so, with a server
// that does not take MCP servers (it advertises mcpCapabilities once it does).

import assert from "node:assert/strict";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { mcpServersFromSetting } from "../core/mcp-servers.js";
import type { StartedServer } from "../core/server-process.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, PYTHON, serve, type Sandbox } from "./support/serve.js";

const NOTES_SERVER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/test/support/notes_mcp_server.py");
let sandbox: Sandbox;
let server: StartedServer;
let client: WarpcodeClient;

before(async () => {
  sandbox = await makeSandbox({}, [
    { tool_calls: [{ name: "mcp__notes__getenv", arguments: { name: "NOTES_GREETING" } }] },
    { text: "The server said hello." },
  ]);
  server = await serve(sandbox, 0, "--mode", "auto");
  const { servers, problems } = mcpServersFromSetting([{ name: "notes", command: PYTHON, args: [NOTES_SERVER], env: { NOTES_GREETING: "hello from the settings" } }]);
  assert.deepEqual(problems, []);
  client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null, mcpServers: servers });
});

after(async () => {
  await client?.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("the settings' MCP server runs in the session, with the settings' env", async () => {
  const offered = (await client.connect()).info.agentCapabilities?.mcpCapabilities;
  assert.equal(offered?.http, true, "the server advertises no mcpCapabilities");
  const session = await client.newSession(sandbox.workspace);
  assert.equal(await client.prompt(session.sessionId, "ask the notes server"), "end_turn");
  const call = session.transcript.items.find((item) => item.kind === "tool");
  assert.ok(call?.kind === "tool", JSON.stringify(session.transcript.items));
  assert.equal(call.status, "completed");
  assert.match(call.output, /hello from the settings/);
});
