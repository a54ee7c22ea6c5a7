import assert from "node:assert/strict";
import { RaftCore } from "./core.ts";
import { entries, messagesOf, RaftHarness } from "../testing/raft_harness.ts";
import type {
  AppendRequest,
  AppendResponse,
  Message,
  NodeId,
} from "./types.ts";

const appendsTo = (messages: Message[], to: NodeId): AppendRequest[] =>
  messagesOf(messages, "append", to);

const rejections = (messages: Message[]): AppendResponse[] =>
  messages.filter((m): m is AppendResponse =>
    m.type === "appendResponse" && !m.success
  );

// --- §5.3 fast conflict backtracking -------------------------------------------

Deno.test("§5.3 fast backtracking: a leader without the conflicting term jumps to conflictIndex (Figure 7 f)", () => {
  // The leader's log of Figure 7 and follower (f), which has terms 2 and 3
  // the leader never saw.
  const c = new RaftHarness(3, {}, {
    n1: {
      entries: entries(1, 1, 1, 4, 4, 5, 5, 6, 6, 6),
      hardState: { term: 6, vote: null, commit: 0 },
    },
    n2: {
      entries: entries(1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3),
      hardState: { term: 6, vote: null, commit: 0 },
    },
    n3: {
      entries: entries(1, 1, 1, 4, 4, 5, 5, 6, 6, 6),
      hardState: { term: 6, vote: null, commit: 0 },
    },
  });
  c.core("n1").campaign();
  const delivered = c.deliver();
  assert.equal(c.core("n1").role, "leader");
  const fromN2 = rejections(delivered).filter((m) => m.from === "n2");
  // Probe at 11 (the leader's new empty entry): n2 has term 3 there from 7;
  // the leader has no term 3, so it tries 7 (prev 6): n2 has term 2 there
  // from 4; no term 2 either, so 4 (prev 3) matches. One rejection per
  // term, not one per entry.
  assert.deepEqual(
    fromN2.map((m) => [m.index, m.conflictTerm, m.conflictIndex]),
    [[10, 3, 7], [6, 2, 4]],
  );
  const probes = appendsTo(delivered, "n2").filter((m) => m.entries.length > 0);
  assert.deepEqual(probes.map((m) => m.prevLogIndex), [10, 6, 3]);
  for (let i = 1; i <= 11; i++) {
    assert.deepEqual(c.core("n2").entryAt(i), c.core("n1").entryAt(i));
  }
});

Deno.test("§5.3 fast backtracking: a leader with entries of the conflicting term resumes after its last one", () => {
  const c = new RaftHarness(3, {}, {
    n1: {
      entries: entries(1, 1, 2, 2, 3),
      hardState: { term: 3, vote: null, commit: 0 },
    },
    n2: {
      entries: entries(1, 1, 2, 2, 2, 2, 2),
      hardState: { term: 3, vote: null, commit: 0 },
    },
    n3: {
      entries: entries(1, 1, 2, 2, 3),
      hardState: { term: 3, vote: null, commit: 0 },
    },
  });
  c.core("n1").campaign();
  const delivered = c.deliver();
  const fromN2 = rejections(delivered).filter((m) => m.from === "n2");
  // The first append follows 5 (the leader's log is 1,1,2,2,3, then its
  // empty entry): n2 holds term 2 there (from 3). The leader's last term-2
  // entry is 4, so the next append follows 4, not 2.
  assert.deepEqual(
    fromN2.map((m) => [m.index, m.conflictTerm, m.conflictIndex]),
    [[5, 2, 3]],
  );
  const sent = appendsTo(delivered, "n2").filter((m) => m.entries.length > 0);
  assert.deepEqual(sent.map((m) => m.prevLogIndex), [5, 4]);
  assert.equal(c.core("n2").lastIndex, 6);
  assert.equal(c.core("n2").entryAt(5)!.term, 3);
});

// --- commit announcements ------------------------------------------------------

