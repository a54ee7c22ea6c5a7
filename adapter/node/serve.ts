/**
 * Node adapter: a JSON-RPC 2.0 TCP server on `node:net`, handed to the
 * runtime-free {@link serveListener}.
 *
 * @module
 */

import { createServer, type Server, type Socket } from "node:net";
import {
  type RpcServer,
  serveListener,
  type ServeOptions,
  type StreamListener,
  validateServeOptions,
} from "../../rpc/server/server.ts";
import type { ByteStream } from "../../rpc/transport/transport.ts";
import { fromNodeSocket } from "./tcp.ts";
// Servers hear CBOR clients too.
import "../../rpc/codec/cbor.ts";

export type { RpcServer, ServeOptions } from "../../rpc/server/server.ts";

/**
 * Starts a JSON-RPC 2.0 server on TCP (NDJSON frames) with `node:net`, one
 * connection handler per accepted connection, Nagle's algorithm off.
 * Resolves once it listens (Node binds asynchronously), unlike Deno's
 * `serve()`, which returns the server at once.
 *
 * @param options `hostname` (default `"127.0.0.1"`), `port` (default 0:
 * ephemeral), the methods, limits, `advertise` and `signal`.
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
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
  const { hostname = "127.0.0.1", port = 0 } = options;
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
  const queued: Socket[] = [];
  let waiting: ((stream: ByteStream | null) => void) | null = null;
  let closed = false;
  server.on("connection", (socket: Socket) => {
    if (closed) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    if (waiting !== null) {
      const wake = waiting;
      waiting = null;
      wake(fromNodeSocket(socket));
    } else {
      queued.push(socket);
    }
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
        accept() {
          const socket = queued.shift();
          if (socket !== undefined) {
            return Promise.resolve(fromNodeSocket(socket));
          }
          if (closed) return Promise.resolve(null);
          return new Promise((resolve) => {
            waiting = resolve;
          });
        },
        close() {
          if (closed) return;
          closed = true;
          server.close();
          for (const socket of queued.splice(0)) socket.destroy();
          const wake = waiting;
          waiting = null;
          wake?.(null);
        },
      };
    },
  };
}
