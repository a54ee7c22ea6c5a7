import assert from "node:assert/strict";
import type { Operation } from "../history.ts";
import { registryModel, registryOps } from "./registry_model.ts";
import { checkLinearizable } from "./wgl.ts";
import {
  bind,
  grant,
  HistoryBuilder,
  keepAlive,
  lookup,
  revoke,
  seen,
  unbind,
} from "./_build.ts";

function linearizable(
  operations: Operation[],
  keepAliveMode: "strict" | "lenient" = "strict",
) {
  return checkLinearizable(
    registryModel({ keepAlive: keepAliveMode }),
    registryOps(operations),
  ).ok;
}

Deno.test("registry model: a re-bind with another lease leaves the old lease", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.granted(0, "l2", 1000, 2);
  h.ok(0, bind("e1", "u1", "l1"), 4, 5, { f: "bind", revision: 1 });
  // At the same url: the same server restarted, it takes e1 over.
  h.ok(0, bind("e1", "u1", "l2"), 6, 7, { f: "bind", revision: 2 });
  // Revoking l1 no longer removes e1.
  h.ok(0, revoke("l1"), 8, 9, { f: "leaseRevoke", revision: 2 });
  h.ok(0, lookup(), 10, 11, seen(2, ["e1", "u1", "l2"]));
  assert.equal(linearizable(h.operations), true);
  h.ok(0, revoke("l2"), 12, 13, { f: "leaseRevoke", revision: 3 });
  h.ok(0, lookup(), 14, 15, seen(3, ["e1", "u1", "l2"]));
  assert.equal(linearizable(h.operations), false);
});

Deno.test("registry model: ID_IN_USE while another live lease holds the id at another url, and only then", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.granted(0, "l2", 1000, 2);
  h.ok(0, bind("e1", "u1", "l1"), 4, 5, { f: "bind", revision: 1 });
  h.ok(0, bind("e1", "u2", "l2"), 6, 7, { f: "bind", idInUse: true });
  h.ok(0, bind("e1", "u3"), 8, 9, { f: "bind", idInUse: true });
  h.ok(0, lookup(), 10, 11, seen(1, ["e1", "u1", "l1"]));
  assert.equal(linearizable(h.operations), true);
  // A refusal is no change: a later keep-alive of l1 still finds it.
  h.ok(0, keepAlive("l1"), 12, 13, { f: "leaseKeepAlive", ttlMs: 1000 });
  assert.equal(linearizable(h.operations), true);
  // After l1's revoke the id is free: a refusal then is wrong.
  h.ok(0, revoke("l1"), 14, 15, { f: "leaseRevoke", revision: 2 });
  const refusedAfter = new HistoryBuilder();
  refusedAfter.operations.push(...h.operations);
  refusedAfter.ok(0, bind("e1", "u4", "l2"), 16, 17, {
    f: "bind",
    idInUse: true,
  });
  assert.equal(linearizable(refusedAfter.operations), false);
  h.ok(0, bind("e1", "u4", "l2"), 16, 17, { f: "bind", revision: 3 });
  h.ok(0, lookup(), 18, 19, seen(3, ["e1", "u4", "l2"]));
  assert.equal(linearizable(h.operations), true);
});

Deno.test("registry model: a bind over a live holder applied means the holder's lease expired; ID_IN_USE on a lease-less binding is wrong", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(0, bind("e1", "u2"), 4, 5, { f: "bind", revision: 2 });
  assert.equal(linearizable(h.operations), true);
  // l1 expired before the bind: a keep-alive of it finding it is wrong.
  h.ok(0, keepAlive("l1"), 6, 7, { f: "leaseKeepAlive", ttlMs: 1000 });
  assert.equal(linearizable(h.operations), false);
  const leaseless = new HistoryBuilder();
  leaseless.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  leaseless.ok(0, bind("e1", "u2"), 2, 3, { f: "bind", idInUse: true });
  assert.equal(linearizable(leaseless.operations), false);
});

