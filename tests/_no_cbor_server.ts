/**
 * A `serve()` in a process that never loads the CBOR codec (for
 * tests/no_cbor_server_test.ts: the codec registry is process-wide). It
 * prints `ready on URL` and serves `echo` until its stdin closes.
 *
 * @module
 */

import { serve } from "../adapter/deno/serve.ts";

const server = serve({
  hostname: "127.0.0.1",
  port: 0,
  methods: { echo: (value: unknown) => value },
});
console.log(`ready on ${server.url}`);
for await (const _ of Deno.stdin.readable) { /* until EOF */ }
await server.close();
