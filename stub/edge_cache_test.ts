/**
 * Tests of EdgeCache.read: concurrent requests share one lookup (by
 * promise, by polling plain data, or not at all), never wait past
 * `shareWaitMs` nor on a request that closed, and a stale list is served
 * while one background refresh runs.
 */

import assert from "node:assert/strict";
import { type LookupResult, makeEndpoint } from "../protocol/registry.ts";
import { EdgeCache, type EdgeRequestIo, type EdgeShare } from "./edge_cache.ts";

const endpoint = makeEndpoint({ id: "a", url: "tcp://127.0.0.1:9001" });
const list = (revision: number): LookupResult => ({
  name: "hello",
  query: {},
  revision,
  endpoints: [endpoint],
  total: 1,
});

/** A lookup the test settles by hand. */
interface Pending {
  resolve(result: LookupResult): void;
  reject(error: Error): void;
}

/** Lookups made through it wait until the test settles them. */
function fakeRegistry() {
  const pending: Pending[] = [];
  return {
    pending,
    lookup: () =>
      new Promise<LookupResult>((resolve, reject) => {
        pending.push({ resolve, reject });
      }),
  };
}

/** Lets every ready promise reaction and a few timers run. */
const settle = (ms = 20) => new Promise((r) => setTimeout(r, ms));

for (const share of ["promise", "poll"] as EdgeShare[]) {
  Deno.test(`EdgeCache.read (${share}): 10 concurrent cold requests make 1 lookup and all get its list`, async () => {
    const cache = new EdgeCache({ share });
    const registry = fakeRegistry();
    const reads = Array.from(
      { length: 10 },
      () => cache.read("hello", { lookup: registry.lookup }),
    );
    await settle();
    assert.equal(registry.pending.length, 1);
    assert.ok(cache.lookingUp("hello"));
    registry.pending[0].resolve(list(7));
    const results = await Promise.all(reads);
    assert.deepEqual(results.map((r) => r.revision), Array(10).fill(7));
    assert.equal(registry.pending.length, 1);
    assert.equal(cache.lookingUp("hello"), false);
    assert.equal(cache.fresh("hello")?.revision, 7);
  });

  Deno.test(`EdgeCache.read (${share}): when the shared lookup fails, one waiter looks up again and the rest share that`, async () => {
    const cache = new EdgeCache({ share });
    const registry = fakeRegistry();
    const first = cache.read("hello", { lookup: registry.lookup });
    await settle(5);
    const others = Array.from(
      { length: 5 },
      () => cache.read("hello", { lookup: registry.lookup }),
    );
    await settle();
    registry.pending[0].reject(new Error("registry unreachable"));
    await assert.rejects(first, /registry unreachable/);
    await settle();
    assert.equal(registry.pending.length, 2);
    registry.pending[1].resolve(list(8));
    const results = await Promise.all(others);
    assert.deepEqual(results.map((r) => r.revision), Array(5).fill(8));
    assert.equal(registry.pending.length, 2);
  });

  Deno.test(`EdgeCache.read (${share}): a request whose client closed is not waited for; one that hangs at most shareWaitMs`, async () => {
    const cache = new EdgeCache({ share, shareWaitMs: 200 });
    const registry = fakeRegistry();
    const closing = new AbortController();
    const owner = cache.read("hello", {
      lookup: registry.lookup,
      signal: closing.signal,
    });
    await settle(5);
    const waiter = cache.read("hello", { lookup: registry.lookup });
    await settle();
    assert.equal(registry.pending.length, 1);
    // The owner's request ends (its lookup never settles): the waiter
    // looks up itself at once.
    closing.abort();
    await settle();
    assert.equal(registry.pending.length, 2);
    registry.pending[1].resolve(list(9));
    assert.equal((await waiter).revision, 9);
    // A lookup that hangs with no word from its request: waited for at
    // most shareWaitMs.
    const hanging = new EdgeCache({ share, shareWaitMs: 200 });
    void hanging.read("hello", { lookup: registry.lookup });
    await settle(5);
    const started = performance.now();
    const late = hanging.read("hello", { lookup: registry.lookup });
    await settle();
    assert.equal(registry.pending.length, 3);
    // Event-driven: the waiter's own lookup shows up once it gave up.
    while (registry.pending.length < 4) await settle(10);
    assert.ok(performance.now() - started >= 150);
    registry.pending[3].resolve(list(10));
    assert.equal((await late).revision, 10);
    registry.pending[0].resolve(list(1));
    registry.pending[2].resolve(list(1));
    await owner;
  });
}

