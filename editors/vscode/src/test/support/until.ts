// Waiting in tests for something the client reports through onChange (with a deadline that says what was awaited).

import type { WarpcodeClient } from "../../core/warpcode-client.js";

export function until<T>(client: WarpcodeClient, what: string, probe: () => T | undefined | null | false, timeoutMs = 20_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = probe();
      if (found === undefined || found === null || found === false) return false;
      stop();
      clearTimeout(timer);
      resolve(found);
      return true;
    };
    const stop = client.onChange(check);
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    check();
  });
}
