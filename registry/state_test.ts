import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type ApplyOutcome,
  type Command,
  encodeCommand,
  RegistryState,
} from "./state.ts";
import { ID_IN_USE, LEASE_NOT_FOUND } from "../protocol/registry.ts";

function apply(state: RegistryState, command: Command): ApplyOutcome {
  return state.apply(encodeCommand(command));
}

function bind(
  name: string,
  id: string,
  url = `tcp://127.0.0.1:${9000 + id.length}`,
  extra: Partial<Extract<Command, { op: "bind" }>> = {},
): Command {
  return { op: "bind", name, endpoint: { id, url }, ...extra };
}

function ids(state: RegistryState, name: string): string[] {
  return state.bindings(name).map((b) => b.id);
}

function value(outcome: ApplyOutcome) {
  assert.ok(outcome.result.ok, JSON.stringify(outcome.result));
  return outcome.result.value;
}

function error(outcome: ApplyOutcome) {
  assert.ok(!outcome.result.ok, JSON.stringify(outcome.result));
  return outcome.result.error;
}

Deno.test("a new state is empty at revision 0 and holds history from revision 1", () => {
  const state = new RegistryState();
  assert.equal(state.revision, 0);
  assert.equal(state.compactRevision, 1);
  assert.deepEqual(state.bindings("hello"), []);
  assert.deepEqual(state.names(), []);
  assert.deepEqual(state.eventsFrom(1), []);
});

Deno.test("bind adds endpoints in binding order, bumps the revision once per entry, and records put events", () => {
  const state = new RegistryState();
  const first = apply(state, bind("hello", "a", "tcp://127.0.0.1:9001"));
  assert.equal(value(first).revision, 1);
  assert.deepEqual(first.change?.events.map((e) => [e.type, e.endpoint.id]), [
    ["put", "a"],
  ]);
  apply(state, bind("hello", "b", "tcp://127.0.0.1:9002"));
  assert.deepEqual(ids(state, "hello"), ["a", "b"]);
  assert.equal(state.revision, 2);
  const [a] = state.bindings("hello");
  assert.deepEqual(a, {
    name: "hello",
    id: "a",
    url: "tcp://127.0.0.1:9001",
    attrs: {},
    weight: 1,
    zone: null,
    leaseId: null,
    createRevision: 1,
    modRevision: 1,
    state: "serving",
    check: null,
  });
  assert.deepEqual(state.eventsFrom(2)?.map((i) => i.revision), [2]);
});

Deno.test("re-binding the same id replaces it in place; an identical bind changes nothing", () => {
  const state = new RegistryState();
  apply(state, bind("hello", "a", "tcp://127.0.0.1:9001"));
  apply(state, bind("hello", "b", "tcp://127.0.0.1:9002"));
  const same = apply(state, bind("hello", "a", "tcp://127.0.0.1:9001"));
  assert.equal(same.change, null);
  assert.equal(value(same).revision, 2);
  apply(state, bind("hello", "a", "tcp://127.0.0.1:9009"));
  assert.deepEqual(ids(state, "hello"), ["a", "b"]);
  const a = state.binding("hello", "a")!;
  assert.equal(a.url, "tcp://127.0.0.1:9009");
  // The same instance (no lease change) keeps its creation revision.
  assert.equal(a.createRevision, 1);
  assert.equal(a.modRevision, 3);
});

Deno.test("unbind removes one endpoint and the name once empty; a missing one removes nothing", () => {
  const state = new RegistryState();
  apply(state, bind("hello", "a"));
  const missing = apply(state, { op: "unbind", name: "hello", id: "zz" });
  assert.deepEqual(value(missing), { revision: 1, removed: 0 });
  assert.equal(missing.change, null);
  const removed = apply(state, { op: "unbind", name: "hello", id: "a" });
  assert.deepEqual(value(removed), { revision: 2, removed: 1 });
  assert.equal(removed.change?.events[0].type, "delete");
  assert.equal(removed.change?.events[0].reason, "unbound");
  assert.deepEqual(state.names(), []);
});