Deno.test("§5.3 commit index: acks of N proposals in one batch bring each follower one commit-carrying message, at once", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  c.tick("n1"); // everyone knows the empty entry is committed
  const before = leader.commitIndex;
  const n = 5;
  for (let i = 0; i < n; i++) leader.propose(`p${i}`);
  // The appends reach the followers; their acks reach the leader together.
  c.round();
  c.flush();
  const acks = c.queue.filter((m) => m.to === "n1");
  assert.ok(acks.length >= 2 * n, `${acks.length} acks for ${n} proposals`);
  c.queue = c.queue.filter((m) => m.to !== "n1");
  for (const ack of acks) leader.step(ack);
  assert.equal(leader.commitIndex, before + n);
  const ready = leader.ready();
  leader.advance(ready);
  for (const follower of ["n2", "n3"]) {
    const sent = appendsTo(ready.leaderMessages, follower);
    assert.equal(sent.length, 1, `one message to ${follower}`);
    assert.equal(sent[0].commit, before + n);
    assert.deepEqual(ready.messages, []);
  }
  // The followers learn the commit index from it, before any tick.
  c.queue.push(...ready.leaderMessages);
  c.deliver();
  for (const follower of ["n2", "n3"]) {
    assert.equal(c.core(follower).commitIndex, before + n);
    assert.deepEqual(
      c.machines.get(follower)!.data,
      ["p0", "p1", "p2", "p3", "p4"],
    );
  }
});

Deno.test("§5.3 commit index: appends still waiting in a Ready carry the newest commit index", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  c.tick("n1");
  leader.propose("a");
  c.round(); // appends of "a" out, acks queued
  c.flush();
  const acks = c.queue.filter((m) => m.to === "n1");
  c.queue = c.queue.filter((m) => m.to !== "n1");
  leader.propose("b"); // appends of "b" queued, carrying the old commit
  for (const ack of acks) leader.step(ack);
  const ready = leader.ready();
  leader.advance(ready);
  for (const follower of ["n2", "n3"]) {
    const sent = appendsTo(ready.leaderMessages, follower);
    assert.equal(sent.length, 1, "only the append of b");
    assert.deepEqual(sent[0].entries.map((e) => e.data), ["b"]);
    assert.equal(sent[0].commit, leader.commitIndex);
  }
});

// --- flow control ----------------------------------------------------------------

Deno.test("etcd flow control: replicate state bounds in-flight appends by count", () => {
  const c = new RaftHarness(3, {
    maxInflightAppends: 2,
    maxEntriesPerAppend: 1,
  });
  const leader = c.elect("n1");
  assert.equal(leader.progressOf("n2")!.state, "replicate");
  for (let i = 0; i < 5; i++) leader.propose(`x${i}`);
  c.flush();
  const sent = appendsTo(c.queue, "n2").filter((m) => m.entries.length > 0);
  assert.equal(sent.length, 2);
  assert.equal(leader.progressOf("n2")!.inflightAppends, 2);
  // Acks free the window; everything arrives in the end.
  c.deliver();
  assert.equal(c.core("n2").lastIndex, leader.lastIndex);
  assert.equal(leader.progressOf("n2")!.inflightAppends, 0);
});

Deno.test("etcd flow control: replicate state bounds in-flight appends by bytes (maxInflightBytes)", () => {
  const c = new RaftHarness(3, { maxInflightBytes: 8 });
  const leader = c.elect("n1");
  for (let i = 0; i < 6; i++) leader.propose(`abc${i}`); // 4 chars each
  c.flush();
  const sent = appendsTo(c.queue, "n2").filter((m) => m.entries.length > 0);
  assert.deepEqual(
    sent.map((m) => m.entries.map((e) => e.data)),
    [["abc0"], ["abc1"]],
  );
  assert.equal(leader.progressOf("n2")!.inflightBytes, 8);
  c.deliver();
  assert.equal(c.core("n2").lastIndex, leader.lastIndex);
  // One entry bigger than the window still goes, alone.
  leader.propose("x".repeat(20));
  c.flush();
  const big = appendsTo(c.queue, "n2").filter((m) => m.entries.length > 0);
  assert.equal(big.length, 1);
  c.deliver();
  assert.equal(c.core("n2").lastIndex, leader.lastIndex);
});

