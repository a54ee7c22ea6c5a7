/**
 * Rafter for Cloudflare Workers (workerd): a dialer on workerd's TCP
 * sockets (`cloudflareDialer`) and `edgeClient()`, which makes a client per
 * request over stubs lists kept in the isolate. Pass `connect` from
 * `cloudflare:sockets` in: this entry imports no runtime module and
 * changes no global state. Everything else comes from `@rafter/rpc` and
 * its subpaths.
 *
 * @example A worker that calls `hello` on each request
 * ```ts ignore
 * // not run: `cloudflare:sockets` exists only inside a Cloudflare Worker
 * // (tests/edge_cloudflare_test.ts runs examples/edge/cloudflare in workerd)
 * import { connect } from "cloudflare:sockets";
 * import { edgeClient } from "@rafter/rpc/cloudflare";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const rafter = edgeClient(["tcp://10.0.0.5:7001"], { connect, ttlMs: 10_000 });
 * export default {
 *   fetch: () =>
 *     rafter.withRequest(async (client) =>
 *       Response.json(await client.stub<Hello>("hello").greet("Ada"))
 *     ),
 * };
 * ```
 *
 * @module
 */

export {
  type CloudflareConnect,
  cloudflareDialer,
  type CloudflareSocket,
  type CloudflareSocketOptions,
} from "./tcp.ts";
export {
  type EdgeClient,
  edgeClient,
  type EdgeClientOptions,
  type WaitUntilContext,
} from "./edge_client.ts";
