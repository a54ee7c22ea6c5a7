/**
 * The worker of tests/edge_cloudflare_share_test.ts (bundled, run in
 * workerd): `GET /?svc=NAME&cache=poll|promise|off[&deadlineMs=MS]` calls
 * `greet(NAME)` on the `NAME` service through `edgeClient()`'s
 * `withRequest(…, ctx)`; `GET /stats?svc=NAME&cache=…` answers what the
 * isolate's cache holds for NAME and how many requests entered, so the
 * test can tell when all its requests are in.
 *
 * @module
 */

// @ts-ignore: workerd's module, resolved by workerd at run time.
import { connect } from "cloudflare:sockets";
import {
  type CloudflareConnect,
  type EdgeClient,
  edgeClient,
  type WaitUntilContext,
} from "../../adapter/cloudflare/mod.ts";
import { RpcError } from "../../mod.ts";

interface Env {
  RAFTER_REGISTRY: string;
  /** The lists' TTL, ms. */
  TTL_MS: string;
}

interface Greeter {
  greet(name: string): string;
}

let clients: Record<string, EdgeClient> | undefined;
let entered = 0;

export default {
  async fetch(
    request: Request,
    env: Env,
    ctx: WaitUntilContext,
  ): Promise<Response> {
    const options = {
      connect: connect as CloudflareConnect,
      ttlMs: Number(env.TTL_MS),
      maxStaleMs: 60_000,
    };
    const urls = env.RAFTER_REGISTRY.split(",");
    clients ??= {
      // edgeClient's default: share by polling plain data.
      poll: edgeClient(urls, options),
      promise: edgeClient(urls, { ...options, share: "promise" }),
      off: edgeClient(urls, { ...options, share: "off" }),
    };
    const url = new URL(request.url);
    const svc = url.searchParams.get("svc") ?? "hello";
    const rafter = clients[url.searchParams.get("cache") ?? "poll"];
    if (url.pathname === "/stats") {
      return Response.json({
        entered,
        fresh: rafter.cache.fresh(svc)?.revision ?? null,
        lookingUp: rafter.cache.lookingUp(svc),
      });
    }
    entered++;
    const deadline = url.searchParams.get("deadlineMs");
    try {
      const answer = await rafter.withRequest(
        (client) =>
          client.stub<Greeter>(svc, {
            deadlineMs: deadline === null ? 10_000 : Number(deadline),
          }).greet(svc),
        ctx,
      );
      return Response.json({ answer });
    } catch (error) {
      const code = error instanceof RpcError ? error.code : null;
      return Response.json({ error: { code, message: String(error) } }, {
        status: 502,
      });
    }
  },
};
