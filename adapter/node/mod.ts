/**
 * Rafter for Node (20 and later): the TCP server (`serve`, on `node:net`;
 * it resolves once listening), the TCP dialer (`nodeTcpDialer`: `node:net`,
 * Nagle off), and `connect()` and `dial()` that use it when no `dialer` is
 * given. Importing it sets no process-wide default dialer and loads no
 * codec beyond NDJSON (for `codec: "cbor"`, import `@rafter/rpc/cbor`
 * once). Everything else comes from `@rafter/rpc` and its subpaths
 * (from the npm package under Node, `@rafter/rpc` has this entry's
 * `connect` and `serve` too).
 *
 * TLS: `serve({ tls: { certFile, keyFile, caFile?, clientCert? } })`
 * listens with TLS (`server.url` is `tls://…`; `clientCert: "require"`
 * makes clients present a certificate from `caFile`, which methods see as
 * `session.peerCertificate`; `handshakeTimeoutMs`, `reloadOnSignal`,
 * `watchFiles`, `onError`; `server.reloadTls()`). `dial(url, { tls })`,
 * `connect(urls, { tls })` and `nodeDialer(tls)` open `tls://` URLs
 * with `{ caFile?, certFile?, keyFile?, serverName? }` (default: the
 * system's roots, no client certificate); see `TlsServerOptions` and
 * `TlsClientOptions`.
 *
 * @example A server that binds itself, and a client
 * ```ts
 * import assert from "node:assert/strict";
 * import { bindServer } from "@rafter/rpc";
 * import { connect, serve } from "@rafter/rpc/node";
 * import { startRegistryNode } from "@rafter/rpc/registry";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = await serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect(node.url); // a real cluster: "tcp://127.0.0.1:7001", …
 * const binding = await bindServer(client.registry, "hello", server, { id: "hello-1" });
 * const hello = client.stub<{ greet(name: string): string }>("hello");
 * assert.equal(await hello.greet("Ada"), "Hello, Ada!");
 * await binding.close(); // drains the server, revokes its lease
 * client.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 *
 * @module
 */

import {
  connect as connectOn,
  type ConnectOptions,
  type RafterClient,
} from "../../stub/client.ts";
import { dial as dialOn, type DialOptions } from "../../rpc/transport/dial.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { nodeDialer, nodeTcpDialer } from "./tcp.ts";
import type { TlsDialOptions } from "../../rpc/transport/tls.ts";
import { withEntryDialer } from "../tls/client.ts";

export { serve } from "./serve.ts";
export type {
  ClientCertPolicy,
  TlsClientOptions,
  TlsDialOptions,
  TlsServerError,
  TlsServerErrorCode,
  TlsServerOptions,
} from "../../rpc/transport/tls.ts";
export { fromNodeSocket, nodeDialer, nodeTcpDialer } from "./tcp.ts";

/**
 * `connect()` of `@rafter/rpc` on {@link nodeDialer}`(options.tls)` unless
 * `options.dialer` says otherwise: a client of the registry cluster at
 * `registryUrls` whose stubs call the servers bound in it; `tcp://` and
 * `tls://` URLs both.
 *
 * @throws {TypeError} when no URL is given.
 */
export function connect(
  registryUrls: string | readonly string[],
  options: ConnectOptions & TlsDialOptions = {},
): RafterClient {
  return connectOn(
    registryUrls,
    withEntryDialer(options, nodeTcpDialer, nodeDialer),
  );
}

/**
 * `dial()` of `@rafter/rpc/transport` on {@link nodeDialer}`(options.tls)`
 * unless `options.dialer` says otherwise: one multiplexed JSON-RPC
 * connection to the endpoint at `url` (`tcp://` or `tls://`).
 *
 * @throws {ConnectionError} when the connection cannot be opened (for
 * TLS: the message says what to do about an untrusted certificate, a name
 * mismatch or a refused client certificate).
 */
export function dial(
  url: string,
  options: DialOptions & TlsDialOptions = {},
): Promise<RpcConnection> {
  return dialOn(url, withEntryDialer(options, nodeTcpDialer, nodeDialer));
}
