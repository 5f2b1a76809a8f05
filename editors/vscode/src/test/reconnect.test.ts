// A dropped connection: `warpcode serve` is stopped and started again on the same port and state directory; the
// client reconnects by itself (initialize + session/load) and the replayed history rebuilds the same transcript.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { StartedServer } from "../core/server-process.js";
import type { ConnectionStatus } from "../core/view-state.js";
import { WarpcodeClient } from "../core/warpcode-client.js";
import { makeSandbox, portOf, serve, type Sandbox } from "./support/serve.js";
import { until } from "./support/until.js";

let sandbox: Sandbox;
let server: StartedServer;
let client: WarpcodeClient;

before(async () => {
  sandbox = await makeSandbox({ "notes.md": "# Notes\nkeep me\n" }, [
    { thought: "A look first.", text: "Reading notes.md.", tool_calls: [{ name: "read_file", arguments: { path: "notes.md" } }] },
    { text: "It says **keep me**." },
  ]);
  server = await serve(sandbox);
  client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null });
});

after(async () => {
  await client?.dispose();
  await server?.stop();
  await sandbox?.remove();
});

test("reconnect after the server restarts: session/load restores the transcript", async () => {
  const session = await client.newSession(sandbox.workspace);
  assert.equal(await client.prompt(session.sessionId, "What do the notes say?"), "end_turn");
  const live = session.transcript;
  assert.deepEqual(live.items.map((item) => item.kind), ["user", "thought", "agent", "tool", "agent"]);

  const states: ConnectionStatus["state"][] = [];
  const shown: number[] = []; // how many items the transcript had at each change
  client.onChange(() => {
    shown.push(session.transcript.items.length);
    if (states.at(-1) !== client.status.state) states.push(client.status.state);
  });
  await server.stop();
  await until(client, "the client to notice the drop", () => client.status.state === "reconnecting");
  server = await serve(sandbox, portOf(server.url));
  await until(client, "the reconnect", () => client.status.state === "connected", 30_000);

  assert.deepEqual(states.slice(0, 1), ["reconnecting"]);
  assert.equal(states.at(-1), "connected");
  assert.ok(Math.min(...shown) < live.items.length, "the transcript was rebuilt from the replay");
  assert.deepEqual(session.transcript.items, live.items);
  assert.equal(session.transcript.modeId, "ask");
  assert.equal(await client.prompt(session.sessionId, "Again?"), "end_turn"); // the reloaded session works
  assert.equal(session.transcript.items.filter((item) => item.kind === "user").length, 2);
});
