import assert from "node:assert/strict";
import { LeadershipTransferError, NotLeaderError, RaftCore } from "./core.ts";
import type { AppendRequest, Message, NodeId } from "./types.ts";
import {
  between,
  entries,
  logOf,
  not,
  RaftHarness,
} from "../testing/raft_harness.ts";

const isolate = (id: NodeId) => (m: Message) => m.from !== id && m.to !== id;

// --- elections ----------------------------------------------------------------

Deno.test("a single node elects itself and commits its proposals", () => {
  const core = new RaftCore({ id: "n1", voters: ["n1"], random: () => 0 });
  assert.equal(core.role, "follower");
  for (let i = 0; i < 9; i++) core.tick();
  assert.equal(core.role, "follower");
  core.tick(); // electionTicks (10) with random() = 0
  assert.equal(core.role, "leader");
  assert.equal(core.term, 1);
  const { index, term } = core.propose("x");
  assert.deepEqual({ index, term }, { index: 2, term: 1 });

  const ready = core.ready();
  assert.deepEqual(ready.hardState, { term: 1, vote: "n1", commit: 0 });
  assert.deepEqual(ready.entries.map((e) => e.data), ["", "x"]);
  // Committed once its own copy is durable (dissertation §10.2.1).
  assert.deepEqual(ready.committedEntries, []);
  assert.deepEqual(ready.softState, {
    term: 1,
    role: "leader",
    leader: "n1",
  });
  assert.deepEqual(ready.messages, []);
  core.advance(ready);
  const next = core.ready();
  assert.deepEqual(next.hardState, { term: 1, vote: "n1", commit: 2 });
  assert.deepEqual(next.committedEntries.map((e) => e.data), ["", "x"]);
  core.advance(next);
  assert.equal(core.hasReady(), false);
  assert.equal(core.commitIndex, 2);
});

Deno.test("a follower refuses a second vote in a term, also after a restart", () => {
  const c = new RaftHarness(3);
  c.core("n1").campaign();
  c.deliver((m) => m.to === "n2" || m.from === "n2");
  assert.equal(c.core("n1").role, "leader");
  assert.equal(c.disks.get("n2")!.hardState!.term, 1);
  assert.equal(c.disks.get("n2")!.hardState!.vote, "n1");
  const request: Message = {
    type: "vote",
    from: "n3",
    to: "n2",
    term: 1,
    lastLogIndex: 5,
    lastLogTerm: 1,
  };
  c.core("n2").step(request);
  let ready = c.core("n2").ready();
  assert.deepEqual(ready.messages, [
    { type: "voteResponse", from: "n2", to: "n3", term: 1, granted: false },
  ]);
  c.core("n2").advance(ready);

  // The vote survives a restart: the rebuilt node still refuses n3 ...
  c.crash("n2");
  c.restart("n2");
  c.core("n2").step(request);
  ready = c.core("n2").ready();
  assert.deepEqual(ready.messages, [
    { type: "voteResponse", from: "n2", to: "n3", term: 1, granted: false },
  ]);
  c.core("n2").advance(ready);
  // ... and grants the same candidate again (its answer may have been lost).
  c.core("n2").step({ ...request, from: "n1" });
  ready = c.core("n2").ready();
  assert.equal(ready.messages.length, 1);
  assert.equal((ready.messages[0] as { granted: boolean }).granted, true);
  c.core("n2").advance(ready);
});

// --- replication ----------------------------------------------------------------

Deno.test("propose on a follower throws NotLeaderError naming the leader", () => {
  const c = new RaftHarness(3);
  assert.throws(
    () => c.core("n2").propose("x"),
    (error: unknown) =>
      error instanceof NotLeaderError && error.leader === null,
  );
  c.elect("n1");
  assert.throws(
    () => c.core("n2").propose("x"),
    (error: unknown) =>
      error instanceof NotLeaderError && error.leader === "n1" &&
      error.message.includes("n1"),
  );
  c.core("n3").campaign();
  assert.throws(
    () => c.core("n3").propose("x"),
    (error: unknown) =>
      error instanceof NotLeaderError && error.leader === null,
  );
});