Deno.test("a lease is granted, holds bindings, and its revoke removes them all in one revision", () => {
  const state = new RegistryState();
  const granted = apply(state, { op: "leaseGrant", id: "L1", ttlMs: 5000 });
  assert.deepEqual(value(granted), {
    revision: 0,
    lease: { id: "L1", ttlMs: 5000 },
  });
  assert.deepEqual(granted.change?.granted, [{ id: "L1", ttlMs: 5000 }]);
  apply(state, bind("hello", "a", undefined, { leaseId: "L1" }));
  apply(state, bind("db", "x", undefined, { leaseId: "L1" }));
  apply(state, bind("hello", "b"));
  assert.deepEqual(state.lease("L1")?.bindings, ["hello\na", "db\nx"]);
  const revoked = apply(state, { op: "leaseRevoke", id: "L1" });
  assert.deepEqual(value(revoked), { revision: 4, removed: 2 });
  assert.deepEqual(
    revoked.change?.events.map((
      e,
    ) => [e.name, e.endpoint.id, e.reason, e.revision]),
    [["hello", "a", "leaseRevoked", 4], ["db", "x", "leaseRevoked", 4]],
  );
  assert.deepEqual(revoked.change?.removed, ["L1"]);
  assert.deepEqual(ids(state, "hello"), ["b"]);
  assert.equal(state.lease("L1"), undefined);
  assert.equal(state.leaseCount, 0);
});

Deno.test("bind with grant creates the lease and the binding in one entry", () => {
  const state = new RegistryState();
  const outcome = apply(
    state,
    bind("hello", "a", undefined, { grant: { id: "L9", ttlMs: 3000 } }),
  );
  const result = value(outcome);
  assert.equal(result.revision, 1);
  assert.deepEqual(result.lease, { id: "L9", ttlMs: 3000 });
  assert.equal(result.binding?.leaseId, "L9");
  assert.deepEqual(outcome.change?.granted, [{ id: "L9", ttlMs: 3000 }]);
  assert.deepEqual(state.lease("L9")?.bindings, ["hello\na"]);
  // Granting an id that exists is refused, and nothing changes.
  const again = apply(
    state,
    bind("hello", "b", undefined, { grant: { id: "L9", ttlMs: 3000 } }),
  );
  assert.equal(error(again).code, -32602);
  assert.deepEqual(ids(state, "hello"), ["a"]);
});

Deno.test("binding to a lease that does not exist fails with LEASE_NOT_FOUND and changes nothing", () => {
  const state = new RegistryState();
  const outcome = apply(
    state,
    bind("hello", "a", undefined, { leaseId: "nope" }),
  );
  const failure = error(outcome);
  assert.equal(failure.code, LEASE_NOT_FOUND);
  assert.deepEqual(failure.data, { leaseId: "nope" });
  assert.match(failure.message, /grant a new lease and bind again/);
  assert.equal(state.revision, 0);
  assert.equal(
    error(apply(state, { op: "leaseRevoke", id: "nope" })).code,
    LEASE_NOT_FOUND,
  );
});

Deno.test("a new instance under the same id takes the binding over; the old instance's unbind and revoke leave it", () => {
  const state = new RegistryState();
  apply(
    state,
    bind("hello", "h1", "tcp://127.0.0.1:9001", {
      grant: { id: "old", ttlMs: 3000 },
    }),
  );
  apply(
    state,
    bind("hello", "h1", "tcp://127.0.0.1:9002", {
      grant: { id: "new", ttlMs: 3000 },
    }),
  );
  const binding = state.binding("hello", "h1")!;
  assert.equal(binding.leaseId, "new");
  assert.equal(binding.createRevision, 2);
  assert.deepEqual(state.lease("old")?.bindings, []);
  const unbind = apply(state, {
    op: "unbind",
    name: "hello",
    id: "h1",
    leaseId: "old",
  });
  assert.deepEqual(value(unbind), { revision: 2, removed: 0 });
  apply(state, { op: "leaseRevoke", id: "old" });
  assert.equal(state.binding("hello", "h1")?.url, "tcp://127.0.0.1:9002");
});