Deno.test("etcd flow control: a follower in probe state gets one append per heartbeat interval", () => {
  const c = new RaftHarness(3);
  const cutN3 = (m: Message) => m.to !== "n3" && m.from !== "n3";
  const leader = c.elect("n1", cutN3);
  assert.equal(leader.progressOf("n3")!.state, "probe");
  c.queue = [];
  for (let i = 0; i < 4; i++) leader.propose(`y${i}`);
  c.flush();
  // The probe sent at election is unanswered: nothing more.
  assert.deepEqual(appendsTo(c.queue, "n3"), []);
  c.queue = [];
  leader.tick(); // a heartbeat interval (heartbeatTicks 1)
  c.flush();
  const toN3 = appendsTo(c.queue, "n3");
  // The heartbeat, and one probe carrying entries.
  assert.equal(toN3.filter((m) => m.entries.length > 0).length, 1);
  assert.equal(toN3.length, 2);
  c.deliver();
  assert.equal(c.core("n3").lastIndex, leader.lastIndex);
  assert.equal(leader.progressOf("n3")!.state, "replicate");
});

// --- dissertation §10.2.1 ----------------------------------------------------------

Deno.test("dissertation §10.2.1: a single-node cluster commits a proposal only after advance() of the Ready holding it", () => {
  const core = new RaftCore({ id: "n1", voters: ["n1"] });
  core.campaign();
  let ready = core.ready();
  core.advance(ready);
  ready = core.ready(); // the empty entry commits once durable
  core.advance(ready);
  core.propose("z");
  ready = core.ready();
  assert.deepEqual(ready.entries.map((e) => e.data), ["z"]);
  assert.deepEqual(ready.committedEntries, []);
  assert.equal(core.commitIndex, 1);
  core.advance(ready);
  assert.equal(core.commitIndex, 2);
  ready = core.ready();
  assert.deepEqual(ready.committedEntries.map((e) => e.data), ["z"]);
  assert.equal(ready.hardState?.commit, 2);
  core.advance(ready);
});

Deno.test("dissertation §10.2.1: a 3-node leader whose own copy is not durable needs both followers' acks", () => {
  for (const persistFirst of [false, true]) {
    const c = new RaftHarness(3);
    const leader = c.elect("n1");
    c.tick("n1");
    const before = leader.commitIndex;
    leader.propose("w");
    const ready = leader.ready();
    // The appends may leave before the leader's fsync.
    assert.equal(appendsTo(ready.leaderMessages, "n2").length, 1);
    assert.deepEqual(ready.messages, []);
    if (persistFirst) leader.advance(ready);
    const acks: Record<string, Message[]> = {};
    for (const follower of ["n2", "n3"]) {
      const core = c.core(follower);
      for (const m of appendsTo(ready.leaderMessages, follower)) core.step(m);
      const answer = core.ready();
      core.advance(answer);
      acks[follower] = answer.messages;
    }
    for (const m of acks.n2) leader.step(m);
    assert.equal(
      leader.commitIndex,
      persistFirst ? before + 1 : before,
      persistFirst
        ? "its own durable copy and one ack are a quorum"
        : "one ack and an unpersisted own copy are not a quorum",
    );
    for (const m of acks.n3) leader.step(m);
    assert.equal(leader.commitIndex, before + 1);
    if (!persistFirst) leader.advance(ready);
  }
});

