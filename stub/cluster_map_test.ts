import assert from "node:assert/strict";
import type { Endpoint, LookupResult } from "../registry/protocol.ts";
import { ClusterMap, type ClusterMapSource } from "./cluster_map.ts";
import type { WatchUpdate } from "./watch.ts";
import { endpoint } from "./_test_util.ts";

const a = endpoint("a", 9001);
const b = endpoint("b", 9002);
const c = endpoint("c", 9003);

/** A registry the test controls: lookups answer from `list`; watches are captured. */
function registry(initial: Endpoint[]) {
  const fake = {
    list: initial,
    revision: 5,
    calls: 0,
    fail: null as Error | null,
    watches: [] as {
      from: number;
      push: (u: WatchUpdate) => void;
      closed: boolean;
    }[],
    source: null as unknown as ClusterMapSource,
  };
  fake.source = {
    lookup: async (): Promise<LookupResult> => {
      fake.calls++;
      await Promise.resolve();
      if (fake.fail !== null) throw fake.fail;
      return {
        name: "hello",
        query: {},
        revision: fake.revision,
        endpoints: fake.list.map((e) => ({ ...e })),
      };
    },
    watch: (from, push) => {
      const watch = { from, push, closed: false };
      fake.watches.push(watch);
      return { close: () => void (watch.closed = true) };
    },
  };
  return fake;
}

function ids(list: readonly Endpoint[]): string[] {
  return list.map((e) => e.id);
}

function put(e: Endpoint, revision: number, name = "hello"): WatchUpdate {
  return {
    kind: "events",
    revision,
    events: [{ type: "put", name, endpoint: e, revision }],
  };
}

function remove(e: Endpoint, revision: number): WatchUpdate {
  return {
    kind: "events",
    revision,
    events: [{
      type: "delete",
      name: "hello",
      endpoint: e,
      revision,
      reason: "leaseExpired",
    }],
  };
}

Deno.test("the first call looks the name up, then a watch from the next revision keeps the map", async () => {
  const reg = registry([a, b]);
  let time = 100;
  const map = new ClusterMap("hello", reg.source, { now: () => time });
  assert.deepEqual(map.current, []);
  assert.equal(map.updatedAt, null);
  assert.deepEqual(ids(await map.endpoints()), ["a", "b"]);
  assert.equal(reg.calls, 1);
  assert.equal(map.revision, 5);
  assert.equal(map.updatedAt, 100);
  assert.equal(reg.watches.length, 1);
  assert.equal(reg.watches[0].from, 6);
  // Changes arrive through the watch: no lookup.
  time = 200;
  reg.watches[0].push(put(c, 6));
  assert.deepEqual(ids(await map.endpoints()), ["a", "b", "c"]);
  reg.watches[0].push(remove(a, 7));
  assert.deepEqual(ids(map.current), ["b", "c"]);
  assert.equal(map.revision, 7);
  assert.equal(map.updatedAt, 200);
  assert.equal(reg.calls, 1);
  map.close();
  assert.equal(reg.watches[0].closed, true);
});