Deno.test("ID_IN_USE: a bind whose id another live lease holds at another url is refused with data, changing nothing", () => {
  const state = new RegistryState();
  apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9001", {
      grant: { id: "first", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  );
  const revision = state.revision;
  const refused = error(apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9002", {
      grant: { id: "second", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  ));
  assert.equal(refused.code, ID_IN_USE);
  assert.deepEqual(refused.data, {
    name: "hello",
    id: "s1",
    leaseId: "first",
    url: "tcp://127.0.0.1:9001",
    ttlMs: 10_000,
  });
  assert.match(
    refused.message,
    /^Id in use: endpoint "s1" of "hello" is held by another live server at tcp:\/\/127\.0\.0\.1:9001 \(lease first\); start this one with another id, stop the other server, or wait for its lease to expire \(10 s after its last keep-alive\)$/,
  );
  // Nothing changed: the first keeps the binding, the grant was not made.
  assert.equal(state.revision, revision);
  assert.equal(state.binding("hello", "s1")?.leaseId, "first");
  assert.equal(state.lease("second"), undefined);
  // Also with an existing lease, and without one.
  apply(state, { op: "leaseGrant", id: "other", ttlMs: 5000 });
  const withLease = bind("hello", "s1", "tcp://127.0.0.1:9003", {
    leaseId: "other",
    exclusiveId: true,
  });
  assert.equal(error(apply(state, withLease)).code, ID_IN_USE);
  assert.equal(
    error(apply(
      state,
      bind("hello", "s1", "tcp://127.0.0.1:9003", { exclusiveId: true }),
    )).code,
    ID_IN_USE,
  );
  assert.deepEqual(state.lease("other")?.bindings, []);
  // The holder itself may rebind, even at another url.
  const moved = bind("hello", "s1", "tcp://127.0.0.1:9004", {
    leaseId: "first",
    exclusiveId: true,
  });
  assert.equal(value(apply(state, moved)).binding?.url, "tcp://127.0.0.1:9004");
});

Deno.test("ID_IN_USE: the same url (a restarted server) takes the binding over with its new lease", () => {
  const state = new RegistryState();
  apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9001", {
      grant: { id: "before", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  );
  const restarted = value(apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9001", {
      grant: { id: "after", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  ));
  assert.equal(restarted.binding?.leaseId, "after");
  assert.deepEqual(state.lease("before")?.bindings, []);
  assert.deepEqual(state.lease("after")?.bindings, ["hello\ns1"]);
  // The old lease's expiry leaves the new binding.
  apply(state, { op: "leaseExpire", ids: ["before"] });
  assert.equal(state.binding("hello", "s1")?.leaseId, "after");
});

Deno.test("ID_IN_USE: once the holding lease is revoked or expired, or the binding is lease-less, the id is free", () => {
  const state = new RegistryState();
  const second = (lease: string) =>
    bind("hello", "s1", "tcp://127.0.0.1:9002", {
      grant: { id: lease, ttlMs: 10_000 },
      exclusiveId: true,
    });
  apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9001", {
      grant: { id: "a", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  );
  assert.equal(error(apply(state, second("b"))).code, ID_IN_USE);
  apply(state, { op: "leaseExpire", ids: ["a"] });
  assert.equal(value(apply(state, second("b"))).binding?.leaseId, "b");
  // Revoked.
  assert.equal(
    error(apply(
      state,
      bind("hello", "s1", "tcp://127.0.0.1:9003", { exclusiveId: true }),
    )).code,
    ID_IN_USE,
  );
  apply(state, { op: "leaseRevoke", id: "b" });
  // Lease-less now (a static binding): replaced by anyone, as a put.
  assert.equal(
    value(apply(
      state,
      bind("hello", "s1", "tcp://127.0.0.1:9003", { exclusiveId: true }),
    )).binding?.leaseId,
    null,
  );
  const leased = value(apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9004", {
      grant: { id: "c", ttlMs: 10_000 },
      exclusiveId: true,
    }),
  ));
  assert.equal(leased.binding?.url, "tcp://127.0.0.1:9004");
});

