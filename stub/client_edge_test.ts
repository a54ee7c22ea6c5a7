import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import { delay, waitFor } from "../testing/time.ts";
import { startTestRegistry } from "../testing/cluster.ts";
import { connect, type RafterClient } from "./client.ts";
import { EdgeCache } from "./edge_cache.ts";

interface Hello {
  greet(name: string): string;
}

Deno.test("edge mode: a client per request takes the isolate's stubs list while it is fresh, a stale one when the registry is down, and skips a server another request saw fail", async () => {
  const { registry, dir } = await startTestRegistry("rafter_edge_");
  const served: string[] = [];
  const hello = (id: string) =>
    serve({
      methods: { greet: (name: string) => (served.push(id), `${id}: ${name}`) },
    });
  const a = hello("a");
  const b = hello("b");
  const cache = new EdgeCache({ ttlMs: 300 });
  /** Background refreshes of stale lists, awaited before the test ends. */
  const kept: Promise<unknown>[] = [];
  /** One request: a client of its own, closed before it returns. */
  const request = async (name: string) => {
    const client: RafterClient = connect(registry.url, {
      edge: cache,
      dialer: denoTcpDialer,
      deadlineMs: 1_000,
      waitUntil: (work) => kept.push(work),
    });
    try {
      return await client.stub<Hello>("hello").greet(name);
    } finally {
      client.close();
    }
  };
  let registryStopped = false;
  try {
    await waitFor(() => registry.raft.status.role === "leader", "n1 to lead");
    const admin = connect(registry.url);
    await admin.bind("hello", { id: "a", url: a.url });
    await admin.bind("hello", { id: "b", url: b.url });
    admin.close();
    assert.match(await request("r1"), /^[ab]: r1$/);
    assert.equal(cache.fresh("hello")?.endpoints.length, 2);
    // The registry goes away: within the TTL the cached list serves.
    await registry.stop();
    registryStopped = true;
    assert.match(await request("r2"), /^[ab]: r2$/);
    // After the TTL the registry cannot be asked: the stale list serves.
    await delay(350);
    assert.equal(cache.fresh("hello"), undefined);
    assert.match(await request("r3"), /^[ab]: r3$/);
    // Server a dies; the requests that meet it fail over to b, and once a
    // is ejected no request tries it again.
    await a.close();
    served.length = 0;
    for (let i = 0; i < 10; i++) {
      assert.equal(await request(`k${i}`), `b: k${i}`);
    }
    assert.deepEqual(served, Array.from({ length: 10 }, () => "b"));
    assert.equal(cache.health.of(a.url).state, "ejected");
    // A list holding a failed endpoint is not fresh: the next request asks
    // the registry (here down, so it falls back to the stale list).
    assert.equal(cache.fresh("hello"), undefined);
    // Past the TTL, requests took the stale list and refreshed it in the
    // background (the registry being down, in vain).
    assert.ok(kept.length >= 1);
  } finally {
    await Promise.all(kept);
    await b.close();
    await a.close();
    if (!registryStopped) await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
