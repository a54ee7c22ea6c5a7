/**
 * Edge mode under `Deno.serve`, on real sockets: a client per HTTP request
 * over one {@link EdgeCache}, against a fake registry on 127.0.0.1 that
 * counts lookups and holds its answers (so the requests surely overlap).
 * N concurrent cold requests make one lookup (N with `share: "off"`, the
 * behaviour before), and a request that finds its list stale is answered
 * from it while a detached refresh (no `waitUntil` under `Deno.serve`)
 * brings the new list.
 *
 * @module
 */

import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { connect } from "../adapter/deno/mod.ts";
import { EdgeCache, type EdgeShare } from "../mod.ts";
import { countingRegistry } from "../testing/counting_registry.ts";
import { waitFor } from "../testing/time.ts";

/** Concurrent cold requests. */
const N = 16;

interface Hello {
  greet(name: string): string;
}

Deno.test("edge mode under Deno.serve: N concurrent cold requests share one lookup; a stale list is served while a detached refresh replaces it", async () => {
  const hello = serve({ methods: { greet: (name: string) => `hi ${name}` } });
  const registry = countingRegistry({
    off: [hello.url],
    promise: [hello.url],
    stale: [hello.url],
  });
  const caches = {
    off: new EdgeCache({ share: "off" }),
    promise: new EdgeCache({ share: "promise" }),
    stale: new EdgeCache({ ttlMs: 200, maxStaleMs: 60_000 }),
  };
  let entered = 0;
  const http = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: () => {},
  }, async (request) => {
    entered++;
    const name = new URL(request.url).searchParams.get("svc")!;
    const cache = caches[name as keyof typeof caches];
    // A client per request, closed before the response (edge mode).
    const client = connect(registry.url, { edge: cache, deadlineMs: 10_000 });
    try {
      const text = await client.stub<Hello>(name).greet(name);
      return new Response(text);
    } catch (error) {
      return new Response(String(error), { status: 502 });
    } finally {
      client.close();
    }
  });
  const origin = `http://127.0.0.1:${http.addr.port}`;
  const get = async (svc: string) => {
    const response = await fetch(`${origin}/?svc=${svc}`, {
      signal: AbortSignal.timeout(15_000),
    });
    return `${response.status} ${await response.text()}`;
  };
  /** N requests at once while the registry holds its answers. */
  const cold = async (svc: EdgeShare) => {
    registry.hold();
    entered = 0;
    const answers = Array.from({ length: N }, () => get(svc));
    await waitFor(
      () => entered === N,
      `${N} requests in the handler`,
      20_000,
    );
    // Every request is in: sharers wait, the others have asked.
    await waitFor(
      () => registry.received(svc) === (svc === "off" ? N : 1),
      `the ${svc} lookups`,
    );
    registry.release();
    assert.deepEqual(
      await Promise.all(answers),
      Array(N).fill(`200 hi ${svc}`),
    );
    return registry.received(svc);
  };
  try {
    const before = await cold("off");
    const after = await cold("promise");
    console.log(
      `measured: ${N} concurrent cold requests made ${before} lookups with share "off", ${after} with share "promise"`,
    );
    assert.equal(before, N);
    assert.equal(after, 1);

    // Stale-while-revalidate.
    assert.equal(await get("stale"), "200 hi stale");
    assert.equal(registry.received("stale"), 1);
    const firstRevision = caches.stale.fresh("stale")?.revision;
    assert.equal(firstRevision, registry.revision());
    await waitFor(
      () => caches.stale.fresh("stale") === undefined,
      "the list to pass its TTL",
    );
    registry.hold();
    registry.list("stale", [hello.url]); // a new revision
    // Answered from the stale list while the refresh is held.
    assert.equal(await get("stale"), "200 hi stale");
    assert.equal(registry.received("stale"), 2);
    assert.equal(registry.held(), 1);
    assert.ok(caches.stale.lookingUp("stale"));
    assert.equal(caches.stale.fresh("stale"), undefined);
    registry.release();
    await waitFor(
      () => caches.stale.fresh("stale")?.revision === registry.revision(),
      "the refresh to store the new list",
    );
    assert.ok(registry.revision() > firstRevision!);
    await waitFor(() => !caches.stale.lookingUp("stale"), "the refresh to end");
    assert.equal(registry.received("stale"), 2);
  } finally {
    registry.release();
    await http.shutdown();
    await registry.close();
    await hello.close();
  }
});