Deno.test("ready()/advance(): one Ready at a time, entries handed out once", () => {
  const c = new RaftHarness(3);
  const n1 = c.core("n1");
  n1.campaign();
  const first = n1.ready();
  assert.throws(() => n1.ready(), /advance\(\) the previous Ready/);
  assert.throws(
    () => n1.advance({ ...first }),
    /takes the Ready last returned/,
  );
  n1.advance(first);
  assert.throws(() => n1.advance(first), /takes the Ready last returned/);
  assert.equal(n1.hasReady(), false);
  c.queue.push(...first.messages);
  c.deliver();
  assert.equal(n1.role, "leader");

  n1.propose("a");
  n1.propose("b");
  const second = n1.ready();
  assert.deepEqual(second.entries.map((e) => e.data), ["a", "b"]);
  // Work arriving before advance() goes into the next Ready, not this one.
  n1.propose("c");
  n1.advance(second);
  const third = n1.ready();
  assert.deepEqual(third.entries.map((e) => e.data), ["c"]);
  n1.advance(third);
  c.queue.push(
    ...second.leaderMessages,
    ...second.messages,
    ...third.leaderMessages,
    ...third.messages,
  );
  c.deliver();
  const appliedData = c.applied.get("n1")!.map((e) => e.data);
  assert.deepEqual(appliedData, ["", "a", "b", "c"], "applied once each");
  assert.equal(n1.hasReady(), false);
});

Deno.test("messages come in the same Ready as the state they depend on", () => {
  const c = new RaftHarness(3);
  const n2 = c.core("n2");
  // A vote is granted in a Ready that also persists it.
  n2.step({
    type: "vote",
    from: "n1",
    to: "n2",
    term: 1,
    lastLogIndex: 0,
    lastLogTerm: 0,
  });
  let ready = n2.ready();
  assert.deepEqual(ready.hardState, { term: 1, vote: "n1", commit: 0 });
  assert.equal(ready.messages.length, 1);
  // A vote granted after ready() waits for the next Ready, with its state.
  n2.step({
    type: "vote",
    from: "n3",
    to: "n2",
    term: 2,
    lastLogIndex: 0,
    lastLogTerm: 0,
  });
  n2.advance(ready);
  ready = n2.ready();
  assert.deepEqual(ready.hardState, { term: 2, vote: "n3", commit: 0 });
  assert.deepEqual(ready.messages, [
    { type: "voteResponse", from: "n2", to: "n3", term: 2, granted: true },
  ]);
  n2.advance(ready);

  // A follower acknowledges entries in the Ready that persists them.
  n2.step({
    type: "append",
    from: "n3",
    to: "n2",
    term: 2,
    prevLogIndex: 0,
    prevLogTerm: 0,
    entries: [{ index: 1, term: 2, data: "" }, {
      index: 2,
      term: 2,
      data: "x",
    }],
    commit: 1,
  });
  ready = n2.ready();
  assert.deepEqual(ready.entries.map((e) => e.index), [1, 2]);
  assert.deepEqual(ready.hardState, { term: 2, vote: "n3", commit: 1 });
  assert.deepEqual(ready.committedEntries.map((e) => e.index), [1]);
  assert.deepEqual(ready.messages, [{
    type: "appendResponse",
    from: "n2",
    to: "n3",
    term: 2,
    success: true,
    index: 2,
    conflictTerm: 0,
    conflictIndex: 0,
  }]);
  n2.advance(ready);
  assert.equal(n2.hasReady(), false);

  // A leader's appends travel with the entries it persists.
  const d = new RaftHarness(3);
  const leader = d.elect("n1");
  leader.propose("y");
  ready = leader.ready();
  const sent = ready.leaderMessages.filter((m): m is AppendRequest =>
    m.type === "append"
  ).flatMap((m) => m.entries.map((e) => e.index));
  const persisted = new Set(
    [...d.disks.get("n1")!.entries, ...ready.entries].map((e) => e.index),
  );
  assert.ok(sent.length > 0 && sent.every((i) => persisted.has(i)));
  leader.advance(ready);
});

// --- CheckQuorum and leases ---------------------------------------------------------

Deno.test("CheckQuorum: a leader that hears from one peer of two stays", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.tick("n1", 40, not(between("n1", "n3")));
  assert.equal(c.core("n1").role, "leader");
});

