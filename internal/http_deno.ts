/**
 * The plain-HTTP listener on `Deno.serve` that a registry node's metrics
 * and dashboard ports and the Deno adapter's metrics port use (private:
 * not part of the public API).
 *
 * @module
 */

import {
  type HttpListener,
  httpOrigin,
  type ListenAddress,
} from "./metrics.ts";

/**
 * Serves `handler` over plain HTTP on `address` with `Deno.serve` (bound
 * when it returns; throws as `Deno.serve` does, e.g. `AddrInUse`).
 */
export function listenHttp(
  address: ListenAddress,
  handler: (request: Request) => Response | Promise<Response>,
): HttpListener {
  const server = Deno.serve({
    hostname: address.hostname,
    port: address.port,
    onListen: () => {},
  }, handler);
  const addr = server.addr as Deno.NetAddr;
  return {
    origin: httpOrigin(addr.hostname, addr.port),
    close: () => server.shutdown(),
  };
}
