import assert from "node:assert/strict";
import type {
  Endpoint,
  EndpointLoad,
  LookupResult,
} from "../../protocol/registry.ts";
import { ClusterMap, type ClusterMapSource } from "./cluster_map.ts";
import { HealthBook } from "./endpoint_health.ts";
import type { WatchUpdate } from "../registry_client/watch.ts";
import { endpoint } from "../../testing/cluster.ts";

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
      loads?: (loads: EndpointLoad[]) => void;
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
        total: fake.list.length,
      };
    },
    watch: (from, push, loads) => {
      const watch = { from, push, loads, closed: false };
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
  const map = new ClusterMap("hello", reg.source, {
    health: new HealthBook({ now: () => time }),
  }, { now: () => time });
  assert.deepEqual(map.candidates(), []);
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
  assert.deepEqual(ids(map.candidates()), ["b", "c"]);
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
  assert.deepEqual(ids(map.candidates()), ["a"]);
  assert.equal(map.revision, 6);
});

Deno.test("draining and unhealthy endpoints are not picked while serving ones remain", async () => {
  const reg = registry([a, b, c]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  reg.watches[0].push(put({ ...a, state: "draining" }, 6));
  reg.watches[0].push(put({ ...b, state: "unhealthy" }, 7));
  assert.deepEqual(ids(map.candidates()), ["c"]);
  assert.deepEqual(ids(map.all), ["a", "b", "c"]);
  // With no serving endpoint left, the draining ones still answer.
  reg.watches[0].push(remove(c, 8));
  assert.deepEqual(ids(map.candidates()), ["a"]);
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
  assert.deepEqual(ids(map.candidates()), ["c"]);
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
  assert.deepEqual(ids(map.candidates()), ["v1"]);
  // An endpoint whose attributes change so it no longer matches leaves
  // (once a lookup confirms that nothing is left).
  reg.list = [{ ...v1, attrs: { version: "3" } }];
  reg.revision = 8;
  reg.watches[0].push(put({ ...v1, attrs: { version: "3" } }, 7));
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(ids(map.candidates()), []);
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
  assert.deepEqual(ids(map.candidates()), ["a", "b"]);
  assert.equal(map.revision, 8);
});

Deno.test("without a watch the map only looks up", async () => {
  const reg = registry([a]);
  const map = new ClusterMap("hello", { lookup: reg.source.lookup });
  assert.deepEqual(ids(await map.endpoints()), ["a"]);
  assert.equal(reg.watches.length, 0);
});

Deno.test("an endpoint this client ejected is out of play until its ejection ends and a probe passes", async () => {
  const reg = registry([a, b, c]);
  let time = 1_000;
  const health = new HealthBook({ now: () => time, baseEjectionMs: 500 });
  const probes: string[] = [];
  let answer = false;
  const map = new ClusterMap("hello", reg.source, {
    health,
    probe: (url) => {
      probes.push(url);
      return Promise.resolve(answer);
    },
  }, { now: () => time });
  await map.endpoints();
  health.of(b.url).failed("refused");
  assert.deepEqual(ids(map.candidates()), ["a", "c"]);
  // The registry still lists it: it stays out.
  reg.watches[0].push(put({ ...b, modRevision: 9 }, 9));
  assert.deepEqual(ids(map.candidates()), ["a", "c"]);
  assert.deepEqual(probes, []);
  time = 1_500; // its 500 ms are over: one probe, which fails
  assert.deepEqual(ids(map.candidates()), ["a", "c"]);
  await Promise.resolve();
  assert.deepEqual(probes, [b.url]);
  assert.equal(health.of(b.url).ejectedUntil, 2_500); // twice as long now
  time = 2_500;
  answer = true;
  map.candidates();
  await Promise.resolve();
  assert.deepEqual(ids(map.candidates()), ["a", "b", "c"]);
  assert.deepEqual(map.states().map((s) => s.state), [
    "serving",
    "serving",
    "serving",
  ]);
});

Deno.test("an ejected endpoint is never in play while one that is not is listed; when every one is ejected, all are", async () => {
  const d = endpoint("d", 9004);
  const reg = registry([a, b, c, d]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health });
  await map.endpoints();
  health.of(a.url).failed("refused");
  health.of(b.url).failed("refused");
  health.of(c.url).failed("refused");
  // 1 of 4 left, well under Envoy's 50 %: still only d.
  assert.deepEqual(ids(map.candidates()), ["d"]);
  assert.equal(map.needsLookup(), false);
  health.of(d.url).failed("refused");
  // None left: every serving one, and a distributor sees their state.
  assert.deepEqual(ids(map.candidates()), ["a", "b", "c", "d"]);
  assert.deepEqual(
    map.candidates().map((e) => e.stats.state),
    ["ejected", "ejected", "ejected", "ejected"],
  );
});