Deno.test("vote requests are ignored within a leader's lease", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.tick("n1", 2);
  const request: Message = {
    type: "vote",
    from: "n3",
    to: "n2",
    term: 5,
    lastLogIndex: 10,
    lastLogTerm: 4,
  };
  c.core("n2").step(request);
  assert.equal(c.core("n2").term, 1, "term unchanged");
  assert.equal(c.core("n2").hasReady(), false, "no answer at all");
  // The leader ignores it too.
  c.core("n1").step({ ...request, to: "n1" });
  assert.equal(c.core("n1").role, "leader");
  assert.equal(c.core("n1").term, 1);

  // Once n2 has not heard from a leader for electionTicks, the lease is
  // over and the request counts.
  c.expireLease("n2");
  c.core("n2").step(request);
  assert.equal(c.core("n2").term, 5);
  const ready = c.core("n2").ready();
  assert.deepEqual(ready.messages, [
    { type: "voteResponse", from: "n2", to: "n3", term: 5, granted: true },
  ]);
  c.core("n2").advance(ready);

  // Without CheckQuorum there is no lease.
  const d = new RaftHarness(3, { checkQuorum: false });
  d.elect("n1");
  d.core("n2").step(request);
  assert.equal(d.core("n2").term, 5);
});

// --- ReadIndex ------------------------------------------------------------------------

Deno.test("ReadIndex on the leader waits for a quorum of heartbeats", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  leader.propose("a");
  c.deliver();
  assert.equal(leader.commitIndex, 2);

  leader.readIndex("r1");
  c.flush();
  assert.deepEqual(c.readStates.get("n1"), [], "not before the acks");
  const round = c.queue.filter((m): m is AppendRequest => m.type === "append");
  assert.equal(round.length, 2);
  assert.ok(round.every((m) => m.context !== undefined));
  // With n3 silent, n2's ack alone (plus the leader) is a quorum.
  c.deliver(isolate("n3"));
  assert.deepEqual(c.readStates.get("n1"), [{ context: "r1", index: 2 }]);

  // An isolated leader never confirms a read.
  leader.readIndex("r2");
  c.tick("n1", 5, isolate("n1"));
  assert.deepEqual(c.readStates.get("n1"), [{ context: "r1", index: 2 }]);
});

Deno.test("dissertation §6.4 ReadIndex batching: the leader runs one heartbeat round at a time; reads before its heartbeats leave join it, reads while it is pending share the next", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  leader.propose("a");
  c.deliver();
  const rounds = () =>
    new Set(
      c.queue.flatMap((m) =>
        m.type === "append" && m.context !== undefined ? [m.context] : []
      ),
    );
  leader.readIndex("r1");
  leader.readIndex("r2"); // before the round's heartbeats leave: joins it
  c.flush();
  assert.equal(rounds().size, 1);
  const first = c.queue;
  c.queue = [];
  leader.readIndex("r3"); // the round is pending: r3 and r4 wait
  leader.step({ // and a read n2 forwards
    type: "readIndex",
    from: "n2",
    to: "n1",
    term: leader.term,
    context: "f4",
  });
  c.flush();
  assert.equal(rounds().size, 0, "no second round while one is pending");
  c.queue = first;
  const delivered = c.deliver();
  const contexts = new Set(
    delivered.flatMap((m) =>
      m.type === "append" && m.context !== undefined ? [m.context] : []
    ),
  );
  assert.equal(contexts.size, 2, "the held round, then one for r3 and f4");
  assert.deepEqual(c.readStates.get("n1")!.map((r) => r.context), [
    "r1",
    "r2",
    "r3",
  ]);
  assert.deepEqual(c.readStates.get("n2")!.map((r) => r.context), ["f4"]);
});

Deno.test("ReadIndex waits until the new leader commits an entry of its term", () => {
  const c = new RaftHarness(3);
  c.core("n1").campaign();
  c.deliver((m) => m.type !== "append"); // elected, but the empty entry is stuck
  const leader = c.core("n1");
  assert.equal(leader.role, "leader");
  leader.readIndex("early");
  c.deliver((m) => m.type !== "append");
  assert.deepEqual(c.readStates.get("n1"), []);
  c.tick("n1");
  assert.equal(leader.commitIndex, 1);
  assert.deepEqual(c.readStates.get("n1"), [{ context: "early", index: 1 }]);
});

// --- restarts -----------------------------------------------------------------------------

