import assert from "node:assert/strict";
import { LeaseKeeper, leaseSyncProblem } from "./lease_keeper.ts";

function clock(start = 0) {
  const c = { now: start, at: () => c.now };
  return c;
}

Deno.test("a keep-alive renews a lease: it is due only once its TTL passed since the last renewal", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("L", 1_000);
  time.now = 900;
  keeper.keepAlive("L", 3);
  time.now = 1_899;
  assert.deepEqual(keeper.due(), []);
  assert.equal(keeper.remainingMs("L", 1_000), 1);
  assert.equal(keeper.load("L"), 3);
  time.now = 1_900;
  assert.deepEqual(keeper.due(), ["L"]);
});

Deno.test("due() scans only once the earliest expiry it knows has come, and never misses one", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("long", 10_000);
  keeper.granted("short", 1_000);
  assert.deepEqual(keeper.due(), []);
  time.now = 999;
  assert.deepEqual(keeper.due(), []);
  time.now = 1_000;
  assert.deepEqual(keeper.due(), ["short"]);
  keeper.removed("short");
  // A lease granted later with an earlier expiry than the one known is
  // still found in time.
  time.now = 2_000;
  keeper.granted("soon", 500);
  time.now = 2_500;
  assert.deepEqual(keeper.due(), ["soon"]);
  keeper.removed("soon");
  time.now = 10_000;
  assert.deepEqual(keeper.due(), ["long"]);
});

Deno.test("a lease being expired is not due twice, reports no time left, and can be timed again", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("L", 1_000);
  time.now = 2_000;
  assert.deepEqual(keeper.due(), ["L"]);
  keeper.markExpiring(["L"]);
  assert.equal(keeper.isExpiring("L"), true);
  assert.equal(keeper.remainingMs("L", 1_000), 0);
  assert.deepEqual(keeper.due(), []);
  keeper.unmarkExpiring(["L"]);
  assert.deepEqual(keeper.due(), ["L"]);
  keeper.removed("L");
  assert.equal(keeper.size, 0);
});

Deno.test("Rafter over etcd 9395/13294: a new leader starts from the synced renewal times, crediting only the leaderless gap", () => {
  const time = clock(10_000);
  const follower = new LeaseKeeper({ tickMs: 100, now: time.at });
  const ttlMs = 3_000;
  follower.granted("dead", ttlMs);
  follower.granted("alive", ttlMs);
  // The old leader's last sync, at 20_000: "dead" renewed 1_000 ms ago,
  // "alive" 100 ms ago.
  time.now = 20_000;
  follower.absorb({
    term: 4,
    renewed: [["dead", 1_000, null], ["alive", 100, 0.2]],
  });
  assert.equal(follower.load("alive"), 0.2);
  // The leader dies; this node wins the election 1_500 ms later.
  time.now = 21_500;
  assert.equal(follower.becomeLeader(), 1_500);
  // The dead server's last renewal was at 19_000: it expires at
  // 19_000 + TTL + the 1_500 ms gap, not a whole TTL after the election.
  time.now = 23_499;
  assert.deepEqual(follower.due(), []);
  time.now = 23_500;
  assert.deepEqual(follower.due(), ["dead"]);
  // The live server reaches the new leader and keeps its lease.
  follower.keepAlive("alive");
  time.now = 26_000;
  assert.deepEqual(follower.due(), ["dead"]);
});

Deno.test("a leader that stalls does not count the stall against any lease", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at, stallTicks: 3 });
  keeper.granted("L", 1_000);
  keeper.becomeLeader();
  time.now = 100;
  assert.equal(keeper.tickLeader(), 0);
  time.now = 400; // 3 ticks: not a stall
  assert.equal(keeper.tickLeader(), 0);
  // SIGSTOP for 5 s: keep-alives sent meanwhile could not be read.
  time.now = 5_400;
  assert.equal(keeper.tickLeader(), 4_900);
  assert.deepEqual(keeper.due(), []);
  assert.equal(keeper.remainingMs("L", 1_000), 500);
});