Deno.test("a panic threshold, when set, brings every serving endpoint back below it (Envoy's)", async () => {
  const reg = registry([a, b, c]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health }, {
    panicThreshold: 0.5,
  });
  await map.endpoints();
  health.of(a.url).failed("refused");
  assert.deepEqual(ids(map.candidates()), ["b", "c"]);
  health.of(b.url).failed("refused");
  // 1 of 3 left, under 50 %: all three are tried again, and a
  // distributor sees which ones this client ejected.
  assert.deepEqual(ids(map.candidates()), ["a", "b", "c"]);
  assert.deepEqual(map.candidates().map((e) => e.stats.state), [
    "ejected",
    "ejected",
    "serving",
  ]);
  const off = new ClusterMap("hello", reg.source, { health });
  await off.endpoints();
  assert.deepEqual(ids(off.candidates()), ["c"]);
});

Deno.test("ejection goes by URL: the same id bound again at a new URL is in play", async () => {
  const reg = registry([a]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health });
  await map.endpoints();
  health.of(a.url).failed("refused");
  reg.watches[0].push(put(endpoint("a", 9999), 6));
  reg.watches[0].push(put(b, 7));
  assert.deepEqual(map.candidates().map((e) => e.url), [
    "tcp://127.0.0.1:9999",
    "tcp://127.0.0.1:9002",
  ]);
});

Deno.test("a new instance at the same URL (a restarted server taking its binding over) starts with a clean record and fresh connections", async () => {
  const reg = registry([a, b]);
  const health = new HealthBook();
  const left: string[] = [];
  const map = new ClusterMap("hello", reg.source, {
    health,
    onLeave: (url) => left.push(url),
  });
  await map.endpoints();
  health.of(a.url).failed("refused");
  assert.deepEqual(ids(map.candidates()), ["b"]);
  // The same instance changing (its load, its state) keeps the record.
  reg.watches[0].push(put({ ...a, modRevision: 6, load: 3 }, 6));
  assert.deepEqual(ids(map.candidates()), ["b"]);
  assert.deepEqual(left, []);
  // A new lease, a new createRevision, the same URL: a new instance.
  reg.watches[0].push(
    put({ ...a, leaseId: "L2", createRevision: 7, modRevision: 7 }, 7),
  );
  assert.deepEqual(ids(map.candidates()), ["a", "b"]);
  assert.deepEqual(left, [a.url]);
});

Deno.test("when every serving endpoint was ejected, endpoints() looks the name up again before falling back to them", async () => {
  const reg = registry([a, b]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health }, {
    panicThreshold: 0,
  });
  await map.endpoints();
  health.of(a.url).failed("refused");
  health.of(b.url).failed("refused");
  assert.equal(map.needsLookup(), true);
  // The registry knows of c (its watch event has not arrived).
  reg.list = [a, b, c];
  reg.revision = 6;
  assert.deepEqual(ids(await map.endpoints()), ["c"]);
  assert.equal(reg.calls, 2);
});

Deno.test("a watch that would empty the map is held back until a lookup confirms it", async () => {
  const reg = registry([a, b]);
  const map = new ClusterMap("hello", reg.source);
  await map.endpoints();
  // A registry that lost its data pushes a reset with nothing in it; the
  // lookup still lists the servers.
  reg.watches[0].push({ kind: "reset", revision: 40, names: [] });
  assert.deepEqual(ids(map.candidates()), ["a", "b"]);
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(ids(map.candidates()), ["a", "b"]);
  assert.equal(reg.calls, 2);
  // Deletes that empty it are confirmed by a lookup too: this time the
  // registry agrees.
  reg.list = [];
  reg.revision = 50;
  reg.watches[0].push(remove(a, 41));
  reg.watches[0].push(remove(b, 42));
  assert.deepEqual(ids(map.candidates()), ["b"]);
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(ids(map.candidates()), []);
  assert.deepEqual(map.states().map((s) => [s.id, s.state]), [
    ["a", "removed"],
    ["b", "removed"],
  ]);
});

