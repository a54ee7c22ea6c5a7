import assert from "node:assert/strict";
import { LeaseKeeper, leaseSyncProblem } from "./lease_keeper.ts";

function clock(start = 0) {
  const c = { now: start, at: () => c.now };
  return c;
}

Deno.test("a keep-alive renews a lease: it is due only once its TTL passed since the last renewal", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("L");
  time.now = 900;
  keeper.keepAlive("L", 3);
  time.now = 1_899;
  assert.deepEqual(keeper.due([{ id: "L", ttlMs: 1_000 }]), []);
  assert.equal(keeper.remainingMs("L", 1_000), 1);
  assert.equal(keeper.load("L"), 3);
  time.now = 1_900;
  assert.deepEqual(keeper.due([{ id: "L", ttlMs: 1_000 }]), ["L"]);
});

Deno.test("a lease being expired is not due twice, reports no time left, and can be timed again", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("L");
  time.now = 2_000;
  const leases = [{ id: "L", ttlMs: 1_000 }];
  assert.deepEqual(keeper.due(leases), ["L"]);
  keeper.markExpiring(["L"]);
  assert.equal(keeper.isExpiring("L"), true);
  assert.equal(keeper.remainingMs("L", 1_000), 0);
  assert.deepEqual(keeper.due(leases), []);
  keeper.unmarkExpiring(["L"]);
  assert.deepEqual(keeper.due(leases), ["L"]);
  keeper.removed("L");
  assert.equal(keeper.size, 0);
});

Deno.test("Rafter over etcd 9395/13294: a new leader starts from the synced renewal times, crediting only the leaderless gap", () => {
  const time = clock(10_000);
  const follower = new LeaseKeeper({ tickMs: 100, now: time.at });
  const ttlMs = 3_000;
  // The old leader's last sync, at 20_000: "dead" renewed 1_000 ms ago,
  // "alive" 100 ms ago.
  time.now = 20_000;
  follower.absorb({
    term: 4,
    full: true,
    renewed: [["dead", 1_000, null], ["alive", 100, 0.2]],
  });
  assert.equal(follower.load("alive"), 0.2);
  // The leader dies; this node wins the election 1_500 ms later.
  time.now = 21_500;
  assert.equal(follower.becomeLeader(), 1_500);
  const leases = [{ id: "dead", ttlMs }, { id: "alive", ttlMs }];
  // The dead server's last renewal was at 19_000: it expires at
  // 19_000 + TTL + the 1_500 ms gap, not a whole TTL after the election.
  time.now = 23_499;
  assert.deepEqual(follower.due(leases), []);
  time.now = 23_500;
  assert.deepEqual(follower.due(leases), ["dead"]);
  assert.ok(23_500 <= 19_000 + ttlMs + 1_500 + 100);
  // The live server reaches the new leader and keeps its lease.
  follower.keepAlive("alive");
  time.now = 26_000;
  assert.deepEqual(follower.due([{ id: "alive", ttlMs }]), []);
});

Deno.test("a leader that stalls does not count the stall against any lease", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at, stallTicks: 3 });
  keeper.granted("L");
  keeper.becomeLeader();
  time.now = 100;
  assert.equal(keeper.tickLeader(), 0);
  time.now = 400; // 3 ticks: not a stall
  assert.equal(keeper.tickLeader(), 0);
  // SIGSTOP for 5 s: keep-alives sent meanwhile could not be read.
  time.now = 5_400;
  assert.equal(keeper.tickLeader(), 4_900);
  assert.deepEqual(keeper.due([{ id: "L", ttlMs: 1_000 }]), []);
  assert.equal(keeper.remainingMs("L", 1_000), 500);
});

Deno.test("sync sends the leases renewed since the last one, or all of them when full", () => {
  const time = clock();
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("A");
  keeper.granted("B");
  keeper.becomeLeader();
  // The first sync after an election carries every lease.
  assert.deepEqual(keeper.sync(3, false).renewed.map(([id]) => id).sort(), [
    "A",
    "B",
  ]);
  assert.deepEqual(keeper.sync(3, false).renewed, []);
  time.now = 50;
  keeper.keepAlive("B", 7);
  time.now = 80;
  assert.deepEqual(keeper.sync(3, false), {
    term: 3,
    full: false,
    renewed: [["B", 30, 7]],
  });
  assert.deepEqual(keeper.sync(3, true).renewed, [["A", 80, null], [
    "B",
    30,
    7,
  ]]);
});

Deno.test("a follower's full sync drops leases the leader no longer times; a late grant keeps the synced time", () => {
  const time = clock(1_000);
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.granted("old");
  keeper.absorb({ term: 1, full: false, renewed: [["new", 400, null]] });
  // The grant of "new" is applied here after the sync: it keeps 600.
  time.now = 1_100;
  keeper.granted("new");
  assert.equal(keeper.remainingMs("new", 1_000), 500);
  keeper.absorb({ term: 1, full: true, renewed: [["new", 0, null]] });
  assert.equal(keeper.size, 1);
});

Deno.test("restored lease times never leave less than the minimum", () => {
  const time = clock(0);
  const keeper = new LeaseKeeper({ tickMs: 100, now: time.at });
  keeper.restoreTimes(
    [["A", 100], ["B", 4_000], ["gone", 10]],
    (id) => (id === "gone" ? undefined : 5_000),
    1_000,
  );
  assert.equal(keeper.remainingMs("A", 5_000), 1_000);
  assert.equal(keeper.remainingMs("B", 5_000), 4_000);
  assert.deepEqual(keeper.remainingTimes([{ id: "A", ttlMs: 5_000 }]), [[
    "A",
    1_000,
  ]]);
});

Deno.test("leaseSyncProblem refuses malformed syncs", () => {
  assert.equal(
    leaseSyncProblem({ term: 1, full: false, renewed: [["a", 1, null]] }),
    null,
  );
  for (
    const bad of [
      null,
      [],
      { term: -1, full: false, renewed: [] },
      { term: 1, full: "no", renewed: [] },
      { term: 1, full: false, renewed: {} },
      { term: 1, full: false, renewed: [["", 1, null]] },
      { term: 1, full: false, renewed: [["a", -1, null]] },
      { term: 1, full: false, renewed: [["a", 1, "x"]] },
      { term: 1, full: false, renewed: [["a", Infinity, null]] },
    ]
  ) {
    assert.notEqual(leaseSyncProblem(bad), null, JSON.stringify(bad));
  }
});
