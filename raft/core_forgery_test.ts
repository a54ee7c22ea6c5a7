/**
 * Messages a correct cluster never sends (a forged or broken member): the
 * core drops and counts them (`stats.anomalies`) without moving its
 * leader, term or log, and stops on an append that contradicts a
 * committed entry (issue #16).
 */

import assert from "node:assert/strict";
import {
  CommittedEntryConflictError,
  MAX_TERM_STEP,
  RAFT_COMMITTED_ENTRY_CONFLICT,
  type RaftCore,
} from "./core.ts";
import {
  appendMessage,
  logOf,
  RaftHarness,
  snapshotMessage,
} from "../testing/raft_harness.ts";

/** A 3-node cluster where n1 leads term 1 and has committed "a" and "b". */
function settled(): RaftHarness {
  const c = new RaftHarness(3);
  c.elect("n1");
  assert.ok(c.commits("n1", "a"));
  assert.ok(c.commits("n1", "b"));
  return c;
}

/** The error `fn` throws, checked to be a {@link CommittedEntryConflictError}. */
function conflictOf(fn: () => void): CommittedEntryConflictError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof CommittedEntryConflictError, String(error));
    return error;
  }
  assert.fail("no CommittedEntryConflictError was thrown");
}

/** Term, role, leader, commit index and log of a core, to compare. */
function shape(core: RaftCore) {
  return {
    term: core.term,
    role: core.role,
    leader: core.leader,
    commit: core.commitIndex,
    log: logOf(core),
  };
}

Deno.test("§5.2 Election Safety: an append of this term from a member that is not its leader is dropped and counted", () => {
  const c = settled();
  const n2 = c.core("n2");
  const before = shape(n2);
  // n3 is a member and knows the cluster secret, but n1 leads term 1.
  n2.step(appendMessage({
    from: "n3",
    to: "n2",
    term: 1,
    prevLogIndex: 3,
    prevLogTerm: 1,
    entries: [{ index: 4, term: 1, data: "forged" }],
    commit: 4,
  }));
  n2.step(appendMessage({ from: "n3", to: "n2", term: 1, prevLogIndex: 3 }));
  n2.step(snapshotMessage({
    from: "n3",
    to: "n2",
    term: 1,
    snapshot: { index: 9, term: 1 },
  }));
  assert.equal(n2.stats.anomalies.appendNotFromLeader, 3);
  assert.deepEqual(shape(n2), before);
  c.flush();
  assert.deepEqual(c.queue, [], "nothing answered");
  // The real leader still replicates to n2.
  assert.ok(c.commits("n1", "c"));
  assert.equal(n2.commitIndex, 4);
  assert.equal(n2.entryAt(4)?.data, "c");
  assert.equal(n2.stats.anomalies.appendNotFromLeader, 3);
});

Deno.test("§5.2: a leader drops an append of its own term from another member", () => {
  const c = settled();
  const n1 = c.core("n1");
  n1.step(appendMessage({ from: "n2", to: "n1", term: 1, prevLogIndex: 3 }));
  assert.equal(n1.stats.anomalies.appendNotFromLeader, 1);
  assert.equal(n1.role, "leader");
  assert.equal(n1.leader, "n1");
});

Deno.test("§5.2: the term's leader stays known while a lost connection makes this node forget it", () => {
  const c = settled();
  const n2 = c.core("n2");
  n2.leaderConnectionLost("n1"); // forgets n1 to stand sooner (PreVote)
  assert.equal(n2.leader, null);
  n2.step(appendMessage({ from: "n3", to: "n2", term: 1, prevLogIndex: 3 }));
  assert.equal(n2.stats.anomalies.appendNotFromLeader, 1);
  assert.equal(n2.leader, null);
  // n1's next heartbeat is taken.
  n2.step(appendMessage({
    from: "n1",
    to: "n2",
    term: 1,
    prevLogIndex: 3,
    prevLogTerm: 1,
    commit: 3,
  }));
  assert.equal(n2.leader, "n1");
});