Deno.test("ID_IN_USE: a bind entry without exclusiveId (an earlier version's) replaces as before", () => {
  const state = new RegistryState();
  apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9001", {
      grant: { id: "a", ttlMs: 10_000 },
    }),
  );
  const replaced = value(apply(
    state,
    bind("hello", "s1", "tcp://127.0.0.1:9002", {
      grant: { id: "b", ttlMs: 10_000 },
    }),
  ));
  assert.equal(replaced.binding?.leaseId, "b");
});

Deno.test("lease expiry removes the bindings of every expired lease and ignores ids already gone", () => {
  const state = new RegistryState();
  apply(state, { op: "leaseGrant", id: "A", ttlMs: 3000 });
  apply(state, { op: "leaseGrant", id: "B", ttlMs: 3000 });
  apply(state, bind("s", "a", undefined, { leaseId: "A" }));
  apply(state, bind("s", "b", undefined, { leaseId: "B" }));
  const outcome = apply(state, { op: "leaseExpire", ids: ["A", "gone", "B"] });
  assert.deepEqual(value(outcome), { revision: 3, removed: 2 });
  assert.deepEqual(outcome.change?.events.map((e) => e.reason), [
    "leaseExpired",
    "leaseExpired",
  ]);
  assert.deepEqual(outcome.change?.removed, ["A", "B"]);
  const none = apply(state, { op: "leaseExpire", ids: ["A"] });
  assert.equal(none.change, null);
});

Deno.test("draining, health transitions, and what they ignore", () => {
  const state = new RegistryState();
  apply(state, bind("s", "a"));
  const created = state.binding("s", "a")!.createRevision;
  const sick = apply(state, {
    op: "health",
    name: "s",
    id: "a",
    createRevision: created,
    healthy: false,
  });
  assert.equal(value(sick).binding?.state, "unhealthy");
  assert.equal(sick.change?.events[0].endpoint.state, "unhealthy");
  // A repeated transition, or one about an older instance, changes nothing.
  assert.equal(
    apply(state, {
      op: "health",
      name: "s",
      id: "a",
      createRevision: created,
      healthy: false,
    }).change,
    null,
  );
  assert.equal(
    apply(state, {
      op: "health",
      name: "s",
      id: "a",
      createRevision: created + 7,
      healthy: true,
    }).change,
    null,
  );
  apply(state, {
    op: "health",
    name: "s",
    id: "a",
    createRevision: created,
    healthy: true,
  });
  assert.equal(state.binding("s", "a")?.state, "serving");
  apply(state, { op: "setState", name: "s", id: "a", state: "draining" });
  assert.equal(state.binding("s", "a")?.state, "draining");
  // Health checks do not override draining.
  apply(state, {
    op: "health",
    name: "s",
    id: "a",
    createRevision: created,
    healthy: false,
  });
  assert.equal(state.binding("s", "a")?.state, "draining");
  const missing = apply(state, {
    op: "setState",
    name: "s",
    id: "zz",
    state: "draining",
  });
  assert.match(error(missing).message, /no endpoint "zz" is bound under "s"/);
});

Deno.test("bindings() filters by query attributes", () => {
  const state = new RegistryState();
  apply(state, {
    op: "bind",
    name: "db",
    endpoint: {
      id: "a",
      url: "tcp://h:1",
      attrs: { version: "1.0", team: "blue" },
    },
  });
  apply(state, {
    op: "bind",
    name: "db",
    endpoint: {
      id: "b",
      url: "tcp://h:2",
      attrs: { version: "2.0", team: "blue" },
    },
  });
  apply(state, {
    op: "bind",
    name: "db",
    endpoint: { id: "c", url: "tcp://h:3" },
  });
  assert.deepEqual(state.bindings("db", { version: "1.0" }).map((b) => b.id), [
    "a",
  ]);
  assert.deepEqual(state.bindings("db", { team: "blue" }).map((b) => b.id), [
    "a",
    "b",
  ]);
  assert.deepEqual(state.bindings("db", { team: "red" }), []);
  assert.deepEqual(state.bindings("db").map((b) => b.id), ["a", "b", "c"]);
});