Deno.test("EdgeCache.read (off): every request looks up itself", async () => {
  const cache = new EdgeCache({ share: "off" });
  const registry = fakeRegistry();
  const reads = Array.from(
    { length: 10 },
    () => cache.read("hello", { lookup: registry.lookup }),
  );
  await settle();
  assert.equal(registry.pending.length, 10);
  for (const p of registry.pending) p.resolve(list(3));
  await Promise.all(reads);
});

Deno.test("EdgeCache.read: a stale list is served at once while one background refresh runs; past maxStaleMs, or without background work, it is looked up first", async () => {
  let time = 0;
  const cache = new EdgeCache({
    ttlMs: 1_000,
    maxStaleMs: 5_000,
    now: () => time,
  });
  const registry = fakeRegistry();
  const background = fakeRegistry();
  const kept: Promise<void>[] = [];
  const io: EdgeRequestIo = {
    lookup: registry.lookup,
    background: { lookup: background.lookup, keep: (w) => kept.push(w) },
  };
  cache.store("hello", list(1));
  time = 1_500;
  // Three requests find it stale: all served at once, one refresh.
  const served = await Promise.all([
    cache.read("hello", io),
    cache.read("hello", io),
    cache.read("hello", io),
  ]);
  assert.deepEqual(served.map((r) => r.revision), [1, 1, 1]);
  assert.equal(registry.pending.length, 0);
  assert.equal(background.pending.length, 1);
  assert.equal(kept.length, 1);
  assert.ok(cache.lookingUp("hello"));
  // A request that can run no background work also takes the stale list
  // while the refresh runs.
  assert.equal(
    (await cache.read("hello", { lookup: registry.lookup })).revision,
    1,
  );
  background.pending[0].resolve(list(2));
  await kept[0];
  assert.equal(cache.lookingUp("hello"), false);
  assert.equal(cache.fresh("hello")?.revision, 2);
  // A refresh that fails leaves the stale list; the next stale request
  // starts another one.
  time = 3_000;
  assert.equal((await cache.read("hello", io)).revision, 2);
  background.pending[1].reject(new Error("registry unreachable"));
  await kept[1];
  assert.equal(cache.stale("hello")?.revision, 2);
  assert.equal(cache.lookingUp("hello"), false);
  // Without background work, a stale list is looked up first.
  const inline = cache.read("hello", { lookup: registry.lookup });
  await settle();
  assert.equal(registry.pending.length, 1);
  registry.pending[0].resolve(list(3));
  assert.equal((await inline).revision, 3);
  // Past ttlMs + maxStaleMs it is looked up first, background or not.
  time = 3_000 + 1_000 + 5_000;
  assert.equal(cache.stale("hello"), undefined);
  const old = cache.read("hello", io);
  await settle();
  assert.equal(registry.pending.length, 2);
  assert.equal(background.pending.length, 2);
  registry.pending[1].resolve(list(4));
  assert.equal((await old).revision, 4);
});

Deno.test("EdgeCache: refuses a negative maxStaleMs or shareWaitMs and an unknown share", () => {
  assert.throws(() => new EdgeCache({ maxStaleMs: -1 }), /maxStaleMs/);
  assert.throws(
    () => new EdgeCache({ shareWaitMs: Number.NaN }),
    /shareWaitMs/,
  );
  assert.throws(
    () => new EdgeCache({ share: "always" as EdgeShare }),
    /share must be "promise", "poll" or "off"/,
  );
});