Deno.test("§5.1: an append of a later term still makes its sender this node's leader", () => {
  const c = settled();
  const n2 = c.core("n2");
  // A real election n2 did not see (n3 won term 2 with n1's vote).
  n2.step(appendMessage({
    from: "n3",
    to: "n2",
    term: 2,
    prevLogIndex: 3,
    prevLogTerm: 1,
    commit: 3,
  }));
  assert.equal(n2.term, 2);
  assert.equal(n2.leader, "n3");
  assert.equal(n2.stats.anomalies.appendNotFromLeader, 0);
  // From then on n1 is the impostor in term 2.
  n2.step(appendMessage({ from: "n1", to: "n2", term: 2, prevLogIndex: 3 }));
  assert.equal(n2.stats.anomalies.appendNotFromLeader, 1);
  assert.equal(n2.leader, "n3");
});

Deno.test("dissertation §6.4: a ReadIndex answer not from this term's leader, or of a later term, is dropped", () => {
  const c = settled();
  const n2 = c.core("n2");
  const forged = { type: "readIndexResponse", from: "n3", to: "n2" } as const;
  n2.step({ ...forged, term: 1, context: "x", index: 1 });
  n2.step({ ...forged, from: "n1", term: 7, context: "y", index: 1 });
  assert.equal(n2.stats.anomalies.readIndexNotFromLeader, 2);
  c.flush();
  assert.deepEqual(c.readStates.get("n2"), []);
  assert.equal(n2.term, 1);
  // The leader's own answer is taken.
  n2.step({ ...forged, from: "n1", term: 1, context: "z", index: 3 });
  c.flush();
  assert.deepEqual(c.readStates.get("n2"), [{ context: "z", index: 3 }]);
});

Deno.test("§5.1: a grant or acknowledgement of a later term is dropped before it moves the term", () => {
  const c = settled();
  const n1 = c.core("n1");
  n1.step({
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 5,
    success: true,
    index: 3,
    conflictTerm: 0,
    conflictIndex: 0,
  });
  n1.step({
    type: "installSnapshotResponse",
    from: "n2",
    to: "n1",
    term: 5,
    snapshotIndex: 3,
    offset: 2,
    success: true,
  });
  n1.step({
    type: "voteResponse",
    from: "n3",
    to: "n1",
    term: 5,
    granted: true,
  });
  assert.equal(n1.stats.anomalies.successFromLaterTerm, 3);
  assert.equal(n1.role, "leader");
  assert.equal(n1.term, 1);
  // A refusal of a later term is how a deposed leader learns it (§5.1).
  n1.step({
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 5,
    success: false,
    index: 3,
    conflictTerm: 0,
    conflictIndex: 0,
  });
  assert.equal(n1.role, "follower");
  assert.equal(n1.term, 5);
  assert.equal(n1.stats.anomalies.successFromLaterTerm, 3);
});

Deno.test("§4.2.1: a vote from a learner does not count and is counted as an anomaly", () => {
  const c = new RaftHarness({ voters: ["n1", "n2", "n3"], learners: ["n4"] });
  const n1 = c.core("n1");
  n1.campaign();
  assert.equal(n1.role, "candidate");
  n1.step({
    type: "voteResponse",
    from: "n4",
    to: "n1",
    term: 1,
    granted: true,
  });
  assert.equal(n1.role, "candidate", "a learner's vote does not elect");
  assert.equal(n1.stats.anomalies.voteFromNonVoter, 1);
  n1.step({
    type: "voteResponse",
    from: "n2",
    to: "n1",
    term: 1,
    granted: true,
  });
  assert.equal(n1.role, "leader");
  assert.equal(n1.stats.anomalies.voteFromNonVoter, 1);
});

Deno.test("a message that claims to come from this node itself is dropped and counted", () => {
  const c = settled();
  const n2 = c.core("n2");
  n2.step({
    type: "vote",
    from: "n2",
    to: "n2",
    term: 9,
    lastLogIndex: 9,
    lastLogTerm: 9,
  });
  assert.equal(n2.stats.anomalies.fromSelf, 1);
  assert.equal(n2.term, 1);
});

