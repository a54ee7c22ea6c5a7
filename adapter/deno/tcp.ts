/**
 * Deno adapter: TCP connections as {@link ByteStream}s, and the dialers
 * that open them: `tcp://` with `Deno.connect`, `tls://` with TLS (on
 * Deno's `node:tls`, whose sockets show the server's certificate). Uses
 * `Deno.*`; the rest of `rpc/` is Web-standard only.
 *
 * @module
 */

import {
  type ByteStream,
  type Dialer,
  formatTcpUrl,
} from "../../rpc/transport/transport.ts";
import type { TlsClientOptions } from "../../rpc/transport/tls.ts";
import { streamOfConn } from "../../rpc/transport/conn_stream.ts";
import { endpointDialer } from "../tls/client.ts";

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
 * A {@link Dialer} for Deno: opens `tcp://host:port` with `Deno.connect`
 * and `tls://host:port` with TLS, Nagle's algorithm off (RPC frames are
 * small and latency-bound). A `tls://` stream has `secure: true` and the
 * server's verified certificate as `peerCertificate`.
 *
 * @param tls for `tls://` URLs: the CA to trust (default: the system's
 * roots), a client certificate to present (mutual TLS), `serverName`.
 * Files are read at each dial, so a renewed certificate is used by the
 * next connection.
 * @returns the dialer; it rejects with a {@link TypeError} for a URL that
 * is neither, or an unreadable file; with an `Error` that says what to do
 * for an untrusted certificate or a name mismatch; with Deno's error
 * (e.g. `Deno.errors.ConnectionRefused`) when the connection cannot be
 * opened.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { denoDialer } from "./tcp.ts";
 * import { serve } from "./serve.ts";
 * const dialer = denoDialer({ caFile: "/etc/rafter/ca.pem" });
 * const server = serve({ methods: {} });
 * const stream = await dialer(server.url); // tcp:// needs no TLS options
 * assert.equal(stream.secure, undefined);
 * stream.close();
 * await server.close();
 * ```
 */
export function denoDialer(tls: TlsClientOptions = {}): Dialer {
  return endpointDialer(tls, connectTcp);
}

async function connectTcp(
  hostname: string,
  port: number,
  signal: AbortSignal | undefined,
): Promise<ByteStream> {
  const conn = await Deno.connect({ hostname, port, transport: "tcp", signal });
  try {
    conn.setNoDelay(true);
  } catch (error) {
    conn.close();
    throw error;
  }
  return fromDenoConn(conn);
}

/**
 * A {@link Dialer} for Deno: opens `tcp://host:port` with `Deno.connect`, with
 * Nagle's algorithm off (`setNoDelay(true)`) since RPC frames are small and
 * latency-bound; `tls://host:port` with TLS, trusting the system's roots
 * (the same as `denoDialer()`; pass options to {@link denoDialer} for
 * another CA or a client certificate).
 *
 * @param url `tcp://host:port`, `tls://host:port` or `host:port`.
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
export const denoTcpDialer: Dialer = denoDialer();