Deno.test("events of other names under the prefix only advance the revision", async () => {
  const reg = registry([a]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  reg.watches[0].push(put(b, 6, "hello2"));
  assert.deepEqual(ids(map.current), ["a"]);
  assert.equal(map.revision, 6);
});

Deno.test("draining and unhealthy endpoints are not picked while serving ones remain", async () => {
  const reg = registry([a, b, c]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  reg.watches[0].push(put({ ...a, state: "draining" }, 6));
  reg.watches[0].push(put({ ...b, state: "unhealthy" }, 7));
  assert.deepEqual(ids(map.current), ["c"]);
  assert.deepEqual(ids(map.all), ["a", "b", "c"]);
  // With no serving endpoint left, the draining ones still answer.
  reg.watches[0].push(remove(c, 8));
  assert.deepEqual(ids(map.current), ["a"]);
});

Deno.test("a reset replaces the map with the listed endpoints of the name", async () => {
  const reg = registry([a, b]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  reg.watches[0].push({
    kind: "reset",
    revision: 40,
    names: [{ name: "hello", count: 1, endpoints: [c] }, {
      name: "x",
      count: 1,
      endpoints: [a],
    }],
  });
  assert.deepEqual(ids(map.current), ["c"]);
  assert.equal(map.revision, 40);
});

Deno.test("a query name keeps only endpoints whose attributes match", async () => {
  const v1 = endpoint("v1", 9101, { attrs: { version: "1" } });
  const v2 = endpoint("v2", 9102, { attrs: { version: "2" } });
  const reg = registry([v1]);
  const map = new ClusterMap("hello?version=1", reg.source);
  assert.equal(map.name, "hello");
  assert.deepEqual(map.query, { version: "1" });
  await map.endpoints();
  reg.watches[0].push(put(v2, 6));
  assert.deepEqual(ids(map.current), ["v1"]);
  // An endpoint whose attributes change so it no longer matches leaves.
  reg.watches[0].push(put({ ...v1, attrs: { version: "3" } }, 7));
  assert.deepEqual(ids(map.current), []);
});

Deno.test("concurrent callers share one lookup", async () => {
  const reg = registry([a, b, c]);
  const gate = Promise.withResolvers<void>();
  const lookup = reg.source.lookup;
  reg.source.lookup = async () => {
    await gate.promise;
    return lookup();
  };
  const map = new ClusterMap("hello", reg.source);
  const waiting = Array.from({ length: 5 }, () => map.endpoints());
  assert.equal(map.refresh(), map.refresh());
  gate.resolve();
  const results = await Promise.all(waiting);
  assert.equal(reg.calls, 1);
  for (const result of results) assert.deepEqual(ids(result), ["a", "b", "c"]);
  assert.equal(reg.watches.length, 1);
});

Deno.test("an evicted endpoint stays out until its quarantine passes, even if the registry lists it", async () => {
  const reg = registry([a, b, c]);
  let time = 1_000;
  const map = new ClusterMap("hello", reg.source, {
    now: () => time,
    quarantineMs: 500,
  });
  await map.endpoints();
  map.evict(b);
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_200;
  await map.refresh();
  reg.watches[0].push(put({ ...b, modRevision: 9 }, 9));
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_499;
  assert.deepEqual(ids(map.current), ["a", "c"]);
  time = 1_500; // evicted at 1_000 + 500
  assert.deepEqual(ids(map.current), ["a", "b", "c"]);
});

Deno.test("when every serving endpoint is quarantined they all come back", async () => {
  const reg = registry([a, b]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  map.evict(a);
  map.evict(b);
  assert.deepEqual(ids(map.current), ["a", "b"]);
});

Deno.test("quarantine goes by id and URL: the same id bound again at a new URL is let in", async () => {
  const reg = registry([a]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  map.evict(a);
  reg.watches[0].push(put(endpoint("a", 9999), 6));
  reg.watches[0].push(put(b, 7));
  assert.deepEqual(map.current.map((e) => e.url), [
    "tcp://127.0.0.1:9999",
    "tcp://127.0.0.1:9002",
  ]);
});

Deno.test("the lookup error reaches the caller when the map is empty; the next call looks up again", async () => {
  const reg = registry([a]);
  reg.fail = new Error("registry down");
  const map = new ClusterMap("hello", reg.source);
  await assert.rejects(map.endpoints(), /registry down/);
  assert.equal(reg.watches.length, 0);
  reg.fail = null;
  assert.deepEqual(ids(await map.endpoints()), ["a"]);
  assert.equal(reg.calls, 2);
});

Deno.test("an empty map looks the name up again on the next call", async () => {
  const reg = registry([]);
  const map = new ClusterMap("hello", reg.source);
  assert.deepEqual(await map.endpoints(), []);
  reg.list = [b];
  reg.revision = 9;
  assert.deepEqual(ids(await map.endpoints()), ["b"]);
  assert.equal(reg.calls, 2);
  // One watch only, started by the first lookup.
  assert.equal(reg.watches.length, 1);
});

Deno.test("a lookup older than what the watch brought does not roll the map back", async () => {
  const reg = registry([a]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  reg.watches[0].push(put(b, 8));
  reg.revision = 7;
  reg.list = [];
  await map.refresh();
  assert.deepEqual(ids(map.current), ["a", "b"]);
  assert.equal(map.revision, 8);
});

Deno.test("without a watch the map only looks up", async () => {
  const reg = registry([a]);
  const map = new ClusterMap("hello", { lookup: reg.source.lookup });
  assert.deepEqual(ids(await map.endpoints()), ["a"]);
  assert.equal(reg.watches.length, 0);
});

Deno.test("when every serving endpoint failed lately, endpoints() looks the name up again before falling back to them", async () => {
  const reg = registry([a, b]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  map.evict(a);
  map.evict(b);
  // The registry knows of c (its watch event has not arrived).
  reg.list = [a, b, c];
  reg.revision = 6;
  assert.deepEqual(ids(await map.endpoints()), ["c"]);
  assert.equal(reg.calls, 2);
});
