import assert from "node:assert/strict";
import { INVALID_PARAMS } from "../../rpc/errors.ts";
import { waitFor } from "../../testing/time.ts";
import { restoreRegistrySnapshot } from "../node/replica.ts";
import {
  type BindResult,
  LEASE_NOT_FOUND,
  type LeaseInfo,
  type LookupResult,
  WATCH_EVENTS_NOTIFICATION,
  type WatchEventsNotification,
} from "../../protocol/registry.ts";
import { rejectsWith, withSingleNode } from "./_test_util.ts";

Deno.test("leases: grant, keep-alive with load, time to live, list, revoke with their bindings; unknown leases get LEASE_NOT_FOUND", async () => {
  await withSingleNode(async (node, connection) => {
    const lease = await connection.call<
      { id: string; ttlMs: number; revision: number }
    >("lease.grant", { ttlMs: 5_000 });
    assert.match(lease.id, /^[0-9a-f]{16}$/);
    assert.equal(lease.ttlMs, 5_000);
    assert.equal(lease.revision, 0); // a grant alone changes no binding
    const named = await connection.call<{ id: string }>("lease.grant", {
      ttlMs: 5_000,
      id: "my-lease",
    });
    assert.equal(named.id, "my-lease");
    await rejectsWith(
      connection.call("lease.grant", { ttlMs: 5_000, id: "my-lease" }),
      INVALID_PARAMS,
      "Invalid params: lease my-lease exists already; grant another id",
    );
    await connection.call("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9301" },
      leaseId: lease.id,
    });
    await connection.call("registry.bind", {
      name: "t",
      endpoint: { id: "b", url: "tcp://127.0.0.1:9302" },
      leaseId: lease.id,
    });
    assert.deepEqual(
      await connection.call("lease.keepAlive", { id: lease.id, load: 0.75 }),
      { id: lease.id, ttlMs: 5_000 },
    );
    const [endpoint] =
      (await connection.call<LookupResult>("registry.lookup", ["s"])).endpoints;
    assert.equal(endpoint.load, 0.75);
    assert.equal(endpoint.leaseId, lease.id);
    const ttl = await connection.call<LeaseInfo>("lease.timeToLive", {
      id: lease.id,
    });
    assert.deepEqual(ttl.bindings, [{ name: "s", id: "a" }, {
      name: "t",
      id: "b",
    }]);
    assert.ok(
      ttl.remainingMs > 4_000 && ttl.remainingMs <= 5_000,
      String(ttl.remainingMs),
    );
    const list = await connection.call<{ leases: LeaseInfo[] }>("lease.list");
    assert.deepEqual(
      list.leases.map((l) => l.id).sort(),
      [lease.id, "my-lease"].sort(),
    );
    assert.deepEqual(await connection.call("lease.revoke", { id: lease.id }), {
      revision: 3,
      removed: 2,
    });
    assert.deepEqual(node.state.names(), []);
    const notFound =
      `Lease not found: lease ${lease.id} does not exist (never granted, revoked, or expired); grant a new lease and bind again`;
    await rejectsWith(
      connection.call("lease.keepAlive", { id: lease.id }),
      LEASE_NOT_FOUND,
      notFound,
      { leaseId: lease.id },
    );
    await rejectsWith(
      connection.call("lease.timeToLive", { id: lease.id }),
      LEASE_NOT_FOUND,
      notFound,
    );
    await rejectsWith(
      connection.call("lease.revoke", { id: lease.id }),
      LEASE_NOT_FOUND,
      notFound,
    );
    await rejectsWith(
      connection.call("registry.bind", {
        name: "s",
        endpoint: { url: "tcp://127.0.0.1:9303" },
        leaseId: lease.id,
      }),
      LEASE_NOT_FOUND,
      notFound,
    );
  });
});

