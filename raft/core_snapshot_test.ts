import assert from "node:assert/strict";
import { RaftCore } from "./core.ts";
import { mulberry32 } from "./simulator.ts";
import { COMPACTED_TERM, MISSING_TERM, RaftLog } from "./log.ts";
import {
  entries,
  type Filter,
  messagesOf,
  RaftHarness,
  snapshotMessage,
} from "../testing/raft_harness.ts";
import type {
  AppendResponse,
  InstallSnapshotRequest,
  InstallSnapshotResponse,
  Message,
} from "./types.ts";

const chunksTo = (messages: Message[], to: string): InstallSnapshotRequest[] =>
  messagesOf(messages, "installSnapshot", to);

// --- the log's snapshot point ----------------------------------------------------

Deno.test("§7 log compaction: termAt tells a compacted index from a missing one", () => {
  const log = new RaftLog(entries(1, 1, 2, 2, 3));
  log.compact(3);
  assert.deepEqual(log.snapshot, { index: 3, term: 2 });
  assert.equal(log.firstIndex, 4);
  assert.equal(log.termAt(3), 2);
  assert.equal(log.termAt(2), COMPACTED_TERM);
  assert.equal(log.termAt(1), COMPACTED_TERM);
  assert.equal(log.termAt(0), 0, "the sentinel is never compacted");
  assert.equal(log.termAt(6), MISSING_TERM);
  assert.notEqual(COMPACTED_TERM, MISSING_TERM);
  assert.equal(log.entryAt(3), undefined);
  assert.deepEqual(log.slice(4, 5).map((e) => e.index), [4, 5]);
  assert.throws(() => log.slice(3, 5), /compacted/);
  log.compact(2); // at or below the snapshot point: nothing happens
  assert.equal(log.firstIndex, 4);
  // Only persisted entries may be compacted.
  log.appendNew(3, "new");
  assert.throws(() => log.compact(6), /persisted only to 5/);
  // A log reloaded from a snapshot and a trailing window.
  const reloaded = new RaftLog(entries(1, 1, 2, 2, 3), { index: 4, term: 2 });
  assert.deepEqual(
    [reloaded.firstIndex, reloaded.lastIndex, reloaded.stableIndex],
    [5, 5, 5],
  );
  assert.throws(
    () => new RaftLog(entries(1, 1, 2), { index: 2, term: 3 }),
    /the snapshot at that index has term 3/,
  );
  assert.throws(
    () => new RaftLog(entries(1, 1).slice(1), { index: 0, term: 0 }),
    /after a gap/,
  );
});

Deno.test("§7 receiver rules 6 and 7: restore keeps the log after a matching point, else discards it", () => {
  const kept = new RaftLog(entries(1, 1, 2, 2, 3));
  assert.equal(kept.restore({ index: 3, term: 2 }), true);
  assert.deepEqual([kept.firstIndex, kept.lastIndex], [4, 5]);
  const discarded = new RaftLog(entries(1, 1, 2, 2, 3));
  assert.equal(discarded.restore({ index: 3, term: 4 }), false);
  assert.deepEqual([discarded.firstIndex, discarded.lastIndex], [4, 3]);
  assert.equal(discarded.lastTerm, 4);
  const short = new RaftLog(entries(1));
  assert.equal(short.restore({ index: 9, term: 2 }), false);
  assert.deepEqual([short.lastIndex, short.stableIndex], [9, 9]);
});

// --- snapshotTaken and restart -----------------------------------------------------

