import assert from "node:assert/strict";
import { RaftCore } from "./core.ts";
import {
  type RaftClock,
  RaftDriver,
  type RaftStorage,
  RaftUnavailableError,
  type StorageWrite,
} from "./driver.ts";
import type { Message, NodeId } from "./types.ts";

/** A clock that never fires timers; deferred work runs at `run()`. */
class HandClock implements RaftClock {
  deferred: (() => void)[] = [];
  timers = 0;
  setTimeout(): unknown {
    return ++this.timers;
  }
  clearTimeout(): void {}
  defer(callback: () => void): void {
    this.deferred.push(callback);
  }
  run(): void {
    for (let i = 0; i < 100 && this.deferred.length > 0; i++) {
      const work = this.deferred;
      this.deferred = [];
      for (const callback of work) callback();
    }
  }
}

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

const instant: RaftStorage = { persist: (_write, done) => done() };

/** Drivers on instant storage, connected by a queue the test delivers. */
class Nodes {
  readonly clock = new HandClock();
  readonly drivers = new Map<NodeId, RaftDriver<string>>();
  queue: Message[] = [];

  constructor(ids: NodeId[]) {
    for (const id of ids) {
      this.drivers.set(
        id,
        new RaftDriver({
          core: new RaftCore({ id, voters: ids, random: () => 0.5 }),
          storage: instant,
          network: { send: (messages) => this.queue.push(...messages) },
          clock: this.clock,
          apply: (entry) => `applied ${entry.data}`,
          onFatal: (error) => {
            throw error;
          },
        }),
      );
    }
  }

  get(id: NodeId): RaftDriver<string> {
    return this.drivers.get(id)!;
  }

  /** Delivers until quiet, dropping messages `keep` rejects. */
  deliver(keep: (m: Message) => boolean = () => true): void {
    for (let round = 0; round < 100; round++) {
      this.clock.run();
      if (this.queue.length === 0) return;
      const batch = this.queue;
      this.queue = [];
      for (const message of batch.filter(keep)) {
        this.get(message.to).step([message]);
      }
    }
    throw new Error("messages never stopped flowing");
  }
}

/** Lets settled promises' callbacks run. */
const microtasks = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("a proposal resolves with the state machine's result once applied", async () => {
  const nodes = new Nodes(["n1", "n2", "n3"]);
  nodes.get("n1").core.campaign();
  nodes.deliver();
  const result = nodes.get("n1").propose("x");
  nodes.deliver();
  assert.equal(await result, "applied x");
  assert.equal(nodes.get("n1").appliedIndex, 2);
});

Deno.test("§5.2 a proposal pending on a leader that loses leadership fails at once, retryable, not at its timeout", async () => {
  const nodes = new Nodes(["n1", "n2", "n3"]);
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
});

Deno.test("dissertation §4.1 proposeConfChange resolves with the new configuration; apply never sees the entry; onConfiguration reports it first", async () => {
  const nodes = new Nodes(["n1", "n2", "n3"]);
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
  const storage = new HeldStorage();
  const driver = new RaftDriver({
    core: new RaftCore({ id: "n1", voters: ["n1"] }),
    storage,
    network: { send: () => {} },
    clock: new HandClock(),
    apply: () => undefined,
  });
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
  const nodes = new Nodes(["n1", "n2", "n3"]);
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
  const nodes = new Nodes(["n1", "n2", "n3"]);
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
  const heartbeat: Message = {
    type: "append",
    from: "n1",
    to: "n2",
    term: 1,
    prevLogIndex: 0,
    prevLogTerm: 0,
    entries: [],
    commit: 0,
  };
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

Deno.test("a storage failure stops the driver, reports it and fails what waits", async () => {
  const storage = new HeldStorage();
  const clock = new HandClock();
  const fatal: unknown[] = [];
  const core = new RaftCore({ id: "n1", voters: ["n1"] });
  const driver = new RaftDriver({
    core,
    storage,
    network: { send: () => {} },
    clock,
    apply: () => {},
    onFatal: (error) => fatal.push(error),
  });
  core.campaign();
  const proposalFailed = assert.rejects(
    driver.propose("x"),
    RaftUnavailableError,
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
