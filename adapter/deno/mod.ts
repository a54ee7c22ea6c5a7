/**
 * Rafter for Deno: the TCP server (`serve`, on `Deno.listen`), the TCP
 * dialer (`denoTcpDialer`: `Deno.connect`, Nagle off, 64 KiB reads), and
 * `connect()` and `dial()` that use it when no `dialer` is given. Importing
 * it sets no process-wide default dialer (`connect` of `@rafter/rpc`
 * finds `Deno.connect` by feature detection, Nagle off too), and loads no
 * npm package: for `codec: "cbor"`, import `@rafter/rpc/cbor` once. Kept
 * out of the edge-safe `@rafter/rpc`, as Hono
 * keeps its runtime adapters at the edge of the code; everything else comes
 * from `@rafter/rpc` and its subpaths.
 *
 * TLS: `serve({ tls: { certFile, keyFile, caFile?, clientCert? } })`
 * listens with TLS (`server.url` is `tls://…`; `clientCert: "require"`
 * makes clients present a certificate from `caFile`, which methods see as
 * `session.peerCertificate`; `handshakeTimeoutMs`, `reloadOnSignal`,
 * `watchFiles`, `onError`; `server.reloadTls()`). `dial(url, { tls })`,
 * `connect(urls, { tls })` and `denoDialer(tls)` open `tls://` URLs
 * with `{ caFile?, certFile?, keyFile?, serverName? }` (default: the
 * system's roots, no client certificate); see `TlsServerOptions` and
 * `TlsClientOptions`.
 *
 * @example Serve a method table and bind it in the registry
 * ```ts
 * import assert from "node:assert/strict";
 * import { connect, serve } from "@rafter/rpc/deno";
 * import { startRegistryNode } from "@rafter/rpc/registry";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = serve({ hostname: "127.0.0.1", port: 0, methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect(node.url); // a real cluster: "tcp://127.0.0.1:7001", …
 * await client.bind("hello", { id: "hello-1", url: server.url });
 * const hello = client.stub<{ greet(name: string): string }>("hello");
 * assert.equal(await hello.greet("Ada"), "Hello, Ada!");
 * client.close();
 * await server.close();
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
import { denoDialer, denoTcpDialer } from "./tcp.ts";
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
export { denoDialer, denoTcpDialer, fromDenoConn } from "./tcp.ts";

/**
 * `connect()` of `@rafter/rpc` on {@link denoDialer}`(options.tls)` unless
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
    withEntryDialer(options, denoTcpDialer, denoDialer),
  );
}

/**
 * `dial()` of `@rafter/rpc/transport` on {@link denoDialer}`(options.tls)`
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
  return dialOn(url, withEntryDialer(options, denoTcpDialer, denoDialer));
}
