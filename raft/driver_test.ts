import assert from "node:assert/strict";
import { CommittedEntryConflictError, RaftCore } from "./core.ts";
import {
  AMORTIZE_FROM_CHARS,
  RaftDriver,
  type RaftDriverOptions,
  type RaftStorage,
  RaftUnavailableError,
  type StorageWrite,
} from "./driver.ts";
import type { Message } from "./types.ts";
import {
  appendMessage,
  DriverHarness,
  HandClock,
} from "../testing/raft_harness.ts";

/** Storage whose writes complete when the test says. */
class HeldStorage implements RaftStorage {
  writes: StorageWrite[] = [];
  #done: ((error?: unknown) => void) | null = null;
  persist(write: StorageWrite, done: (error?: unknown) => void): void {
    this.writes.push(write);
    this.#done = done;
  }
  complete(error?: unknown): void {
    const done = this.#done;
    this.#done = null;
    done?.(error);
  }
}

/**
 * A single-node driver n1 on {@link HeldStorage} and a {@link HandClock},
 * sending nothing and applying nothing unless `options` say otherwise.
 */
function heldDriver(options: Partial<RaftDriverOptions<unknown>> = {}) {
  const storage = new HeldStorage();
  const clock = new HandClock();
  const core = new RaftCore({ id: "n1", voters: ["n1"] });
  const driver = new RaftDriver({
    core,
    storage,
    network: { send: () => {} },
    clock,
    apply: () => {},
    ...options,
  });
  return { storage, clock, core, driver };
}

const instant: RaftStorage = { persist: (_write, done) => done() };

/** n1's heartbeat in term 1, which makes n2 a follower that knows n1 leads. */
const heartbeatFromN1: Message = appendMessage();

/** Lets settled promises' callbacks run. */
const microtasks = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("a proposal resolves with the state machine's result once applied", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const result = nodes.get("n1").propose("x");
  nodes.deliver();
  assert.equal(await result, "applied x");
  assert.equal(nodes.get("n1").appliedIndex, 2);
});

Deno.test("§5.2 a proposal pending on a leader that loses leadership fails at once, retryable, not at its timeout", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const timersBefore = nodes.clock.timers;
  // n1 is cut off with an uncommitted proposal; n2 wins a new term.
  const fromN1 = (m: Message) => m.from !== "n1";
  const proposal = nodes.get("n1").propose("lost?");
  let outcome: unknown = "pending";
  proposal.then((v) => outcome = v, (e) => outcome = e);
  nodes.deliver(fromN1);
  assert.equal(nodes.clock.timers, timersBefore + 1, "its timeout was armed");
  for (let i = 0; i < 10; i++) { // past their lease (§4.2.3), no campaign
    nodes.get("n2").tick();
    nodes.get("n3").tick();
  }
  nodes.get("n2").core.campaign();
  nodes.deliver((m) => fromN1(m) || m.type === "voteResponse");
  assert.equal(nodes.get("n2").core.role, "leader");
  assert.equal(nodes.get("n1").core.role, "follower");
  await microtasks();
  // No timer fired (the hand clock fires none), yet the proposal failed.
  assert.ok(outcome instanceof RaftUnavailableError, String(outcome));
  assert.match(
    (outcome as Error).message,
    /^leadership lost \(term 1\) before the proposal at index 2 committed; it may still commit, retry if the write is idempotent$/,
  );
  // It was appended and may still commit: the outcome is unknown.
  assert.equal((outcome as RaftUnavailableError).applied, "unknown");
});