Deno.test("§7 snapshotTaken keeps the snapshot, compacts to compactTo and checks its arguments", () => {
  const c = new RaftHarness(1);
  const core = c.elect("n1");
  for (let i = 0; i < 6; i++) core.propose(`e${i}`);
  c.flush();
  assert.equal(c.machines.get("n1")!.index, 7);
  const term = core.term;
  assert.throws(
    () => core.snapshotTaken({ index: 8, term, data: "" }),
    /beyond the applied index 7/,
  );
  assert.throws(
    () => core.snapshotTaken({ index: 5, term: term + 1, data: "" }),
    /not the term of entry 5/,
  );
  assert.throws(
    () => core.snapshotTaken({ index: 5, term, data: "" }, { compactTo: 6 }),
    /compactTo 6 must be an integer in 0\.\.5/,
  );
  c.snapshot("n1", 3); // at 7, keeping a trailing window of 4 entries
  assert.deepEqual(core.snapshotPoint, { index: 3, term });
  assert.equal(core.entryAt(4)?.data, "e2");
  assert.throws(
    () => core.snapshotTaken({ index: 6, term, data: "" }),
    /below the latest snapshot's \(7\)/,
  );
  c.snapshot("n1");
  assert.deepEqual(core.snapshotPoint, { index: 7, term });
  assert.equal(core.lastIndex, 7);
  // Proposals go on after it.
  core.propose("later");
  c.flush();
  assert.deepEqual(c.machines.get("n1")!.data.at(-1), "later");
});

Deno.test("§7 a restart from a snapshot starts its log, commit index and applied cursor at the snapshot point", () => {
  const core = new RaftCore({
    id: "n1",
    voters: ["n1", "n2"],
    snapshot: { index: 10, term: 2, data: "[]" },
    entries: [
      { index: 9, term: 2, data: "window" },
      { index: 11, term: 3, data: "x" },
    ].filter((e) => e.index > 10),
    hardState: { term: 3, vote: null, commit: 4 },
  });
  assert.equal(core.commitIndex, 10);
  assert.equal(core.lastIndex, 11);
  assert.deepEqual(core.snapshotPoint, { index: 10, term: 2 });
  const ready = core.ready();
  assert.deepEqual(ready.committedEntries, [], "nothing at or below 10 again");
  assert.equal(ready.hardState?.commit, 10);
  core.advance(ready);
  assert.throws(
    () =>
      new RaftCore({
        id: "n1",
        voters: ["n1"],
        snapshot: { index: 10, term: 2 },
        entries: [{ index: 12, term: 2, data: "" }],
      }),
    /after a gap/,
  );
});

// --- InstallSnapshot ------------------------------------------------------------------

/** A 3-node cluster whose n3 missed 20 entries the leader then compacted. */
function behindCompacted(chunk: number): RaftHarness {
  const c = new RaftHarness(3, { snapshotChunkChars: chunk });
  c.elect("n1");
  c.crash("n3", { dropSent: true });
  for (let i = 0; i < 20; i++) c.core("n1").propose(`v${i}`);
  c.deliver();
  c.tick("n1");
  c.snapshot("n1");
  c.snapshot("n2");
  c.boot("n3"); // n3 comes back with its old disk (the empty entry only)
  return c;
}

Deno.test("§7 InstallSnapshot: an acknowledgement beyond the snapshot's end is not taken as installed, and is counted", () => {
  const c = behindCompacted(8);
  const leader = c.core("n1");
  c.tick("n1", 1, (m) => m.type !== "installSnapshot"); // the chunk is lost
  assert.equal(leader.progressOf("n3")!.state, "snapshot");
  const match = leader.progressOf("n3")!.match;
  leader.step({
    type: "installSnapshotResponse",
    from: "n3",
    to: "n1",
    term: leader.term,
    snapshotIndex: leader.snapshotPoint.index,
    offset: 1_000_000,
    success: true,
  });
  assert.equal(leader.stats.anomalies.snapshotAckBeyondEnd, 1);
  assert.equal(leader.progressOf("n3")!.state, "snapshot");
  assert.equal(leader.progressOf("n3")!.match, match);
  // The transfer goes on and completes.
  c.tick("n1", 10);
  c.deliver();
  assert.deepEqual(c.machines.get("n3"), c.machines.get("n1"));
});

