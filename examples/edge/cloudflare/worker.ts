/**
 * A Cloudflare Worker that calls `hello` through a Rafter stub on every
 * HTTP request: `GET /?name=Ada` answers `{ "greeting": "Hello, Ada!",
 * "server": "hello-1" }`. The registry URLs come from the
 * `RAFTER_REGISTRY` binding (comma-separated `tcp://host:port` or
 * `tls://host:port`), the registry token (when the registry enforces auth:
 * one with `read:hello`) from the `RAFTER_TOKEN` binding (a secret). A
 * `tls://` URL is verified against the CAs workerd trusts (see README.md:
 * a private CA goes into the workerd config; Cloudflare trusts public CAs
 * only).
 *
 * Each request gets its own client (workerd forbids using a socket another
 * request opened), closed before the response; the stubs list stays in the
 * isolate for `ttlMs` (then served while `ctx.waitUntil` refreshes it),
 * concurrent requests share one lookup, and a server a request saw fail is
 * skipped by the next ones.
 *
 * Build: `deno bundle --platform browser --external cloudflare:sockets -o
 * dist/worker.js examples/edge/cloudflare/worker.ts`; run with `workerd
 * serve config.capnp` (see README.md here).
 *
 * @module
 */

// @ts-ignore: workerd's module, resolved by workerd at run time.
import { connect } from "cloudflare:sockets";
import {
  type CloudflareConnect,
  type EdgeClient,
  edgeClient,
} from "../../../adapter/cloudflare/mod.ts";
import { RpcError } from "../../../mod.ts";

/** The hello service's interface (examples/hello/server.ts). */
interface Hello {
  greet(name: string): { greeting: string; server: string };
}

/** The worker's bindings (config.capnp). */
interface Env {
  RAFTER_REGISTRY: string;
  /** A registry token (`rft_…`), when the registry enforces auth. */
  RAFTER_TOKEN?: string;
}

/** One per isolate: made on the first request, from its bindings. */
let rafter: EdgeClient | undefined;

/** The part of the Worker's `ctx` (ExecutionContext) used here. */
interface Context {
  waitUntil(promise: Promise<unknown>): void;
}

export default {
  async fetch(request: Request, env: Env, ctx: Context): Promise<Response> {
    rafter ??= edgeClient(env.RAFTER_REGISTRY.split(","), {
      connect: connect as CloudflareConnect,
      // An unset or empty binding: no token (a registry without auth).
      token: env.RAFTER_TOKEN?.trim() || undefined,
      ttlMs: 5_000,
      deadlineMs: 5_000,
    });
    const name = new URL(request.url).searchParams.get("name") ?? "world";
    try {
      // With ctx, a stubs list past its TTL is served at once and
      // refreshed through ctx.waitUntil.
      const answer = await rafter.withRequest(
        (client) =>
          client.stub<Hello>("hello", { idempotent: true }).greet(name),
        ctx,
      );
      return Response.json(answer);
    } catch (error) {
      const code = error instanceof RpcError ? error.code : null;
      const message = error instanceof Error ? error.message : String(error);
      return Response.json({ error: { code, message } }, { status: 502 });
    }
  },
};