Deno.test("dissertation §4.1 proposeConfChange resolves with the new configuration; apply never sees the entry; onConfiguration reports it first", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  const seen: string[] = [];
  const applied: string[] = [];
  const driver = new RaftDriver({
    core: new RaftCore({ id: "n1", voters: ["n1", "n2", "n3"] }),
    storage: instant,
    network: {
      send: (messages) => {
        seen.push(...messages.map((m) => `send ${m.type} ${m.to}`));
        nodes.queue.push(...messages);
      },
    },
    clock: nodes.clock,
    apply: (entry) => {
      applied.push(entry.data);
      return entry.data;
    },
    onConfiguration: (c) =>
      seen.push(`config ${c.voters.join(",")} / ${c.learners.join(",")}`),
  });
  nodes.drivers.set("n1", driver);
  driver.core.campaign();
  nodes.deliver();
  const x = driver.propose("x");
  nodes.deliver();
  assert.equal(await x, "x");
  const change = driver.proposeConfChange({ type: "addLearner", node: "n4" });
  nodes.deliver((m) => m.to !== "n4");
  assert.deepEqual(await change, {
    voters: ["n1", "n2", "n3"],
    learners: ["n4"],
  });
  assert.deepEqual(applied, ["", "x"]);
  const config = seen.indexOf("config n1,n2,n3 / n4");
  assert.ok(config >= 0, seen.join("; "));
  assert.ok(
    seen.indexOf("send append n4") > config,
    "the new learner is sent appends only after onConfiguration",
  );
  // A second change while none is pending is fine; a refused one rejects.
  await assert.rejects(
    driver.proposeConfChange({ type: "addLearner", node: "n4" }),
    /ConfChangeError|already|nothing/i,
  );
});

Deno.test("MustSync: a write whose only change is the commit index is marked mustSync false; entries, a new term or a vote are not", () => {
  const { storage, driver } = heldDriver();
  driver.core.campaign(); // term 1, vote n1, the leader's empty entry
  driver.process();
  assert.equal(storage.writes.length, 1);
  assert.equal(storage.writes[0].mustSync, true);
  storage.complete();
  driver.process(); // the entry is durable: it commits (commit 0 -> 1)
  const last = storage.writes.at(-1)!;
  assert.equal(storage.writes.length, 2);
  assert.deepEqual(last.entries, []);
  assert.equal(last.hardState?.commit, 1);
  assert.equal(last.mustSync, false);
});

Deno.test("a proposal on a follower rejects at once with NotLeaderError", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  await assert.rejects(nodes.get("n2").propose("x"), /the leader is n1/);
});

Deno.test("Raft paper Figure 2: nothing is sent or applied before the write is durable", () => {
  const storage = new HeldStorage();
  const clock = new HandClock();
  const sent: Message[] = [];
  const core = new RaftCore({ id: "n1", voters: ["n1", "n2", "n3"] });
  const driver = new RaftDriver({
    core,
    storage,
    network: { send: (messages) => sent.push(...messages) },
    clock,
    apply: () => {},
  });
  core.campaign();
  clock.run();
  assert.deepEqual(storage.writes, [{
    hardState: { term: 1, vote: "n1", commit: 0 },
    entries: [],
    mustSync: true,
  }]);
  assert.equal(driver.persisting, true);
  assert.equal(sent.length, 0, "no vote request before the vote is durable");
  driver.tick(); // work arriving meanwhile waits for the next Ready
  clock.run();
  assert.equal(storage.writes.length, 1, "one write in flight at a time");
  storage.complete();
  assert.deepEqual(sent.map((m) => `${m.type}>${m.to}`), [
    "vote>n2",
    "vote>n3",
  ]);
  assert.equal(driver.persisting, false);
});

