/**
 * A Rafter client for Cloudflare Workers: per-request clients over an
 * isolate-wide {@link EdgeCache}.
 *
 * @module
 */

import {
  connect,
  type ConnectOptions,
  type RafterClient,
} from "../../stub/client.ts";
import { EdgeCache, type EdgeCacheOptions } from "../../stub/edge_cache.ts";
import { type CloudflareConnect, cloudflareDialer } from "./tcp.ts";

/** Settings of {@link edgeClient}. */
export interface EdgeClientOptions extends
  Omit<
    ConnectOptions,
    "dialer" | "edge" | "watch" | "health" | "waitUntil"
  >,
  EdgeCacheOptions {
  /** `connect` imported from `cloudflare:sockets`. */
  connect: CloudflareConnect;
}

/** The part of a Worker's `ctx` (ExecutionContext) that Rafter uses. */
export interface WaitUntilContext {
  /** Keeps the request's I/O alive until `promise` settles. */
  waitUntil(promise: Promise<unknown>): void;
}

/** What {@link edgeClient} returns: keep it in module scope. */
export interface EdgeClient {
  /** The stubs lists and server verdicts kept between requests. */
  readonly cache: EdgeCache;
  /**
   * Runs `handle` with a client for this request only, and closes the
   * client (its sockets and timers) when `handle` settles, before the
   * result is returned: nothing is left pending when the response goes.
   * With the request's `ctx`, a stubs list past its TTL (within
   * `maxStaleMs`) is served at once and refreshed through
   * `ctx.waitUntil`, on a registry connection this request opens and the
   * refresh closes; without it the request looks the list up first.
   *
   * @returns what `handle` returns.
   * @throws what `handle` throws.
   */
  withRequest<T>(
    handle: (client: RafterClient) => Promise<T>,
    ctx?: WaitUntilContext,
  ): Promise<T>;
}

/**
 * Makes the client of a Cloudflare Worker (edge mode): workerd forbids
 * using a socket opened by another request and warns about promises and
 * timers left pending, so each request gets its own client (its own
 * connections), while the stubs lists (plain data, refreshed after
 * `ttlMs` or after a failure) and the verdicts of failed servers stay in
 * the isolate.
 *
 * @param registryUrls the registry nodes, `tcp://host:port`.
 * @param options `connect` from `cloudflare:sockets`, `ttlMs` (default
 * 10_000), `maxStaleMs` (default 30_000), `share` (default `"poll"`:
 * concurrent requests share one lookup through the cache's plain data),
 * `shareWaitMs` (default 3_000) and the options of `connect()` (without a
 * watch). `token` (the
 * registry's) and `serverToken` (the servers') apply to every request's
 * client: its connections are its own, so each authenticates once per
 * request, before its first call (keep the secrets in Worker secrets,
 * `env.RAFTER_TOKEN`, not in code).
 * @throws {TypeError} when no registry URL is given.
 *
 * @example
 * ```ts ignore
 * // not run: `cloudflare:sockets` exists only inside a Cloudflare Worker
 * // (tests/edge_cloudflare_test.ts runs examples/edge/cloudflare in workerd)
 * import { connect } from "cloudflare:sockets";
 * import { edgeClient, type WaitUntilContext } from "@rafter/rpc/cloudflare";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const rafter = edgeClient(["tcp://10.0.0.5:7001"], { connect });
 * export default {
 *   fetch: (_request: Request, _env: unknown, ctx: WaitUntilContext) =>
 *     rafter.withRequest(async (client) =>
 *       Response.json(await client.stub<Hello>("hello").greet("Ada")),
 *       ctx, // a stale stubs list is refreshed through ctx.waitUntil
 *     ),
 * };
 * ```
 */
export function edgeClient(
  registryUrls: string | readonly string[],
  options: EdgeClientOptions,
): EdgeClient {
  const {
    connect: tcp,
    ttlMs,
    maxStaleMs,
    share,
    shareWaitMs,
    now,
    health,
    ...rest
  } = options;
  const urls = typeof registryUrls === "string" ? [registryUrls] : registryUrls;
  if (urls.length === 0) {
    throw new TypeError("edgeClient needs at least one registry URL");
  }
  // Concurrent requests share a lookup through plain data: a request waits
  // on no promise another request's I/O settles (docs/runtimes.md).
  const cache = new EdgeCache({
    ttlMs,
    maxStaleMs,
    share: share ?? "poll",
    shareWaitMs,
    now,
    health,
  });
  const dialer = cloudflareDialer(tcp);
  return {
    cache,
    async withRequest<T>(
      handle: (client: RafterClient) => Promise<T>,
      ctx?: WaitUntilContext,
    ): Promise<T> {
      const client = connect(urls, {
        ...rest,
        dialer,
        edge: cache,
        waitUntil: ctx === undefined ? null : (work) => ctx.waitUntil(work),
      });
      try {
        return await handle(client);
      } finally {
        client.close();
      }
    },
  };
}