Deno.test("names() lists names under a prefix, sorted, with counts", () => {
  const state = new RegistryState();
  apply(state, bind("services/db", "a"));
  apply(state, bind("services/api", "a"));
  apply(state, bind("services/api", "b"));
  apply(state, bind("other", "a"));
  assert.deepEqual(state.names("services/"), [
    { name: "services/api", count: 2 },
    { name: "services/db", count: 1 },
  ]);
  assert.equal(state.names().length, 3);
});

Deno.test("the history window keeps whole revisions up to historyEvents and reports what it dropped", () => {
  const state = new RegistryState({ historyEvents: 3 });
  for (let i = 1; i <= 5; i++) apply(state, bind("s", `e${i}`));
  assert.equal(state.revision, 5);
  assert.equal(state.compactRevision, 3);
  assert.equal(state.eventsFrom(2), null);
  assert.deepEqual(state.eventsFrom(3)?.map((i) => i.revision), [3, 4, 5]);
  assert.deepEqual(state.eventsFrom(5)?.map((i) => i.events[0].endpoint.id), [
    "e5",
  ]);
  assert.deepEqual(state.eventsFrom(6), []);
  // A revision larger than the window is kept whole.
  apply(state, { op: "leaseGrant", id: "L", ttlMs: 1000 });
  for (let i = 1; i <= 4; i++) {
    apply(state, bind("t", `t${i}`, undefined, { leaseId: "L" }));
  }
  apply(state, { op: "leaseRevoke", id: "L" });
  assert.equal(state.compactRevision, state.revision);
  assert.equal(state.eventsFrom(state.revision)?.[0].events.length, 4);
  assert.deepEqual(state.eventsFrom(0, "s"), null);
});

Deno.test("eventsFrom filters by prefix and leaves out revisions with no match", () => {
  const state = new RegistryState();
  apply(state, bind("a/x", "1"));
  apply(state, bind("b/x", "1"));
  apply(state, bind("a/y", "1"));
  assert.deepEqual(
    state.eventsFrom(1, "a/")?.map((i) => [i.revision, i.events[0].name]),
    [[1, "a/x"], [3, "a/y"]],
  );
});

Deno.test("a malformed or forged entry yields an error result and changes nothing", () => {
  const state = new RegistryState();
  apply(state, bind("hello", "a"));
  const before = JSON.stringify(state.snapshot());
  for (
    const data of [
      "not json",
      "[1,2]",
      "null",
      '{"op":"bind","name":"x"}',
      '{"op":"bind","name":"x","endpoint":{"id":"a","url":"tcp://h:1","weight":0}}',
      '{"op":"bind","name":"x","endpoint":{"id":"a","url":"tcp://h:1","attrs":{"k":1}}}',
      '{"op":"bind","name":"x","endpoint":{"id":"a","url":"tcp://h:1"},"leaseId":"A","grant":{"id":"B","ttlMs":10}}',
      '{"op":"bind","name":"x","endpoint":{"id":"a","url":"tcp://h:1","check":{"kind":"udp"}}}',
      '{"op":"leaseGrant","id":"L","ttlMs":-5}',
      '{"op":"leaseGrant","id":"L","ttlMs":1e20}',
      '{"op":"leaseExpire","ids":[]}',
      '{"op":"health","name":"hello","id":"a","createRevision":"1","healthy":false}',
      '{"op":"setState","name":"hello","id":"a","state":"unhealthy"}',
      '{"op":"drop-table"}',
      '{"op":"__proto__"}',
    ]
  ) {
    const outcome = state.apply(data);
    assert.equal(outcome.result.ok, false, data);
    assert.equal(outcome.change, null, data);
  }
  assert.equal(JSON.stringify(state.snapshot()), before);
});

Deno.test("entries written by the walking skeleton (bind with id and url only) still apply", () => {
  const state = new RegistryState();
  state.apply(
    '{"op":"bind","name":"svc","endpoint":{"id":"a","url":"tcp://127.0.0.1:9001"}}',
  );
  state.apply('{"op":"unbind","name":"svc","id":"zz"}');
  assert.deepEqual(ids(state, "svc"), ["a"]);
  assert.equal(state.revision, 1);
});

