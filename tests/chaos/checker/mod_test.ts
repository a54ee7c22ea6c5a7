import assert from "node:assert/strict";
import { checkHistory, type CheckReport, formatReport } from "./mod.ts";
import {
  bind,
  del,
  HistoryBuilder,
  keepAlive,
  lookup,
  put,
  seen,
  unbind,
} from "./_build.ts";

function check(report: CheckReport, name: string) {
  const found = report.checks.find((c) => c.check === name);
  assert.ok(found, `no check ${name}`);
  return found;
}

/** Asserts the report rejects the history in check `name` with a violation of `kind`. */
function rejected(report: CheckReport, name: string, kind: string) {
  assert.equal(report.valid, false, formatReport(report));
  const found = check(report, name);
  assert.equal(found.status, "violation", formatReport(report));
  const violation = found.violations.find((v) => v.kind === kind);
  assert.ok(violation, `no ${kind} in ${name}:\n${formatReport(report)}`);
  return violation;
}

Deno.test("checker: a concurrent history with unknowns, a re-bind and an expiry passes", () => {
  const h = new HistoryBuilder();
  h.granted(0, "k1-l1", 100, 0);
  h.ok(1, bind("e1", "u1"), 2, 4, { f: "bind", revision: 1 });
  h.ok(2, bind("e2", "u2"), 3, 6, { f: "bind", revision: 2 });
  // Concurrent with the bind of e2: linearized before it.
  h.ok(3, lookup(), 4, 5, seen(1, ["e1", "u1"]));
  // A re-bind of e1 at another url (lease-less: replaced).
  h.ok(1, bind("e1", "u3"), 7, 8, { f: "bind", revision: 3 });
  // Unknown: this one took effect, the next did not.
  h.unknown(4, bind("e3", "u4"), 9);
  h.unknown(5, bind("e4", "u5"), 9.5);
  h.ok(2, bind("e5", "u6", "k1-l1"), 11, 12, { f: "bind", revision: 5 });
  // A serializable lookup, stale by two revisions: a real past state.
  h.ok(6, lookup("serializable"), 13, 14, seen(3, ["e1", "u3"], ["e2", "u2"]));
  // The lease expires (ttl 100 after its grant, never kept alive).
  h.ok(
    3,
    lookup(),
    160,
    161,
    seen(6, ["e1", "u3"], ["e2", "u2"], ["e3", "u4"]),
  );
  h.ok(0, keepAlive("k1-l1"), 162, 163, {
    f: "leaseKeepAlive",
    leaseNotFound: true,
  });
  h.ok(0, bind("e6", "u7", "k1-l1"), 164, 165, {
    f: "bind",
    leaseNotFound: true,
  });
  h.ok(2, unbind("e9"), 166, 167, { f: "unbind", revision: 6, removed: 0 });
  h.finalIndexes = [
    h.ok(
      7,
      lookup(),
      200,
      201,
      seen(6, ["e1", "u3"], ["e2", "u2"], ["e3", "u4"]),
    ),
  ];
  const events = [
    put(1, "e1", "u1", 3.5),
    put(2, "e2", "u2", 5.5),
    put(3, "e1", "u3", 7.5),
    put(4, "e3", "u4", 10),
    put(5, "e5", "u6", 11.5, "k1-l1"),
    del(6, "e5", "u6", 150, "leaseExpired", "k1-l1"),
  ];
  h.watch(1, events);
  // The second watcher reconnects and is sent revision 3 again.
  h.watch(1, events.slice(0, 3), [
    { kind: "close", at: 8, reason: "connection lost" },
    { kind: "open", at: 9, fromRevision: 3, node: "n2" },
    ...events.slice(2).map((e) => ({
      kind: "event" as const,
      ...e,
      at: e.at + 1,
    })),
  ]);
  const report = checkHistory(h.build());
  assert.equal(report.valid, true, formatReport(report));
  assert.equal(report.counts.operations, 14);
  assert.equal(report.counts.byOutcome.unknown, 2);
  assert.match(formatReport(report), /^VALID/);
});