Deno.test("dissertation §10.2.1: only what a leader sends goes into leaderMessages", () => {
  const c = new RaftHarness(3);
  c.core("n1").campaign();
  const vote = c.core("n1").ready();
  assert.deepEqual(vote.leaderMessages, []);
  assert.deepEqual(vote.messages.map((m) => m.type), ["vote", "vote"]);
  c.core("n1").advance(vote);
  c.queue.push(...vote.messages);
  c.deliver();
  const follower = c.readys.get("n2")!.flatMap((r) => r.messages);
  assert.ok(follower.some((m) => m.type === "appendResponse"));
  assert.ok(c.readys.get("n2")!.every((r) => r.leaderMessages.length === 0));
  c.core("n1").transferLeadership("n2");
  const transfer = c.core("n1").ready();
  c.core("n1").advance(transfer);
  assert.deepEqual(transfer.leaderMessages.map((m) => m.type), ["timeoutNow"]);
});

// --- issue 8: defensive against bad peer messages ---------------------------------

Deno.test("issue 8: messages from non-members, to another node, or of an older term are dropped and counted", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  const stats = leader.stats;
  leader.step({
    type: "appendResponse",
    from: "n9",
    to: "n1",
    term: leader.term,
    success: true,
    index: 1,
    conflictTerm: 0,
    conflictIndex: 0,
  });
  leader.step({ type: "timeoutNow", from: "n2", to: "n7", term: leader.term });
  leader.step({
    type: "voteResponse",
    from: "n2",
    to: "n1",
    term: 0,
    granted: true,
  });
  assert.deepEqual(leader.stats, {
    ...stats,
    droppedNotMember: stats.droppedNotMember + 1,
    droppedMisaddressed: stats.droppedMisaddressed + 1,
    droppedStale: stats.droppedStale + 1,
  });
  assert.equal(leader.progressOf("n2")!.match, 1);
});

/** n2's forged or corrupt success to n1, far past the leader's log. */
const ackBeyond = (term: number): Message => ({
  type: "appendResponse",
  from: "n2",
  to: "n1",
  term,
  success: true,
  index: 100,
  conflictTerm: 0,
  conflictIndex: 0,
});

Deno.test("issue 16: a follower whose acks stay beyond the leader's log is probed once per heartbeat, not once per answer", () => {
  const c = new RaftHarness(3, { heartbeatTicks: 2 });
  const leader = c.elect("n1");
  for (let i = 0; i < 5; i++) leader.step(ackBeyond(leader.term));
  c.flush();
  assert.equal(leader.stats.anomalies.ackBeyondLastIndex, 5);
  assert.deepEqual(appendsTo(c.queue, "n2"), [], "no append per answer");
  c.queue = [];
  leader.tick(); // one heartbeat interval (heartbeatTicks 2)
  leader.tick();
  c.flush();
  const probes = appendsTo(c.queue, "n2");
  assert.ok(
    probes.length >= 1 && probes.length <= 2,
    `${probes.length} appends`,
  );
  assert.equal(probes.at(-1)!.prevLogIndex, leader.lastIndex);
});

Deno.test("issue 8 (§5.3): an ack beyond the leader's last index does not stall replication to that follower", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  c.tick("n1");
  leader.step(ackBeyond(leader.term));
  assert.equal(leader.stats.anomalies.ackBeyondLastIndex, 1);
  assert.ok(leader.progressOf("n2")!.match <= leader.lastIndex);
  assert.ok(leader.progressOf("n2")!.next <= leader.lastIndex + 1);
  const delivered: Message[] = [];
  for (let i = 0; i < 3; i++) {
    leader.propose(`after${i}`);
    delivered.push(...c.deliver(), ...c.tick("n1"));
  }
  for (const m of appendsTo(delivered, "n2")) {
    assert.ok(m.prevLogTerm >= 0, `prevLogTerm ${m.prevLogTerm} is a term`);
  }
  assert.equal(c.core("n2").lastIndex, leader.lastIndex);
  assert.equal(c.core("n2").commitIndex, leader.commitIndex);
  assert.deepEqual(c.machines.get("n2")!.data, ["after0", "after1", "after2"]);
});