Deno.test("returned bindings and events are copies: changing them does not change the state", () => {
  const state = new RegistryState();
  apply(state, {
    op: "bind",
    name: "s",
    endpoint: { id: "a", url: "tcp://h:1", attrs: { k: "v" } },
  });
  state.bindings("s")[0].attrs.k = "changed";
  state.eventsFrom(1)![0].events[0].endpoint.attrs.k = "changed";
  assert.equal(state.binding("s", "a")?.attrs.k, "v");
  assert.equal(state.eventsFrom(1)![0].events[0].endpoint.attrs.k, "v");
});

Deno.test("restore refuses what is not a snapshot, naming the problem", () => {
  assert.throws(
    () => RegistryState.restore({ version: 2 } as never),
    /not a registry snapshot: version is not 1/,
  );
  const snapshot = new RegistryState().snapshot();
  assert.throws(
    () =>
      RegistryState.restore(
        { ...snapshot, bindings: [{ name: "x" }] } as never,
      ),
    /malformed binding/,
  );
});

Deno.test("§7 load replaces a state's content in place with a snapshot's (an InstallSnapshot on a follower); a bad snapshot leaves it unchanged", () => {
  const leader = new RegistryState();
  apply(leader, {
    op: "bind",
    name: "svc",
    endpoint: { id: "a", url: "tcp://127.0.0.1:9001" },
    grant: { id: "L1", ttlMs: 5000 },
  });
  apply(leader, {
    op: "bind",
    name: "svc",
    endpoint: { id: "b", url: "tcp://127.0.0.1:9002" },
  });
  const follower = new RegistryState();
  apply(follower, {
    op: "bind",
    name: "old",
    endpoint: { id: "x", url: "tcp://127.0.0.1:9009" },
    grant: { id: "L9", ttlMs: 5000 },
  });
  const same = follower;
  follower.load(JSON.parse(JSON.stringify(leader.snapshot())));
  assert.equal(same, follower);
  assert.deepEqual(follower.snapshot(), leader.snapshot());
  assert.deepEqual(follower.bindings("old"), []);
  assert.deepEqual(follower.leases().map((l) => l.id), ["L1"]);
  // It goes on applying from there as the leader does.
  const next: Command = { op: "unbind", name: "svc", id: "b" };
  apply(follower, next);
  apply(leader, next);
  assert.deepEqual(follower.snapshot(), leader.snapshot());
  const before = follower.snapshot();
  assert.throws(
    () => follower.load({ version: 2 } as never),
    /not a registry snapshot/,
  );
  assert.deepEqual(follower.snapshot(), before);
});

// --- determinism: the whole log vs a snapshot in the middle plus the rest ---

const NAMES = ["a", "a/b", "b", "svcx"];
const IDS = ["i1", "i2", "i3"];
const LEASES = ["L1", "L2", "L3"];

const commandArbitrary: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    op: fc.constant("bind" as const),
    name: fc.constantFrom(...NAMES),
    endpoint: fc.record({
      id: fc.constantFrom(...IDS),
      url: fc.constantFrom("tcp://h:1", "tcp://h:2"),
      attrs: fc.constantFrom<Record<string, string>[]>({}, { v: "1" }, {
        v: "2",
        t: "x",
      }),
      weight: fc.integer({ min: 1, max: 3 }),
    }),
  }),
  fc.record({
    op: fc.constant("bind" as const),
    name: fc.constantFrom(...NAMES),
    endpoint: fc.record({
      id: fc.constantFrom(...IDS),
      url: fc.constant("tcp://h:3"),
    }),
    leaseId: fc.constantFrom(...LEASES),
  }),
  fc.record({
    op: fc.constant("bind" as const),
    name: fc.constantFrom(...NAMES),
    endpoint: fc.record({
      id: fc.constantFrom(...IDS),
      url: fc.constant("tcp://h:4"),
    }),
    grant: fc.record({
      id: fc.constantFrom(...LEASES),
      ttlMs: fc.constant(2000),
    }),
  }),
  fc.record({
    op: fc.constant("unbind" as const),
    name: fc.constantFrom(...NAMES),
    id: fc.constantFrom(...IDS),
  }),
  fc.record({
    op: fc.constant("setState" as const),
    name: fc.constantFrom(...NAMES),
    id: fc.constantFrom(...IDS),
    state: fc.constantFrom("serving" as const, "draining" as const),
  }),
  fc.record({
    op: fc.constant("health" as const),
    name: fc.constantFrom(...NAMES),
    id: fc.constantFrom(...IDS),
    createRevision: fc.integer({ min: 0, max: 30 }),
    healthy: fc.boolean(),
  }),
  fc.record({
    op: fc.constant("leaseGrant" as const),
    id: fc.constantFrom(...LEASES),
    ttlMs: fc.constantFrom(1000, 5000),
  }),
  fc.record({
    op: fc.constant("leaseRevoke" as const),
    id: fc.constantFrom(...LEASES),
  }),
  fc.record({
    op: fc.constant("leaseExpire" as const),
    ids: fc.subarray(LEASES, { minLength: 1 }),
  }),
);

