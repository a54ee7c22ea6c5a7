import assert from "node:assert/strict";
import type { Endpoint } from "../registry/types.ts";
import { ClusterMap } from "./cluster_map.ts";

const a: Endpoint = { id: "a", url: "tcp://127.0.0.1:9001" };
const b: Endpoint = { id: "b", url: "tcp://127.0.0.1:9002" };
const c: Endpoint = { id: "c", url: "tcp://127.0.0.1:9003" };

/** A lookup the test controls: answers from `list`, counts its calls. */
function registry(initial: Endpoint[]) {
  const fake = {
    list: initial,
    calls: 0,
    fail: null as Error | null,
    lookup: async (): Promise<Endpoint[]> => {
      fake.calls++;
      await Promise.resolve();
      if (fake.fail !== null) throw fake.fail;
      return fake.list.map((e) => ({ ...e }));
    },
  };
  return fake;
}

function ids(list: readonly Endpoint[]): string[] {
  return list.map((e) => e.id);
}

Deno.test("the first call looks the name up; later calls use the map", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time });
  assert.deepEqual(map.current, []);
  assert.equal(reg.calls, 0);
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  assert.equal(reg.calls, 1);
  time = 9_999;
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  assert.deepEqual(ids(map.current), ["a", "b"]);
  assert.equal(reg.calls, 1);
});

Deno.test("concurrent callers share one lookup", async () => {
  const reg = registry([a, b, c]);
  const gate = Promise.withResolvers<void>();
  let calls = 0;
  const map = new ClusterMap(async () => {
    calls++;
    await gate.promise;
    return reg.list;
  });
  const waiting = Array.from({ length: 5 }, () => map.endpoints());
  await Promise.resolve();
  assert.equal(calls, 1);
  gate.resolve();
  const results = await Promise.all(waiting);
  assert.equal(calls, 1);
  for (const result of results) assert.deepEqual(ids(result), ["a", "b", "c"]);
  // An explicit refresh while one is under way joins it too.
  const gate2 = Promise.withResolvers<void>();
  const map2 = new ClusterMap(async () => {
    calls++;
    await gate2.promise;
    return [a];
  });
  const first = map2.refresh();
  const second = map2.refresh();
  assert.equal(first, second);
  gate2.resolve();
  await first;
  assert.equal(calls, 2);
  assert.deepEqual(ids(map2.current), ["a"]);
});

Deno.test("an evicted endpoint stays out through refreshes until its quarantine passes", async () => {
  const reg = registry([a, b, c]);
  let time = 1_000;
  const map = new ClusterMap(reg.lookup, {
    now: () => time,
    quarantineMs: 500,
    refreshMs: 100,
  });
  await map.endpoints();
  map.evict(b);
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_200;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_499;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_500; // evicted at 1_000 + 500
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b", "c"]);
  // The quarantine is over: a later refresh keeps it too.
  time = 1_600;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b", "c"]);
});

Deno.test("evicting an endpoint the map does not hold only quarantines it", async () => {
  const reg = registry([a]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, {
    now: () => time,
    quarantineMs: 100,
  });
  await map.endpoints();
  map.evict(b);
  assert.deepEqual(ids(map.current), ["a"]);
  reg.list = [a, b];
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a"]);
  time = 100;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b"]);
});

Deno.test("when every listed endpoint is quarantined they all come back", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, {
    now: () => time,
    quarantineMs: 5_000,
  });
  await map.endpoints();
  map.evict(a);
  map.evict(b);
  assert.deepEqual(map.current, []);
  time = 10;
  // The map is empty, so this looks up at once.
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  assert.equal(reg.calls, 2);
  // Their quarantine was lifted: a server listed later is not refused
  // because the others were.
  reg.list = [a, b, c];
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b", "c"]);
});

Deno.test("a partly quarantined list keeps only the healthy endpoints", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time });
  await map.endpoints();
  map.evict(a);
  map.evict(b);
  reg.list = [a, b, c];
  time = 1;
  assert.deepEqual(ids(await map.endpoints()), ["c"]);
});

