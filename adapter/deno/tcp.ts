/**
 * Deno adapter: TCP connections as {@link ByteStream}s, and the dialer that
 * opens them. Uses `Deno.*`; the rest of `rpc/` is Web-standard only.
 *
 * @module
 */

import {
  type ByteStream,
  type Dialer,
  formatTcpUrl,
  parseTcpUrl,
} from "../../rpc/transport/transport.ts";
import { streamOfConn } from "../../rpc/transport/conn_stream.ts";

/**
 * Wraps a `Deno.Conn` as a {@link ByteStream}.
 *
 * Unlike `conn.readable`, the readable side does not close the connection
 * when the peer ends its side, so responses can still be written after a
 * client half-closes (`nc -N`). It reads only when asked (no read-ahead),
 * which keeps TCP backpressure intact; each chunk is a fresh copy of at most
 * 64 KiB. `close()` closes both directions, may be called any number of
 * times, and ends a pending read. Cancelling the readable also closes the
 * connection, and its promise settles once the pending read is over.
 * Rafter's own connections read and write `conn` directly, without the Web
 * streams.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { fromDenoConn } from "./tcp.ts";
 * import { serve } from "./serve.ts";
 * const server = serve({ methods: {} });
 * const port = Number(new URL(server.url).port);
 * const conn = await Deno.connect({ hostname: "127.0.0.1", port });
 * const stream = fromDenoConn(conn);
 * assert.equal(stream.remoteAddress, `127.0.0.1:${port}`);
 * const ping = '{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\n';
 * await stream.writable.getWriter().write(new TextEncoder().encode(ping));
 * const { value } = await stream.readable.getReader().read();
 * const answer = JSON.parse(new TextDecoder().decode(value)); // one NDJSON line
 * assert.deepEqual(answer, { jsonrpc: "2.0", id: 1, result: "pong" });
 * stream.close();
 * await server.close();
 * ```
 */
export function fromDenoConn(conn: Deno.Conn): ByteStream {
  const remote = conn.remoteAddr as Deno.NetAddr;
  const remoteAddress = remote?.hostname === undefined
    ? undefined
    : formatTcpUrl(remote).slice("tcp://".length);
  return streamOfConn(conn, remoteAddress);
}

/**
 * A {@link Dialer} for Deno: opens `tcp://host:port` with `Deno.connect`, with
 * Nagle's algorithm off (`setNoDelay(true)`) since RPC frames are small and
 * latency-bound.
 *
 * @param url `tcp://host:port` or `host:port`.
 * @param options.signal Aborts the connection attempt.
 * @throws {TypeError} for a URL that is not `tcp://host:port`; rejects with
 * Deno's error (e.g. `Deno.errors.ConnectionRefused`) when the connection
 * cannot be opened.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { denoTcpDialer } from "./tcp.ts";
 * import { serve } from "./serve.ts";
 * const server = serve({ methods: {} });
 * const stream = await denoTcpDialer(server.url);
 * assert.equal(`tcp://${stream.remoteAddress}`, server.url);
 * stream.close();
 * await server.close();
 * ```
 */
export const denoTcpDialer: Dialer = async (
  url: string,
  options?: { signal?: AbortSignal },
): Promise<ByteStream> => {
  const { hostname, port } = parseTcpUrl(url);
  const conn = await Deno.connect({
    hostname,
    port,
    transport: "tcp",
    signal: options?.signal,
  });
  try {
    conn.setNoDelay(true);
  } catch (error) {
    conn.close();
    throw error;
  }
  return fromDenoConn(conn);
};
