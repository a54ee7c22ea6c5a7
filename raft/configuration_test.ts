import assert from "node:assert/strict";
import fc from "fast-check";
import {
  applyConfChange,
  checkTransition,
  type ConfChange,
  ConfChangeError,
  type Configuration,
  decodeConfiguration,
  encodeConfiguration,
  latestConfiguration,
  makeConfiguration,
  quorumSize,
  sameConfiguration,
} from "./configuration.ts";
import type { Entry, NodeId } from "./types.ts";

const three = makeConfiguration(["n1", "n2", "n3"]);

Deno.test("makeConfiguration sorts, deduplicates and refuses a node in both lists", () => {
  assert.deepEqual(makeConfiguration(["n3", "n1", "n3"], ["n4", "n4"]), {
    voters: ["n1", "n3"],
    learners: ["n4"],
  });
  assert.throws(
    () => makeConfiguration(["n1", "n2"], ["n2"]),
    /n2 listed both as voter and as learner/,
  );
  assert.throws(() => makeConfiguration([""]), /non-empty string/);
});

Deno.test("§5.2 quorum: a strict majority of the voters; learners never count", () => {
  assert.equal(quorumSize(makeConfiguration(["n1"])), 1);
  assert.equal(quorumSize(makeConfiguration(["n1", "n2"])), 2);
  assert.equal(quorumSize(three), 2);
  assert.equal(quorumSize(makeConfiguration(["n1", "n2", "n3"], ["n4"])), 2);
  assert.equal(quorumSize(makeConfiguration(["n1", "n2", "n3", "n4"])), 3);
});

Deno.test("dissertation §4.1 applyConfChange: each change type yields the whole new configuration", () => {
  const withLearner = applyConfChange(three, {
    type: "addLearner",
    node: "n4",
  });
  assert.deepEqual(withLearner, {
    voters: ["n1", "n2", "n3"],
    learners: ["n4"],
  });
  assert.deepEqual(
    applyConfChange(withLearner, { type: "promote", node: "n4" }),
    {
      voters: ["n1", "n2", "n3", "n4"],
      learners: [],
    },
  );
  assert.deepEqual(applyConfChange(three, { type: "addVoter", node: "n5" }), {
    voters: ["n1", "n2", "n3", "n5"],
    learners: [],
  });
  assert.deepEqual(
    applyConfChange(withLearner, { type: "remove", node: "n2" }),
    {
      voters: ["n1", "n3"],
      learners: ["n4"],
    },
  );
  assert.deepEqual(
    applyConfChange(withLearner, { type: "remove", node: "n4" }),
    three,
  );
});

Deno.test("dissertation §4.1 applyConfChange refuses what does not apply, saying why", () => {
  const refuses = (config: Configuration, change: ConfChange, why: RegExp) =>
    assert.throws(
      () => applyConfChange(config, change),
      (e) => e instanceof ConfChangeError && why.test(e.message),
    );
  refuses(three, { type: "addVoter", node: "n1" }, /changes nothing/);
  refuses(
    three,
    { type: "addLearner", node: "n1" },
    /n1 is a voter; to make it a learner, remove it/,
  );
  refuses(three, { type: "promote", node: "n4" }, /n4 is not a learner/);
  refuses(three, { type: "remove", node: "n9" }, /n9 is not a member/);
  refuses(
    makeConfiguration(["n1"], ["n2"]),
    { type: "remove", node: "n1" },
    /no voter/,
  );
  refuses(three, { type: "addVoter", node: "" }, /non-empty string/);
  refuses(
    three,
    { type: "demote" as "remove", node: "n1" },
    /unknown membership change type "demote"/,
  );
});

Deno.test("dissertation §4.1 checkTransition refuses a change of two voters at once", () => {
  assert.throws(
    () => checkTransition(three, makeConfiguration(["n1", "n4", "n5"])),
    /adds voters \[n4,n5\] and removes \[n2,n3\]; only one voter may change at a time/,
  );
  // Learners may come and go alongside (they are in no quorum).
  checkTransition(three, makeConfiguration(["n1", "n2", "n3", "n4"], ["n5"]));
});

