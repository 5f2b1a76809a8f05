// What the user sees when the connection cannot be made: a wrong token, a refused Origin, a missing token file,
// nothing listening; and with a server command configured, nothing listening starts `warpcode serve`.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { StartedServer } from "../core/server-process.js";
import { ConnectError } from "../core/socket.js";
import { WarpcodeClient, type ClientOptions } from "../core/warpcode-client.js";
import { makeSandbox, PYTHON, serve, serveArgs, type Sandbox } from "./support/serve.js";

let sandbox: Sandbox;
let server: StartedServer;
const clients: WarpcodeClient[] = [];

before(async () => {
  sandbox = await makeSandbox({}, [{ text: "Hello." }]);
  server = await serve(sandbox);
});

after(async () => {
  await Promise.all(clients.map((client) => client.dispose()));
  await server?.stop();
  await sandbox?.remove();
});

function clientWith(options: Partial<ClientOptions>): WarpcodeClient {
  const client = new WarpcodeClient({ url: server.url, token: { token: "", tokenFile: server.tokenFile! }, buffers: null, serverCommand: null, ...options });
  clients.push(client);
  return client;
}

test("a wrong token: HTTP 401, the server's reason, and which settings to fix", async () => {
  const client = clientWith({ token: { token: "not-the-token", tokenFile: "" } });
  await assert.rejects(client.connect(), (error: ConnectError) => {
    assert.equal(error.failure, "unauthorized");
    assert.equal(
      error.message,
      `warpcode serve at ${server.url} refused the token (HTTP 401: missing or wrong bearer token in the Authorization ` +
        `header). Set warpcode.token to the token it uses, or warpcode.tokenFile to the token file its start-up line names.`,
    );
    return true;
  });
  assert.equal(client.status.state, "disconnected");
});

test("a browser Origin the server does not allow: HTTP 403 with the server's fix", async () => {
  const client = clientWith({ headers: { Origin: "https://evil.example" } });
  await assert.rejects(client.connect(), {
    name: "ConnectError",
    failure: "forbidden",
    message: `warpcode serve at ${server.url} refused the connection (HTTP 403: origin 'https://evil.example' is not allowed (start the server with --allow-origin)).`,
  });
});

test("a URL that is not a WebSocket URL", async () => {
  await assert.rejects(clientWith({ url: "127.0.0.1:8765/acp" }).connect(), { // the scheme forgotten
    failure: "invalid-url",
    message: /^warpcode\.url is not a WebSocket URL like ws:\/\/127\.0\.0\.1:8765\/acp: /,
  });
});

test("a token file that does not exist says how to get one", async () => {
  const tokenFile = `${sandbox.root}/no-such-token`;
  const client = clientWith({ token: { token: "", tokenFile } });
  await assert.rejects(client.connect(), {
    message: `No token: ${tokenFile} does not exist. Start \`warpcode serve\` (it creates the file and prints its path), then set warpcode.tokenFile to that path, or warpcode.token to the token.`,
  });
});

test("nothing listening: a clear error; with a server command, warpcode serve is started", async () => {
  const closed = "ws://127.0.0.1:9/acp"; // the discard port: nothing listens on loopback
  await assert.rejects(clientWith({ url: closed }).connect(), {
    failure: "unreachable",
    message: `Nothing answers at ${closed}: start \`warpcode serve\` there, or set warpcode.serverCommand to have VS Code start it.`,
  });

  const autoStarting = clientWith({ url: closed, token: { token: "", tokenFile: "" }, serverCommand: { command: PYTHON, args: serveArgs(sandbox), cwd: sandbox.root } });
  const connection = await autoStarting.connect();
  assert.match(connection.agentName, /^warpcode /);
  assert.notEqual(autoStarting.status.url, closed); // the started server's own URL, read from its start-up line
  const session = await autoStarting.newSession(sandbox.workspace);
  assert.equal(await autoStarting.prompt(session.sessionId, "hi"), "end_turn");
  assert.deepEqual(session.transcript.items.at(-1), { kind: "agent", text: "Hello." });
});
