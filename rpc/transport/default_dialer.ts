/**
 * The dialer used when none is passed: the one a runtime entry set
 * (`@rafter/rpc/deno`, `@rafter/rpc/node`, `@rafter/rpc/cloudflare`), or,
 * with none set, one found by feature detection (`Deno.connect`, reached
 * through `globalThis`, so this module needs no runtime's types).
 *
 * @module
 */

import { type Dialer, formatTcpUrl, parseTcpUrl } from "./transport.ts";
import { streamOfConn } from "./conn_stream.ts";

let chosen: Dialer | null = null;

/**
 * Makes `dialer` the default of `dial()`, `connect()` and the stubs' pools
 * from now on (each runtime entry does this when imported); null goes back
 * to feature detection.
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
 * @throws {TypeError} on a runtime with neither, saying which entry to
 * import (Node: `@rafter/rpc/node`; Cloudflare Workers:
 * `@rafter/rpc/cloudflare`) or to pass a `dialer`.
 */
export function defaultDialer(): Dialer {
  if (chosen !== null) return chosen;
  const deno = (globalThis as { Deno?: Partial<DenoConnect> }).Deno;
  if (typeof deno?.connect === "function") {
    chosen = detectedDenoDialer(deno as DenoConnect);
    return chosen;
  }
  throw new TypeError(
    "no TCP dialer on this runtime: import from @rafter/rpc/node (Node) or @rafter/rpc/cloudflare (Cloudflare Workers), which set one, or pass the `dialer` option",
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
 * (`_conn_stream.ts`), not through the connection's own Web streams, which
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
