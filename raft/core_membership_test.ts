import assert from "node:assert/strict";
import { LeadershipTransferError, NotLeaderError, RaftCore } from "./core.ts";
import { ConfChangeError, makeConfiguration } from "./configuration.ts";
import {
  appendMessage,
  logOf,
  RaftHarness,
  without,
} from "../testing/raft_harness.ts";

const refusal = (why: RegExp) => (e: unknown) =>
  e instanceof ConfChangeError && why.test(e.message);

// --- learners (dissertation §4.2.1) -------------------------------------------

Deno.test("dissertation §4.2.1 learners: a learner never gets a vote request, never stands, and its votes are ignored", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"], learners: ["n4"] });
  const delivered = c.tick("n1", 15); // n1's election timeout (15 ticks)
  assert.equal(c.core("n1").role, "leader");
  assert.deepEqual(
    delivered.filter((m) =>
      m.to === "n4" && (m.type === "vote" || m.type === "preVote")
    ),
    [],
  );
  // A learner's election timeout does nothing.
  c.crash("n1");
  const fromLearner = c.tick("n4", 100).filter((m) => m.from === "n4");
  assert.deepEqual(fromLearner, []);
  assert.equal(c.core("n4").role, "follower");
  assert.equal(c.core("n4").preCandidate, false);
  assert.equal(c.core("n4").term, 1);
  c.restart("n1");
  c.expireLease("n2", "n3");

  // A candidate that n2 and n3 do not answer is not elected by n4's vote.
  const n1 = c.core("n1");
  n1.campaign();
  c.flush();
  const requests = c.queue; // held back: n2 and n3 have not answered yet
  c.queue = [];
  assert.deepEqual(requests.map((m) => m.to), ["n2", "n3"]);
  n1.step({
    type: "voteResponse",
    from: "n4",
    to: "n1",
    term: n1.term,
    granted: true,
  });
  assert.equal(n1.role, "candidate");
  c.queue = requests;
  c.deliver();
  assert.equal(n1.role, "leader");
});

Deno.test("dissertation §4.2.1 learners: CheckQuorum and ReadIndex count voters only", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"], learners: ["n4"] });
  const leader = c.elect("n1");
  // A ReadIndex round acknowledged by the learner alone is not confirmed.
  leader.readIndex("r1");
  c.deliver(without("n2", "n3"));
  assert.deepEqual(c.readStates.get("n1"), []);
  c.tick("n1", 1); // the next heartbeat round carries the read's context
  assert.deepEqual(c.readStates.get("n1"), [{
    context: "r1",
    index: leader.commitIndex,
  }]);
  // With only the learner answering, the leader steps down after an
  // election timeout (10 ticks).
  for (let i = 0; i < 20 && leader.role === "leader"; i++) {
    c.tick("n1", 1, without("n2", "n3"));
  }
  assert.equal(leader.role, "follower");
});

Deno.test("dissertation §4.2.1 learners: not offered as leadership-transfer targets", () => {
  const c = new RaftHarness({ voters: ["n1", "n2"], learners: ["n3"] });
  const leader = c.elect("n1");
  leader.propose("x");
  c.deliver(without("n2")); // the learner is the most up to date
  assert.ok(
    leader.progress().get("n3")!.match > leader.progress().get("n2")!.match,
  );
  assert.throws(() => leader.transferLeadership("n3"), /n3 is not a voter/);
  assert.equal(leader.transferLeadership(), "n2");
});

// --- adding and promoting at runtime (dissertation §4.1, §4.2.1) ----------------

Deno.test("dissertation §4.1 adding a learner: a joining node learns the configuration from appends and catches up", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  const leader = c.elect("n1");
  c.commits("n1", "a");
  c.startJoining("n4");
  const n4 = c.core("n4");
  assert.deepEqual(n4.configuration, { voters: [], learners: [] });
  // A joining node never stands for election.
  c.tick("n4", 100);
  assert.equal(n4.role, "follower");
  assert.equal(n4.term, 0);

  const { index } = leader.proposeConfChange({
    type: "addLearner",
    node: "n4",
  });
  assert.deepEqual(leader.entryAt(index), {
    index,
    term: 1,
    type: "config",
    data: '{"voters":["n1","n2","n3"],"learners":["n4"]}',
  });
  // In force on the leader as soon as appended (§4.1), before it commits.
  assert.deepEqual(leader.configuration.learners, ["n4"]);
  assert.equal(leader.progress().get("n4")?.learner, true);
  c.deliver();
  assert.equal(leader.commitIndex, index);
  // n4 took appends from a leader of a term it had never seen.
  assert.equal(n4.term, 1);
  assert.deepEqual(logOf(n4), logOf(leader));
  assert.deepEqual(n4.configuration, {
    voters: ["n1", "n2", "n3"],
    learners: ["n4"],
  });
  assert.deepEqual(c.configurations.get("n4"), [n4.configuration]);
  assert.deepEqual(c.configurations.get("n2"), [n4.configuration]);
  // The driver's "caught up?" view.
  assert.deepEqual(leader.progress().get("n4"), {
    match: leader.lastIndex,
    next: leader.lastIndex + 1,
    state: "replicate",
    learner: true,
  });
  assert.deepEqual(
    [...leader.progress().values()].map((p) => p.learner),
    [false, false, true],
  );
  // State machines skip config entries; they are still committed entries.
  assert.deepEqual(
    c.applied.get("n4")!.map((e) => e.type ?? e.data),
    ["", "a", "config"],
  );
});

