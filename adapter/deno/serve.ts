/**
 * Deno adapter: a JSON-RPC 2.0 TCP server on `Deno.listen`, handed to the
 * runtime-free {@link serveListener}.
 *
 * @module
 */

import {
  type RpcServer,
  serveListener,
  type ServeOptions,
  type StreamListener,
  validateServeOptions,
} from "../../rpc/server/server.ts";
import { fromDenoConn } from "./tcp.ts";
// Servers hear CBOR clients too.
import "../../rpc/codec/cbor.ts";

export type { RpcServer, ServeOptions } from "../../rpc/server/server.ts";

/**
 * Starts a JSON-RPC 2.0 server on TCP (NDJSON frames) with `Deno.listen`,
 * one connection handler per accepted connection, Nagle's algorithm off.
 *
 * @param options `hostname` (default `"127.0.0.1"`), `port` (default 0:
 * ephemeral), the methods, limits, `advertise` and `signal`.
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen`
 * when the address cannot be bound.
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
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
  const { hostname = "127.0.0.1", port = 0 } = options;
  return serveListener(
    denoListener(Deno.listen({ hostname, port, transport: "tcp" })),
    options,
  );
}

/** `listener` as a {@link StreamListener}. */
function denoListener(listener: Deno.TcpListener): StreamListener {
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
      return fromDenoConn(conn);
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