Deno.test("a stale map is refreshed in the background while the current list is returned", async () => {
  const reg = registry([a]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time, refreshMs: 1_000 });
  await map.endpoints();
  reg.list = [a, b];
  time = 999;
  assert.deepEqual(ids(await map.endpoints()), ["a"]);
  assert.equal(reg.calls, 1);
  time = 1_000;
  const returned = await map.endpoints();
  assert.deepEqual(ids(returned), ["a"]);
  assert.equal(reg.calls, 2);
  await map.refresh(); // joins the background refresh
  assert.equal(reg.calls, 2);
  assert.deepEqual(ids(map.current), ["a", "b"]);
  // Fresh again: no lookup until refreshMs has passed since the last one.
  time = 1_999;
  await map.endpoints();
  assert.equal(reg.calls, 2);
  time = 2_000;
  await map.endpoints();
  assert.equal(reg.calls, 3);
  await map.refresh();
});

Deno.test("a failing background refresh keeps the map", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time, refreshMs: 100 });
  await map.endpoints();
  reg.fail = new Error("registry down");
  time = 100;
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  assert.equal(reg.calls, 2);
  await assert.rejects(map.refresh(), /registry down/);
  assert.deepEqual(ids(map.current), ["a", "b"]);
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  // Still stale (the failure did not count as a lookup): another try.
  await assert.rejects(map.refresh(), /registry down/);
  assert.deepEqual(ids(map.current), ["a", "b"]);
  // Once the registry answers, the next refresh replaces the map.
  reg.fail = null;
  reg.list = [c];
  await map.refresh();
  assert.deepEqual(ids(map.current), ["c"]);
});

Deno.test("the lookup error reaches the caller when the map is empty", async () => {
  const reg = registry([a]);
  reg.fail = new Error("no registry node answered");
  const map = new ClusterMap(reg.lookup);
  await assert.rejects(map.endpoints(), {
    message: "no registry node answered",
  });
  assert.deepEqual(map.current, []);
  // The failed lookup is not cached: the next call tries again.
  reg.fail = null;
  assert.deepEqual(ids(await map.endpoints()), ["a"]);
  assert.equal(reg.calls, 2);
});

Deno.test("an empty answer leaves the map empty and the next call looks up again", async () => {
  const reg = registry([]);
  const map = new ClusterMap(reg.lookup);
  assert.deepEqual(await map.endpoints(), []);
  assert.deepEqual(await map.endpoints(), []);
  assert.equal(reg.calls, 2);
  reg.list = [b];
  assert.deepEqual(ids(await map.endpoints()), ["b"]);
});

Deno.test("an endpoint evicted while a lookup is under way stays out of its result", async () => {
  const gate = Promise.withResolvers<void>();
  const map = new ClusterMap(async () => {
    await gate.promise;
    return [a, b];
  }, { now: () => 0 });
  const pending = map.refresh();
  map.evict(a);
  gate.resolve();
  await pending;
  assert.deepEqual(ids(map.current), ["b"]);
});

Deno.test("defaults: refresh after 10 s, quarantine 5 s", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time });
  await map.endpoints();
  map.evict(a);
  time = 9_999;
  await map.endpoints();
  assert.equal(reg.calls, 1);
  time = 10_000;
  await map.endpoints();
  await map.refresh();
  assert.equal(reg.calls, 2);
  // Evicted at 0 with a 5 s quarantine: back by now.
  assert.deepEqual(ids(map.current), ["a", "b"]);
  map.evict(b);
  time = 14_999;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a"]);
  time = 15_000;
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b"]);
});

Deno.test("quarantine goes by id and URL: the same id bound again at a new URL is let in", async () => {
  const reg = registry([a, b]);
  let time = 0;
  const map = new ClusterMap(reg.lookup, { now: () => time, refreshMs: 10 });
  await map.endpoints();
  map.evict(a);
  assert.deepEqual(ids(map.current), ["b"]);
  // "a" restarts elsewhere and binds its id again.
  reg.list = [{ id: "a", url: "tcp://127.0.0.1:9101" }, b];
  time = 20;
  await map.refresh();
  assert.deepEqual(map.current.map((e) => e.url), [
    "tcp://127.0.0.1:9101",
    b.url,
  ]);
});