Deno.test("property: applying a log, or restoring a snapshot taken in the middle and applying the rest, gives identical state", () => {
  fc.assert(
    fc.property(
      fc.array(commandArbitrary, { maxLength: 60 }),
      fc.nat(),
      fc.integer({ min: 1, max: 12 }),
      (commands, cut, historyEvents) => {
        const log = commands.map(encodeCommand);
        const at = log.length === 0 ? 0 : cut % (log.length + 1);
        const whole = new RegistryState({ historyEvents });
        const wholeResults = log.map((data) => whole.apply(data));
        const first = new RegistryState({ historyEvents });
        for (const data of log.slice(0, at)) first.apply(data);
        // Through JSON, as a snapshot file would be: the text written from
        // the live state is the copy's text.
        const text = first.snapshotJson();
        assert.equal(text, JSON.stringify(first.snapshot()));
        const snapshot = JSON.parse(text);
        const restored = RegistryState.restore(snapshot, { historyEvents });
        const restResults = log.slice(at).map((data) => restored.apply(data));
        assert.deepEqual(restored.snapshot(), whole.snapshot());
        assert.deepEqual(restResults, wholeResults.slice(at));
        for (const name of NAMES) {
          assert.deepEqual(restored.bindings(name), whole.bindings(name));
        }
        for (
          let from = whole.compactRevision;
          from <= whole.revision + 1;
          from++
        ) {
          assert.deepEqual(restored.eventsFrom(from), whole.eventsFrom(from));
        }
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("property: every revision's events are kept whole, in order, and revisions only grow", () => {
  fc.assert(
    fc.property(fc.array(commandArbitrary, { maxLength: 80 }), (commands) => {
      const state = new RegistryState({ historyEvents: 1_000 });
      let last = 0;
      const seen: number[] = [];
      for (const command of commands) {
        const outcome = apply(state, command);
        assert.ok(state.revision >= last);
        if (outcome.change !== null && outcome.change.events.length > 0) {
          assert.equal(outcome.change.revision, last + 1);
          assert.ok(
            outcome.change.events.every((e) => e.revision === last + 1),
          );
          seen.push(outcome.change.revision);
        }
        last = state.revision;
      }
      assert.deepEqual(state.eventsFrom(1)?.map((i) => i.revision), seen);
    }),
    { numRuns: 200 },
  );
});

Deno.test("a long history window keeps exactly the newest events after thousands of writes", () => {
  const state = new RegistryState({ historyEvents: 10 });
  for (let i = 1; i <= 3_000; i++) {
    state.apply(encodeCommand(bind("s", `e${i % 7}`, `tcp://h:${i}`)));
  }
  assert.equal(state.revision, 3_000);
  assert.equal(state.compactRevision, 2_991);
  assert.deepEqual(
    state.eventsFrom(2_991)?.map((i) => i.revision),
    Array.from({ length: 10 }, (_, i) => 2_991 + i),
  );
  assert.equal(state.eventsFrom(2_990), null);
  const restored = RegistryState.restore(
    JSON.parse(JSON.stringify(state.snapshot())),
    { historyEvents: 10 },
  );
  assert.deepEqual(restored.snapshot(), state.snapshot());
  assert.equal(state.snapshot().history.length, 10);
});