Deno.test("a restarted core re-emits committed entries from index 1", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  leader.propose("a");
  leader.propose("b");
  c.deliver();
  leader.propose("uncommitted");
  c.flush();
  c.queue = [];
  assert.equal(leader.commitIndex, 3);
  assert.equal(leader.lastIndex, 4);

  c.crash("n1");
  const disk = c.disks.get("n1")!;
  const core = new RaftCore({
    id: "n1",
    voters: c.ids,
    hardState: disk.hardState,
    entries: disk.entries,
  });
  assert.equal(core.role, "follower");
  assert.equal(core.term, 1);
  assert.equal(core.commitIndex, 3);
  assert.equal(core.lastIndex, 4);
  const ready = core.ready();
  assert.equal(ready.hardState, null, "nothing new to persist");
  assert.deepEqual(ready.entries, []);
  assert.deepEqual(ready.committedEntries.map((e) => e.data), ["", "a", "b"]);
  core.advance(ready);
  assert.equal(core.hasReady(), false);

  assert.throws(
    () =>
      new RaftCore({
        id: "n1",
        voters: c.ids,
        hardState: { term: 1, vote: null, commit: 9 },
        entries: disk.entries,
      }),
    RangeError,
  );
});

// --- recovery from lost appends (fixed bugs) ----------------------------------------

Deno.test("a follower whose pipelined appends were all lost catches up", () => {
  // Bug: with the in-flight window full of lost appends, the leader sent the
  // follower nothing but heartbeats anchored at its old match index, which
  // always succeed, so it never caught up while that leader lasted.
  const c = new RaftHarness(3, { maxInflightAppends: 2 });
  const leader = c.elect("n1");
  leader.propose("a");
  c.deliver();
  const appendTo3 = (m: Message) =>
    m.type === "append" && m.to === "n3" && m.entries.length > 0;
  for (const data of ["b", "c", "d", "e"]) {
    leader.propose(data);
    c.deliver(not(appendTo3));
  }
  assert.equal(c.core("n3").lastIndex, 2);
  c.tick("n1", 3);
  assert.deepEqual(logOf(c.core("n3")), logOf(leader));
  leader.propose("f");
  c.deliver();
  c.tick("n1");
  assert.equal(c.core("n3").lastIndex, 7);
  assert.equal(c.core("n3").commitIndex, 7);
});

Deno.test("a lost append is resent even when no further proposal comes", () => {
  // Bug: in replicate state only a later append exposed the gap, so the last
  // entry before a quiet period stayed uncommitted (and the new leader's
  // empty entry could too, holding back every ReadIndex).
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  leader.propose("last");
  c.deliver((m) => !(m.type === "append" && m.entries.length > 0));
  assert.equal(leader.commitIndex, 1);
  c.tick("n1", 2);
  assert.equal(leader.commitIndex, 2);
  for (const id of c.ids) assert.equal(c.core(id).commitIndex, 2);
  assert.deepEqual(c.applied.get("n3")!.map((e) => e.data), ["", "last"]);
});

Deno.test("a lagging follower gets a full window of appends per round trip", () => {
  // Bug: each acknowledgement released a single append, so a follower that
  // fell behind caught up at maxEntriesPerAppend entries per round trip,
  // whatever the window, and never when proposals came faster than that.
  const c = new RaftHarness(3, {
    maxEntriesPerAppend: 1,
    maxInflightAppends: 8,
  });
  const leader = c.elect("n1");
  for (let i = 0; i < 40; i++) {
    leader.propose(`e${i}`);
    c.deliver(isolate("n3"));
  }
  assert.equal(leader.commitIndex, 41);
  assert.equal(c.core("n3").lastIndex, 1);
  leader.tick(); // n3 is back: a heartbeat (and tail probe) reaches it
  let hops = 0;
  while (c.core("n3").lastIndex < leader.lastIndex && hops < 1000) {
    c.round();
    hops++;
  }
  assert.deepEqual(logOf(c.core("n3")), logOf(leader));
  // 40 entries, 8 in flight: about 5 round trips (10 hops) plus the probe.
  assert.ok(hops <= 16, `caught up after ${hops} hops`);
});

Deno.test("a lost vote response is made up for by the next campaign", () => {
  const c = new RaftHarness(3);
  c.core("n1").campaign();
  c.deliver((m) => m.type !== "voteResponse");
  assert.equal(c.core("n1").role, "candidate");
  c.tick("n1", 15); // election timeout: a new term, new requests
  assert.equal(c.core("n1").role, "leader");
  assert.equal(c.core("n1").term, 2);
});

