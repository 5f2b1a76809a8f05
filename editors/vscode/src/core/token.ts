// Where the bearer token comes from: the setting, else the token file (the setting's, else $WARPCODE_TOKEN, else
// the file `warpcode serve` writes beside its state by default), read fresh at each connect so a restarted server's
// new token is picked up.

import { readFile } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";

// No token to send: the file is missing or empty.
export class TokenError extends Error {
  override name = "TokenError";
}

export interface TokenSource {
  token: string; // "" when unset
  tokenFile: string; // "" for the default
}

export function defaultTokenFile(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME ?? "";
  const stateHome = env.WARPCODE_STATE_DIR
    ? env.WARPCODE_STATE_DIR
    : path.join(path.isAbsolute(xdg) ? xdg : path.join(env.HOME ?? os.homedir(), ".local", "state"), "warpcode");
  return path.join(expandHome(stateHome, env), "serve-token");
}

export async function resolveToken(source: TokenSource, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (source.token.trim()) return source.token.trim();
  if (!source.tokenFile && env.WARPCODE_TOKEN?.trim()) return env.WARPCODE_TOKEN.trim();
  const file = source.tokenFile ? expandHome(source.tokenFile, env) : defaultTokenFile(env);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "does not exist" : (error as Error).message;
    throw new TokenError(
      `No token: ${file} ${reason}. Start \`warpcode serve\` (it creates the file and prints its path), then set ` +
        `warpcode.tokenFile to that path, or warpcode.token to the token.`,
    );
  }
  const token = text.trim();
  if (!token) throw new TokenError(`No token: ${file} is empty. Delete it and restart \`warpcode serve\` to get a new one.`);
  return token;
}

function expandHome(file: string, env: NodeJS.ProcessEnv): string {
  return file === "~" || file.startsWith("~/") ? path.join(env.HOME ?? os.homedir(), file.slice(1)) : file;
}
