/**
 * The server of `bench/codec.ts`: `echo` returns its params object. Prints
 * `listening on tcp://127.0.0.1:PORT`; exits when stdin closes.
 *
 * @module
 */

// It answers the CBOR clients of codec.ts.
import "../rpc/codec/cbor.ts";
import { serve } from "../adapter/deno/serve.ts";

const server = serve({
  methods: { echo: (value: unknown) => value },
  maxFrameBytes: 4 * 1024 * 1024,
});
console.log(`listening on ${server.url}`);
for await (const _ of Deno.stdin.readable) { /* until EOF */ }
await server.close();
