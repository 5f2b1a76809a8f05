// Opening the WebSocket to `warpcode serve`: the bearer token on the upgrade request, and every way the upgrade
// can fail turned into a `ConnectError` that says what happened and what to do (the server's own refusal reason
// included: it names the fix, e.g. --allow-origin).

import WebSocket from "ws";

const OPEN_TIMEOUT_MS = 10_000;
const MAX_REASON_BYTES = 2048;

export type ConnectFailure = "invalid-url" | "unreachable" | "unauthorized" | "forbidden" | "refused" | "timeout";

export class ConnectError extends Error {
  constructor(
    readonly failure: ConnectFailure,
    message: string,
  ) {
    super(message);
    this.name = "ConnectError";
  }
}

export interface SocketOptions {
  url: string;
  token: string;
  headers?: Record<string, string>; // extra upgrade headers (an Origin, a proxy's)
}

export function openSocket({ url, token, headers }: SocketOptions): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    let socket: WebSocket;
    try {
      socket = new WebSocket(url, { headers: { ...headers, Authorization: `Bearer ${token}` }, perMessageDeflate: false });
    } catch (error) {
      reject(new ConnectError("invalid-url", `warpcode.url is not a WebSocket URL like ws://127.0.0.1:8765/acp: ${(error as Error).message}`));
      return;
    }
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.on("error", () => undefined); // the abort below reports once more
      socket.terminate();
      reject(error);
    };
    const timer = setTimeout(() => {
      fail(new ConnectError("timeout", `No answer from ${url} within ${OPEN_TIMEOUT_MS / 1000} s: is warpcode serve running there?`));
    }, OPEN_TIMEOUT_MS);
    socket.once("open", () => {
      settled = true;
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once("unexpected-response", (_request, response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        if (size < MAX_REASON_BYTES) chunks.push(chunk);
        size += chunk.length;
      });
      response.on("end", () => fail(refusal(url, response.statusCode ?? 0, Buffer.concat(chunks).toString("utf8").trim())));
      response.on("error", () => fail(refusal(url, response.statusCode ?? 0, "")));
    });
    socket.once("error", (error: NodeJS.ErrnoException) => fail(unreachable(url, error)));
  });
}

function refusal(url: string, status: number, reason: string): ConnectError {
  const said = reason ? `: ${reason}` : "";
  if (status === 401) {
    return new ConnectError(
      "unauthorized",
      `warpcode serve at ${url} refused the token (HTTP 401${said}). Set warpcode.token to the token it uses, or ` +
        `warpcode.tokenFile to the token file its start-up line names.`,
    );
  }
  if (status === 403) return new ConnectError("forbidden", `warpcode serve at ${url} refused the connection (HTTP 403${said}).`);
  return new ConnectError("refused", `${url} refused the WebSocket upgrade (HTTP ${status}${said}): check warpcode.url.`);
}

function unreachable(url: string, error: NodeJS.ErrnoException): ConnectError {
  if (error.code === "ECONNREFUSED") {
    return new ConnectError(
      "unreachable",
      `Nothing answers at ${url}: start \`warpcode serve\` there, or set warpcode.serverCommand to have VS Code start it.`,
    );
  }
  return new ConnectError("unreachable", `Cannot connect to ${url}: ${error.message}.`);
}
