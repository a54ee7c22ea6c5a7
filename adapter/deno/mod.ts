/**
 * Rafter for Deno: everything in `@rafter/rpc`, plus the TCP server
 * (`serve`, on `Deno.listen`) and the TCP dialer (`Deno.connect`, Nagle off,
 * 64 KiB reads), which this entry makes the default of `dial()`,
 * `connect()` and the stubs when imported. Kept out of the edge-safe
 * `mod.ts`, as Hono keeps its runtime adapters at the edge of the code.
 *
 * @example Serve a method table and bind it in the registry
 * ```ts ignore
 * import { connect, serve } from "@rafter/rpc/deno";
 * const server = serve({ hostname: "127.0.0.1", port: 0, methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect("tcp://127.0.0.1:7001");
 * await client.bind("hello", { id: "hello-1", url: server.url });
 * ```
 *
 * @module
 */

import "../../rpc/codec/cbor.ts";
import { setDefaultDialer } from "../../rpc/transport/default_dialer.ts";
import { denoTcpDialer } from "./tcp.ts";

setDefaultDialer(denoTcpDialer);

export * from "../../mod.ts";
export { serve } from "./serve.ts";
export { denoTcpDialer, fromDenoConn } from "./tcp.ts";