Deno.test("duplicated and reordered appends leave the follower's log intact", () => {
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  const appends: Message[] = [];
  for (const data of ["a", "b", "c"]) {
    leader.propose(data);
    c.flush();
    appends.push(...c.queue.filter((m) => m.to === "n2"));
    c.queue = [];
  }
  const n2 = c.core("n2");
  for (
    const m of [appends[2], appends[0], appends[1], appends[0], appends[2]]
  ) {
    n2.step(m);
  }
  c.flush();
  assert.deepEqual(logOf(n2), logOf(leader));
  // An old append arriving late does not truncate what came after it.
  n2.step(appends[0]);
  assert.deepEqual(logOf(n2), logOf(leader));
  c.deliver();
  assert.equal(n2.commitIndex, 4);
});

Deno.test("a follower whose ack arrives after the commit moved learns the commit index at once, not at the next heartbeat", () => {
  // Bug (found by the registry benchmark): the first ack committed the
  // entry and the heartbeat that announced it was anchored at each
  // follower's match, below the entry for the follower that had not acked
  // yet; its ack then sent nothing, so its watchers and serializable reads
  // lagged by up to a heartbeat interval.
  const c = new RaftHarness(3);
  const leader = c.elect("n1");
  leader.propose("x");
  c.round(); // the appends reach n2 and n3; their acks are queued
  const acks = c.queue;
  c.queue = [];
  const late = acks.filter((m) => m.from === "n3");
  for (const m of acks.filter((m) => m.from !== "n3")) leader.step(m);
  c.deliver(); // n2's ack commits index 2; the heartbeats go out
  assert.equal(leader.commitIndex, 2);
  assert.equal(c.core("n2").commitIndex, 2);
  assert.equal(c.core("n3").commitIndex, 1);
  for (const m of late) leader.step(m);
  c.deliver(); // no tick
  assert.equal(c.core("n3").commitIndex, 2);
  assert.deepEqual(c.applied.get("n3")!.map((e) => e.data), ["", "x"]);
});

// --- PreVote (Raft dissertation §9.6) -----------------------------------------

const preVoteTo = (
  to: NodeId,
  from: NodeId,
  term: number,
  lastLogIndex: number,
  lastLogTerm: number,
): Message => ({ type: "preVote", from, to, term, lastLogIndex, lastLogTerm });

/** A core of `voters` whose election timeout (10 ticks) has fired. */
function preCandidate(voters: NodeId[]): RaftCore {
  const core = new RaftCore({ id: voters[0], voters, random: () => 0 });
  for (let i = 0; i < 10; i++) core.tick();
  assert.equal(core.preCandidate, true);
  return core;
}

/** A pre-vote reply from `from` to n1. */
const preVoteReply = (
  from: NodeId,
  term: number,
  granted: boolean,
): Message => ({
  type: "preVoteResponse",
  from,
  to: "n1",
  term,
  granted,
});

/**
 * Steps a pre-vote request into `core` and checks that it answers with
 * exactly one reply, carrying `term` and `granted`.
 */
function assertPreVoteAnswer(
  core: RaftCore,
  request: Message,
  term: number,
  granted: boolean,
): void {
  core.step(request);
  const ready = core.ready();
  core.advance(ready);
  assert.deepEqual(ready.messages, [
    {
      type: "preVoteResponse",
      from: request.to,
      to: request.from,
      term,
      granted,
    },
  ]);
}

Deno.test("§9.6 PreVote: a voter that heard from a leader within the election timeout refuses, and keeps its term", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  const n2 = c.core("n2");
  const before = n2.hardState;
  assertPreVoteAnswer(n2, preVoteTo("n2", "n3", 2, 99, 1), 1, false);
  assert.deepEqual(n2.hardState, before);
  assert.equal(n2.leader, "n1");

  // After an election timeout of silence from n1, the same request is granted,
  // still without moving n2's term or vote.
  c.expireLease("n2");
  assertPreVoteAnswer(n2, preVoteTo("n2", "n3", 2, 99, 1), 2, true);
  assert.deepEqual(n2.hardState, before);
});

