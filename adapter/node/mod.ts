/**
 * Rafter for Node (20 and later): the TCP server (`serve`, on `node:net`;
 * it resolves once listening), the TCP dialer (`nodeTcpDialer`: `node:net`,
 * Nagle off), and `connect()` and `dial()` that use it when no `dialer` is
 * given. Importing it sets no process-wide default dialer; it loads the
 * CBOR codec. Everything else comes from `@rafter/rpc` and its subpaths
 * (from the npm package under Node, `@rafter/rpc` has this entry's
 * `connect` and `serve` too).
 *
 * @example A server that binds itself, and a client
 * ```ts ignore
 * import { bindServer } from "@rafter/rpc";
 * import { connect, serve } from "@rafter/rpc/node";
 * const server = await serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect("tcp://127.0.0.1:7001");
 * const binding = await bindServer(client.registry, "hello", server, { id: "hello-1" });
 * console.log(await client.stub<{ greet(name: string): string }>("hello").greet("Ada"));
 * ```
 *
 * @module
 */

import "../../rpc/codec/cbor.ts";
import {
  connect as connectOn,
  type ConnectOptions,
  type RafterClient,
} from "../../stub/client.ts";
import { dial as dialOn, type DialOptions } from "../../rpc/transport/dial.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { nodeTcpDialer } from "./tcp.ts";

export { serve } from "./serve.ts";
export { fromNodeSocket, nodeTcpDialer } from "./tcp.ts";

/**
 * `connect()` of `@rafter/rpc` on {@link nodeTcpDialer} unless
 * `options.dialer` says otherwise: a client of the registry cluster at
 * `registryUrls` whose stubs call the servers bound in it.
 *
 * @throws {TypeError} when no URL is given.
 */
export function connect(
  registryUrls: string | readonly string[],
  options: ConnectOptions = {},
): RafterClient {
  return connectOn(registryUrls, {
    ...options,
    dialer: options.dialer ?? nodeTcpDialer,
  });
}

/**
 * `dial()` of `@rafter/rpc/transport` on {@link nodeTcpDialer} unless
 * `options.dialer` says otherwise: one multiplexed JSON-RPC connection to
 * the endpoint at `url`.
 *
 * @throws {ConnectionError} when the connection cannot be opened.
 */
export function dial(
  url: string,
  options: DialOptions = {},
): Promise<RpcConnection> {
  return dialOn(url, { ...options, dialer: options.dialer ?? nodeTcpDialer });
}