Deno.test("checker: a stale read is rejected, and shrunk to the bind and the read", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  for (let i = 0; i < 10; i++) {
    h.ok(2, bind(`x${i}`, `v${i}`), 2 + i, 2.5 + i, {
      f: "bind",
      revision: 2 + i,
    });
  }
  // Invoked after the bind completed, yet misses it.
  h.ok(
    1,
    lookup(),
    20,
    21,
    seen(
      11,
      ...Array.from(
        { length: 10 },
        (_, i): [string, string] => [`x${i}`, `v${i}`],
      ),
    ),
  );
  const report = checkHistory(h.build());
  const violation = rejected(report, "linearizability", "not-linearizable");
  assert.deepEqual(violation.operations, [0, 11]);
  // The other binds are kept as possibilities only (the read shows them).
  assert.deepEqual(violation.relaxed, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.match(
    violation.lines![0],
    /^#0 p0 invoke bind chaos\/k1 e1 url=u1 lease=none @0 → ok rev 1 @1 \(its answer is not needed\)$/,
  );
  assert.match(
    violation.lines![1],
    /^#1 .* → \(taken as unknown; recorded: ok rev 2 @2.5\)$/,
  );
  assert.match(
    violation.lines!.at(-1)!,
    /^#11 p1 invoke lookup chaos\/k1 @20 → ok rev 11 \[x0=v0, /,
  );
});

Deno.test("checker: a read that sees a write invoked after it completed is rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, lookup(), 0, 1, seen(1, ["e1", "u1"]));
  h.ok(1, bind("e1", "u1"), 2, 3, { f: "bind", revision: 1 });
  h.watch(1, [put(1, "e1", "u1", 2.5)]);
  const report = checkHistory(h.build());
  // The lookup alone is enough: the only bind that could explain it came later.
  const violation = rejected(report, "linearizability", "not-linearizable");
  assert.deepEqual(violation.operations, [0]);
  assert.deepEqual(rejected(report, "revisions", "future-read").operations, [
    0,
    1,
  ]);
  // The put was received before its bind was invoked: seen as such.
  const early = new HistoryBuilder();
  early.ok(1, bind("e1", "u1"), 2, 3, { f: "bind", revision: 1 });
  early.watch(1, [put(1, "e1", "u1", 1)]);
  const unexplained = rejected(
    checkHistory(early.build()),
    "watch",
    "unexplained",
  );
  assert.match(unexplained.message, /before its bind was invoked/);
});

Deno.test("checker: an acknowledged write missing from the final lookups is a lost write", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(1, bind("e2", "u2"), 2, 3, { f: "bind", revision: 2 });
  h.finalIndexes = [h.ok(2, lookup(), 10, 11, seen(2, ["e2", "u2"]))];
  h.watch(1, [put(1, "e1", "u1", 0.5), put(2, "e2", "u2", 2.5)]);
  const report = checkHistory(h.build());
  const lost = rejected(report, "final", "lost-write");
  assert.deepEqual(lost.operations, [0, 2]);
  const violation = rejected(report, "linearizability", "not-linearizable");
  assert.deepEqual(violation.operations, [0, 2]);
  rejected(report, "revisions", "lookup-contents");
});

Deno.test("checker: a write recorded as fail that took effect is rejected", () => {
  const h = new HistoryBuilder();
  h.fail(0, bind("e1", "u1"), 0, 1);
  h.ok(1, lookup(), 2, 3, seen(1, ["e1", "u1"]));
  h.watch(1, [put(1, "e1", "u1", 0.5)]);
  const report = checkHistory(h.build());
  const violation = rejected(report, "watch", "fail-took-effect");
  assert.deepEqual(violation.operations, [0]);
  // The lookup is unexplained too: fail operations are not linearized.
  assert.deepEqual(
    rejected(report, "linearizability", "not-linearizable").operations,
    [1],
  );
});

Deno.test("checker: a dropped watch event is a gap", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(0, bind("e2", "u2"), 2, 3, { f: "bind", revision: 2 });
  h.ok(0, bind("e3", "u3"), 4, 5, { f: "bind", revision: 3 });
  h.watch(1, [put(1, "e1", "u1", 1), put(3, "e3", "u3", 5)]);
  const report = checkHistory(h.build());
  const gap = rejected(report, "watch", "gap");
  assert.match(gap.message, /never got revision 2/);
});

Deno.test("checker: a watcher that resumes past what it saw is a gap", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(0, bind("e2", "u2"), 2, 3, { f: "bind", revision: 2 });
  h.ok(0, bind("e3", "u3"), 4, 5, { f: "bind", revision: 3 });
  h.watch(1, [put(1, "e1", "u1", 1)], [
    { kind: "close", at: 2, reason: "lost" },
    { kind: "open", at: 6, fromRevision: 3, node: "n2" },
    { kind: "event", ...put(3, "e3", "u3", 6) },
  ]);
  const gap = rejected(checkHistory(h.build()), "watch", "gap");
  assert.match(gap.message, /resumed from revision 3/);
});

