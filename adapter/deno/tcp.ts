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
} from "../../rpc/transport.ts";

const READ_BUFFER_BYTES = 64 * 1024;

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
 *
 * @example
 * ```ts ignore
 * import { fromDenoConn } from "./tcp.ts";
 * const conn = await Deno.connect({ hostname: "127.0.0.1", port: 7001 });
 * const stream = fromDenoConn(conn);
 * stream.close();
 * ```
 */
export function fromDenoConn(conn: Deno.Conn): ByteStream {
  let closed = false;
  let reading: Promise<unknown> = Promise.resolve();
  const buffer = new Uint8Array(READ_BUFFER_BYTES);
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch {
      // Already closed by Deno.
    }
  };
  const readable = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const read = conn.read(buffer);
      reading = read.catch(() => {});
      let count: number | null;
      try {
        count = await read;
      } catch (error) {
        if (closed) controller.close();
        else controller.error(error);
        return;
      }
      if (count === null) controller.close();
      else controller.enqueue(buffer.slice(0, count));
    },
    async cancel() {
      close();
      await reading;
    },
  }, { highWaterMark: 0 });
  const writable = new WritableStream<Uint8Array>({
    async write(chunk) {
      let offset = 0;
      while (offset < chunk.length) {
        offset += await conn.write(chunk.subarray(offset));
      }
    },
  });
  const remote = conn.remoteAddr as Deno.NetAddr;
  const remoteAddress = remote?.hostname === undefined
    ? undefined
    : formatTcpUrl(remote).slice("tcp://".length);
  return { readable, writable, close, remoteAddress };
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
 * ```ts ignore
 * import { denoTcpDialer } from "./tcp.ts";
 * const stream = await denoTcpDialer("tcp://127.0.0.1:7001");
 * stream.close();
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
