/**
 * Node adapter: a JSON-RPC 2.0 TCP server on `node:net`, handed to the
 * runtime-free {@link serveListener}.
 *
 * @module
 */

import { createServer, type Server, type Socket } from "node:net";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type RpcServer,
  serveListener,
  type ServeOptions,
  type StreamListener,
  validateServeOptions,
} from "../../rpc/server/server.ts";
import { ServerMetrics } from "../../rpc/server/metrics.ts";
import { type HttpListener, httpOrigin } from "../../internal/metrics.ts";
import { acceptQueue, fromNodeSocket } from "../tls/node_socket.ts";
import { openTlsListener } from "../tls/server.ts";

export type { RpcServer, ServeOptions } from "../../rpc/server/server.ts";

/**
 * Starts a JSON-RPC 2.0 server on TCP (NDJSON frames) with `node:net`, one
 * connection handler per accepted connection, Nagle's algorithm off.
 * Resolves once it listens (Node binds asynchronously), unlike Deno's
 * `serve()`, which returns the server at once.
 *
 * With `tls` (see `TlsServerOptions`) it listens with `node:tls`:
 * `server.url` is `tls://host:port`, each stream is `secure` and carries
 * the verified client certificate (`session.peerCertificate`) when
 * `tls.clientCert` asks for one; `server.reloadTls()` re-reads the files,
 * as SIGHUP and a change of the files do.
 *
 * With `metrics` (`{ listen: "127.0.0.1:9464" }`), it also serves
 * Prometheus metrics on `GET /metrics` of that plain-HTTP port (on
 * `node:http`; `server.metricsUrl`), closed with the server; a
 * non-loopback address is logged as a warning.
 *
 * @param options `hostname` (default `"127.0.0.1"`), `port` (default 0:
 * ephemeral), the methods, limits, `advertise`, `signal`, `tls` and
 * `metrics`.
 * @throws {TypeError} for a `metrics.listen` that is not `host:port`.
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
 * @throws {TypeError} for `tls` files that cannot be read or a
 * certificate and key that do not match.
 * @throws the `node:net` listen error (e.g. `EADDRINUSE`) as a rejection.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial, serve } from "@rafter/rpc/node";
 * const server = await serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * assert.match(server.url, /^tcp:\/\/127\.0\.0\.1:\d+$/); // the port it got
 * const connection = await dial(server.url);
 * assert.equal(await connection.call("greet", ["Ada"]), "Hello, Ada!");
 * connection.close();
 * await server.close();
 * ```
 */
export async function serve(options: ServeOptions): Promise<RpcServer> {
  validateServeOptions(options);
  if (options.metrics === undefined) return await serveRpc(options);
  const metrics = new ServerMetrics(options.metrics);
  const server = await serveRpc(metrics.instrument(options));
  let listener: HttpListener;
  try {
    listener = await listenMetrics(metrics);
  } catch (error) {
    await server.close();
    throw error;
  }
  return metrics.attach(server, listener);
}

/** The metrics port of `metrics` on `node:http`, once it listens. */
async function listenMetrics(metrics: ServerMetrics): Promise<HttpListener> {
  const http = createHttpServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://metrics").pathname;
    const answer = metrics.answer(request.method ?? "GET", path);
    response.writeHead(answer.status, answer.headers);
    response.end(request.method === "HEAD" ? undefined : answer.body);
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(
      { host: metrics.address.hostname, port: metrics.address.port },
      () => {
        http.off("error", reject);
        resolve();
      },
    );
  });
  const bound = http.address() as AddressInfo;
  return {
    origin: httpOrigin(bound.address, bound.port),
    close: () =>
      new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

/** {@link serve} without the metrics port. */
async function serveRpc(options: ServeOptions): Promise<RpcServer> {
  const { hostname = "127.0.0.1", port = 0 } = options;
  if (options.tls !== undefined) {
    const listener = openTlsListener(options.tls, { hostname, port });
    await listener.listening;
    return serveListener(listener, options);
  }
  const server = createServer({ noDelay: true });
  const listener = nodeListener(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: hostname, port }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return serveListener(listener.bound(), options);
}

/** `server` as a {@link StreamListener}, once it listens. */
function nodeListener(server: Server): { bound(): StreamListener } {
  const queue = acceptQueue(
    (socket: Socket) => fromNodeSocket(socket),
    (socket) => socket.destroy(),
  );
  server.on("connection", (socket: Socket) => {
    if (!queue.closed) socket.setNoDelay(true);
    queue.push(socket);
  });
  server.on("error", (error) => {
    // After listening, errors are per connection attempt: log, go on.
    console.error("rpc: accept failed:", error);
  });
  return {
    bound(): StreamListener {
      const address = server.address();
      if (address === null || typeof address === "string") {
        throw new TypeError("the server is not listening on TCP");
      }
      return {
        address: { hostname: address.address, port: address.port },
        accept: () => queue.accept(),
        close() {
          if (queue.closed) return;
          server.close();
          queue.close();
        },
      };
    },
  };
}