Deno.test("dissertation §5.3 InstallSnapshot: a lost chunk is sent again; a leader change starts the transfer over", () => {
  const c = behindCompacted(8);
  const leader = c.core("n1");
  let lost = false;
  // Lose the second chunk once.
  const loseSecond: Filter = (m) => {
    if (m.type === "installSnapshot" && m.offset === 8 && !lost) {
      lost = true;
      return false;
    }
    return true;
  };
  let delivered = c.tick("n1", 1, loseSecond);
  assert.ok(lost);
  assert.equal(leader.progressOf("n3")!.state, "snapshot");
  assert.equal(c.core("n3").commitIndex, 1);
  // The chunk is sent again after an election timeout without an answer.
  delivered = c.tick("n1", 10);
  const resent = chunksTo(delivered, "n3");
  assert.equal(resent[0].offset, 8);
  assert.deepEqual(c.machines.get("n3"), c.machines.get("n1"));

  // A follower handed a chunk out of order answers with the offset it expects.
  const d = behindCompacted(8);
  const first: InstallSnapshotRequest = snapshotMessage({
    to: "n3",
    term: d.core("n1").term,
    snapshot: d.core("n1").snapshotPoint,
    data: "[1234567",
    done: false,
  });
  const n3 = d.core("n3");
  n3.step({ ...first, offset: 16, data: "xxxxxxxx" });
  n3.step(first);
  n3.step({ ...first, term: first.term + 1, offset: 8 }); // a new leader mid-way
  const ready = n3.ready();
  n3.advance(ready);
  const answers = ready.messages as InstallSnapshotResponse[];
  assert.deepEqual(
    answers.map((m) => [m.success, m.offset]),
    [[false, 0], [true, 8], [false, 0]],
  );
});

Deno.test("§7 InstallSnapshot: a stale snapshot (at or below the commit index) is answered but not installed", () => {
  const core = new RaftCore({
    id: "n2",
    voters: ["n1", "n2"],
    entries: entries(1, 1, 1, 1),
    hardState: { term: 1, vote: null, commit: 3 },
  });
  core.step(snapshotMessage({
    snapshot: { index: 2, term: 1 },
  }));
  const ready = core.ready();
  core.advance(ready);
  assert.equal(ready.snapshot, null);
  assert.deepEqual(ready.messages as AppendResponse[], [{
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 1,
    success: true,
    index: 3,
    conflictTerm: 0,
    conflictIndex: 0,
  }]);
  assert.equal(core.lastIndex, 4);
});

Deno.test("§7 receiver rule 6: a follower keeps its entries after a snapshot point it agrees with", () => {
  for (const [term, kept] of [[1, true], [2, false]] as const) {
    const core = new RaftCore({
      id: "n2",
      voters: ["n1", "n2"],
      entries: entries(1, 1, 1, 1, 1),
      hardState: { term: 2, vote: null, commit: 1 },
    });
    core.step(snapshotMessage({
      term: 2,
      snapshot: { index: 3, term },
      data: '["a"]',
    }));
    const ready = core.ready();
    assert.deepEqual(ready.snapshot, {
      index: 3,
      term,
      data: '["a"]',
      configuration: { voters: ["n1", "n2", "n3"], learners: [] },
    });
    assert.deepEqual(ready.committedEntries, []);
    assert.equal(ready.hardState?.commit, 3);
    assert.equal(core.lastIndex, kept ? 5 : 3);
    assert.equal(core.entryAt(5)?.data, kept ? "5@1" : undefined);
    core.advance(ready);
    assert.equal(core.hasReady(), false);
  }
});

Deno.test("§7 InstallSnapshot: a snapshot bigger than maxSnapshotChars is refused and counted", () => {
  const core = new RaftCore({
    id: "n2",
    voters: ["n1", "n2"],
    maxSnapshotChars: 10,
  });
  const chunk: InstallSnapshotRequest = snapshotMessage({
    snapshot: { index: 5, term: 1 },
    data: "123456",
    done: false,
  });
  core.step(chunk);
  core.step({ ...chunk, offset: 6, data: "789012", done: true });
  const ready = core.ready();
  core.advance(ready);
  assert.equal(ready.snapshot, null);
  assert.deepEqual(
    (ready.messages as InstallSnapshotResponse[]).map((m) => [
      m.success,
      m.offset,
    ]),
    [[true, 6], [false, 0]],
  );
  assert.equal(core.stats.anomalies.snapshotTooLarge, 1);
  assert.equal(core.commitIndex, 0);
});

