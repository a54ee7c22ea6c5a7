/**
 * Rafter for Node (20 and later): everything in `@rafter/rpc`, plus the
 * TCP server (`serve`, on `node:net`; it resolves once listening) and the
 * TCP dialer (`node:net`, Nagle off), which this entry makes the default
 * of `dial()`, `connect()` and the stubs when imported.
 *
 * @example A server that binds itself, and a client
 * ```ts ignore
 * import { bindServer, connect, serve } from "@rafter/rpc/node";
 * const server = await serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect("tcp://127.0.0.1:7001");
 * const binding = await bindServer(client.registry, "hello", server, { id: "hello-1" });
 * console.log(await client.stub<{ greet(name: string): string }>("hello").greet("Ada"));
 * ```
 *
 * @module
 */

import "../../rpc/codec/cbor.ts";
import { setDefaultDialer } from "../../rpc/transport/default_dialer.ts";
import { nodeTcpDialer } from "./tcp.ts";

setDefaultDialer(nodeTcpDialer);

export * from "../../mod.ts";
export { serve } from "./serve.ts";
export { fromNodeSocket, nodeTcpDialer } from "./tcp.ts";
