/**
 * End-to-end: the `deno serve` example (examples/edge/deno/main.ts) on real
 * processes. A 1-node registry and two hello servers run as `deno run`
 * children, the example runs under `deno serve` on a free 127.0.0.1 port
 * with the permissions its README gives, and 200 HTTP requests go through
 * it, a few at a time, while one hello server is killed with SIGKILL
 * midway. Every request must get 200 and its own greeting; both servers
 * answer before the kill, only the survivor after it; `deno serve` logs
 * nothing but its listening line (also once hello-1's lease has expired
 * and the example's watch has dropped it). On SIGTERM with a request under
 * way, that request still gets its answer and the process exits 0: the
 * example closes its client once idle, and nothing of Rafter's is left
 * running.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { LookupResult } from "../protocol/registry.ts";
import { type Spawned, startDenoServe } from "./_edge_fixtures.ts";

const REQUESTS = 200;
/** The hello server is killed once this many requests have been answered. */
const KILL_AFTER = 100;
/** Requests in flight at once. */
const CONCURRENCY = 4;
/**
 * The hello servers' lease TTL, ms: hello-1 leaves the registry this soon
 * after its kill; hello-2 keeps its lease while frozen for less.
 */
const TTL_MS = 2_000;
/** How long hello-2 is frozen (SIGSTOP) before and after the SIGTERM, ms. */
const FROZEN_MS = 300;
const REQUEST_TIMEOUT_MS = 10_000;

/** One HTTP request to the example and what came back. */
interface Exchange {
  index: number;
  name: string;
  /** `performance.now()` when it was sent and when its body was read, ms. */
  startedAt: number;
  endedAt: number;
  status: number;
  body: { greeting?: string; server?: string; error?: unknown } | string;
}

/**
 * Polls the registry at `url` until `id` is no longer bound under `name`;
 * how long that took, ms. @throws {Error} after `timeoutMs`.
 */