Deno.test("dissertation §6.4 ReadIndex: a restarted node's read is not completed by the leader's late answer to the previous incarnation's read", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const sent: Message[] = [];
  const follower = () =>
    new RaftDriver({
      core: new RaftCore({ id: "n2", voters: ["n1", "n2", "n3"] }),
      storage: instant,
      network: { send: (messages) => sent.push(...messages) },
      clock: nodes.clock,
      apply: () => {},
    });
  // Learns the leader from a heartbeat, then asks for a read index.
  const heartbeat = heartbeatFromN1;
  const first = follower();
  first.step([heartbeat]);
  nodes.clock.run();
  first.readIndex().catch(() => {});
  nodes.clock.run();
  const firstAsk = sent.find((m) => m.type === "readIndex")!;
  await first.stop();
  sent.length = 0;

  const second = follower(); // the node restarted
  second.step([heartbeat]);
  nodes.clock.run();
  let served: number | null = null;
  second.readIndex().then((index) => served = index, () => {});
  nodes.clock.run();
  const secondAsk = sent.find((m) => m.type === "readIndex")!;
  assert.ok(firstAsk.type === "readIndex" && secondAsk.type === "readIndex");
  assert.notEqual(secondAsk.context, firstAsk.context);
  // The leader's answer to the first incarnation's read arrives late.
  second.step([{
    type: "readIndexResponse",
    from: "n1",
    to: "n2",
    term: 1,
    context: firstAsk.context,
    index: 0,
  }]);
  nodes.clock.run();
  await microtasks();
  assert.equal(served, null, "the new read still waits for its own answer");
  await second.stop();
});

Deno.test("dissertation §6.4 ReadIndex batching: a follower asks one round at a time; the reads arriving while it is pending share the next", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const follower = nodes.get("n2");
  const served: number[] = [];
  const read = () => follower.readIndex().then((i) => served.push(i));
  const first = [read(), read()]; // the same turn: one request
  nodes.clock.run();
  const asks = () => nodes.queue.filter((m) => m.type === "readIndex");
  assert.equal(asks().length, 1, "one request for the two reads");
  const firstAsk = asks()[0];
  nodes.queue = nodes.queue.filter((m) => m !== firstAsk);
  const later = [read(), read(), read()]; // while the round is pending
  nodes.clock.run();
  assert.equal(asks().length, 0, "no request while one is pending");
  nodes.queue.push(firstAsk);
  let requests = 0;
  // The leader confirms; the next round goes out and back.
  nodes.deliver((m) => {
    if (m.type === "readIndex") requests++;
    return true;
  });
  await Promise.all([...first, ...later]);
  assert.deepEqual(served, [1, 1, 1, 1, 1]);
  assert.equal(requests, 2, "the held request and one for the three later");
});