Deno.test("dissertation §4.2.1 promotion: the learner becomes a voter and the quorum grows to 3 of 4", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"], learners: ["n4"] });
  const leader = c.elect("n1");
  const { index } = leader.proposeConfChange({ type: "promote", node: "n4" });
  c.deliver();
  assert.equal(leader.commitIndex, index);
  assert.deepEqual(c.core("n4").voters, ["n1", "n2", "n3", "n4"]);
  assert.equal(leader.progress().get("n4")?.learner, false);
  // 2 of 4 voters no longer commit; 3 of 4 do, n4 among them.
  assert.equal(c.commits("n1", "a", without("n3", "n4")), false);
  c.deliver(without("n3"));
  assert.equal(c.commits("n1", "b", without("n3")), true);

  // The promoted node stands for election, and a restart from its disk
  // recovers the configuration from the log.
  c.crash("n4");
  c.restart("n4");
  assert.deepEqual(c.core("n4").voters, ["n1", "n2", "n3", "n4"]);
  c.crash("n1");
  c.expireLease("n2", "n3");
  c.tick("n4", 15);
  assert.equal(c.core("n4").role, "leader");
});

// --- removal (dissertation §4.1, §4.2.2) ----------------------------------------

Deno.test("dissertation §4.2.2 removing the leader: it leads without counting itself until the removal commits, then steps down", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  const leader = c.elect("n1");
  const { index } = leader.proposeConfChange({ type: "remove", node: "n1" });
  assert.deepEqual(leader.voters, ["n2", "n3"]);
  // n1 + n2 are a majority of the old configuration, not of the new one.
  c.deliver(without("n3"));
  assert.equal(leader.role, "leader");
  assert.ok(leader.commitIndex < index);
  // Proposals still go through it meanwhile.
  leader.propose("during");
  c.deliver();
  assert.ok(leader.commitIndex >= index);
  assert.equal(leader.role, "follower");
  assert.equal(leader.leader, null);
  // The others learnt the commit and the data proposed meanwhile.
  assert.equal(c.core("n2").commitIndex, leader.commitIndex);
  // The removed node never stands again...
  c.tick("n1", 100);
  assert.equal(leader.role, "follower");
  assert.equal(leader.term, 1);
  // ...and the rest elect a new leader, which sends it nothing.
  c.expireLease("n3");
  const delivered = c.tick("n2", 30);
  assert.equal(c.core("n2").role, "leader");
  assert.equal(delivered.some((m) => m.to === "n1"), false);
  assert.equal(c.commits("n2", "after"), true);
  assert.deepEqual(
    c.applied.get("n3")!.map((e) => e.data).filter((d) =>
      d === "during" || d === "after"
    ),
    ["during", "after"],
  );
});

// --- refusals -------------------------------------------------------------------

Deno.test("dissertation §4.1 one change at a time: a second change is refused while the first is uncommitted", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  const leader = c.elect("n1");
  leader.proposeConfChange({ type: "addLearner", node: "n4" });
  c.deliver(without("n2", "n3"));
  assert.throws(
    () => leader.proposeConfChange({ type: "promote", node: "n4" }),
    refusal(
      /membership change at index 2 is not committed yet; wait until it commits/,
    ),
  );
  c.tick("n1", 2);
  leader.proposeConfChange({ type: "remove", node: "n4" });
});