Deno.test("checker: a duplicated watch event is rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.watch(1, [put(1, "e1", "u1", 1), put(1, "e1", "u1", 1.1)]);
  const duplicate = rejected(checkHistory(h.build()), "watch", "duplicate");
  assert.match(duplicate.lines![0], /rev 1 put chaos\/k1 e1 url=u1/);
});

Deno.test("checker: an event older than a resumed watch's revision is rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(0, bind("e2", "u2"), 2, 3, { f: "bind", revision: 2 });
  h.watch(1, [put(1, "e1", "u1", 1)], [
    { kind: "open", at: 2, fromRevision: 2, node: "n2" },
    { kind: "event", ...put(1, "e1", "u1", 2.1) },
    { kind: "event", ...put(2, "e2", "u2", 3) },
  ]);
  rejected(checkHistory(h.build()), "watch", "older-than-from");
});

Deno.test("checker: two watchers that disagree on a revision are rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.unknown(1, bind("e2", "u2"), 0);
  h.watch(1, [put(1, "e1", "u1", 1)]);
  h.watch(1, [put(1, "e2", "u2", 1)]);
  const disagreement = rejected(
    checkHistory(h.build()),
    "watch",
    "disagreement",
  );
  assert.match(disagreement.message, /watchers 0 and 1 disagree on revision 1/);
});

Deno.test("checker: a revision going backwards in real time is rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 2 });
  h.ok(1, bind("e2", "u2"), 2, 3, { f: "bind", revision: 1 });
  h.watch(1, [put(1, "e2", "u2", 2.5), put(2, "e1", "u1", 0.5)]);
  const backwards = rejected(checkHistory(h.build()), "revisions", "backwards");
  assert.deepEqual(backwards.operations, [0, 1]);
});

Deno.test("checker: a lookup whose endpoints are not the state at its revision is rejected", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(0, bind("e2", "u2"), 2, 3, { f: "bind", revision: 2 });
  // Serializable (left out of the search), with revision 1 but the state of 2.
  h.ok(1, lookup("serializable"), 4, 5, seen(1, ["e1", "u1"], ["e2", "u2"]));
  h.watch(1, [put(1, "e1", "u1", 1), put(2, "e2", "u2", 3)]);
  const report = checkHistory(h.build());
  const contents = rejected(report, "revisions", "lookup-contents");
  assert.deepEqual(contents.operations, [2]);
  assert.match(contents.message, /extra: e2=u2\/none/);
  assert.equal(check(report, "linearizability").status, "ok");
});

Deno.test("checker: a lease expired while kept alive is rejected", () => {
  const h = new HistoryBuilder();
  h.granted(0, "k1-l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "k1-l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(0, keepAlive("k1-l1"), 500, 501, { f: "leaseKeepAlive", ttlMs: 1000 });
  // Expired 400 ms after a keep-alive, with a ttl of 1000 ms.
  h.watch(1, [
    put(1, "e1", "u1", 2.5, "k1-l1"),
    del(2, "e1", "u1", 900, "leaseExpired", "k1-l1"),
  ]);
  const early = rejected(checkHistory(h.build()), "leases", "early-expiry");
  assert.deepEqual(early.operations, [2]);
  assert.match(early.message, /lease k1-l1 \(ttl 1000 ms\) expired early/);
});

Deno.test("checker: a keep-alive answered LEASE_NOT_FOUND too soon is an early expiry", () => {
  const h = new HistoryBuilder();
  h.granted(0, "k1-l1", 1000, 0);
  h.ok(0, keepAlive("k1-l1"), 100, 101, {
    f: "leaseKeepAlive",
    leaseNotFound: true,
  });
  h.watch(1, []);
  const early = rejected(checkHistory(h.build()), "leases", "early-expiry");
  assert.deepEqual(early.operations, [0, 1]);
});

Deno.test("checker: a revoke explains a lease's end", () => {
  const h = new HistoryBuilder();
  h.granted(0, "k1-l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "k1-l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(1, { f: "leaseRevoke", name: "chaos/k1", leaseId: "k1-l1" }, 4, 5, {
    f: "leaseRevoke",
    revision: 2,
  });
  h.ok(0, keepAlive("k1-l1"), 6, 7, {
    f: "leaseKeepAlive",
    leaseNotFound: true,
  });
  h.ok(1, lookup(), 8, 9, seen(2));
  h.watch(1, [
    put(1, "e1", "u1", 2.5, "k1-l1"),
    del(2, "e1", "u1", 4.5, "leaseRevoked", "k1-l1"),
  ]);
  const report = checkHistory(h.build());
  assert.equal(report.valid, true, formatReport(report));
});
