// A real `warpcode serve` for the tests: a scripted model (docs/reference/scripted-model.md), a temporary workspace and state
// directory, a free port. $WARPCODE_PYTHON names the Python that has warpcode (default: python3, as in CI's venv).

import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { startServer, type StartedServer } from "../../core/server-process.js";

export const PYTHON = process.env.WARPCODE_PYTHON ?? "python3";

export interface ScriptedTurn {
  text?: string;
  thought?: string;
  tool_calls?: { name: string; arguments: Record<string, unknown> }[];
}

export interface Sandbox {
  root: string;
  workspace: string; // the session's folder
  stateDir: string;
  script: string; // the scripted model's file
  remove(): Promise<void>;
}

export async function makeSandbox(files: Record<string, string>, turns: ScriptedTurn[]): Promise<Sandbox> {
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), "warpcode-vscode-")));
  const workspace = path.join(root, "repo");
  await mkdir(workspace);
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(workspace, name), text);
  const script = path.join(root, "model.json");
  await writeFile(script, JSON.stringify({ turns }));
  const stateDir = path.join(root, "state");
  return { root, workspace, stateDir, script, remove: () => rm(root, { recursive: true, force: true }) };
}

export function serveArgs(sandbox: Sandbox, port = 0, ...extra: string[]): string[] {
  return ["-m", "warpcode.agent", "serve", "--port", String(port), "--model", `scripted:${sandbox.script}`, "--state-dir", sandbox.stateDir, ...extra];
}

export function serve(sandbox: Sandbox, port = 0, ...extra: string[]): Promise<StartedServer> {
  return startServer({ command: PYTHON, args: serveArgs(sandbox, port, ...extra), cwd: sandbox.root });
}

export function portOf(url: string): number {
  return Number(new URL(url).port);
}