Deno.test("§9.6 PreVote, leader connection lost: the followers of an exited leader forget it and elect a new one within ⌈electionTicks / 2⌉ ticks, not an election timeout", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.crash("n1");
  for (const id of ["n2", "n3"]) {
    c.core(id).leaderConnectionLost("n1");
    assert.equal(c.core(id).leader, null);
    assert.equal(c.core(id).term, 1, "no term moves on the report itself");
  }
  // random() = 0.5: n2 waits 1 + floor(0.5 × 5) = 3 ticks (a full election
  // timeout would be 15), and n3 grants its pre-vote and vote at once.
  c.tick("n2", 2);
  assert.equal(c.core("n2").preCandidate, false);
  c.tick("n2", 1);
  assert.equal(c.core("n2").role, "leader");
  assert.equal(c.core("n2").term, 2);
  assert.equal(c.core("n3").leader, "n2");
});

Deno.test("§9.6 PreVote, leader connection lost: a follower that still hears the leader refuses the hurried pre-vote, and no term moves", () => {
  const c = new RaftHarness(3);
  const n1 = c.elect("n1");
  const n2 = c.core("n2");
  n2.leaderConnectionLost("n1"); // a spurious report: n1 is alive
  c.tick("n2", 3, (m) => m.from !== "n1"); // n1's heartbeats do not reach n2
  assert.equal(n2.preCandidate, true, "it asked for pre-votes");
  assert.equal(n2.role, "follower");
  assert.equal(n2.term, 1);
  assert.equal(c.core("n3").leader, "n1", "n3 refused: it heard n1");
  assert.equal(n1.role, "leader");
  assert.equal(n1.term, 1);
  // n1's next heartbeat brings n2 back.
  c.tick("n1", 1);
  assert.equal(n2.leader, "n1");
  assert.equal(n2.preCandidate, false);
});

Deno.test("§9.6 PreVote, leader connection lost: ignored for a peer that is not the leader, on the leader, and without PreVote", () => {
  const c = new RaftHarness(3);
  const n1 = c.elect("n1");
  c.core("n2").leaderConnectionLost("n3");
  assert.equal(c.core("n2").leader, "n1");
  n1.leaderConnectionLost("n1");
  assert.equal(n1.role, "leader");

  const off = new RaftHarness(3, { preVote: false });
  off.elect("n1");
  off.core("n2").leaderConnectionLost("n1");
  assert.equal(off.core("n2").leader, "n1");
  off.tick("n2", 3, (m) => m.from !== "n1");
  assert.equal(off.core("n2").role, "follower", "no hurried election");
  assert.equal(off.core("n2").term, 1);
});

Deno.test("§9.6 PreVote: the rule holds with checkQuorum off too", () => {
  const c = new RaftHarness(3, { checkQuorum: false });
  c.elect("n1");
  assertPreVoteAnswer(c.core("n2"), preVoteTo("n2", "n3", 2, 99, 1), 1, false);
});

Deno.test("§9.6 PreVote: a leader refuses pre-votes and keeps leading in its term", () => {
  const c = new RaftHarness(3);
  const n1 = c.elect("n1");
  assertPreVoteAnswer(n1, preVoteTo("n1", "n3", 5, 99, 1), 1, false);
  assert.equal(n1.role, "leader");
  assert.equal(n1.term, 1);
});

Deno.test("§9.6 PreVote: refused when the pre-candidate's log is behind (§5.4.1 up-to-date rule)", () => {
  const hardState = { term: 2, vote: null, commit: 0 };
  const c = new RaftHarness(3, {}, {
    n2: { entries: entries(1, 2), hardState },
  });
  const n2 = c.core("n2");
  // Shorter log with the same last term: refused.
  assertPreVoteAnswer(n2, preVoteTo("n2", "n1", 3, 1, 2), 2, false);
  // Older last term: refused.
  assertPreVoteAnswer(n2, preVoteTo("n2", "n1", 3, 5, 1), 2, false);
  // At least as up to date: granted.
  assertPreVoteAnswer(n2, preVoteTo("n2", "n1", 3, 2, 2), 3, true);
  assert.deepEqual(n2.hardState, hardState);
});

Deno.test("§9.6 PreVote: in the receiver's own term it is granted only if the receiver could still vote", () => {
  const c = new RaftHarness(3, {}, {
    n2: { hardState: { term: 4, vote: "n3", commit: 0 } },
  });
  const n2 = c.core("n2");
  assertPreVoteAnswer(n2, preVoteTo("n2", "n1", 4, 0, 0), 4, false);
  assertPreVoteAnswer(n2, preVoteTo("n2", "n3", 4, 0, 0), 4, true);
  // A stale pre-vote (term below the receiver's) is refused with its term.
  assertPreVoteAnswer(n2, preVoteTo("n2", "n1", 3, 0, 0), 4, false);
  assert.equal(n2.term, 4);
});

