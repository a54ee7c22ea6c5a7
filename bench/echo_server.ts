/**
 * A raw TCP line echo server: the floor the RPC paths are measured against.
 * Prints `listening on tcp://127.0.0.1:PORT`; exits when stdin closes.
 *
 * @module
 */

import { acceptUntilStdinCloses } from "./_rpc_driver.ts";

for await (const conn of acceptUntilStdinCloses()) {
  (async () => {
    const buffer = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await conn.read(buffer);
        if (n === null) break;
        for (let sent = 0; sent < n;) {
          sent += await conn.write(buffer.subarray(sent, n));
        }
      }
    } catch {
      // The client went away.
    } finally {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  })();
}