Deno.test("sync sends the leases renewed since the last one and a rolling slice of all, covering every lease in rollTicks ticks", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at, rollTicks: 4 });
  for (let i = 0; i < 8; i++) keeper.granted(`L${i}`, 5_000);
  keeper.becomeLeader();
  // The first sync after an election carries every lease.
  assert.equal(keeper.sync(3).renewed.length, 8);
  time.now = 50;
  keeper.keepAlive("L7", 7);
  time.now = 80;
  const next = keeper.sync(3);
  assert.deepEqual(next.renewed.find(([id]) => id === "L7"), ["L7", 30, 7]);
  // Two leases a tick (8 / 4), plus the renewed one.
  assert.deepEqual(next.renewed.map(([id]) => id).sort(), ["L2", "L3", "L7"]);
  const covered = new Set<string>();
  for (let tick = 0; tick < 4; tick++) {
    for (const [id] of keeper.sync(3).renewed) covered.add(id);
  }
  assert.equal(covered.size, 8);
});

Deno.test("a follower's late grant keeps the synced time", () => {
  const time = clock(1_000);
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.absorb({ term: 1, renewed: [["new", 400, null]] });
  // The grant of "new" is applied here after the sync: it keeps 600.
  time.now = 1_100;
  keeper.granted("new", 1_000);
  assert.equal(keeper.remainingMs("new", 1_000), 500);
});

Deno.test("restored lease times never leave less than the minimum", () => {
  const time = clock(0);
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("A", 5_000);
  keeper.granted("B", 5_000);
  keeper.restoreTimes([["A", 100], ["B", 4_000], ["gone", 10]], 1_000);
  assert.equal(keeper.remainingMs("A", 5_000), 1_000);
  assert.equal(keeper.remainingMs("B", 5_000), 4_000);
  assert.deepEqual(keeper.remainingTimes(), [["A", 1_000], ["B", 4_000]]);
});

Deno.test("leaseSyncProblem refuses malformed syncs", () => {
  assert.equal(leaseSyncProblem({ term: 1, renewed: [["a", 1, null]] }), null);
  for (
    const bad of [
      null,
      [],
      { term: -1, renewed: [] },
      { term: 1, renewed: {} },
      { term: 1, renewed: [["", 1, null]] },
      { term: 1, renewed: [["a", -1, null]] },
      { term: 1, renewed: [["a", 1, "x"]] },
      { term: 1, renewed: [["a", Infinity, null]] },
    ]
  ) {
    assert.notEqual(leaseSyncProblem(bad), null, JSON.stringify(bad));
  }
});

Deno.test("onLoadChange hears each load that changes, on the leader and from a sync, and not a repeated one", () => {
  const time = clock(0);
  const changes: [string, number | null][] = [];
  const keeper = new LeaseKeeper({
    tickMs: 100,
    now: time.at,
    onLoadChange: (id, load) => changes.push([id, load]),
  });
  keeper.granted("A", 5_000);
  keeper.keepAlive("A", 3);
  keeper.keepAlive("A", 3); // the same load: nothing to tell
  keeper.keepAlive("A"); // no load sent: kept
  keeper.keepAlive("A", 5);
  assert.deepEqual(changes, [["A", 3], ["A", 5]]);
  const follower = new LeaseKeeper({
    tickMs: 100,
    now: time.at,
    onLoadChange: (id, load) => changes.push([id, load]),
  });
  changes.length = 0;
  follower.absorb({ term: 1, renewed: [["A", 0, 5], ["B", 0, null]] });
  follower.absorb({ term: 1, renewed: [["A", 0, 5], ["B", 0, 1]] });
  follower.absorb({ term: 1, renewed: [["A", 0, null]] });
  assert.deepEqual(changes, [["A", 5], ["B", 1], ["A", null]]);
  assert.equal(follower.load("A"), null);
});