Deno.test("config entry data round-trips, and malformed data is refused clearly", () => {
  const config = makeConfiguration(["n1", "n2"], ["n3"]);
  assert.equal(
    encodeConfiguration(config),
    '{"voters":["n1","n2"],"learners":["n3"]}',
  );
  assert.deepEqual(decodeConfiguration(encodeConfiguration(config)), config);
  assert.throws(() => decodeConfiguration("nope"), /must hold .*not JSON/);
  assert.throws(
    () => decodeConfiguration('{"voters":[]}'),
    /arrays of non-empty strings/,
  );
  assert.throws(
    () => decodeConfiguration('{"voters":[],"learners":[]}'),
    /no voter/,
  );
  assert.throws(
    () => decodeConfiguration('{"voters":["a"],"learners":["a"]}'),
    /both as voter and as learner/,
  );
  assert.throws(
    () => decodeConfiguration("null"),
    /arrays of non-empty strings/,
  );
});

Deno.test("latestConfiguration: the last config entry, else the fallback", () => {
  const entries: Entry[] = [
    { index: 1, term: 1, data: "" },
    {
      index: 2,
      term: 1,
      data: '{"voters":["n1"],"learners":["n2"]}',
      type: "config",
    },
    {
      index: 3,
      term: 1,
      data: '{"voters":["n1","n2"],"learners":[]}',
      type: "config",
    },
    { index: 4, term: 1, data: "x" },
  ];
  assert.deepEqual(
    latestConfiguration(entries, three),
    makeConfiguration(["n1", "n2"]),
  );
  assert.deepEqual(
    latestConfiguration(entries.slice(0, 2), three),
    makeConfiguration(["n1"], ["n2"]),
  );
  assert.equal(latestConfiguration(entries.slice(0, 1), three), three);
});

/** Every subset of `ids`. */
function subsets(ids: readonly NodeId[]): NodeId[][] {
  const out: NodeId[][] = [];
  for (let mask = 0; mask < 1 << ids.length; mask++) {
    out.push(ids.filter((_, i) => (mask & (1 << i)) !== 0));
  }
  return out;
}

/** Whether some majority of `a` and some majority of `b` share no voter. */
function disjointMajorities(a: Configuration, b: Configuration): boolean {
  const majorities = (c: Configuration) =>
    subsets(c.voters).filter((s) => s.length >= quorumSize(c));
  const ofB = majorities(b);
  return majorities(a).some((m) =>
    ofB.some((n) => !n.some((id) => m.includes(id)))
  );
}

const pool = ["n1", "n2", "n3", "n4", "n5", "n6", "n7"];
const changeArb = fc.record({
  type: fc.constantFrom(
    "addLearner",
    "addVoter",
    "promote",
    "remove",
  ) as fc.Arbitrary<
    ConfChange["type"]
  >,
  node: fc.constantFrom(...pool),
});