Deno.test("Ongaro's raft-dev fix: a leader refuses a change until an entry of its term is committed", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  const leader = c.elect("n1", (m) => m.type !== "appendResponse");
  assert.equal(leader.commitIndex, 0);
  assert.throws(
    () => leader.proposeConfChange({ type: "addLearner", node: "n4" }),
    refusal(/has not yet committed an entry of its term 1; retry shortly/),
  );
  c.tick("n1", 1);
  assert.equal(leader.commitIndex, 1);
  leader.proposeConfChange({ type: "addLearner", node: "n4" });
});

Deno.test("dissertation §4.1 refusals: a follower, a transfer, a no-op, the last voter", () => {
  const c = new RaftHarness({ voters: ["n1", "n2"] });
  const leader = c.elect("n1");
  assert.throws(
    () => c.core("n2").proposeConfChange({ type: "remove", node: "n1" }),
    (e) => e instanceof NotLeaderError && e.leader === "n1",
  );
  assert.throws(
    () => leader.proposeConfChange({ type: "addVoter", node: "n2" }),
    refusal(/changes nothing/),
  );
  leader.proposeConfChange({ type: "remove", node: "n2" });
  c.deliver();
  assert.deepEqual(leader.voters, ["n1"]);
  assert.throws(
    () => leader.proposeConfChange({ type: "remove", node: "n1" }),
    refusal(/would leave no voter; add another voter first/),
  );
  const solo = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  solo.elect("n1").transferLeadership("n2");
  assert.throws(
    () => solo.core("n1").proposeConfChange({ type: "remove", node: "n3" }),
    (e) => e instanceof LeadershipTransferError,
  );
});

// --- truncation (dissertation §4.1) ----------------------------------------------

Deno.test("dissertation §4.1 truncation: a follower whose uncommitted config entry is overwritten returns to the old configuration", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3", "n4", "n5"] });
  const old = makeConfiguration(["n1", "n2", "n3", "n4", "n5"]);
  const leader = c.elect("n1");
  leader.proposeConfChange({ type: "addLearner", node: "n6" });
  c.deliver((m) => m.from !== "n1" || m.to === "n2");
  assert.deepEqual(c.core("n2").configuration.learners, ["n6"]);
  c.crash("n1");
  // n3, n4, n5 elect n3 without n2's log.
  c.expireLease("n3", "n4", "n5");
  c.elect("n3", without("n2"));
  assert.deepEqual(c.core("n3").configuration, old);
  c.tick("n3", 2);
  const n2 = c.core("n2");
  assert.equal(n2.entryAt(2)?.term, 2);
  assert.deepEqual(n2.configuration, old);
  assert.deepEqual(c.configurations.get("n2"), [
    makeConfiguration(old.voters, ["n6"]),
    old,
  ]);
});

Deno.test("a config entry with malformed data is dropped with its message, not applied", () => {
  const core = new RaftCore({ id: "n2", voters: ["n1", "n2"] });
  core.step(appendMessage({
    entries: [{ index: 1, term: 1, data: "{", type: "config" }],
  }));
  assert.equal(core.lastIndex, 0);
  assert.deepEqual(core.voters, ["n1", "n2"]);
});

Deno.test("a node must be a member unless it joins", () => {
  assert.throws(
    () => new RaftCore({ id: "n4", voters: ["n1"] }),
    /n4 is not among voters or learners; list it there, or pass join: true/,
  );
  const learner = new RaftCore({ id: "n2", voters: ["n1"], learners: ["n2"] });
  assert.deepEqual(learner.configuration, { voters: ["n1"], learners: ["n2"] });
  const recovered = new RaftCore({
    id: "n9",
    voters: [],
    configuration: makeConfiguration(["n1", "n2"]),
  });
  assert.deepEqual(recovered.voters, ["n1", "n2"]);
});

Deno.test("dissertation §10.2.1 with one voter: a leader elected in one Ready sends its learners nothing of a term its disk does not hold yet", () => {
  // n1 is the only voter and n2 a learner: n1 stands and wins in the same
  // Ready that raises its term. Were its appends to n2 sent before that
  // term is durable, a crash before the write would let n1 lead the same
  // term again after restart with different entries at the same indices.
  const core = new RaftCore({
    id: "n1",
    voters: ["n1"],
    learners: ["n2"],
    random: () => 0.5,
    preVote: false,
  });
  for (let i = 0; i < 40 && core.role !== "leader"; i++) core.tick();
  assert.equal(core.role, "leader");
  const ready = core.ready();
  assert.equal(ready.hardState?.term, 1);
  assert.deepEqual(ready.leaderMessages, []);
  const appends = ready.messages.filter((m) => m.type === "append");
  assert.deepEqual(appends.map((m) => [m.to, m.term]), [["n2", 1]]);
  core.advance(ready);
  // Once the term is durable, appends go out before the leader's own write.
  const learner = new RaftCore({
    id: "n2",
    voters: ["n1"],
    learners: ["n2"],
    random: () => 0.5,
  });
  for (const message of appends) learner.step(message);
  const answer = learner.ready();
  learner.advance(answer);
  for (const message of answer.messages) core.step(message);
  if (core.hasReady()) core.advance(core.ready());
  core.propose("x");
  const next = core.ready();
  assert.equal(next.hardState, null);
  assert.deepEqual(
    next.leaderMessages.filter((m) => m.type === "append").map((m) => m.to),
    ["n2"],
  );
});