Deno.test("dissertation §6.4 ReadIndex batching: on the leader, reads arriving during a heartbeat round share the next round", async () => {
  const nodes = new DriverHarness(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const leader = nodes.get("n1");
  const rounds = () =>
    new Set(
      nodes.queue.flatMap((m) =>
        m.type === "append" && m.context !== undefined ? [m.context] : []
      ),
    );
  const reads = [leader.readIndex()];
  nodes.clock.run();
  assert.equal(rounds().size, 1);
  for (let i = 0; i < 10; i++) reads.push(leader.readIndex());
  nodes.clock.run();
  assert.equal(rounds().size, 1, "the ten later reads wait for the round");
  const heartbeats = nodes.queue;
  nodes.queue = [];
  for (const m of heartbeats) nodes.get(m.to).step([m]);
  nodes.clock.run(); // the acks
  const acks = nodes.queue;
  nodes.queue = [];
  for (const m of acks) leader.step([m]);
  nodes.clock.run();
  assert.equal(rounds().size, 1, "one round for the ten");
  nodes.deliver();
  assert.deepEqual(await Promise.all(reads), Array(11).fill(1));
});

Deno.test("dissertation §6.4 ReadIndex batching: a follower whose request was lost asks again with the same context", async () => {
  const timers: (() => void)[] = [];
  const clock = new class extends HandClock {
    override setTimeout(callback?: () => void): unknown {
      return timers.push(callback!);
    }
  }();
  const sent: Message[] = [];
  const follower = new RaftDriver({
    core: new RaftCore({ id: "n2", voters: ["n1", "n2", "n3"] }),
    storage: instant,
    network: { send: (messages) => sent.push(...messages) },
    clock,
    apply: () => {},
  });
  follower.step([heartbeatFromN1]);
  clock.run();
  const read = follower.readIndex();
  clock.run();
  const asks = () => sent.filter((m) => m.type === "readIndex");
  assert.equal(asks().length, 1);
  // timers[0] is the read's timeout, timers[1] the round's retry.
  assert.equal(timers.length, 2);
  timers[1]();
  clock.run();
  assert.equal(asks().length, 2, "asked again");
  const [a, b] = asks() as Extract<Message, { type: "readIndex" }>[];
  assert.equal(b.context, a.context);
  follower.step([{
    type: "readIndexResponse",
    from: "n1",
    to: "n2",
    term: 1,
    context: a.context,
    index: 0,
  }]);
  clock.run();
  assert.equal(await read, 0);
  await follower.stop();
});

Deno.test("a storage failure stops the driver, reports it and fails what waits", async () => {
  const fatal: unknown[] = [];
  const { storage, clock, core, driver } = heldDriver({
    onFatal: (error) => fatal.push(error),
  });
  core.campaign();
  // Pending when storage failed: it may have reached other members.
  const proposalFailed = assert.rejects(
    driver.propose("x"),
    (error: unknown) =>
      error instanceof RaftUnavailableError && error.applied === "unknown",
  );
  clock.run();
  const stopped = driver.stop(); // waits for the write in flight
  let stoppedYet = false;
  stopped.then(() => stoppedYet = true);
  await microtasks();
  assert.equal(stoppedYet, false);
  storage.complete(new Error("disk full"));
  await stopped;
  await proposalFailed;
  assert.equal(fatal.length, 0, "stopped before the failure: not reported");

  const second = new RaftDriver({
    core: new RaftCore({ id: "n1", voters: ["n1"] }),
    storage,
    network: { send: () => {} },
    clock,
    apply: () => {},
    onFatal: (error) => fatal.push(error),
  });
  second.core.campaign();
  const pendingFailed = assert.rejects(
    second.propose("y"),
    /the Raft node stopped/,
  );
  clock.run();
  storage.complete(new Error("disk full"));
  assert.equal(second.stopped, true);
  assert.match(String(fatal[0]), /disk full/);
  await pendingFailed;
  await assert.rejects(second.propose("z"), /the Raft node stopped/);
});

Deno.test("§5.4 an append contradicting a committed entry stops the driver once, reports the sender, and fails what waits", async () => {
  const fatal: unknown[] = [];
  const { clock, core, driver, storage } = heldDriver({
    onFatal: (error) => fatal.push(error),
  });
  core.campaign();
  clock.run();
  storage.complete(); // entry 1 (term 1) is committed
  assert.equal(core.commitIndex, 1);
  const waiting = assert.rejects(driver.propose("x"), RaftUnavailableError);
  clock.run();
  const forged = appendMessage({
    from: "n9",
    to: "n1",
    term: 4,
    prevLogIndex: 1,
    prevLogTerm: 3,
  });
  // Before the fix this threw out of step() on every retry of the sender.
  driver.step([forged]);
  assert.equal(driver.stopped, true);
  assert.equal(fatal.length, 1);
  const error = fatal[0];
  assert.ok(error instanceof CommittedEntryConflictError);
  assert.deepEqual(
    [error.index, error.localTerm, error.claimedTerm, error.from],
    [1, 1, 3, "n9"],
  );
  await waiting;
  driver.step([forged]);
  driver.tick();
  assert.equal(fatal.length, 1, "reported once");
  assert.equal(core.term, 1);
});

// --- snapshots ---------------------------------------------------------------------

Deno.test("§7 the driver snapshots every N applied entries; storage has it durable before the core does, and the log keeps trailingEntries", () => {
  const state: string[] = [];
  const { storage, clock, core, driver } = heldDriver({
    apply: (entry) => {
      if (entry.data !== "") state.push(entry.data);
    },
    snapshot: {
      take: () => JSON.stringify(state),
      everyEntries: 5,
      trailingEntries: 2,
    },
  });
  core.campaign();
  clock.run();
  storage.complete(); // the empty entry of term 1
  for (let i = 1; i <= 4; i++) driver.propose(`e${i}`);
  for (let i = 0; i < 20 && !storage.writes.at(-1)?.snapshot; i++) {
    clock.run();
    storage.complete();
  }
  // 5 entries applied (the empty one and e1..e4): a snapshot write follows.
  const write = storage.writes.at(-1)!;
  assert.deepEqual(write.entries, []);
  assert.equal(write.hardState, undefined);
  assert.deepEqual(write.snapshot, {
    index: 5,
    term: 1,
    data: '["e1","e2","e3","e4"]',
    configuration: { voters: ["n1"], learners: [] },
  });
  assert.deepEqual(write.compactTo, { index: 3, term: 1 });
  // Not durable yet: the core neither holds it nor compacted its log.
  assert.equal(core.snapshotConfiguration, null);
  assert.equal(core.snapshotPoint.index, 0);
  assert.equal(driver.snapshotIndex, 0);
  const writes = storage.writes.length;
  driver.propose("e5");
  clock.run();
  assert.equal(storage.writes.length, writes, "no write while it is in flight");
  storage.complete();
  assert.equal(driver.snapshotIndex, 5);
  assert.deepEqual(core.snapshotPoint, { index: 3, term: 1 });
  assert.equal(core.entryAt(4)?.data, "e3", "the trailing window is kept");
  // Then the Ready that waited goes on.
  clock.run();
  assert.equal(storage.writes.at(-1)!.entries[0]?.data, "e5");
});

Deno.test("§7 InstallSnapshot through the driver: the follower stores the snapshot first, restores the state machine, then applies what follows", () => {
  const c = new DriverHarness(["n1", "n2", "n3"], {
    snapshot: { everyEntries: 4, trailingEntries: 0 },
  });
  const nodes = c.nodes;
  const deliver = (keep: (m: Message) => boolean) => c.deliver(keep, 200);
  const leader = nodes.get("n1")!.driver;
  leader.core.campaign();
  deliver(() => true);
  const n3Cut = (m: Message) => m.to !== "n3" && m.from !== "n3";
  for (let i = 1; i <= 10; i++) {
    leader.propose(`v${i}`);
    deliver(n3Cut);
  }
  assert.ok(leader.core.snapshotPoint.index >= 8, "the leader compacted");
  const n3 = nodes.get("n3")!;
  assert.deepEqual(n3.state, []);
  // n3 is back: its next index is compacted, so it gets the snapshot.
  for (let i = 0; i < 3; i++) {
    leader.tick();
    deliver(() => true);
  }
  leader.propose("after");
  deliver(() => true);
  assert.deepEqual(n3.state, nodes.get("n1")!.state);
  assert.deepEqual(n3.state.at(-1), "after");
  assert.equal(n3.restored.length, 1);
  const installed = n3.writes.find((w) => w.snapshot !== undefined)!;
  assert.equal(installed.snapshot!.index, n3.restored[0]);
  assert.deepEqual(installed.compactTo, {
    index: installed.snapshot!.index,
    term: installed.snapshot!.term,
  });
  assert.equal(installed.discardLog, true, "n3 held nothing after the point");
  assert.equal(installed.received, true, "marked as received");
  // The leader's own snapshots are not.
  const taken = nodes.get("n1")!.writes.filter((w) => w.snapshot !== undefined);
  assert.ok(taken.length > 0 && taken.every((w) => w.received === undefined));
  assert.deepEqual(installed.snapshot!.configuration, {
    voters: ["n1", "n2", "n3"],
    learners: [],
  });
  assert.ok(n3.driver.snapshotIndex >= n3.restored[0]);
  assert.equal(n3.driver.appliedIndex, leader.appliedIndex);
});

Deno.test("§7 a driver without restore() stops with a clear error when the leader sends it a snapshot", () => {
  const c = new DriverHarness(["n1", "n2", "n3"], {
    snapshot: { everyEntries: 2, trailingEntries: 0 },
    withoutRestore: "n3",
  });
  const { nodes, errors } = c;
  const deliver = (keep: (m: Message) => boolean) => c.deliver(keep, 200);
  const leader = nodes.get("n1")!.driver;
  leader.core.campaign();
  deliver(() => true);
  for (let i = 0; i < 4; i++) {
    leader.propose(`x${i}`);
    deliver((m) => m.to !== "n3");
  }
  assert.ok(leader.core.snapshotPoint.index > 0);
  for (let i = 0; i < 3 && errors.length === 0; i++) {
    leader.tick();
    deliver(() => true);
  }
  assert.equal(errors.length, 1);
  assert.match(
    String(errors[0]),
    /received a snapshot at index \d+ from the leader, but no restore\(\) was given to install it; pass RaftDriverOptions.restore/,
  );
  assert.equal(nodes.get("n3")!.driver.stopped, true);
});

Deno.test("§7 a large state is snapshotted again only once the data applied since is growthFraction of it; a small one every N entries", () => {
  const run = (stateChars: number, growthFraction?: number) => {
    const taken: number[] = [];
    const { storage, clock, core, driver } = heldDriver({
      snapshot: {
        take: () => {
          taken.push(driver.appliedIndex);
          return "x".repeat(stateChars);
        },
        everyEntries: 2,
        trailingEntries: 0,
        growthFraction,
      },
    });
    core.campaign();
    clock.run();
    storage.complete();
    // Entries of 100 k chars each, one at a time.
    for (let i = 0; i < 12; i++) {
      driver.propose("d".repeat(100_000));
      for (let j = 0; j < 5 && (clock.run(), storage.writes.length > 0); j++) {
        storage.complete();
      }
    }
    return taken;
  };
  // 10 k chars: below AMORTIZE_FROM_CHARS, every 2 entries.
  assert.deepEqual(run(10_000), [2, 4, 6, 8, 10, 12]);
  // 1.6 M chars: after the first, not before 800 k chars (8 entries) since.
  assert.ok(AMORTIZE_FROM_CHARS <= 1_600_000);
  assert.deepEqual(run(1_600_000), [2, 10]);
  // Off: every 2 entries again.
  assert.deepEqual(run(1_600_000, 0), [2, 4, 6, 8, 10, 12]);
});

Deno.test("§7 snapshot policy values are checked", () => {
  for (
    const [policy, message] of [
      [
        { everyEntries: 0 },
        /snapshot.everyEntries must be an integer >= 1, got 0/,
      ],
      [{ everyBytes: 1.5 }, /snapshot.everyBytes must be an integer >= 1/],
      [
        { trailingEntries: -1 },
        /snapshot.trailingEntries must be an integer >= 0/,
      ],
      [
        { growthFraction: -0.5 },
        /snapshot.growthFraction must be a number >= 0, got -0.5/,
      ],
    ] as const
  ) {
    assert.throws(
      () =>
        new RaftDriver({
          core: new RaftCore({ id: "n1", voters: ["n1"] }),
          storage: instant,
          network: { send: () => {} },
          clock: new HandClock(),
          apply: () => {},
          snapshot: { take: () => "", ...policy },
        }),
      message,
    );
  }
});

Deno.test("a storage failure's error reaches every call: what waits and what comes later are told storage failed, with the storage's message and cause", async () => {
  const { storage, clock, core, driver } = heldDriver({ onFatal: () => {} });
  core.campaign();
  const full = Object.assign(
    new Error(
      "write-ahead log /d/wal/1.wal: write failed: disk full (ENOSPC). Free space",
    ),
    { code: "ENOSPC" },
  );
  const pending = driver.propose("x");
  pending.catch(() => {});
  clock.run();
  storage.complete(full);
  for (
    const [call, applied] of [[pending, "unknown"], [
      driver.propose("y"),
      false,
    ]] as const
  ) {
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof RaftUnavailableError);
      assert.equal(error.reason, "storageFailed");
      assert.equal(error.applied, applied);
      assert.equal(error.cause, full);
      assert.match(
        error.message,
        /^the Raft node stopped: its storage failed: write-ahead log \/d\/wal\/1\.wal: write failed: disk full \(ENOSPC\)/,
      );
      return true;
    });
  }
  await assert.rejects(driver.readIndex(), /its storage failed: .*ENOSPC/);
  await driver.stop();
});