Deno.test("§9.6 PreVote: a refusal carrying a higher term makes a stale pre-candidate a follower of that term", () => {
  const n1 = preCandidate(["n1", "n2", "n3"]);
  n1.step(preVoteReply("n2", 7, false));
  assert.equal(n1.term, 7);
  assert.equal(n1.role, "follower");
  assert.equal(n1.preCandidate, false);
});

Deno.test("§9.6 PreVote: grants below a quorum raise no term; a quorum starts the election", () => {
  const n1 = preCandidate(["n1", "n2", "n3", "n4", "n5"]);
  const grant = (from: NodeId, term = 1) => preVoteReply(from, term, true);
  n1.advance(n1.ready()); // the pre-vote requests
  n1.step(grant("n2"));
  n1.step(grant("n2")); // a duplicate counts once
  n1.step(grant("n3", 5)); // not for this round: ignored
  assert.equal(n1.term, 0);
  assert.equal(n1.preCandidate, true);
  n1.step(grant("n4"));
  assert.equal(n1.role, "candidate");
  assert.equal(n1.term, 1);
  const ready = n1.ready();
  assert.deepEqual(ready.hardState, { term: 1, vote: "n1", commit: 0 });
  assert.deepEqual(ready.messages.map((m) => [m.type, m.to, m.term]), [
    ["vote", "n2", 1],
    ["vote", "n3", 1],
    ["vote", "n4", 1],
    ["vote", "n5", 1],
  ]);
});

Deno.test("§9.6 PreVote: a quorum of refusals ends the round; the pre-candidate retries after a timeout", () => {
  const n1 = preCandidate(["n1", "n2", "n3"]);
  n1.step(preVoteReply("n2", 0, false));
  n1.step(preVoteReply("n3", 0, false));
  assert.equal(n1.preCandidate, false);
  assert.equal(n1.term, 0);
  n1.advance(n1.ready());
  for (let i = 0; i < 10; i++) n1.tick();
  assert.equal(n1.preCandidate, true);
  assert.equal(n1.term, 0);
});

Deno.test("§9.6 PreVote: a pre-candidate that hears the leader's append follows it", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.tick("n3", 15, isolate("n3")); // n3's timeout fires: pre-candidate
  assert.equal(c.core("n3").preCandidate, true);
  c.tick("n1", 1); // a heartbeat
  assert.equal(c.core("n3").preCandidate, false);
  assert.equal(c.core("n3").leader, "n1");
  assert.equal(c.core("n3").term, 1);
});

Deno.test("§9.6 PreVote: a node cut off and rejoined keeps the leader and the term (and does not without PreVote)", () => {
  for (const preVote of [true, false]) {
    const c = new RaftHarness(3, { preVote });
    c.elect("n1");
    // n3 is cut off for many election timeouts while n1 keeps n2 in touch.
    for (let i = 0; i < 100; i++) {
      c.core("n3").tick();
      c.core("n1").tick();
      c.core("n2").tick();
      c.deliver(isolate("n3"));
    }
    const alone = c.core("n3").term;
    // It rejoins.
    for (let i = 0; i < 30; i++) {
      for (const id of c.ids) c.core(id).tick();
      c.deliver();
    }
    const leader = c.ids.find((id) => c.core(id).role === "leader");
    const terms = c.ids.map((id) => c.core(id).term);
    if (preVote) {
      assert.equal(alone, 1);
      assert.deepEqual(terms, [1, 1, 1]);
      assert.equal(leader, "n1");
    } else {
      assert.ok(alone > 3, `n3 reached term ${alone} alone`);
      assert.ok(terms.every((t) => t > 1), `terms ${terms}`);
    }
  }
});

Deno.test("preVote: false campaigns at once when the election timeout fires", () => {
  const n1 = new RaftCore({
    id: "n1",
    voters: ["n1", "n2", "n3"],
    random: () => 0,
    preVote: false,
  });
  for (let i = 0; i < 10; i++) n1.tick();
  assert.equal(n1.role, "candidate");
  assert.equal(n1.term, 1);
  assert.equal(n1.preCandidate, false);
});

// --- leadership transfer (dissertation §3.10) ---------------------------------

