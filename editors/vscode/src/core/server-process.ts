// Starting `warpcode serve` as a child process (the extension's optional auto-start, and the tests' real server):
// it is ready when its start-up line on stderr says where it listens and which token file it uses.

import { spawn, type ChildProcess } from "node:child_process";

const LISTENING = "warpcode serve: ACP on "; // agent/cli/serve.py LISTENING
const TOKEN_FILE = /\(token in (.+?); model: /;
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const KEPT_OUTPUT_CHARS = 16_000;

export interface ServerCommand {
  command: string;
  args?: string[];
  shell?: boolean; // `command` is a whole command line (the setting)
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export interface StartedServer {
  url: string;
  tokenFile: string | null; // null when it was given its token (--token, $WARPCODE_TOKEN)
  stop(): Promise<void>;
}

export function startServer(server: ServerCommand): Promise<StartedServer> {
  const child = spawn(server.command, server.args ?? [], {
    shell: server.shell ?? false,
    cwd: server.cwd,
    env: server.env ?? process.env,
    stdio: ["ignore", "ignore", "pipe"],
    detached: true, // its own process group: stop() ends a shell and the server it started together
  });
  let output = ""; // the last KEPT_OUTPUT_CHARS of stderr, for the error when it does not start
  let pending = ""; // stderr not yet split into lines, until the start-up line
  let ready = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(`did not say where it listens within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    const fail = (why: string) => {
      clearTimeout(timer);
      void stopProcess(child);
      reject(new Error(`\`${commandLine(server)}\` ${why}.${output ? ` It printed:\n${output.trim()}` : ""}`));
    };
    child.once("error", (error) => fail(`could not start: ${error.message}`));
    child.once("exit", (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before listening`));
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      output = (output + chunk).slice(-KEPT_OUTPUT_CHARS);
      if (ready) return;
      pending += chunk;
      for (let newline = pending.indexOf("\n"); newline !== -1; newline = pending.indexOf("\n")) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (!line.startsWith(LISTENING)) continue;
        clearTimeout(timer);
        child.removeAllListeners("exit");
        child.removeAllListeners("error");
        ready = true;
        resolve({
          url: line.slice(LISTENING.length).split(" ")[0]!,
          tokenFile: TOKEN_FILE.exec(line)?.[1] ?? null,
          stop: () => stopProcess(child),
        });
        return;
      }
    });
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  signalGroup(child, "SIGTERM");
  const timer = setTimeout(() => signalGroup(child, "SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

function commandLine(server: ServerCommand): string {
  return [server.command, ...(server.args ?? [])].join(" ");
}
