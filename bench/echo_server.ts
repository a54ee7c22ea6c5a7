/**
 * A raw TCP line echo server: the floor the RPC paths are measured against.
 * Prints `listening on tcp://127.0.0.1:PORT`; exits when stdin closes.
 *
 * @module
 */

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
console.log(
  `listening on tcp://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
);
(async () => {
  for await (const _ of Deno.stdin.readable) { /* until EOF */ }
  Deno.exit(0);
})();
for await (const conn of listener) {
  conn.setNoDelay(true);
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