Deno.test("states() names each endpoint's state and why", async () => {
  const reg = registry([
    a,
    { ...b, state: "draining" },
    { ...c, state: "unhealthy" },
    endpoint("d", 9004),
  ]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health });
  await map.endpoints();
  health.of(endpoint("d", 9004).url).failed("timeout");
  assert.deepEqual(map.states(), [
    { id: "a", url: a.url, state: "serving", reason: null },
    {
      id: "b",
      url: b.url,
      state: "draining",
      reason: "its server is shutting down",
    },
    {
      id: "c",
      url: c.url,
      state: "ejected",
      reason: "its registry health check fails",
    },
    {
      id: "d",
      url: "tcp://127.0.0.1:9004",
      state: "suspect",
      reason: "an attempt timed out",
    },
  ]);
  reg.watches[0].push(remove(a, 6));
  assert.deepEqual(map.states()[3], {
    id: "a",
    url: a.url,
    state: "removed",
    reason: "its lease expired",
  });
});

Deno.test("an endpoint that leaves the map or starts draining is handed to onLeave", async () => {
  const reg = registry([a, b]);
  const left: string[] = [];
  const map = new ClusterMap("hello", reg.source, {
    health: new HealthBook(),
    onLeave: (url) => left.push(url),
  });
  await map.endpoints();
  reg.watches[0].push(put({ ...a, state: "draining" }, 6));
  reg.watches[0].push(remove(b, 7));
  assert.deepEqual(left, [a.url, b.url]);
});

Deno.test("which endpoints are in play is kept between calls and follows every ejection, probe and watch event", async () => {
  const reg = registry([a, b, c]);
  let time = 0;
  const health = new HealthBook({ now: () => time, baseEjectionMs: 1_000 });
  let probes = 0;
  const map = new ClusterMap("hello", reg.source, {
    health,
    probe: () => {
      probes++;
      return Promise.resolve(true);
    },
  }, { panicThreshold: 0 });
  await map.endpoints();
  const first = map.candidates();
  assert.deepEqual(ids(first), ["a", "b", "c"]);
  // Nothing changed: the same list, not walked again.
  assert.equal(map.candidates(), first);
  health.of(b.url).failed("refused");
  assert.deepEqual(ids(map.candidates()), ["a", "c"]);
  assert.equal(map.needsLookup(), false);
  health.of(a.url).failed("refused");
  health.of(c.url).failed("refused");
  // None left: every serving one is back in play (they may answer), and
  // the next call looks the name up again.
  assert.deepEqual(ids(map.candidates()), ["a", "b", "c"]);
  assert.equal(map.needsLookup(), true);
  assert.equal(probes, 0);
  // Their time is up: the next look probes each once; passed probes
  // re-admit them.
  time = 1_000;
  map.candidates();
  map.candidates();
  assert.equal(probes, 3);
  await Promise.resolve();
  assert.equal(map.needsLookup(), false);
  assert.deepEqual(
    ["a", "b", "c"].map((id) =>
      health.of(map.all.find((e) => e.id === id)!.url).state
    ),
    ["serving", "serving", "serving"],
  );
  // A watch event changes the list at once.
  reg.watches[0].push(remove(b, 6));
  assert.deepEqual(ids(map.candidates()), ["a", "c"]);
  map.close();
});

Deno.test("a watch's loads update the endpoints' load without a lookup, noting this client's calls under way at the report", async () => {
  const reg = registry([{ ...a, load: 4 }, b]);
  const health = new HealthBook();
  const map = new ClusterMap("hello", reg.source, { health });
  health.of(a.url).started();
  const first = await map.endpoints();
  assert.deepEqual(first.map((e) => [e.id, e.load, e.inFlightAtLoad]), [
    ["a", 4, 1],
    ["b", null, 0],
  ]);
  health.of(a.url).started();
  health.of(b.url).started();
  reg.watches[0].loads!([
    { name: "hello", id: "a", load: 9 },
    { name: "hello", id: "b", load: 2 },
    { name: "hello2", id: "a", load: 0 }, // another name under the prefix
    { name: "hello", id: "gone", load: 1 }, // not in the map
  ]);
  const after = map.candidates();
  assert.deepEqual(after.map((e) => [e.id, e.load, e.inFlightAtLoad]), [
    ["a", 9, 2],
    ["b", 2, 1],
  ]);
  assert.equal(after[0].stats.inFlight, 2);
  // A put with the same load keeps the calls noted at the report.
  health.of(a.url).started();
  reg.watches[0].push(put({ ...a, load: 9, modRevision: 6 }, 6));
  assert.equal(map.candidates()[0].inFlightAtLoad, 2);
  assert.equal(reg.calls, 1);
  map.close();
});