Deno.test("§5.4: an append contradicting a committed entry stops the core with an error naming index, terms and sender", () => {
  const c = settled();
  const n2 = c.core("n2");
  assert.equal(n2.commitIndex, 3);
  const before = shape(n2);
  // n3 claims to lead term 2 and holds another entry 3 (term 2): no real
  // leader of term 2 can lack the committed entry 3 of term 1.
  const forged = appendMessage({
    from: "n3",
    to: "n2",
    term: 2,
    prevLogIndex: 3,
    prevLogTerm: 2,
    commit: 3,
  });
  const error = conflictOf(() => n2.step(forged));
  assert.equal(error.code, RAFT_COMMITTED_ENTRY_CONFLICT);
  assert.equal(error.index, 3);
  assert.equal(error.localTerm, 1);
  assert.equal(error.claimedTerm, 2);
  assert.equal(error.from, "n3");
  assert.equal(error.messageTerm, 2);
  assert.match(
    error.message,
    /n2 holds committed entry 3 of term 1, but n3 .* sent term 2 .* corrupt or n3 is not to be trusted/,
  );
  assert.equal(n2.halted, error);
  assert.deepEqual(shape(n2), before, "nothing changed, not even the term");
  // It stays stopped: no later message or tick is acted on.
  assert.throws(
    () => n2.step(appendMessage({ from: "n1", to: "n2", prevLogIndex: 3 })),
    CommittedEntryConflictError,
  );
  assert.throws(() => n2.tick(), CommittedEntryConflictError);
});

Deno.test("§5.4: a late append whose entries contradict committed ones stops the core (it used to be acknowledged)", () => {
  const c = settled();
  const n2 = c.core("n2");
  // Below the commit index: once answered "success at the commit index"
  // unchecked, which set the sender's match to a log it does not hold.
  const forged = appendMessage({
    from: "n3",
    to: "n2",
    term: 2,
    prevLogIndex: 1,
    prevLogTerm: 1,
    entries: [{ index: 2, term: 2, data: "forged" }],
    commit: 2,
  });
  const error = conflictOf(() => n2.step(forged));
  assert.deepEqual([error.index, error.localTerm, error.claimedTerm], [
    2,
    1,
    2,
  ]);
  assert.equal(n2.term, 1);
});

Deno.test("§5.4: a snapshot contradicting a committed entry stops the core", () => {
  const c = settled();
  const n2 = c.core("n2");
  assert.throws(
    () =>
      n2.step(snapshotMessage({
        from: "n3",
        to: "n2",
        term: 2,
        snapshot: { index: 2, term: 2 },
      })),
    (error: unknown) =>
      error instanceof CommittedEntryConflictError && error.index === 2 &&
      error.from === "n3",
  );
});

Deno.test("§5.3: a late append that agrees with the committed log is still acknowledged", () => {
  const c = settled();
  const n2 = c.core("n2");
  c.flush();
  c.queue = [];
  n2.step(appendMessage({
    from: "n1",
    to: "n2",
    term: 1,
    prevLogIndex: 1,
    prevLogTerm: 1,
    entries: [{ index: 2, term: 1, data: "a" }],
    commit: 2,
  }));
  assert.equal(n2.halted, null);
  c.flush();
  const answers = c.queue;
  assert.equal(answers.length, 1);
  assert.equal(answers[0].type, "appendResponse");
  assert.equal((answers[0] as { success: boolean }).success, true);
});

Deno.test("a term more than MAX_TERM_STEP past this node's is dropped and counted; the cluster still elects", () => {
  const c = settled();
  const n2 = c.core("n2");
  const before = shape(n2);
  // n3 refuses a pre-vote in term 2^53 - 1 (any refusal carries the
  // refuser's term, which a node adopts): were it taken, no node could
  // ever campaign again (2^53 is not a safe integer).
  n2.step({
    type: "preVoteResponse",
    from: "n3",
    to: "n2",
    term: Number.MAX_SAFE_INTEGER,
    granted: false,
  });
  c.core("n1").step({
    type: "appendResponse",
    from: "n3",
    to: "n1",
    term: 1 + MAX_TERM_STEP + 1,
    success: false,
    index: 3,
    conflictTerm: 0,
    conflictIndex: 0,
  });
  assert.equal(n2.stats.anomalies.termJump, 1);
  assert.equal(c.core("n1").stats.anomalies.termJump, 1);
  assert.deepEqual(shape(n2), before);
  assert.equal(c.core("n1").role, "leader");
  // At the bound it is a term like any other.
  n2.step({
    type: "preVoteResponse",
    from: "n3",
    to: "n2",
    term: 1 + MAX_TERM_STEP,
    granted: false,
  });
  assert.equal(n2.term, 1 + MAX_TERM_STEP);
  assert.equal(n2.stats.anomalies.termJump, 1);
});
