/**
 * The dialer used when none is passed: the one set with
 * {@link setDefaultDialer}, or, with none set, one found by feature
 * detection (`Deno.connect`, reached through `globalThis`, so this module
 * needs no runtime's types; `tls://` URLs through `Deno.connectTls`,
 * trusting the system's roots). No runtime entry sets it on import:
 * `connect` and `dial` of `@rafter/rpc/deno` and `@rafter/rpc/node` pass
 * their own, which also take a CA and a client certificate (`{ tls }`).
 *
 * @module
 */

import { type Dialer, formatTcpUrl, parseEndpointUrl } from "./transport.ts";
import { streamOfConn } from "./conn_stream.ts";

let chosen: Dialer | null = null;

/**
 * Makes `dialer` the default of `dial()`, `connect()` and the stubs' pools
 * from now on (process-wide: no entry calls it for you); null goes back to
 * feature detection.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { defaultDialer, setDefaultDialer } from "./default_dialer.ts";
 * const refuse = () => Promise.reject(new Error("no network here"));
 * setDefaultDialer(refuse);
 * assert.equal(defaultDialer(), refuse);
 * setDefaultDialer(null);
 * ```
 */
export function setDefaultDialer(dialer: Dialer | null): void {
  chosen = dialer;
}

/**
 * The default dialer: the one set with {@link setDefaultDialer}, else TCP
 * through `Deno.connect` when the runtime has it, and TLS (`tls://` URLs)
 * through `Deno.connectTls` with the system's trusted roots; its streams
 * are `secure` but have no `peerCertificate` (Deno does not show it).
 * For another CA, a client certificate or the server's certificate, pass
 * `dialer: denoDialer({ caFile, certFile, keyFile })` of
 * `@rafter/rpc/deno`, or make it the default with `setDefaultDialer()`.
 *
 * @throws {TypeError} on a runtime with neither, saying what to use
 * instead (Node: `connect`/`dial` of `@rafter/rpc/node`; Cloudflare
 * Workers: `edgeClient` of `@rafter/rpc/cloudflare`), or to pass a
 * `dialer` or call `setDefaultDialer()`.
 */
export function defaultDialer(): Dialer {
  if (chosen !== null) return chosen;
  const deno = (globalThis as { Deno?: Partial<DenoConnect> }).Deno;
  if (typeof deno?.connect === "function") {
    chosen = detectedDenoDialer(deno as DenoConnect);
    return chosen;
  }
  throw new TypeError(
    "no TCP dialer on this runtime: use connect/dial of @rafter/rpc/node (Node) or edgeClient of @rafter/rpc/cloudflare (Cloudflare Workers), pass the `dialer` option, or call setDefaultDialer()",
  );
}

/** What the detected dialer reads and writes (a `Deno.Conn` or `Deno.TlsConn`). */
interface DenoConn {
  read(buffer: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  readonly remoteAddr: { hostname?: string; port?: number };
  setNoDelay?(noDelay?: boolean): void;
  close(): void;
}

/** The part of Deno's API the detected dialer uses (no Deno types needed). */
interface DenoConnect {
  connectTls?(options: { hostname: string; port: number }): Promise<
    DenoConn & { handshake(): Promise<unknown> }
  >;
  connect(options: {
    hostname: string;
    port: number;
    transport: "tcp";
    signal?: AbortSignal;
  }): Promise<DenoConn & { setNoDelay(noDelay?: boolean): void }>;
}

/** Closes `conn`, ignoring that it may be closed already. */
function closeQuietly(conn: DenoConn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/**
 * TLS through `Deno.connectTls` (system roots, the URL's host checked
 * against the certificate), the handshake finished before it resolves.
 */
async function connectTlsOn(
  deno: DenoConnect,
  url: string,
  hostname: string,
  port: number,
  signal: AbortSignal | undefined,
): Promise<DenoConn> {
  if (typeof deno.connectTls !== "function") {
    throw new TypeError(
      `cannot open ${url}: this runtime has no TLS dialer found by feature detection (Deno's connectTls); pass dialer: denoDialer({ caFile }) of @rafter/rpc/deno or nodeDialer({ caFile }) of @rafter/rpc/node`,
    );
  }
  signal?.throwIfAborted();
  const conn = await deno.connectTls({ hostname, port });
  try {
    await conn.handshake();
  } catch (error) {
    closeQuietly(conn);
    throw new Error(
      `TLS to ${url} failed: ${
        (error as Error).message
      }; the default dialer trusts only the system's roots: for a private CA pass dialer: denoDialer({ caFile }) of @rafter/rpc/deno`,
      { cause: error },
    );
  }
  return conn;
}

/**
 * TCP through `Deno.connect`, read and written as `fromDenoConn` does
 * (`conn_stream.ts`), not through the connection's own Web streams, which
 * cost a sequential call several µs more.
 */
function detectedDenoDialer(deno: DenoConnect): Dialer {
  return async (url, options) => {
    const { hostname, port, tls } = parseEndpointUrl(url);
    const conn: DenoConn = tls
      ? await connectTlsOn(deno, url, hostname, port, options?.signal)
      : await deno.connect({
        hostname,
        port,
        transport: "tcp",
        signal: options?.signal,
      });
    try {
      conn.setNoDelay?.(true);
    } catch (error) {
      closeQuietly(conn);
      throw error;
    }
    const stream = streamOfConn(
      conn,
      conn.remoteAddr.hostname === undefined ? undefined : formatTcpUrl({
        hostname: conn.remoteAddr.hostname,
        port: conn.remoteAddr.port ?? port,
      }).slice("tcp://".length),
    );
    return tls ? Object.assign(stream, { secure: true }) : stream;
  };
}
