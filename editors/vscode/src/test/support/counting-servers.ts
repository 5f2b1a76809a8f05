// Two servers on loopback, plain HTTP and HTTPS (a throw-away self-signed certificate made with openssl; Chromium
// is told to accept it), that answer every request with an image and note every connection and request: what a
// page loads from "the network" shows up here.

import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
// A 1x1 transparent PNG: a real image, so that a page that asks for one gets one.
const PIXEL = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");

export interface CountingServers {
  httpOrigin: string; // http://127.0.0.1:PORT
  httpsOrigin: string; // https://127.0.0.1:PORT
  seen: string[]; // "connection" per TCP connection, then the method and URL of each request
  close(): Promise<void>;
}

export async function startCountingServers(): Promise<CountingServers> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "warpcode-tls-"));
  const key = path.join(dir, "key.pem");
  const cert = path.join(dir, "cert.pem");
  try {
    await run("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
      "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]);
    const seen: string[] = [];
    const answer = (request: http.IncomingMessage, response: http.ServerResponse) => {
      seen.push(`${request.method} ${request.url}`);
      response.writeHead(200, { "content-type": "image/png", "access-control-allow-origin": "*" }).end(PIXEL);
    };
    const plain = http.createServer(answer);
    const secure = https.createServer({ key: await readFile(key), cert: await readFile(cert) }, answer);
    for (const server of [plain, secure]) {
      server.on("connection", () => seen.push("connection"));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    }
    const origin = (scheme: string, server: http.Server) => `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
      httpOrigin: origin("http", plain),
      httpsOrigin: origin("https", secure),
      seen,
      close: async () => {
        for (const server of [plain, secure]) {
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
