/**
 * The dialer used when none is passed: the one set with
 * {@link setDefaultDialer}, or, with none set, one found by feature
 * detection (`Deno.connect`, reached through `globalThis`, so this module
 * needs no runtime's types). No runtime entry sets it on import: `connect`
 * and `dial` of `@rafter/rpc/deno` and `@rafter/rpc/node` pass their own.
 *
 * @module
 */

import { type Dialer, formatTcpUrl, parseTcpUrl } from "./transport.ts";
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
 * through `Deno.connect` when the runtime has it.
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

/** The part of Deno's API the detected dialer uses (no Deno types needed). */
interface DenoConnect {
  connect(options: {
    hostname: string;
    port: number;
    transport: "tcp";
    signal?: AbortSignal;
  }): Promise<{
    read(buffer: Uint8Array): Promise<number | null>;
    write(bytes: Uint8Array): Promise<number>;
    readonly remoteAddr: { hostname?: string; port?: number };
    setNoDelay(noDelay?: boolean): void;
    close(): void;
  }>;
}

/**
 * TCP through `Deno.connect`, read and written as `fromDenoConn` does
 * (`conn_stream.ts`), not through the connection's own Web streams, which
 * cost a sequential call several µs more.
 */
function detectedDenoDialer(deno: DenoConnect): Dialer {
  return async (url, options) => {
    const { hostname, port } = parseTcpUrl(url);
    const conn = await deno.connect({
      hostname,
      port,
      transport: "tcp",
      signal: options?.signal,
    });
    try {
      conn.setNoDelay(true);
    } catch (error) {
      try {
        conn.close();
      } catch {
        // Already closed.
      }
      throw error;
    }
    return streamOfConn(
      conn,
      conn.remoteAddr.hostname === undefined ? undefined : formatTcpUrl({
        hostname: conn.remoteAddr.hostname,
        port: conn.remoteAddr.port ?? port,
      }).slice("tcp://".length),
    );
  };
}
