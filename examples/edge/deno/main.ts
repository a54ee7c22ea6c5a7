/**
 * A `deno serve` handler that calls the hello service through a Rafter
 * cluster stub on each HTTP request: `GET /?name=Ada` answers
 * `{ "greeting": "Hello, Ada!", "server": "hello-1" }`.
 *
 * The client is made once per isolate, at module scope, and every request
 * shares it: its cluster map, its registry watch and its pooled
 * connections live between requests (under `deno serve` background work is
 * fine). `greet` is idempotent, so a call that was under way on a server
 * that died is made again on another one. A failed call answers 504 when
 * its deadline passed and 502 otherwise, with the JSON-RPC error's code and
 * message in the body. On Ctrl-C or SIGTERM it closes the client once the
 * requests under way have their answers, so the process can end.
 *
 * It reads, as the hello server and the `rafter` CLI do: `RAFTER_REGISTRY`
 * (comma-separated `tcp://` or `tls://` URLs), `RAFTER_TOKEN` (a registry
 * token with `read:hello`, when the registry enforces auth) and
 * `RAFTER_CA` (the CA file to verify `tls://` registry nodes and servers
 * with; default the system's roots).
 *
 * ```sh
 * RAFTER_REGISTRY=tcp://127.0.0.1:7001 deno serve --allow-net --allow-env=RAFTER_REGISTRY,RAFTER_TOKEN,RAFTER_CA --port 8000 examples/edge/deno/main.ts
 * curl 'http://127.0.0.1:8000/?name=Ada'
 * ```
 *
 * Outside this repository, import `@rafter/rpc/deno` and `@rafter/rpc`
 * instead of the relative paths.
 *
 * @module
 */

import { connect } from "../../../adapter/deno/mod.ts";
import { DEADLINE_EXCEEDED, RpcError, tlsFailureOf } from "../../../mod.ts";
import type { Hello } from "../../hello/server.ts";
import { reachFromEnv } from "../../hello/security.ts";

/** Deadline of one `greet` call, all attempts included, ms. */
const CALL_DEADLINE_MS = 5_000;

/**
 * `$RAFTER_REGISTRY` (else the local default), `$RAFTER_TOKEN` and
 * `$RAFTER_CA`.
 */
const reach = reachFromEnv();
/** The registry nodes, comma-separated in `$RAFTER_REGISTRY`. */
const registryUrls = reach.registry.split(",").map((url) => url.trim())
  .filter((url) => url !== "");

// Once per isolate, shared by every request. The CA (when given) verifies
// the registry nodes' and the servers' certificates (tls:// URLs); the
// token is presented to the registry.
const client = connect(registryUrls, { token: reach.token, tls: reach.tls });
const hello = client.stub<Hello>("hello", {
  idempotent: ["greet"],
  deadlineMs: CALL_DEADLINE_MS,
});

// On Ctrl-C or SIGTERM, `deno serve` stops taking connections, lets the
// requests under way finish, and ends the process once nothing is left to
// run; the client's watch and pooled connections would keep it running, so
// close the client too, once the last request under way has its answer.
let inFlight = 0;
let stopping = false;
let closed = false;
function closeWhenIdle(): void {
  if (!stopping || inFlight > 0 || closed) return;
  closed = true;
  client.close();
}
const signals: Deno.Signal[] = Deno.build.os === "windows"
  ? ["SIGINT"]
  : ["SIGINT", "SIGTERM"];
for (const signal of signals) {
  Deno.addSignalListener(signal, () => {
    stopping = true;
    closeWhenIdle();
  });
}

/** A JSON response with `status`. */
function json(status: number, body: unknown): Response {
  return Response.json(body, {
    status,
    headers: { "cache-control": "no-store" },
  });
}

/**
 * What to do about `error` in this example's terms, when its cause is a
 * certificate this isolate does not trust: the SDK's message names its
 * option (`tls.caFile`), this example reads the CA from `RAFTER_CA`.
 */
function hintOf(error: unknown): string | undefined {
  if (tlsFailureOf(error) !== "untrusted") return undefined;
  const caFile = reach.tls?.caFile;
  return `the registry's (or a server's) TLS certificate is not trusted: set RAFTER_CA to the CA certificate file that signed it (${
    caFile === undefined
      ? "RAFTER_CA is not set, so only the system's roots are trusted"
      : `RAFTER_CA=${caFile} did not sign it`
  }), and let deno serve read it (--allow-read=FILE)`;
}

/**
 * The HTTP answer to a failed call: 504 when its deadline passed, 502 when
 * no server could answer it or a server answered with an error; the
 * JSON-RPC code and message in the body, and a `hint` when the cause is a
 * certificate not trusted (see {@link hintOf}).
 */
function failure(error: unknown): Response {
  if (error instanceof RpcError) {
    const status = error.code === DEADLINE_EXCEEDED ? 504 : 502;
    const hint = hintOf(error);
    console.error(
      `hello.greet failed with ${error.code}: ${error.message}${
        hint === undefined ? "" : `\n  (${hint})`
      }`,
    );
    return json(status, {
      error: {
        code: error.code,
        message: error.message,
        ...(hint === undefined ? {} : { hint }),
      },
    });
  }
  // Not a Rafter failure: a bug in this handler.
  console.error("hello.greet threw", error);
  return json(500, { error: { message: String(error) } });
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname !== "/") {
      return json(404, { error: { message: "not found: try /?name=Ada" } });
    }
    const name = url.searchParams.get("name") ?? "world";
    // Not request.signal: Deno 2.9 warns when it is read (it still aborts
    // after every successful response); the call's deadline bounds it.
    inFlight++;
    try {
      const { greeting, server } = await hello.greet(name);
      return json(200, { greeting, server });
    } catch (error) {
      return failure(error);
    } finally {
      inFlight--;
      closeWhenIdle();
    }
  },
} satisfies Deno.ServeDefaultExport;