Deno.test("§7 InstallSnapshot: a snapshot checkSnapshot cannot read is refused, counted, and changes nothing", () => {
  const seen: string[] = [];
  const core = new RaftCore({
    id: "n2",
    voters: ["n1", "n2"],
    checkSnapshot: (data) => {
      seen.push(data);
      return data.startsWith("{") ? null : "not JSON";
    },
  });
  const chunk: InstallSnapshotRequest = snapshotMessage({
    snapshot: { index: 5, term: 1 },
    data: "not a",
    done: false,
  });
  core.step(chunk);
  core.step({ ...chunk, offset: 5, data: " snapshot", done: true });
  const ready = core.ready();
  core.advance(ready);
  assert.deepEqual(seen, ["not a snapshot"]); // the whole, once
  assert.equal(ready.snapshot, null);
  assert.deepEqual(
    (ready.messages as InstallSnapshotResponse[]).map((m) => [
      m.success,
      m.offset,
    ]),
    [[true, 5], [false, 0]],
  );
  assert.equal(core.stats.anomalies.snapshotUnreadable, 1);
  assert.equal(core.commitIndex, 0);
  assert.equal(core.lastIndex, 0);
  // A readable one is then taken.
  core.step({ ...chunk, data: "{}", done: true });
  const next = core.ready();
  assert.equal(next.snapshot?.data, "{}");
  assert.equal(core.commitIndex, 5);
});

// --- compaction under partitions ----------------------------------------------------

Deno.test("§7 compaction with partitions: every node's applied sequence is a prefix of one sequence", () => {
  let installed = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const random = mulberry32(seed);
    const c = new RaftHarness(3, {
      snapshotChunkChars: 16 + Math.floor(random() * 200),
      random,
    });
    let isolated: string | null = null;
    const keep: Filter = (m) =>
      (isolated === null || (m.from !== isolated && m.to !== isolated)) &&
      random() > 0.1;
    let proposed = 0;
    for (let step = 0; step < 300; step++) {
      const roll = random();
      if (roll < 0.05) {
        isolated = isolated === null
          ? `n${1 + Math.floor(random() * 3)}`
          : null;
      }
      for (const id of c.ids) c.core(id).tick();
      const leader = c.ids.map((id) => c.core(id)).find((core) =>
        core.role === "leader"
      );
      if (leader !== undefined && random() < 0.6) {
        try {
          leader.propose(`s${seed}:${proposed++}`);
        } catch {
          // Transferring leadership; nothing to do.
        }
      }
      c.round(keep);
      for (const id of c.ids) {
        const machine = c.machines.get(id)!;
        if (
          machine.index - c.core(id).snapshotPoint.index >= 3 &&
          random() < 0.5
        ) {
          c.snapshot(id, Math.max(0, machine.index - Math.floor(random() * 3)));
        }
      }
      if (roll > 0.98) {
        // A crash and restart from disk.
        const id = `n${1 + Math.floor(random() * 3)}`;
        installed += c.readys.get(id)!.filter((r) => r.snapshot).length;
        c.crash(id, { dropSent: true });
        c.boot(id);
      }
    }
    isolated = null;
    const caughtUp = () =>
      c.ids.every((id) =>
        c.machines.get(id)!.index === c.machines.get("n1")!.index
      );
    for (let i = 0; i < 400 && (i < 20 || !caughtUp()); i++) {
      for (const id of c.ids) c.core(id).tick();
      c.round();
    }
    const sequences = c.ids.map((id) => c.machines.get(id)!.data);
    const longest = sequences.reduce((a, b) => (b.length > a.length ? b : a));
    for (const [i, sequence] of sequences.entries()) {
      assert.deepEqual(
        sequence,
        longest.slice(0, sequence.length),
        `seed ${seed}: n${i + 1} applied a sequence that is not a prefix`,
      );
    }
    // After healing, everyone caught up.
    assert.ok(
      sequences.every((s) => s.length === longest.length),
      `seed ${seed}: ${sequences.map((s) => s.length)} applied after healing`,
    );
    assert.ok(longest.length > 0, `seed ${seed}: something committed`);
    for (const id of c.ids) {
      installed += c.readys.get(id)!.filter((r) => r.snapshot).length;
    }
  }
  // The partitions did make leaders send snapshots to followers.
  assert.ok(installed >= 10, `${installed} snapshots installed`);
});