async function waitUntilUnbound(
  url: string,
  name: string,
  id: string,
  timeoutMs: number,
): Promise<number> {
  const started = performance.now();
  const connection = await dial(url, { connectTimeoutMs: 2_000 });
  try {
    let ids: string[] = [];
    while (performance.now() - started < timeoutMs) {
      const lookup = await connection.call<LookupResult>(
        "registry.lookup",
        { name },
        { timeoutMs: 2_000 },
      );
      ids = lookup.endpoints.map((endpoint) => endpoint.id);
      if (!ids.includes(id)) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(
      `${id} still bound under ${name} after ${timeoutMs} ms: ${ids}`,
    );
  } finally {
    connection.close();
  }
}

/** Waits at most `ms` for `promise`; whether it settled. */
async function settlesWithin(promise: Promise<unknown>, ms: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("deno serve example: 200 requests through a cluster stub, one hello server SIGKILLed midway, no failure, no error logged", async () => {
  const cluster = new LocalCluster();
  const http = Deno.createHttpClient({});
  let serve: Spawned | null = null;
  try {
    await cluster.startRegistryWithLeader(1);
    await Promise.all(
      ["hello-1", "hello-2"].map((id) =>
        cluster.startHello(id, ["--ttl-ms", String(TTL_MS)])
      ),
    );
    const started = await startDenoServe({
      RAFTER_REGISTRY: cluster.registryUrls.join(","),
    });
    serve = started.serve;
    const origin = started.origin;

    const exchanges: Exchange[] = [];
    let next = 0;
    let answered = 0;
    let killSentAt = Infinity;
    let deadAt = Infinity;
    let killing: Promise<void> | null = null;
    const worker = async () => {
      while (true) {
        // The requests under way when the kill is sent run on; new ones
        // wait until hello-1 has exited, so "after" means after.
        if (killing !== null) await killing;
        if (next >= REQUESTS) break;
        const index = next++;
        const name = `user-${index}`;
        const startedAt = performance.now();
        let status = 0;
        let body: Exchange["body"];
        try {
          const response = await fetch(
            `${origin}/?name=${encodeURIComponent(name)}`,
            { client: http, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) },
          );
          status = response.status;
          body = await response.text();
          body = JSON.parse(body);
        } catch (error) {
          body ??= `no answer: ${error}`;
        }
        exchanges.push({
          index,
          name,
          startedAt,
          endedAt: performance.now(),
          status,
          body: body!,
        });
        if (++answered === KILL_AFTER) {
          killSentAt = performance.now();
          killing = cluster.kill("hello-1", "SIGKILL").then(() => {
            deadAt = performance.now();
          });
        }
      }
    };
    const runStarted = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const runMs = performance.now() - runStarted;
    assert.ok(killing !== null, "the kill never happened");
    await killing;

    // Every request: 200 and its own greeting.
    const serverOf = (e: Exchange) =>
      typeof e.body === "string" ? undefined : e.body.server;
    const failures = exchanges.filter((e) =>
      e.status !== 200 || typeof e.body === "string" ||
      e.body.greeting !== `Hello, ${e.name}!` ||
      (e.body.server !== "hello-1" && e.body.server !== "hello-2")
    );
    const count = (list: Exchange[]) => {
      const counts: Record<string, number> = {};
      for (const e of list) {
        const server = serverOf(e) ?? "none";
        counts[server] = (counts[server] ?? 0) + 1;
      }
      return counts;
    };
    const before = exchanges.filter((e) => e.endedAt < killSentAt);
    const after = exchanges.filter((e) => e.startedAt > deadAt);
    const during = exchanges.filter((e) =>
      !before.includes(e) && !after.includes(e)
    );
    const firstBySurvivor = exchanges
      .filter((e) => e.endedAt > killSentAt && serverOf(e) === "hello-2")
      .reduce((min, e) => Math.min(min, e.endedAt), Infinity);
    const worstAfterKill = exchanges
      .filter((e) => e.endedAt > killSentAt)
      .reduce((max, e) => Math.max(max, e.endedAt - e.startedAt), 0);
    const figures = {
      requests: exchanges.length,
      failures: failures.length,
      answeredBy: count(exchanges),
      beforeKill: count(before),
      duringKill: count(during),
      afterKill: count(after),
      killToDeadMs: Math.round(deadAt - killSentAt),
      killToFirstSurvivorAnswerMs: Math.round(firstBySurvivor - killSentAt),
      slowestRequestAfterKillMs: Math.round(worstAfterKill),
      runMs: Math.round(runMs),
    };
    console.log(`deno serve example: ${JSON.stringify(figures)}`);
    const context = `\n${JSON.stringify(figures)}\nfailures: ${
      JSON.stringify(failures.slice(0, 5))
    }\ndeno serve output:\n${serve.output.join("\n")}`;

    assert.equal(exchanges.length, REQUESTS, context);
    assert.deepEqual(failures, [], context);
    // Both servers answered before the kill; after hello-1 had exited, only
    // hello-2 did (a request under way at the kill may have got hello-1's
    // answer just before it died).
    assert.ok((figures.beforeKill["hello-1"] ?? 0) > 0, context);
    assert.ok((figures.beforeKill["hello-2"] ?? 0) > 0, context);
    assert.ok(after.length >= 90, `only ${after.length} after${context}`);
    assert.deepEqual(Object.keys(figures.afterKill), ["hello-2"], context);
    assert.ok(Number.isFinite(firstBySurvivor), context);

    // hello-1's lease expires and the registry drops it; the example's
    // cluster map hears of it through its watch, in the background.
    const leaseGoneMs = await waitUntilUnbound(
      cluster.registryUrls[0],
      "hello",
      "hello-1",
      TTL_MS + 5_000,
    );
    await new Promise((r) => setTimeout(r, 200));
    console.log(
      `hello-1 left the registry ${
        Math.round(performance.now() - deadAt)
      } ms after its kill (TTL ${TTL_MS} ms; polled for ${
        Math.round(leaseGoneMs)
      } ms)`,
    );

    // deno serve logged its listening line and nothing else: no error, no
    // warning, no uncaught rejection, also while its map changed.
    const logged = serve.output.filter((line) =>
      !/^deno serve: Listening on http:\/\/127\.0\.0\.1:\d+\/$/.test(line)
    );
    assert.deepEqual(logged, [], context);

    // SIGTERM with a request under way (hello-2 frozen with SIGSTOP, for
    // well under its lease TTL): deno serve lets the request finish, the
    // example closes its client once it has, and the process ends (nothing
    // of Rafter's keeps it alive).
    cluster.pause("hello-2");
    const last = fetch(`${origin}/?name=last`, {
      client: http,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    }).then(async (response) => ({
      status: response.status,
      body: await response.text(),
    }));
    await new Promise((r) => setTimeout(r, FROZEN_MS));
    const termAt = performance.now();
    serve.process.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, FROZEN_MS));
    cluster.resume("hello-2");
    const answer = await last;
    http.close();
    assert.equal(answer.status, 200, `${answer.body}${context}`);
    assert.deepEqual(JSON.parse(answer.body), {
      greeting: "Hello, last!",
      server: "hello-2",
    });
    assert.ok(
      await settlesWithin(serve.exited, 5_000),
      `deno serve still running 5 s after SIGTERM${context}`,
    );
    const exitMs = performance.now() - termAt;
    assert.equal(await serve.exited, 0, context);
    console.log(
      `SIGTERM with a request under way: it got 200, deno serve exited 0 after ${
        Math.round(exitMs)
      } ms`,
    );
    assert.deepEqual(
      serve.output.filter((line) => !/^deno serve: Listening on /.test(line)),
      [],
      `deno serve logged at shutdown${context}`,
    );
  } finally {
    try {
      http.close();
    } catch { /* closed before the SIGTERM */ }
    if (serve !== null && serve.running()) {
      try {
        serve.process.kill("SIGKILL");
      } catch { /* already gone */ }
    }
    await serve?.exited;
    await cluster.stop();
  }
});