Deno.test("§3.10 leadership transfer: by default the most up-to-date voter is chosen", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.core("n1").propose("x");
  c.deliver(not(between("n1", "n2")));
  assert.equal(c.core("n1").transferLeadership(), "n3");
});

Deno.test("§3.10 leadership transfer: proposals are refused during the transfer with a retryable NotLeader-style error", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.core("n1").transferLeadership("n3");
  assert.equal(c.core("n1").transferee, "n3");
  assert.throws(() => c.core("n1").propose("x"), (e: unknown) => {
    assert.ok(e instanceof LeadershipTransferError);
    assert.ok(e instanceof NotLeaderError);
    assert.equal(e.leader, "n3");
    assert.match(e.message, /transferred to n3; retry/);
    return true;
  });
  // Still the leader: reads are still served.
  assert.equal(c.core("n1").role, "leader");
});

Deno.test("§3.10 leadership transfer: abandoned after an election timeout, and the leader resumes", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.core("n1").transferLeadership("n3");
  // n3 is unreachable: it never catches up or hears the timeoutNow, but n2
  // keeps answering, so CheckQuorum keeps n1 leading.
  c.tick("n1", 9, isolate("n3"));
  assert.equal(c.core("n1").transferee, "n3");
  assert.throws(() => c.core("n1").propose("x"), LeadershipTransferError);
  c.tick("n1", 1, isolate("n3"));
  assert.equal(c.core("n1").transferee, null);
  assert.equal(c.core("n1").role, "leader");
  assert.equal(c.core("n1").term, 1);
  c.core("n1").propose("after");
  c.deliver(isolate("n3"));
  assert.equal(c.applied.get("n2")!.at(-1)?.data, "after");
});

Deno.test("§3.10 leadership transfer: only a leader transfers, only to a voter; to itself it is a no-op", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  assert.throws(() => c.core("n2").transferLeadership("n3"), NotLeaderError);
  assert.throws(() => c.core("n1").transferLeadership("n9"), RangeError);
  assert.equal(c.core("n1").transferLeadership("n1"), "n1");
  assert.equal(c.core("n1").transferee, null);
  const solo = new RaftCore({ id: "n1", voters: ["n1"] });
  solo.campaign();
  assert.throws(() => solo.transferLeadership(), RangeError);
});

Deno.test("§3.10 leadership transfer: a vote request without the flag is still ignored within the lease (§4.2.3)", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  const request: Message = {
    type: "vote",
    from: "n3",
    to: "n2",
    term: 2,
    lastLogIndex: 1,
    lastLogTerm: 1,
  };
  c.core("n2").step(request);
  assert.equal(c.core("n2").term, 1);
  c.core("n2").step({ ...request, transfer: true });
  assert.equal(c.core("n2").term, 2);
  assert.equal(c.core("n2").hardState.vote, "n3");
});

Deno.test("§3.10 leadership transfer: a stale timeoutNow (older term) is ignored", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  c.core("n1").transferLeadership("n2");
  c.deliver();
  assert.equal(c.core("n2").role, "leader");
  c.core("n3").step({ type: "timeoutNow", from: "n1", to: "n3", term: 1 });
  c.deliver();
  assert.equal(c.core("n2").role, "leader");
  assert.equal(c.core("n3").term, 2);
});

Deno.test("§3.10: a timeoutNow not from the leader of this term is dropped and counted, and moves no term", () => {
  const c = new RaftHarness(3);
  c.elect("n1");
  const n3 = c.core("n3");
  const term = n3.term;
  // n2 is a member, but not the leader n3 follows: it cannot hand over
  // n1's leadership, in this term or a later one.
  n3.step({ type: "timeoutNow", from: "n2", to: "n3", term });
  n3.step({ type: "timeoutNow", from: "n2", to: "n3", term: term + 5 });
  // Nor can the leader itself, in a term it does not lead.
  n3.step({ type: "timeoutNow", from: "n1", to: "n3", term: term + 1 });
  assert.equal(n3.stats.anomalies.timeoutNowNotFromLeader, 3);
  assert.equal(n3.role, "follower");
  assert.equal(n3.term, term);
  c.deliver();
  assert.equal(c.core("n1").role, "leader");
  assert.equal(c.core("n1").term, term);
  // The leader's own hand-over still works.
  c.core("n1").transferLeadership("n3");
  c.deliver();
  assert.equal(n3.role, "leader");
  assert.equal(n3.stats.anomalies.timeoutNowNotFromLeader, 3);
});
