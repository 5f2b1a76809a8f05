// warpcode.mcpServers as ACP's mcpServers: the shapes of ACP 1.21's McpServerStdio and McpServerHttp (env and
// headers as {name, value} lists, an absolute command), a bare command found on a real PATH (a temporary folder
// with an executable in it), and each wrong server left out with one line saying what to fix.

import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { mcpServersFromSetting } from "../core/mcp-servers.js";

let dir: string;
let bin: string;

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "warpcode-mcp-"));
  bin = path.join(dir, "bin");
  await mkdir(bin);
  await writeFile(path.join(bin, "files-mcp"), "#!/bin/sh\n");
  await chmod(path.join(bin, "files-mcp"), 0o755);
  await writeFile(path.join(bin, "not-executable"), "");
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("stdio and HTTP servers in ACP's shapes; a bare command is looked up on PATH", () => {
  const { servers, problems } = mcpServersFromSetting([
    { name: "files", command: "files-mcp", args: ["--root", "/repo"], env: { FILES_TOKEN: "t0k" } },
    { name: "shell", command: "/bin/sh" },
    { name: "docs", url: "https://docs.example/mcp", headers: { Authorization: "Bearer abc" } },
  ], `relative/bin${path.delimiter}${path.join(dir, "missing")}${path.delimiter}${bin}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(servers, [
    { name: "files", command: path.join(bin, "files-mcp"), args: ["--root", "/repo"], env: [{ name: "FILES_TOKEN", value: "t0k" }] },
    { name: "shell", command: "/bin/sh", args: [], env: [] },
    { type: "http", name: "docs", url: "https://docs.example/mcp", headers: [{ name: "Authorization", value: "Bearer abc" }] },
  ]);
});

test("each wrong server is left out, saying why; the others stay", () => {
  const { servers, problems } = mcpServersFromSetting([
    { name: "ok", command: "/bin/sh" },
    { name: "ok", command: "/bin/true" },
    { name: "both", command: "/bin/sh", url: "https://x.example/mcp" },
    { command: "/bin/sh" },
    { name: "lost", command: "not-executable" },
    { name: "rel", command: "./server" },
    { name: "ftp", url: "ftp://x.example/mcp" },
    { name: "env", command: "/bin/sh", env: { N: 1 } },
    { name: "typo", command: "/bin/sh", agrs: [] },
    "files",
  ], bin);
  assert.deepEqual(servers.map((s) => s.name), ["ok"]);
  assert.deepEqual(problems, [
    'warpcode.mcpServers: server "ok" left out: a second server named "ok": give each its own name',
    'warpcode.mcpServers: server "both" left out: give exactly one of command (a stdio server) or url (an HTTP server)',
    "warpcode.mcpServers: server number 4 left out: it needs a name",
    'warpcode.mcpServers: server "lost" left out: command "not-executable" is not on PATH: give its absolute path',
    'warpcode.mcpServers: server "rel" left out: command "./server" is relative: give an absolute path or a program on PATH',
    'warpcode.mcpServers: server "ftp" left out: url must be an http:// or https:// URL',
    'warpcode.mcpServers: server "env" left out: env must be an object of strings: { "NAME": "value" }',
    'warpcode.mcpServers: server "typo" left out: unknown key "agrs" (known: name, command, args, env, url, headers)',
    "warpcode.mcpServers: server number 10 left out: each server is an object with a name and a command or url",
  ]);
  assert.deepEqual(mcpServersFromSetting({ files: { command: "/bin/sh" } }).problems, ['warpcode.mcpServers must be a list of servers: [{ "name": …, "command": … }]']);
  assert.deepEqual(mcpServersFromSetting(undefined), { servers: [], problems: [] });
});