Deno.test("dissertation §4.1 safety: across random single-server changes no two consecutive configurations have disjoint majorities", () => {
  fc.assert(
    fc.property(
      fc.subarray(pool, { minLength: 1, maxLength: 5 }),
      fc.array(changeArb, { maxLength: 30 }),
      (voters, changes) => {
        let config = makeConfiguration(voters);
        for (const change of changes) {
          let next: Configuration;
          try {
            next = applyConfChange(config, change);
          } catch (error) {
            assert.ok(error instanceof ConfChangeError);
            continue;
          }
          assert.equal(disjointMajorities(config, next), false);
          assert.equal(disjointMajorities(next, config), false);
          assert.ok(next.voters.length >= 1);
          config = next;
        }
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("dissertation §4.1: checkTransition never allows a transition with disjoint majorities", () => {
  const configArb = fc.subarray(pool.slice(0, 5), { minLength: 1 }).map((v) =>
    makeConfiguration(v)
  );
  fc.assert(
    fc.property(configArb, configArb, (a, b) => {
      let allowed = true;
      try {
        checkTransition(a, b);
      } catch {
        allowed = false;
      }
      // Allowed transitions never have disjoint majorities; the refused
      // ones here may (e.g. {n1,n2,n3} -> {n1,n4,n5}).
      if (allowed) assert.equal(disjointMajorities(a, b), false);
    }),
    { numRuns: 500 },
  );
  // The check is not vacuous: a two-voter swap does have disjoint majorities.
  assert.equal(
    disjointMajorities(three, makeConfiguration(["n1", "n4", "n5"])),
    true,
  );
});

/** Asserts that `fn` throws a `type` whose message includes `text`. */
function throwsWith(
  fn: () => unknown,
  type: ErrorConstructor | typeof ConfChangeError,
  text: string,
) {
  assert.throws(
    fn,
    (e: unknown) => e instanceof type && e.message.includes(text),
  );
}

Deno.test("dissertation §4.1 addresses are replicated state: a change's peer and client URLs enter the configuration, remove drops them", () => {
  const boot = makeConfiguration(["n1", "n2"], [], {
    peerUrls: { n1: "tcp://h:1", n2: "tcp://h:2", stranger: "tcp://h:9" },
  });
  assert.deepEqual(boot.peerUrls, { n1: "tcp://h:1", n2: "tcp://h:2" });
  assert.deepEqual(boot.clientUrls, undefined);
  const added = applyConfChange(boot, {
    type: "addLearner",
    node: "n3",
    peerUrl: "tcp://h:3",
    clientUrl: "tcp://h:33",
  });
  assert.deepEqual(added, {
    voters: ["n1", "n2"],
    learners: ["n3"],
    peerUrls: { n1: "tcp://h:1", n2: "tcp://h:2", n3: "tcp://h:3" },
    clientUrls: { n3: "tcp://h:33" },
  });
  const promoted = applyConfChange(added, { type: "promote", node: "n3" });
  assert.deepEqual(promoted.peerUrls, added.peerUrls);
  assert.deepEqual(promoted.voters, ["n1", "n2", "n3"]);
  const removed = applyConfChange(promoted, { type: "remove", node: "n3" });
  assert.deepEqual(removed, {
    voters: ["n1", "n2"],
    learners: [],
    peerUrls: { n1: "tcp://h:1", n2: "tcp://h:2" },
  });
  // The same learner with the same URL changes nothing; a moved URL does.
  throwsWith(
    () =>
      applyConfChange(added, {
        type: "addLearner",
        node: "n3",
        peerUrl: "tcp://h:3",
      }),
    ConfChangeError,
    "changes nothing",
  );
  assert.deepEqual(
    applyConfChange(added, {
      type: "addLearner",
      node: "n3",
      peerUrl: "tcp://h:4",
    })
      .peerUrls?.n3,
    "tcp://h:4",
  );
  throwsWith(
    () =>
      applyConfChange(boot, { type: "addLearner", node: "n3", peerUrl: "" }),
    ConfChangeError,
    "peerUrl must be a non-empty string",
  );
  assert.deepEqual(sameConfiguration(added, promoted), false);
  assert.deepEqual(
    sameConfiguration(
      boot,
      makeConfiguration(["n1", "n2"], [], {
        peerUrls: { n1: "tcp://h:1", n2: "tcp://other:2" },
      }),
    ),
    false,
  );
});

Deno.test("config entry data carries the URLs and round-trips; a malformed URL map is refused", () => {
  const config = makeConfiguration(["n1"], ["n2"], {
    peerUrls: { n1: "tcp://h:1", n2: "tcp://h:2" },
    clientUrls: { n2: "tcp://h:22" },
  });
  assert.deepEqual(decodeConfiguration(encodeConfiguration(config)), config);
  // An entry written before URLs existed still reads.
  assert.deepEqual(
    decodeConfiguration('{"voters":["n1"],"learners":[]}'),
    makeConfiguration(["n1"]),
  );
  throwsWith(
    () =>
      decodeConfiguration('{"voters":["n1"],"learners":[],"peerUrls":["x"]}'),
    TypeError,
    "peerUrls and clientUrls must map ids to non-empty strings",
  );
  throwsWith(
    () =>
      decodeConfiguration(
        '{"voters":["n1"],"learners":[],"peerUrls":{"n1":3}}',
      ),
    TypeError,
    "peerUrls and clientUrls",
  );
});
