/**
 * Cloudflare Workers adapter: workerd's TCP sockets (`connect()` from
 * `cloudflare:sockets`) as {@link ByteStream}s. The worker passes its
 * `connect` in, so this module imports nothing runtime-specific (Deno and
 * Node can type-check and test it, and bundlers need no external).
 *
 * @module
 */

import {
  type Dialer,
  parseEndpointUrl,
} from "../../rpc/transport/transport.ts";

/** The part of workerd's `Socket` (from `cloudflare:sockets`) the dialer uses. */
export interface CloudflareSocket {
  /** Bytes from the server. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes to the server. */
  readonly writable: WritableStream<Uint8Array>;
  /** Resolves once connected; rejects when the connection failed. */
  readonly opened: Promise<unknown>;
  /** Resolves once closed. */
  readonly closed: Promise<void>;
  /** Closes both directions; resolves once closed. */
  close(): Promise<void>;
  /**
   * Of a socket opened with `secureTransport: "starttls"`: starts TLS on
   * it, returning the TLS socket (this one is no longer usable).
   */
  startTls?(): CloudflareSocket;
}

/** The options of workerd's `connect()` the dialer passes. */
export interface CloudflareSocketOptions {
  /**
   * `"on"`: TLS from the start (what a `tls://` URL asks for); `"off"`:
   * plain TCP.
   */
  secureTransport?: "on" | "off" | "starttls";
  /** False: closing the writable side closes the socket. */
  allowHalfOpen?: boolean;
}

/** workerd's `connect()` from `cloudflare:sockets`, as the dialer calls it. */
export type CloudflareConnect = (
  address: { hostname: string; port: number },
  options?: CloudflareSocketOptions,
) => CloudflareSocket;

/**
 * A {@link Dialer} on workerd's `connect()`. A socket belongs to the
 * request that opened it (workerd refuses I/O on it from another request),
 * so use it through a client made per request (`edgeClient`).
 *
 * A `tls://host:port` URL is opened with `secureTransport: "starttls"`
 * and TLS started once TCP is up (so a failed handshake, tagged
 * `tlsFailure: "handshake"`, is told apart from a refused connection, which
 * workerd words the same): workerd verifies the server's certificate against its trusted roots and the
 * URL's host name (workerd has no per-socket CA option, and gives no peer
 * certificate); the stream is then `secure`. `tcp://` is plain TCP.
 *
 * @param connect `connect` imported from `cloudflare:sockets`.
 * @returns a dialer for `tcp://host:port` and `tls://host:port` URLs.
 *
 * @example
 * ```ts ignore
 * // not run: `cloudflare:sockets` exists only inside a Cloudflare Worker
 * // (tests/edge_cloudflare_test.ts runs examples/edge/cloudflare in workerd)
 * import { connect } from "cloudflare:sockets";
 * import { cloudflareDialer } from "@rafter/rpc/cloudflare";
 * import { dial } from "@rafter/rpc/transport";
 * const connection = await dial("tcp://10.0.0.5:7001", { dialer: cloudflareDialer(connect) });
 * ```
 */
export function cloudflareDialer(connect: CloudflareConnect): Dialer {
  return async (url, options) => {
    const { hostname, port, tls } = parseEndpointUrl(url);
    const signal = options?.signal;
    signal?.throwIfAborted();
    // tls://: TCP first, then TLS on it, so a refused connection and a
    // failed handshake (workerd's `connect()` rejects both with "proxy
    // request failed, cannot connect to the specified address") can be
    // told apart.
    let socket = connect({ hostname, port }, {
      secureTransport: tls ? "starttls" : "off",
      allowHalfOpen: false,
    });
    // workerd rejects `closed` when the connection fails or breaks; the
    // stream's readers see that, so nobody else needs to.
    socket.closed.catch(() => {});
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      socket.close().catch(() => {
        // Already closed or never opened.
      });
    };
    let onAbort: (() => void) | undefined;
    const opened = (opening: CloudflareSocket) =>
      new Promise<void>((resolve, reject) => {
        onAbort = () => reject(signal!.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        opening.opened.then(() => resolve(), reject);
      }).finally(() => {
        if (onAbort !== undefined) {
          signal?.removeEventListener("abort", onAbort);
        }
      });
    try {
      await opened(socket);
    } catch (error) {
      close();
      throw error;
    }
    if (tls) {
      if (socket.startTls === undefined) {
        close();
        throw new TypeError(
          `cannot open ${url}: this connect() gives sockets without startTls() (workerd's cloudflare:sockets has it)`,
        );
      }
      socket = socket.startTls();
      socket.closed.catch(() => {});
      try {
        await opened(socket);
      } catch (error) {
        close();
        if (signal?.aborted) throw error;
        throw Object.assign(
          new Error(
            `TLS to ${url} failed: the TCP connection was accepted, then the TLS handshake failed; workerd does not tell the worker why, its log does (e.g. "TLS handshake failed: invalid peer certificate: UnknownIssuer": workerd does not trust the server's certificate; add the CA that signed it to the network's tlsOptions.trustedCertificates) (${
              error instanceof Error ? error.message : String(error)
            })`,
            { cause: error },
          ),
          { code: "TLS_FAILED", tlsFailure: "handshake" as const },
        );
      }
    }
    return {
      readable: socket.readable,
      writable: socket.writable,
      close,
      ...(tls ? { secure: true } : {}),
    };
  };
}