Deno.test("§7 a leader change during a transfer: the new leader sends its own snapshot from offset 0", () => {
  const c = behindCompacted(16);
  // n2, compacted too, takes over before n3 got any chunk from n1.
  c.elect("n2", (m) => m.type !== "installSnapshot");
  const leader = c.core("n2");
  assert.ok(leader.progressOf("n3")!.match < leader.snapshotPoint.index);
  assert.equal(leader.progressOf("n3")!.state, "snapshot");
  // Its first chunk was dropped above: it is sent again after an election
  // timeout without an answer.
  const delivered = c.tick("n2", 12);
  const chunks = chunksTo(delivered, "n3");
  assert.ok(chunks.length > 0 && chunks.every((m) => m.from === "n2"));
  assert.equal(chunks[0].offset, 0);
  assert.deepEqual(c.machines.get("n3"), c.machines.get("n2"));
  assert.equal(leader.progressOf("n3")!.state, "replicate");
});

// --- the configuration in a snapshot ---------------------------------------------

const config = (voters: string[], learners: string[] = []) => ({
  voters,
  learners,
});

Deno.test("§7 a snapshot includes the latest configuration as of its last included index (dissertation §5.1)", () => {
  const c = new RaftHarness(3, { voters: ["n1", "n2"], join: true });
  const core = c.elect("n1");
  core.propose("a");
  c.deliver();
  const before = core.lastIndex;
  const change = core.proposeConfChange({ type: "addLearner", node: "n3" });
  c.deliver();
  core.propose("b");
  c.deliver();
  assert.deepEqual(core.configuration, config(["n1", "n2"], ["n3"]));
  // At an index before the config entry: the configuration the log starts with.
  core.snapshotTaken({ index: before, term: core.term, data: "[]" });
  assert.deepEqual(core.snapshotConfiguration, config(["n1", "n2"]));
  // At the config entry itself, and after it: the new configuration.
  core.snapshotTaken({ index: change.index, term: core.term, data: "[]" });
  assert.deepEqual(core.snapshotConfiguration, config(["n1", "n2"], ["n3"]));
  const taken = c.snapshot("n1");
  assert.deepEqual(taken.configuration, config(["n1", "n2"], ["n3"]));
  assert.ok(core.snapshotPoint.index > change.index, "the entry is compacted");
  assert.deepEqual(core.configuration, config(["n1", "n2"], ["n3"]));
});

Deno.test("§7 compaction folds config entries into the base configuration: a removal that is compacted stays in force", () => {
  const c = new RaftHarness(3, { voters: ["n1", "n2"], join: true });
  const core = c.elect("n1");
  core.proposeConfChange({ type: "addLearner", node: "n3" });
  c.deliver();
  core.proposeConfChange({ type: "remove", node: "n3" });
  c.deliver();
  core.propose("x");
  c.deliver();
  // Keep a trailing window holding only the last entry: both config
  // entries are compacted away.
  c.snapshot("n1", core.lastIndex - 1);
  assert.deepEqual(core.configuration, config(["n1", "n2"]));
  // A restart from that disk (snapshot + window) has the same configuration
  // without any config entry in its log.
  c.crash("n1", { dropSent: true });
  c.boot("n1");
  assert.deepEqual(c.core("n1").configuration, config(["n1", "n2"]));
  assert.deepEqual(c.core("n1").snapshotConfiguration, config(["n1", "n2"]));
});