Deno.test("bind with grant makes the lease and the binding in one step; the leader expires a lease nobody keeps alive and a watch sees the delete", async () => {
  const events: WatchEventsNotification[] = [];
  await withSingleNode(async (_node, connection) => {
    await connection.call("registry.watch", { prefix: "s" });
    const bound = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9401" },
      grant: { ttlMs: 300 },
    });
    assert.match(bound.leaseId!, /^[0-9a-f]{16}$/);
    assert.equal(bound.ttlMs, 300);
    assert.equal(bound.endpoint.leaseId, bound.leaseId);
    const started = Date.now();
    await waitFor(
      () => events.some((n) => n.events.some((e) => e.type === "delete")),
      "the expiry",
      5_000,
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 250, `expired after ${elapsed} ms`);
    const deleted = events.flatMap((n) => n.events).find((e) =>
      e.type === "delete"
    )!;
    assert.equal(deleted.reason, "leaseExpired");
    assert.equal(deleted.endpoint.id, "a");
    assert.deepEqual(
      (await connection.call<LookupResult>("registry.lookup", ["s"])).endpoints,
      [],
    );
    await rejectsWith(
      connection.call("lease.keepAlive", { id: bound.leaseId }),
      LEASE_NOT_FOUND,
      /does not exist/,
    );
  }, {
    onNotification: (method, params) => {
      if (method === WATCH_EVENTS_NOTIFICATION) {
        events.push(params as unknown as WatchEventsNotification);
      }
    },
  });
});

Deno.test("a lease kept alive does not expire; unbind with a stale leaseId removes nothing", async () => {
  await withSingleNode(async (node, connection) => {
    const bound = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9501" },
      grant: { ttlMs: 200 },
    });
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 60));
      await connection.call("lease.keepAlive", { id: bound.leaseId });
    }
    assert.equal(node.state.bindings("s").length, 1);
    // A new instance (restarted at the same url) takes the id over; the
    // old one's unbind leaves it.
    const replaced = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9501" },
      grant: { ttlMs: 5_000 },
    });
    assert.notEqual(replaced.leaseId, bound.leaseId);
    assert.deepEqual(
      await connection.call("registry.unbind", {
        name: "s",
        id: "a",
        leaseId: bound.leaseId,
      }),
      { revision: replaced.revision, removed: 0 },
    );
    assert.equal(node.state.binding("s", "a")?.leaseId, replaced.leaseId);
  });
});

Deno.test("a node's snapshot restores to the same state, with the leases' remaining times", async () => {
  await withSingleNode(async (node, connection) => {
    const bound = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9701", attrs: { v: "1" } },
      grant: { ttlMs: 60_000 },
    });
    await connection.call("registry.bind", ["s", {
      id: "b",
      url: "tcp://127.0.0.1:9702",
    }]);
    const snapshot = JSON.parse(JSON.stringify(node.snapshot()));
    assert.equal(snapshot.index, node.raft.status.appliedIndex);
    const { state, leases } = restoreRegistrySnapshot(snapshot, {
      tickMs: 10,
      minRemainingMs: 1_000,
    });
    assert.deepEqual(state.snapshot(), node.state.snapshot());
    const remaining = leases.remainingMs(bound.leaseId!, 60_000);
    assert.ok(remaining > 55_000 && remaining <= 60_000, String(remaining));
  });
});

Deno.test("the lease calls refuse an unknown param, naming it and the accepted ones", async () => {
  await withSingleNode(async (node, connection) => {
    await rejectsWith(
      connection.call("lease.grant", { ttlMs: 60_000, ttl: 60 }),
      INVALID_PARAMS,
      'Invalid params: "ttl" is not a param of lease.grant, which takes { ttlMs, id? }',
    );
    await rejectsWith(
      connection.call("lease.keepAlive", { id: "abc", cpu: 0.5 }),
      INVALID_PARAMS,
      'Invalid params: "cpu" is not a param of lease.keepAlive, which takes { id, load? }',
    );
    await rejectsWith(
      connection.call("lease.revoke", { id: "abc", bindings: false }),
      INVALID_PARAMS,
      'Invalid params: "bindings" is not a param of lease.revoke, which takes { id }',
    );
    await rejectsWith(
      connection.call("lease.timeToLive", { id: "abc", keys: true }),
      INVALID_PARAMS,
      'Invalid params: "keys" is not a param of lease.timeToLive, which takes { id }',
    );
    await rejectsWith(
      connection.call("lease.list", { limit: 10 }),
      INVALID_PARAMS,
      'Invalid params: "limit" is not a param: lease.list takes no params',
    );
    assert.equal(node.state.leaseCount, 0);
  });
});