Deno.test("registry model: a revoke removes every binding of its lease", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(0, bind("e2", "u2", "l1"), 4, 5, { f: "bind", revision: 2 });
  h.ok(0, bind("e3", "u3"), 6, 7, { f: "bind", revision: 3 });
  h.ok(0, revoke("l1"), 8, 9, { f: "leaseRevoke", revision: 4 });
  h.ok(0, lookup(), 10, 11, seen(4, ["e3", "u3"]));
  assert.equal(linearizable(h.operations), true);
  // A second revoke: the lease is gone.
  h.ok(0, revoke("l1"), 12, 13, { f: "leaseRevoke", revision: 4 });
  assert.equal(linearizable(h.operations), false);
});

Deno.test("registry model: a grant of an existing id answers exists, a bind of a missing lease LEASE_NOT_FOUND", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.ok(0, grant("l1"), 2, 3, { f: "leaseGrant", exists: true });
  h.ok(0, bind("e1", "u1", "nope"), 4, 5, { f: "bind", leaseNotFound: true });
  h.ok(0, lookup(), 6, 7, seen(0));
  assert.equal(linearizable(h.operations), true);
  // A bind with a lease never granted cannot succeed.
  h.ok(0, bind("e2", "u2", "never"), 8, 9, { f: "bind", revision: 1 });
  assert.equal(linearizable(h.operations), false);
});

Deno.test("registry model: a fresh grant of an id in use is not 'exists' unless the lease is there", () => {
  const h = new HistoryBuilder();
  h.ok(0, grant("l1"), 0, 1, { f: "leaseGrant", exists: true });
  assert.equal(linearizable(h.operations), false);
});

Deno.test("registry model: unbind answers removed 1 once, then 0", () => {
  const h = new HistoryBuilder();
  h.ok(0, bind("e1", "u1"), 0, 1, { f: "bind", revision: 1 });
  h.ok(0, unbind("e1"), 2, 3, { f: "unbind", revision: 2, removed: 1 });
  h.ok(0, unbind("e1"), 4, 5, { f: "unbind", revision: 2, removed: 0 });
  assert.equal(linearizable(h.operations), true);
  h.ok(0, unbind("e1"), 6, 7, { f: "unbind", revision: 3, removed: 1 });
  assert.equal(linearizable(h.operations), false);
});

Deno.test("registry model: a lease may expire between any two operations, and stays gone", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(0, lookup(), 4, 5, seen(1, ["e1", "u1", "l1"]));
  h.ok(0, lookup(), 6, 7, seen(2));
  h.ok(0, keepAlive("l1"), 8, 9, { f: "leaseKeepAlive", leaseNotFound: true });
  assert.equal(linearizable(h.operations), true);
  // An expired lease is never kept alive again (strict), unless keep-alives are taken as unreliable.
  h.ok(0, keepAlive("l1"), 10, 11, { f: "leaseKeepAlive", ttlMs: 1000 });
  assert.equal(linearizable(h.operations), false);
  assert.equal(linearizable(h.operations, "lenient"), true);
});

Deno.test("registry model: an unknown grant may take effect late", () => {
  const h = new HistoryBuilder();
  h.unknown(0, grant("l1"), 0);
  h.ok(1, bind("e1", "u1", "l1"), 2, 3, { f: "bind", leaseNotFound: true });
  h.ok(1, bind("e1", "u2", "l1"), 10, 11, { f: "bind", revision: 1 });
  h.ok(1, lookup(), 12, 13, seen(1, ["e1", "u2", "l1"]));
  assert.equal(linearizable(h.operations), true);
});

Deno.test("registry model: a lookup must show lease ids as they are", () => {
  const h = new HistoryBuilder();
  h.granted(0, "l1", 1000, 0);
  h.ok(0, bind("e1", "u1", "l1"), 2, 3, { f: "bind", revision: 1 });
  h.ok(0, lookup(), 4, 5, seen(1, ["e1", "u1"]));
  assert.equal(linearizable(h.operations), false);
});