Deno.test("§7 InstallSnapshot carries the configuration: the follower installs it with the state and keeps it across a restart", () => {
  const c = new RaftHarness(4, { voters: ["n1", "n2", "n3"], join: true });
  const core = c.elect("n1");
  c.crash("n3", { dropSent: true });
  core.proposeConfChange({ type: "addLearner", node: "n4" });
  c.deliver();
  for (let i = 0; i < 5; i++) core.propose(`e${i}`);
  c.deliver();
  c.snapshot("n1");
  c.boot("n3"); // its disk holds only the bootstrap configuration
  assert.deepEqual(c.core("n3").configuration, config(["n1", "n2", "n3"]));
  const delivered = c.tick("n1");
  const chunks = chunksTo(delivered, "n3");
  assert.ok(chunks.length > 0);
  for (const chunk of chunks) {
    assert.deepEqual(chunk.configuration, config(["n1", "n2", "n3"], ["n4"]));
  }
  const installed = c.readys.get("n3")!.find((r) => r.snapshot !== null)!;
  assert.deepEqual(
    installed.snapshot!.configuration,
    config(["n1", "n2", "n3"], ["n4"]),
  );
  assert.deepEqual(
    installed.configuration,
    config(["n1", "n2", "n3"], ["n4"]),
    "the Ready reports the configuration change",
  );
  assert.deepEqual(
    c.core("n3").configuration,
    config(["n1", "n2", "n3"], ["n4"]),
  );
  c.crash("n3", { dropSent: true });
  c.boot("n3");
  assert.deepEqual(
    c.core("n3").configuration,
    config(["n1", "n2", "n3"], ["n4"]),
  );
});

Deno.test("§7 receiver rule 6 with membership: a config entry kept after the snapshot point stays in force over the snapshot's", () => {
  const core = new RaftCore({
    id: "n2",
    voters: ["n1", "n2"],
    entries: [
      { index: 1, term: 1, data: "" },
      { index: 2, term: 1, data: "a" },
      {
        index: 3,
        term: 1,
        data: JSON.stringify(config(["n1", "n2"], ["n3"])),
        type: "config",
      },
    ],
    hardState: { term: 1, vote: null, commit: 1 },
  });
  assert.deepEqual(core.configuration, config(["n1", "n2"], ["n3"]));
  core.step(snapshotMessage({
    snapshot: { index: 2, term: 1 },
    configuration: config(["n1", "n2"]),
  }));
  assert.equal(core.lastIndex, 3, "the entries after the point are kept");
  assert.deepEqual(core.configuration, config(["n1", "n2"], ["n3"]));
  assert.deepEqual(core.snapshotConfiguration, config(["n1", "n2"]));
});

Deno.test("§7 InstallSnapshot: a transfer not yet started sends the newest snapshot, not the one the follower first needed", () => {
  const c = behindCompacted(1 << 20);
  const leader = c.core("n1");
  // The first chunk is lost: the transfer starts, nothing is acknowledged.
  const noChunks = (m: Message) => m.type !== "installSnapshot";
  c.tick("n1", 1, noChunks);
  const first = leader.progressOf("n3")!.snapshotIndex;
  assert.equal(first, leader.snapshotPoint.index);
  for (let i = 0; i < 5; i++) leader.propose(`b${i}`);
  c.deliver(noChunks);
  c.snapshot("n1");
  const newest = leader.snapshotPoint.index;
  assert.ok(newest > first!);
  // The unanswered chunk is sent again after an election timeout.
  c.tick("n1", 12);
  const installed = c.readys.get("n3")!.filter((r) => r.snapshot !== null);
  assert.deepEqual(installed.map((r) => r.snapshot!.index), [newest]);
  assert.deepEqual(c.machines.get("n3"), c.machines.get("n1"));
});
