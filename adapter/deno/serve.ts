/**
 * Deno adapter: a JSON-RPC 2.0 TCP server on `Deno.listen`, handed to the
 * runtime-free {@link serveListener}; with the `tls` option, a TLS server
 * on Deno's `node:tls` (`Deno.listenTls` can neither ask for client
 * certificates nor change its certificate while it listens).
 *
 * @module
 */

import {
  type RpcServer,
  serveListener,
  type ServeOptions,
  validateServeOptions,
} from "../../rpc/server/server.ts";
import { ServerMetrics } from "../../rpc/server/metrics.ts";
import { responseOf } from "../../internal/metrics.ts";
import { listenHttp } from "../../internal/http_deno.ts";
import { fromDenoConn } from "./tcp.ts";
import { openTlsListener } from "../tls/server.ts";
import { Duplex } from "node:stream";

export type { RpcServer, ServeOptions } from "../../rpc/server/server.ts";

/**
 * Starts a JSON-RPC 2.0 server on TCP (NDJSON frames) with `Deno.listen`,
 * one connection handler per accepted connection, Nagle's algorithm off.
 *
 * With `tls` (see `TlsServerOptions`) it listens with TLS: `server.url`
 * is `tls://host:port`, each stream is `secure` and carries the verified
 * client certificate (`session.peerCertificate`) when `tls.clientCert`
 * asks for one; `server.reloadTls()` re-reads the files, as SIGHUP and a
 * change of the files do. The port is bound with `Deno.listen` first, so
 * `serve()` still returns at once with the actual port and throws
 * `AddrInUse` synchronously; the TLS socket then listens on that port.
 *
 * With `metrics` (`{ listen: "127.0.0.1:9464" }`), it also serves
 * Prometheus metrics on `GET /metrics` of that plain-HTTP port
 * (`server.metricsUrl`), closed with the server; a non-loopback address
 * is logged as a warning.
 *
 * @param options `hostname` (default `"127.0.0.1"`), `port` (default 0:
 * ephemeral), the methods, limits, `advertise`, `signal`, `tls` and
 * `metrics`.
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen`
 * when the address (or the metrics address) cannot be bound.
 * @throws {TypeError} for a `metrics.listen` that is not `host:port`.
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
 * @throws {TypeError} for `tls` files that cannot be read or a
 * certificate and key that do not match.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { serve } from "./serve.ts";
 * import { dial } from "../../rpc/transport/dial.ts";
 * const server = serve({
 *   port: 0,
 *   methods: { greet: (name: string) => `Hello, ${name}!` },
 * });
 * assert.match(server.url, /^tcp:\/\/127\.0\.0\.1:\d+$/); // the port it got
 * const connection = await dial(server.url);
 * assert.equal(await connection.call("greet", ["Ada"]), "Hello, Ada!");
 * connection.close();
 * await server.close();
 * ```
 */
export function serve(options: ServeOptions): RpcServer {
  validateServeOptions(options);
  if (options.metrics === undefined) return serveRpc(options);
  const metrics = new ServerMetrics(options.metrics);
  const server = serveRpc(metrics.instrument(options));
  let listener;
  try {
    listener = listenHttp(
      metrics.address,
      (request) =>
        responseOf(
          metrics.answer(request.method, new URL(request.url).pathname),
        ),
    );
  } catch (error) {
    void server.close();
    throw error;
  }
  return metrics.attach(server, listener);
}

/** {@link serve} without the metrics port. */
function serveRpc(options: ServeOptions): RpcServer {
  const { hostname = "127.0.0.1", port = 0 } = options;
  if (options.tls !== undefined) return serveTls(options, hostname, port);
  return serveListener(
    denoListener(
      Deno.listen({ hostname, port, transport: "tcp" }),
      fromDenoConn,
    ),
    options,
  );
}

/**
 * The TLS server: `Deno.listen` binds (synchronously: `serve()` returns
 * with the actual port, and refuses a busy one at once), `node:tls` runs
 * the handshakes on the accepted connections.
 */
function serveTls(
  options: ServeOptions,
  hostname: string,
  port: number,
): RpcServer {
  const tls = options.tls!;
  const listener = Deno.listen({ hostname, port, transport: "tcp" });
  try {
    return serveListener(
      openTlsListener(tls, denoListener(listener, duplexOfConn)),
      options,
    );
  } catch (error) {
    listener.close();
    throw error;
  }
}

/**
 * `conn` as a `node:stream` duplex (what `node:tls` runs on): reads only
 * when the TLS layer asks (a fresh copy of at most 64 KiB each), writes
 * in full, `destroy()` closes the connection.
 */
function duplexOfConn(conn: Deno.TcpConn): Duplex {
  const buffer = new Uint8Array(64 * 1024);
  let reading = false;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  };
  const duplex: Duplex = new Duplex({
    read() {
      if (reading) return;
      reading = true;
      conn.read(buffer).then((count) => {
        reading = false;
        if (count === null) duplex.push(null);
        else if (duplex.push(buffer.slice(0, count))) duplex.read(0);
      }, (error) => {
        reading = false;
        if (closed) duplex.push(null);
        else duplex.destroy(error);
      });
    },
    write(chunk: Uint8Array, _encoding, callback) {
      (async () => {
        let offset = 0;
        while (offset < chunk.length) {
          offset += await conn.write(chunk.subarray(offset));
        }
      })().then(() => callback(), callback);
    },
    final(callback) {
      conn.closeWrite().then(() => callback(), () => callback());
    },
    destroy(error, callback) {
      close();
      callback(error);
    },
  });
  const remote = conn.remoteAddr;
  Object.assign(duplex, {
    remoteAddress: remote.hostname,
    remotePort: remote.port,
  });
  return duplex;
}

/**
 * `listener` as the shape of a {@link StreamListener}, each accepted
 * connection (Nagle off) made into what `wrap` makes of it: a stream for
 * the plain server, a duplex for `node:tls`.
 */
function denoListener<T>(
  listener: Deno.TcpListener,
  wrap: (conn: Deno.TcpConn) => T,
): {
  address: Deno.NetAddr;
  accept(): Promise<T | null>;
  close(): void;
} {
  let closed = false;
  return {
    address: listener.addr,
    async accept() {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (closed || isListenerGone(error)) return null;
        throw error;
      }
      try {
        conn.setNoDelay(true);
      } catch {
        // The peer is already gone; the connection's reader will see it.
      }
      return wrap(conn);
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        listener.close();
      } catch {
        // Already closed.
      }
    },
  };
}

function isListenerGone(error: unknown): boolean {
  return error instanceof Deno.errors.BadResource ||
    error instanceof Deno.errors.Interrupted;
}