Deno.test("dissertation §4.1 a follower that missed the change adding the leader still follows that leader and catches up", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"] });
  const leader = c.elect("n1");
  c.startJoining("n4");
  const cut = without("n3");
  leader.proposeConfChange({ type: "addLearner", node: "n4" });
  c.deliver(cut);
  leader.proposeConfChange({ type: "promote", node: "n4" });
  c.deliver(cut);
  // n3 missed both changes: n4 is not in its configuration.
  assert.deepEqual(c.core("n3").voters, ["n1", "n2", "n3"]);
  leader.transferLeadership("n4");
  c.deliver(cut);
  const n4 = c.core("n4");
  assert.equal(n4.role, "leader");
  // n4's appends reach n3: it must not drop them as coming from a
  // non-member, or it never learns the changes (nor anything after).
  assert.equal(c.commits("n4", "after"), true);
  c.tick("n4", 3);
  assert.equal(c.core("n3").leader, "n4");
  assert.deepEqual(logOf(c.core("n3")), logOf(n4));
  assert.deepEqual(c.core("n3").voters, ["n1", "n2", "n3", "n4"]);
});

Deno.test("dissertation §4.2.2 a leader deposed before its removal commits stands again, so the new configuration can commit it", () => {
  const c = new RaftHarness({ voters: ["n1", "n2"] });
  c.elect("n1").proposeConfChange({ type: "remove", node: "n1" });
  c.flush();
  c.queue = []; // n2 never hears of the removal: n1 crashes with it on disk
  c.crash("n1");
  c.restart("n1");
  const n1 = c.core("n1");
  assert.deepEqual(n1.voters, ["n2"]);
  // n2 (still in {n1, n2}) stands, and n1 refuses it: n1's log is longer.
  c.tick("n2", 40);
  assert.notEqual(c.core("n2").role, "leader");
  // Only n1 holds the entry that makes n2 the sole voter: n1 must stand
  // again (counting n2's vote, not its own), or nobody ever leads.
  for (let i = 0; i < 200; i++) {
    c.tick(i % 2 === 0 ? "n1" : "n2");
    if (c.core("n2").role === "leader") break;
  }
  const n2 = c.core("n2");
  assert.equal(n2.role, "leader");
  assert.deepEqual(n2.voters, ["n2"]);
  assert.equal(c.commits("n2", "after"), true);
  assert.equal(n1.role, "follower");
});

Deno.test("dissertation §4.1 a voter with a stale configuration hears a candidate outside it whose log is at least as up to date", () => {
  // n5 missed the changes that made n2 a voter (its configuration is
  // {n3, n5}); n2's configuration is {n2, n5}, so n2 needs n5's vote. Were
  // n5 to drop n2's requests, neither could ever be elected.
  const n5 = new RaftCore({
    id: "n5",
    voters: ["n3", "n5"],
    random: () => 0.5,
    hardState: { term: 3, vote: null, commit: 1 },
    entries: [{ index: 1, term: 1, data: "" }],
  });
  const request = {
    from: "n2",
    to: "n5",
    term: 4,
    lastLogIndex: 2,
    lastLogTerm: 3,
  } as const;
  n5.step({ type: "preVote", ...request });
  n5.step({ type: "vote", ...request });
  const ready = n5.ready();
  assert.deepEqual(
    ready.messages.map((m) => [m.type, m.to, "granted" in m && m.granted]),
    [["preVoteResponse", "n2", true], ["voteResponse", "n2", true]],
  );
  assert.equal(n5.term, 4);
  // A node outside its configuration whose log is behind stays unheard.
  n5.advance(ready);
  n5.step({
    type: "vote",
    ...request,
    from: "n9",
    term: 9,
    lastLogIndex: 0,
    lastLogTerm: 0,
  });
  assert.equal(n5.term, 4);
  assert.equal(n5.stats.droppedNotMember, 1);
});
