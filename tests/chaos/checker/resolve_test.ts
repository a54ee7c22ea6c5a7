import assert from "node:assert/strict";
import { resolveUnknowns, streamCovers } from "./resolve.ts";
import { checkWatches } from "./watch.ts";
import { checkHistory, formatReport } from "./mod.ts";
import {
  bind,
  del,
  grant,
  HistoryBuilder,
  lookup,
  put,
  revoke,
  seen,
  unbind,
} from "./_build.ts";

Deno.test("resolve: unknown writes are settled from the watch streams", () => {
  const h = new HistoryBuilder();
  const applied = h.unknown(0, bind("e1", "u1"), 0);
  const lost = h.unknown(1, bind("e2", "u2"), 0);
  const read = h.unknown(2, lookup(), 0);
  const granted = h.unknown(3, grant("k1-l1"), 1);
  h.ok(3, bind("e3", "u3", "k1-l1"), 4, 5, { f: "bind", revision: 2 });
  const revoked = h.unknown(4, revoke("k1-l1"), 6);
  const noop = h.unknown(5, unbind("e9"), 7);
  const unbound = h.unknown(6, unbind("e1"), 8);
  h.ok(7, lookup(), 20, 21, seen(4));
  h.watch(1, [
    put(1, "e1", "u1", 2),
    put(2, "e3", "u3", 4.5, "k1-l1"),
    del(3, "e3", "u3", 7, "leaseRevoked", "k1-l1"),
    del(4, "e1", "u1", 9, "unbound"),
  ]);
  const history = h.build();
  const { stream } = checkWatches(history);
  assert.equal(streamCovers(history, stream), true);
  const resolution = resolveUnknowns(history, stream);
  const byIndex = new Map(resolution.operations.map((op) => [op.index, op]));
  assert.deepEqual(byIndex.get(applied)?.output, { f: "bind", revision: 1 });
  assert.equal(byIndex.get(applied)?.completedAt, 2);
  assert.equal(byIndex.has(lost), false);
  assert.equal(byIndex.has(read), false);
  assert.equal(byIndex.get(granted)?.outcome, "ok");
  assert.equal(byIndex.get(granted)?.completedAt, 4.5);
  assert.deepEqual(byIndex.get(revoked)?.output, {
    f: "leaseRevoke",
    revision: 3,
  });
  assert.equal(byIndex.has(noop), false);
  assert.deepEqual(byIndex.get(unbound)?.output, {
    f: "unbind",
    revision: 4,
    removed: 1,
  });
  assert.equal(resolution.applied, 4);
  assert.equal(resolution.dropped, 3);
  const report = checkHistory(history);
  assert.equal(report.valid, true, formatReport(report));
});

Deno.test("resolve: streams that do not reach the last revision settle nothing", () => {
  const h = new HistoryBuilder();
  h.unknown(0, bind("e1", "u1"), 0);
  h.ok(1, bind("e2", "u2"), 1, 2, { f: "bind", revision: 2 });
  h.watch(1, [put(1, "e1", "u1", 0.5)]);
  const history = h.build();
  assert.equal(streamCovers(history, checkWatches(history).stream), false);
});
