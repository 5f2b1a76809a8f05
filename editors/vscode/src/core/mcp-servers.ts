// `warpcode.mcpServers` (the user's settings) as ACP's `mcpServers`, which the extension sends in session/new, load
// and resume so that every session can use them: a server is a command (stdio) or a URL (streamable HTTP).
// The setting is written as people write MCP configs (`env` and `headers` as objects); ACP wants lists of
// {name, value} and an absolute command, so a bare command name is looked up on PATH here. A server that is
// wrong is left out and named, with what to fix, so that the others still work.

import { accessSync, constants, statSync } from "node:fs";
import * as path from "node:path";
import type { McpServer } from "@agentclientprotocol/sdk";

export interface McpSettings {
  servers: McpServer[];
  problems: string[]; // one line per server left out
}

export function mcpServersFromSetting(value: unknown, searchPath = process.env.PATH ?? ""): McpSettings {
  const servers: McpServer[] = [];
  const problems: string[] = [];
  if (value === undefined || value === null) return { servers, problems };
  if (!Array.isArray(value)) return { servers, problems: ["warpcode.mcpServers must be a list of servers: [{ \"name\": …, \"command\": … }]"] };
  const names = new Set<string>();
  for (const [index, entry] of value.entries()) {
    try {
      const server = mcpServer(entry, searchPath);
      if (names.has(server.name)) throw new Error(`a second server named "${server.name}": give each its own name`);
      names.add(server.name);
      servers.push(server);
    } catch (error) {
      const name = typeof entry?.name === "string" && entry.name ? `"${entry.name}"` : `number ${index + 1}`;
      problems.push(`warpcode.mcpServers: server ${name} left out: ${(error as Error).message}`);
    }
  }
  return { servers, problems };
}

function mcpServer(entry: unknown, searchPath: string): McpServer {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw new Error("each server is an object with a name and a command or url");
  const server = entry as Record<string, unknown>;
  const known = ["name", "command", "args", "env", "url", "headers"];
  const unknown = Object.keys(server).find((key) => !known.includes(key));
  if (unknown !== undefined) throw new Error(`unknown key "${unknown}" (known: ${known.join(", ")})`);
  if (typeof server.name !== "string" || server.name.trim() === "") throw new Error("it needs a name");
  const name = server.name.trim();
  if ((server.command === undefined) === (server.url === undefined)) throw new Error("give exactly one of command (a stdio server) or url (an HTTP server)");
  if (server.url !== undefined) {
    if (server.args !== undefined || server.env !== undefined) throw new Error("args and env go with command; a url server takes headers");
    if (typeof server.url !== "string" || !/^https?:\/\//.test(server.url)) throw new Error("url must be an http:// or https:// URL");
    return { type: "http", name, url: server.url, headers: pairs(server.headers, "headers") };
  }
  if (server.headers !== undefined) throw new Error("headers go with url; a command server takes env");
  if (typeof server.command !== "string" || server.command.trim() === "") throw new Error("command must be a program to run");
  const args = server.args ?? [];
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === "string")) throw new Error("args must be a list of strings");
  return { name, command: absoluteCommand(server.command.trim(), searchPath), args, env: pairs(server.env, "env") };
}

function pairs(value: unknown, key: string): { name: string; value: string }[] {
  if (value === undefined) return [];
  if (typeof value !== "object" || value === null || Array.isArray(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new Error(`${key} must be an object of strings: { "NAME": "value" }`);
  }
  return Object.entries(value as Record<string, string>).map(([name, text]) => ({ name, value: text }));
}

// ACP's command is an absolute path: a bare name is found on PATH as a shell would find it.
function absoluteCommand(command: string, searchPath: string): string {
  if (path.isAbsolute(command)) return command;
  if (command.includes("/")) throw new Error(`command "${command}" is relative: give an absolute path or a program on PATH`);
  for (const folder of searchPath.split(path.delimiter).filter((f) => path.isAbsolute(f))) {
    const candidate = path.join(folder, command);
    if (isExecutable(candidate)) return candidate;
  }
  throw new Error(`command "${command}" is not on PATH: give its absolute path`);
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
