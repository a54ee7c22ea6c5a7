import assert from "node:assert/strict";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { INVALID_PARAMS, METHOD_NOT_FOUND, RpcError } from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { serve } from "../adapter/deno/serve.ts";
import { freePorts, TEST_SECRET, waitFor } from "../raft/_test_util.ts";
import { authenticatePeer, ClusterKey } from "../raft/peer_auth.ts";
import {
  type RegistryNode,
  restoreRegistrySnapshot,
  startRegistryNode,
} from "./registry_node.ts";
import {
  type BindResult,
  type Endpoint,
  LEADER_TRANSFER_FAILED,
  type LeaderTransferResult,
  LEASE_NOT_FOUND,
  type LeaseInfo,
  type ListResult,
  type LookupResult,
  MAX_NAME_LENGTH,
  type MemberListResult,
  MEMBERSHIP_CHANGE_FAILED,
  NOT_LEADER,
  type RegistryStatus,
  UNAVAILABLE,
  WATCH_EVENTS_NOTIFICATION,
  type WatchEventsNotification,
} from "../protocol/registry.ts";

/** A single-node registry (elected) and a raw connection to it. */
async function withSingleNode(
  fn: (node: RegistryNode, connection: RpcConnection) => Promise<void>,
  options: {
    onNotification?: (method: string, params: Params | undefined) => void;
  } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_service_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: dir,
    tickMs: 10,
    electionTicks: 5,
  });
  let connection: RpcConnection | undefined;
  try {
    await waitFor(() => node.raft.status.role === "leader", "n1 to lead");
    connection = await dial(node.url, {
      onNotification: options.onNotification,
    });
    await fn(node, connection);
  } finally {
    connection?.close();
    await connection?.closed;
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejectsWith(
  call: Promise<unknown>,
  code: number,
  message: string | RegExp,
  data?: unknown,
): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof RpcError, `${error} is an RpcError`);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    assert.equal(error.code, code);
    if (data !== undefined) assert.deepEqual(error.data, data);
    return true;
  });
}

const BIND_SHAPE =
  "Invalid params: registry.bind takes { name, endpoint: { url, id?, attrs?, weight?, zone?, check? }, leaseId?, grant?: { ttlMs }, scope? }";
const ENDPOINT_SHAPE =
  'Invalid params: "endpoint" must be { url, id?, attrs?, weight?, zone?, check? }';

function ids(result: LookupResult): string[] {
  return result.endpoints.map((e) => e.id);
}

Deno.test("registry.bind refuses every kind of bad params with -32602 naming the field, and writes nothing", async () => {
  await withSingleNode(async (node, connection) => {
    const bad = (params: Params | undefined, message: string | RegExp) =>
      rejectsWith(
        connection.call("registry.bind", params),
        INVALID_PARAMS,
        message,
      );
    const url = "tcp://127.0.0.1:9001";
    await bad(undefined, BIND_SHAPE);
    await bad([], BIND_SHAPE);
    await bad([5], BIND_SHAPE);
    await bad([null], BIND_SHAPE);
    await bad({}, 'Invalid params: "name" must be a string');
    await bad(
      { name: 5, endpoint: { url } },
      'Invalid params: "name" must be a string',
    );
    await bad(
      { name: "", endpoint: { url } },
      'Invalid params: "name" must be a non-empty string',
    );
    await bad(
      { name: "x".repeat(MAX_NAME_LENGTH + 1), endpoint: { url } },
      `Invalid params: "name" is ${
        MAX_NAME_LENGTH + 1
      } characters long; at most ${MAX_NAME_LENGTH} are allowed`,
    );
    await bad(
      { name: "he llo", endpoint: { url } },
      'Invalid params: "name" "he llo" may not contain whitespace, control characters, "?" or "#"',
    );
    // Malformed queries.
    await bad(
      { name: "db?", endpoint: { url } },
      'Invalid params: "name" ends with "?" but has no attributes; write name?key=value&key=value',
    );
    await bad(
      { name: "db?version", endpoint: { url } },
      /query item "version" has no "="/,
    );
    await bad(
      { name: "db?a=1&a=2", endpoint: { url } },
      /attribute "a" is given twice/,
    );
    await bad(
      { name: "db?b@d=1", endpoint: { url } },
      /attribute name "b@d" must be/,
    );
    await bad(
      { name: "db?v=%zz", endpoint: { url } },
      /malformed percent escape/,
    );
    await bad({ name: "hello" }, ENDPOINT_SHAPE);
    await bad({ name: "hello", endpoint: url }, ENDPOINT_SHAPE);
    await bad(["hello", null], ENDPOINT_SHAPE);
    await bad(
      { name: "hello", endpoint: {} },
      'Invalid params: "endpoint.url" must be a string like tcp://127.0.0.1:9001',
    );
    for (
      const badUrl of [
        "http://127.0.0.1:9001",
        "tcp://127.0.0.1:0",
        "tcp://127.0.0.1",
      ]
    ) {
      await bad(
        { name: "hello", endpoint: { url: badUrl } },
        `Invalid params: "endpoint.url": invalid endpoint URL "${badUrl}": expected tcp://host:port with a port in 1..65535`,
      );
    }
    // A URL with a path or query is refused, not silently trimmed.
    await bad(
      { name: "hello", endpoint: { url: "tcp://127.0.0.1:9/db?version=1.0" } },
      'Invalid params: "endpoint.url": invalid endpoint URL "tcp://127.0.0.1:9/db?version=1.0": a tcp:// URL has no path, query, fragment or user name; give only tcp://host:port (attributes go in the name, "name?key=value", or in "endpoint.attrs")',
    );
    await bad(
      { name: "hello", endpoint: { url: "tcp://0.0.0.0:9001" } },
      'Invalid params: "endpoint.url" "tcp://0.0.0.0:9001" names a wildcard address, which no client can dial; bind the server\'s reachable address (serve({ advertise }) or --advertise)',
    );
    await bad(
      { name: "hello", endpoint: { url: "tcp://[::]:9001" } },
      /names a wildcard address/,
    );
    await bad(
      { name: "hello", endpoint: { id: "", url } },
      'Invalid params: "endpoint.id" must be a non-empty string',
    );
    await bad(
      { name: "hello", endpoint: { url, weight: 0 } },
      'Invalid params: "endpoint.weight" must be an integer in 1..1000000',
    );
    await bad(
      { name: "hello", endpoint: { url, weight: 1.5 } },
      /"endpoint.weight" must be an integer/,
    );
    await bad(
      { name: "hello", endpoint: { url, zone: "" } },
      'Invalid params: "endpoint.zone" must be a string of 1..64 characters, or null',
    );
    await bad(
      { name: "hello", endpoint: { url, attrs: [] } },
      /"endpoint.attrs" must be an object/,
    );
    await bad(
      { name: "hello", endpoint: { url, attrs: { v: 1 } } },
      'Invalid params: "endpoint.attrs": attribute "v" must have a string value',
    );
    await bad(
      { name: "hello?v=1", endpoint: { url, attrs: { v: "2" } } },
      'Invalid params: attribute "v" is "1" in the name but "2" in "endpoint.attrs"',
    );
    await bad(
      { name: "hello", endpoint: { url, check: { kind: "udp" } } },
      'Invalid params: "endpoint.check.kind" must be "tcp" or "ping"',
    );
    await bad(
      {
        name: "hello",
        endpoint: {
          url,
          check: { kind: "ping", intervalMs: 1000, timeoutMs: 1000 },
        },
      },
      'Invalid params: "endpoint.check.timeoutMs" must be an integer in 10..999',
    );
    await bad(
      { name: "hello", endpoint: { url }, leaseId: "no such!" },
      'Invalid params: "leaseId" must be a lease id: 1..64 characters of A-Z a-z 0-9 _ -',
    );
    await bad(
      { name: "hello", endpoint: { url }, grant: 5 },
      'Invalid params: "grant" must be { ttlMs }',
    );
    await bad(
      { name: "hello", endpoint: { url }, grant: { ttlMs: 10 } },
      'Invalid params: "grant.ttlMs" is 10 ms; it must be at least 75 ms (1.5 × this registry\'s election timeout), or a leader change could expire a lease that is kept alive',
    );
    await bad(
      {
        name: "hello",
        endpoint: { url },
        grant: { ttlMs: 1000 },
        leaseId: "abc",
      },
      'Invalid params: give "leaseId" (an existing lease) or "grant", not both',
    );
    await bad(
      { name: "hello", endpoint: { url }, scope: "cluster" },
      'Invalid params: "scope" must be "global" or "local"',
    );
    // Nothing was written.
    assert.equal(node.state.revision, 0);
    assert.equal(node.state.leaseCount, 0);
    assert.deepEqual(node.state.names(), []);
  });
});

Deno.test("registry.unbind, lookup, list, watch and the lease calls refuse bad params with -32602", async () => {
  await withSingleNode(async (_node, connection) => {
    const bad = (
      method: string,
      params: Params | undefined,
      message: string | RegExp,
    ) => rejectsWith(connection.call(method, params), INVALID_PARAMS, message);
    await bad(
      "registry.unbind",
      undefined,
      "Invalid params: registry.unbind takes { name, id, leaseId?, scope? }",
    );
    await bad(
      "registry.unbind",
      { name: "hello" },
      'Invalid params: "id" must be a non-empty string',
    );
    await bad(
      "registry.lookup",
      [false],
      "Invalid params: registry.lookup takes { name, consistency?, rotate?, includeUnhealthy?, limit? }",
    );
    await bad(
      "registry.lookup",
      ["hello", "strong"],
      'Invalid params: "consistency" must be "linearizable" or "serializable"',
    );
    await bad(
      "registry.lookup",
      { name: "hello", rotate: "yes" },
      'Invalid params: "rotate" must be a boolean',
    );
    await bad("registry.lookup", { name: "db?x" }, /query item "x" has no "="/);
    await bad(
      "registry.list",
      { prefix: 5 },
      'Invalid params: "prefix" must be a string of at most 256 characters',
    );
    await bad(
      "registry.watch",
      { prefix: "db?x" },
      'Invalid params: "prefix" "db?x" may not contain whitespace, control characters, "?" or "#": it is the start of a name, and no name has a query (attributes are matched by lookups)',
    );
    await bad("registry.list", { prefix: "db?" }, /may not contain/);
    await bad(
      "registry.watch",
      { prefix: "", fromRevision: 0 },
      'Invalid params: "fromRevision" must be a revision: an integer >= 1',
    );
    await bad(
      "registry.watch",
      { prefix: "", watchId: 5 },
      'Invalid params: "watchId" must be a string',
    );
    await bad(
      "registry.setState",
      { name: "a", id: "b", state: "unhealthy" },
      'Invalid params: "state" must be "serving" or "draining"',
    );
    await bad(
      "lease.grant",
      {},
      'Invalid params: "ttlMs" must be an integer number of ms',
    );
    await bad(
      "lease.grant",
      { ttlMs: 74 },
      /"ttlMs" is 74 ms; it must be at least 75 ms/,
    );
    await bad(
      "lease.grant",
      { ttlMs: 1000, id: "bad id" },
      /"id" must be a lease id/,
    );
    await bad(
      "lease.keepAlive",
      { id: "abc", load: "high" },
      'Invalid params: "load" must be a finite number',
    );
    await bad("lease.keepAlive", [1], /lease.keepAlive takes \{ id, load\? \}/);
    await bad("lease.revoke", {}, /"id" must be a lease id/);
  });
});

Deno.test("bind, lookup and unbind by name and by position, with full endpoints and the revision read", async () => {
  await withSingleNode(async (node, connection) => {
    const h1 = { id: "h1", url: "tcp://127.0.0.1:9001" };
    const bound = await connection.call<BindResult>("registry.bind", {
      name: "hello",
      endpoint: h1,
    });
    assert.deepEqual(bound, {
      revision: 1,
      name: "hello",
      leaseId: null,
      endpoint: {
        id: "h1",
        url: h1.url,
        attrs: {},
        weight: 1,
        zone: null,
        leaseId: null,
        createRevision: 1,
        modRevision: 1,
        state: "serving",
        load: null,
        scope: "global",
        check: null,
      },
    });
    // By position; the id defaults to the URL, spelt one way.
    const byPosition = await connection.call<BindResult>("registry.bind", [
      "hello",
      { url: "127.0.0.1:9002" },
    ]);
    assert.equal(byPosition.endpoint.id, "tcp://127.0.0.1:9002");
    assert.equal(byPosition.revision, 2);
    // The same binding again changes nothing.
    assert.equal(
      (await connection.call<BindResult>("registry.bind", ["hello", h1]))
        .revision,
      2,
    );
    const lookup = await connection.call<LookupResult>("registry.lookup", {
      name: "hello",
      rotate: false,
    });
    assert.deepEqual(ids(lookup), ["h1", "tcp://127.0.0.1:9002"]);
    assert.equal(lookup.revision, 2);
    assert.deepEqual(lookup.query, {});
    const serializable = await connection.call<LookupResult>(
      "registry.lookup",
      ["hello", "serializable"],
    );
    assert.equal(serializable.endpoints.length, 2);
    assert.deepEqual(
      await connection.call("registry.unbind", { name: "hello", id: "h1" }),
      { revision: 3, removed: 1 },
    );
    assert.deepEqual(
      await connection.call("registry.unbind", ["hello", "h1"]),
      { revision: 3, removed: 0 },
    );
    assert.deepEqual(
      await connection.call("registry.lookup", ["nothing"]),
      { name: "nothing", query: {}, endpoints: [], total: 0, revision: 3 },
    );
    assert.equal(node.state.revision, 3);
  });
});

Deno.test("attribute queries return exactly the endpoints that match every pair", async () => {
  await withSingleNode(async (_node, connection) => {
    const bind = (name: string, id: string, attrs?: Record<string, string>) =>
      connection.call("registry.bind", {
        name,
        endpoint: {
          id,
          url: `tcp://127.0.0.1:${9000 + id.length * 7 + id.charCodeAt(0)}`,
          attrs,
        },
      });
    await bind("services/db?version=1.0&team=blue", "a");
    await bind("services/db?version=2.0", "b", { team: "blue" });
    await bind("services/db", "c", { version: "1.0", team: "red" });
    await bind("services/db", "d");
    await bind("services/db?label=a%20b", "e");
    const lookup = async (name: string) =>
      ids(
        await connection.call<LookupResult>("registry.lookup", {
          name,
          rotate: false,
        }),
      );
    assert.deepEqual(await lookup("services/db"), ["a", "b", "c", "d", "e"]);
    assert.deepEqual(await lookup("services/db?version=1.0"), ["a", "c"]);
    assert.deepEqual(await lookup("services/db?team=blue"), ["a", "b"]);
    assert.deepEqual(await lookup("services/db?version=1.0&team=blue"), ["a"]);
    assert.deepEqual(await lookup("services/db?team=green"), []);
    assert.deepEqual(await lookup("services/db?label=a%20b"), ["e"]);
    const result = await connection.call<LookupResult>("registry.lookup", {
      name: "services/db?version=2.0",
    });
    assert.equal(result.name, "services/db");
    assert.deepEqual(result.query, { version: "2.0" });
    assert.deepEqual(result.endpoints[0].attrs, {
      version: "2.0",
      team: "blue",
    });
  });
});

Deno.test("lookups rotate the serving endpoints by one each time; rotate: false keeps binding order; draining ones come last", async () => {
  await withSingleNode(async (_node, connection) => {
    for (const [i, id] of ["a", "b", "c"].entries()) {
      await connection.call("registry.bind", {
        name: "s",
        endpoint: { id, url: `tcp://127.0.0.1:${9100 + i}` },
      });
    }
    const firsts: string[] = [];
    for (let i = 0; i < 6; i++) {
      firsts.push(
        ids(await connection.call<LookupResult>("registry.lookup", ["s"]))[0],
      );
    }
    assert.deepEqual(firsts, ["a", "b", "c", "a", "b", "c"]);
    assert.deepEqual(
      ids(
        await connection.call<LookupResult>("registry.lookup", { name: "s" }),
      ),
      ["a", "b", "c"],
    );
    assert.deepEqual(
      ids(
        await connection.call<LookupResult>("registry.lookup", {
          name: "s",
          rotate: false,
        }),
      ),
      ["a", "b", "c"],
    );
    await connection.call("registry.setState", {
      name: "s",
      id: "a",
      state: "draining",
    });
    const result = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.deepEqual(result.endpoints.map((e) => [e.id, e.state]), [
      ["b", "serving"],
      ["c", "serving"],
      ["a", "draining"],
    ]);
  });
});

Deno.test("lookup limit: the first N of the rotated answer, serving ones first, so successive lookups hand out successive subsets; total counts every match; a bad limit is -32602", async () => {
  await withSingleNode(async (_node, connection) => {
    for (const [i, id] of ["a", "b", "c", "d", "e"].entries()) {
      await connection.call("registry.bind", {
        name: "s",
        endpoint: { id, url: `tcp://127.0.0.1:${9300 + i}` },
      });
    }
    await connection.call("registry.setState", {
      name: "s",
      id: "e",
      state: "draining",
    });
    const subsets: string[][] = [];
    for (let i = 0; i < 3; i++) {
      const result = await connection.call<LookupResult>("registry.lookup", {
        name: "s",
        limit: 2,
      });
      assert.equal(result.total, 5);
      subsets.push(ids(result));
    }
    assert.deepEqual(subsets, [["a", "b"], ["b", "c"], ["c", "d"]]);
    // A limit beyond the matches cuts nothing; the draining one comes last.
    const all = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
      limit: 10,
    });
    assert.deepEqual(ids(all), ["a", "b", "c", "d", "e"]);
    assert.equal(all.total, 5);
    const unlimited = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.equal(unlimited.total, unlimited.endpoints.length);
    for (const limit of [0, -1, 1.5, "2", null]) {
      await rejectsWith(
        connection.call("registry.lookup", { name: "s", limit }),
        INVALID_PARAMS,
        'Invalid params: "limit" must be an integer >= 1 (leave it out for every endpoint)',
      );
    }
  });
});

Deno.test("registry.list lists names under a prefix, with counts or endpoints, and the revision", async () => {
  await withSingleNode(async (_node, connection) => {
    await connection.call("registry.bind", ["svc/a", {
      id: "1",
      url: "tcp://127.0.0.1:9201",
    }]);
    await connection.call("registry.bind", ["svc/a", {
      id: "2",
      url: "tcp://127.0.0.1:9202",
    }]);
    await connection.call("registry.bind", ["svc/b", {
      id: "1",
      url: "tcp://127.0.0.1:9203",
    }]);
    await connection.call("registry.bind", ["other", {
      id: "1",
      url: "tcp://127.0.0.1:9204",
    }]);
    assert.deepEqual(
      await connection.call<ListResult>("registry.list", { prefix: "svc/" }),
      {
        revision: 4,
        names: [{ name: "svc/a", count: 2 }, { name: "svc/b", count: 1 }],
      },
    );
    const all = await connection.call<ListResult>("registry.list", {});
    assert.deepEqual(all.names.map((n) => n.name), ["other", "svc/a", "svc/b"]);
    const withEndpoints = await connection.call<ListResult>("registry.list", {
      prefix: "svc/b",
      endpoints: true,
    });
    assert.deepEqual(withEndpoints.names[0].endpoints?.map((e) => e.url), [
      "tcp://127.0.0.1:9203",
    ]);
  });
});

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
    // A new instance takes the id over; the old one's unbind leaves it.
    const replaced = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9502" },
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
    assert.equal(node.state.binding("s", "a")?.url, "tcp://127.0.0.1:9502");
  });
});

Deno.test("repeated lookups see every change at once: a bind, a drain, an unbind, and local bindings that move no revision", async () => {
  await withSingleNode(async (_node, connection) => {
    const look = async () =>
      (await connection.call<LookupResult>("registry.lookup", {
        name: "c",
        rotate: false,
      })).endpoints.map((e) => `${e.id}:${e.state}:${e.scope}`);
    await connection.call("registry.bind", ["c", {
      id: "a",
      url: "tcp://127.0.0.1:9701",
    }]);
    assert.deepEqual(await look(), ["a:serving:global"]);
    assert.deepEqual(await look(), ["a:serving:global"]);
    await connection.call("registry.bind", ["c", {
      id: "b",
      url: "tcp://127.0.0.1:9702",
    }]);
    assert.deepEqual(await look(), ["a:serving:global", "b:serving:global"]);
    await connection.call("registry.setState", {
      name: "c",
      id: "a",
      state: "draining",
    });
    assert.deepEqual(await look(), ["b:serving:global", "a:draining:global"]);
    await connection.call("registry.unbind", ["c", "b"]);
    assert.deepEqual(await look(), ["a:draining:global"]);
    const lease = await connection.call<{ id: string }>("lease.grant", {
      ttlMs: 5_000,
    });
    await connection.call("registry.bind", {
      name: "c",
      endpoint: { id: "l", url: "tcp://127.0.0.1:9703" },
      scope: "local",
      leaseId: lease.id,
    });
    assert.deepEqual(await look(), ["l:serving:local", "a:draining:global"]);
    await connection.call("registry.setState", {
      name: "c",
      id: "l",
      state: "draining",
      scope: "local",
    });
    assert.deepEqual(await look(), ["a:draining:global", "l:draining:local"]);
    await connection.call("registry.unbind", {
      name: "c",
      id: "l",
      scope: "local",
    });
    assert.deepEqual(await look(), ["a:draining:global"]);
  });
});

Deno.test("a local binding lives only on its node's lookups, is not replicated, and goes with its lease", async () => {
  await withSingleNode(async (node, connection) => {
    await connection.call("registry.bind", ["s", {
      id: "g",
      url: "tcp://127.0.0.1:9601",
    }]);
    const lease = await connection.call<{ id: string }>("lease.grant", {
      ttlMs: 5_000,
    });
    const local = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "l", url: "tcp://127.0.0.1:9602" },
      scope: "local",
      leaseId: lease.id,
    });
    assert.equal(local.endpoint.scope, "local");
    // The revision did not move: nothing went through the log.
    assert.equal(local.revision, 1);
    assert.equal(node.state.revision, 1);
    assert.deepEqual(node.state.bindings("s").map((b) => b.id), ["g"]);
    const lookup = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.deepEqual(lookup.endpoints.map((e) => [e.id, e.scope]), [[
      "g",
      "global",
    ], ["l", "local"]]);
    assert.deepEqual(
      (await connection.call<ListResult>("registry.list", {})).names,
      [{ name: "s", count: 2 }],
    );
    await rejectsWith(
      connection.call("registry.bind", {
        name: "s",
        endpoint: { url: "tcp://127.0.0.1:9603" },
        scope: "local",
        grant: { ttlMs: 1000 },
      }),
      INVALID_PARAMS,
      /a local binding cannot grant its lease in the same call/,
    );
    await connection.call("lease.revoke", { id: lease.id });
    assert.deepEqual(
      ids(await connection.call<LookupResult>("registry.lookup", ["s"])),
      ["g"],
    );
  });
});

Deno.test("a health-checked endpoint whose server stops answering is marked unhealthy, left out of lookups, and comes back", async () => {
  await withSingleNode(async (node, connection) => {
    const [port] = freePorts(1);
    let server = serve({ port, methods: {} });
    await connection.call("registry.bind", {
      name: "s",
      endpoint: {
        id: "a",
        url: `tcp://127.0.0.1:${port}`,
        check: {
          kind: "ping",
          intervalMs: 100,
          timeoutMs: 50,
          failuresBeforeUnhealthy: 2,
        },
      },
    });
    const state = () => node.state.binding("s", "a")?.state;
    const revision = node.state.revision;
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(state(), "serving");
    assert.equal(
      node.state.revision,
      revision,
      "probes that pass write nothing",
    );
    await server.close();
    await waitFor(() => state() === "unhealthy", "unhealthy", 5_000);
    assert.deepEqual(
      (await connection.call<LookupResult>("registry.lookup", ["s"])).endpoints,
      [],
    );
    const all = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      includeUnhealthy: true,
    });
    assert.deepEqual(all.endpoints.map((e: Endpoint) => e.state), [
      "unhealthy",
    ]);
    // One entry per transition, not per probe.
    const afterDown = node.state.revision;
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(node.state.revision, afterDown);
    server = serve({ port, methods: {} });
    await waitFor(() => state() === "serving", "serving again", 5_000);
    assert.equal(node.state.revision, afterDown + 1);
    await server.close();
  });
});

Deno.test("registry.status reports consensus, revision, leases, watches and the members", async () => {
  await withSingleNode(async (node, connection) => {
    await connection.call("registry.bind", ["hello", {
      url: "tcp://127.0.0.1:9001",
    }]);
    await connection.call("lease.grant", { ttlMs: 5_000 });
    await connection.call("registry.watch", { prefix: "" });
    const status = await connection.call<RegistryStatus>("registry.status");
    assert.deepEqual({ ...status, term: 0 }, {
      id: "n1",
      url: node.url,
      peerUrl: node.peerUrl,
      term: 0,
      role: "leader",
      kind: "voter",
      leader: "n1",
      leaderUrl: node.url,
      // Index 1 is the leader's empty entry, 2 the bind, 3 the grant.
      commitIndex: 3,
      appliedIndex: 3,
      snapshotIndex: 0,
      revision: 1,
      compactRevision: 1,
      leases: 1,
      watchers: 1,
      electionTimeoutMs: 50,
      minTtlMs: 75,
      members: [{
        id: "n1",
        peerUrl: node.peerUrl,
        clientUrl: node.url,
        self: true,
        reachable: true,
        lastHeardMsAgo: 0,
        lastError: null,
      }],
    });
    assert.ok(status.term >= 1);
    assert.notEqual(status.peerUrl, status.url);
  });
});

Deno.test("the client port has no raft.step: a client gets -32601", async () => {
  await withSingleNode(async (_node, connection) => {
    await rejectsWith(
      connection.call("raft.step", [[]]),
      METHOD_NOT_FOUND,
      'Method not found: no method "raft.step" on this server',
    );
  });
});

Deno.test("a follower answers writes with NOT_LEADER naming the leader's learnt client URL, and no leader with UNAVAILABLE", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_service_" });
  const [port1, peerPort1, peerPort2] = freePorts(3);
  const url1 = `tcp://127.0.0.1:${port1}`;
  const peerUrl1 = `tcp://127.0.0.1:${peerPort1}`;
  const peerUrl2 = `tcp://127.0.0.1:${peerPort2}`;
  // n2's client URL, as n2 announces it in the peer handshake.
  const url2 = "tcp://127.0.0.1:7002";
  // n2 never runs: the test speaks for it. A long election timeout keeps
  // n1 from campaigning while the test runs.
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: port1 },
    peers: { n1: peerUrl1, n2: peerUrl2 },
    clusterSecret: TEST_SECRET,
    dataDir: dir,
    tickMs: 100,
    electionTicks: 100,
  });
  const connection = await dial(node.url);
  let peer: RpcConnection | undefined;
  try {
    const bind = () =>
      connection.call("registry.bind", ["hello", {
        url: "tcp://127.0.0.1:9001",
      }]);
    // No leader known yet, and n1 cannot reach n2: it says so.
    const noQuorum =
      `no quorum: this node reaches 1 of 2 members (n2 at ${peerUrl2}: connection refused); a 2-member registry needs 2 to elect a leader: start the others, or check the network between them`;
    await rejectsWith(
      bind(),
      UNAVAILABLE,
      `Unavailable: ${noQuorum}`,
      { retryAfterMs: 10_000 },
    );
    // A linearizable lookup waits for a leader to confirm it, then gives up.
    await rejectsWith(
      connection.call("registry.lookup", ["hello"]),
      UNAVAILABLE,
      `Unavailable: no leader was elected within 2000 ms to confirm the read; retry, or pass consistency: "serializable" for a possibly stale answer (${noQuorum})`,
      { retryAfterMs: 10_000 },
    );
    // n2 speaks up as the leader of term 2 (a heartbeat), on the peer port
    // after the handshake: the client port has no raft.step.
    const heartbeat = {
      type: "append",
      from: "n2",
      to: "n1",
      term: 2,
      prevLogIndex: 0,
      prevLogTerm: 0,
      entries: [],
      commit: 0,
    };
    await rejectsWith(
      connection.call("raft.step", [[heartbeat]]),
      METHOD_NOT_FOUND,
      'Method not found: no method "raft.step" on this server',
    );
    assert.equal(node.raft.status.leader, null);
    // (Dialed now: a connection must authenticate within 2 s.)
    peer = await dial(peerUrl1);
    assert.deepEqual(
      await authenticatePeer(peer, {
        key: await ClusterKey.fromSecret(TEST_SECRET),
        clusterId: node.clusterId,
        from: "n2",
        to: "n1",
        clientUrl: url2,
      }),
      { clientUrl: url1 },
    );
    await peer.call("raft.step", [[heartbeat]]);
    await waitFor(() => node.raft.status.leader === "n2", "n1 to follow n2");
    await rejectsWith(
      bind(),
      NOT_LEADER,
      `Not leader: node n1 is a follower; send writes to the leader n2 at ${url2}`,
      { leaderId: "n2", leaderUrl: url2 },
    );
    await rejectsWith(
      connection.call("registry.unbind", ["hello", "h1"]),
      NOT_LEADER,
      `Not leader: node n1 is a follower; send writes to the leader n2 at ${url2}`,
      { leaderId: "n2", leaderUrl: url2 },
    );
    // Bad params are reported before leadership matters.
    await rejectsWith(
      connection.call("registry.bind", ["hello"]),
      INVALID_PARAMS,
      ENDPOINT_SHAPE,
    );
    // A serializable read answers from the follower's own state.
    assert.deepEqual(
      await connection.call("registry.lookup", ["hello", "serializable"]),
      { name: "hello", query: {}, endpoints: [], total: 0, revision: 0 },
    );
    // Lease calls go to the leader too.
    await rejectsWith(
      connection.call("lease.keepAlive", { id: "abc" }),
      NOT_LEADER,
      `Not leader: node n1 is a follower; send writes to the leader n2 at ${url2}`,
      { leaderId: "n2", leaderUrl: url2 },
    );
    const status = await connection.call<RegistryStatus>("registry.status");
    assert.deepEqual({ ...status, members: [] }, {
      id: "n1",
      url: url1,
      peerUrl: peerUrl1,
      term: 2,
      role: "follower",
      kind: "voter",
      leader: "n2",
      leaderUrl: url2,
      commitIndex: 0,
      appliedIndex: 0,
      snapshotIndex: 0,
      revision: 0,
      compactRevision: 1,
      leases: 0,
      watchers: 0,
      electionTimeoutMs: 10_000,
      minTtlMs: 15_000,
      members: [],
    });
    // n1 heard from n2 (inbound) but cannot reach n2's peer port itself.
    const [self, n2] = status.members;
    assert.deepEqual(self, {
      id: "n1",
      peerUrl: peerUrl1,
      clientUrl: url1,
      self: true,
      reachable: true,
      lastHeardMsAgo: 0,
      lastError: null,
    });
    assert.equal(n2.id, "n2");
    assert.equal(n2.peerUrl, peerUrl2);
    assert.equal(n2.clientUrl, url2);
    assert.equal(n2.self, false);
    assert.equal(n2.reachable, false);
    assert.equal(n2.lastError, "connection refused");
    assert.ok(
      n2.lastHeardMsAgo !== null && n2.lastHeardMsAgo < 5_000,
      String(n2.lastHeardMsAgo),
    );
  } finally {
    peer?.close();
    await peer?.closed;
    connection.close();
    await connection.closed;
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
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

/** Three in-process registry nodes n1..n3 with a leader elected. */
async function withThreeNodes(
  fn: (
    nodes: RegistryNode[],
    leader: RegistryNode,
    stop: (node: RegistryNode) => Promise<void>,
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_service_" });
  const ports = freePorts(6);
  const peers: Record<string, string> = {};
  for (let i = 0; i < 3; i++) {
    peers[`n${i + 1}`] = `tcp://127.0.0.1:${ports[3 + i]}`;
  }
  const nodes = await Promise.all([0, 1, 2].map((i) =>
    startRegistryNode({
      id: `n${i + 1}`,
      listen: { hostname: "127.0.0.1", port: ports[i] },
      peers,
      clusterSecret: TEST_SECRET,
      dataDir: `${dir}/n${i + 1}`,
      tickMs: 20,
      electionTicks: 10,
    })
  ));
  const running = new Set(nodes);
  const leaderOf = () => {
    const leaders = nodes.filter((n) => n.raft.status.role === "leader");
    return leaders.length === 1 &&
        nodes.every((n) => n.raft.status.leader === leaders[0].id)
      ? leaders[0]
      : undefined;
  };
  try {
    await waitFor(() => leaderOf() !== undefined, "a leader all follow");
    await fn(nodes, leaderOf()!, async (node) => {
      running.delete(node);
      await node.stop();
    });
  } finally {
    for (const node of running) await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

async function callOn<T>(
  node: RegistryNode,
  method: string,
  params?: Record<string, unknown>,
): Promise<T> {
  const connection = await dial(node.url);
  try {
    return await connection.call<T>(method, params, { timeoutMs: 5_000 });
  } finally {
    connection.close();
    await connection.closed;
  }
}

Deno.test("dissertation §3.10 registry.leaderTransfer: to a named member, then to any; naming the leader is a no-op; a follower redirects to the leader", async () => {
  await withThreeNodes(async (nodes, leader) => {
    const follower = nodes.find((n) => n !== leader)!;
    await rejectsWith(
      callOn(follower, "registry.leaderTransfer", {}),
      NOT_LEADER,
      new RegExp(
        `^Not leader: node ${follower.id} is a follower; send writes to the leader ${leader.id} at `,
      ),
      { leaderId: leader.id, leaderUrl: leader.url },
    );
    const same = await callOn<LeaderTransferResult>(
      leader,
      "registry.leaderTransfer",
      { to: leader.id },
    );
    assert.deepEqual(same, {
      leader: leader.id,
      leaderUrl: leader.url,
      previousLeader: leader.id,
      term: leader.raft.status.term,
      tookMs: 0,
    });
    const termBefore = leader.raft.status.term;
    const moved = await callOn<LeaderTransferResult>(
      leader,
      "registry.leaderTransfer",
      { to: follower.id },
    );
    assert.equal(moved.leader, follower.id);
    assert.equal(moved.leaderUrl, follower.url);
    assert.equal(moved.previousLeader, leader.id);
    assert.ok(moved.term > termBefore, `${moved.term} > ${termBefore}`);
    await waitFor(
      () => follower.raft.status.role === "leader",
      "the target leads",
    );
    const onward = await callOn<LeaderTransferResult>(
      follower,
      "registry.leaderTransfer",
    );
    assert.notEqual(onward.leader, follower.id);
    assert.equal(onward.previousLeader, follower.id);
    await waitFor(
      () =>
        nodes.find((n) => n.id === onward.leader)!.raft.status.role ===
          "leader",
      "the member picked leads",
    );
  });
});

Deno.test("dissertation §3.10 registry.leaderTransfer errors: an unknown member or bad timeout is invalid params; a single node has no other voter", async () => {
  await withThreeNodes(async (_nodes, leader) => {
    await rejectsWith(
      callOn(leader, "registry.leaderTransfer", { to: "n9" }),
      INVALID_PARAMS,
      'Invalid params: "to" must name a member of this registry (n1, n2, n3), not "n9"',
    );
    await rejectsWith(
      callOn(leader, "registry.leaderTransfer", { timeoutMs: 0 }),
      INVALID_PARAMS,
      'Invalid params: "timeoutMs" must be an integer number of ms from 1 to 60000, not 0',
    );
  });
  await withSingleNode(async (node, connection) => {
    await rejectsWith(
      connection.call("registry.leaderTransfer", {}),
      LEADER_TRANSFER_FAILED,
      "Leader transfer failed: n1 is the only voter of this registry; there is no other member to hand leadership to",
      { reason: "noOtherVoter", target: null, leader: "n1" },
    );
    assert.equal(node.raft.status.role, "leader");
  });
});

Deno.test("dissertation §3.10 registry.leaderTransfer to a stopped member fails after timeoutMs and the leader leads on", async () => {
  await withThreeNodes(async (nodes, leader, stop) => {
    const follower = nodes.find((n) => n !== leader)!;
    await stop(follower);
    await rejectsWith(
      callOn(leader, "registry.leaderTransfer", {
        to: follower.id,
        timeoutMs: 300,
      }),
      LEADER_TRANSFER_FAILED,
      `Leader transfer failed: no other member took over from ${leader.id} (to ${follower.id}) within 300 ms, so ${leader.id} leads on; rafter member list shows how far behind each member is, rafter status whether it is reachable`,
      { reason: "timeout", target: follower.id, leader: leader.id },
    );
    // The core abandons the transfer after an election timeout (200 ms).
    await waitFor(async () => {
      try {
        await callOn(leader, "registry.bind", {
          name: "after",
          endpoint: { url: "tcp://127.0.0.1:9801" },
        });
        return true;
      } catch {
        return false;
      }
    }, "the leader to take writes again");
    assert.equal(leader.raft.status.role, "leader");
  });
});

Deno.test("§5.3 registry.memberList: the leader reports every member's role, kind, match index and lag; a follower redirects", async () => {
  await withThreeNodes(async (nodes, leader, stop) => {
    await callOn(leader, "registry.bind", {
      name: "m",
      endpoint: { url: "tcp://127.0.0.1:9802" },
    });
    const lastIndex = leader.raft.status.lastIndex;
    // Every follower acknowledges the bind within a heartbeat or two.
    let list: MemberListResult | undefined;
    await waitFor(async () => {
      list = await callOn<MemberListResult>(leader, "registry.memberList");
      return list.members.every((m) => m.matchIndex === lastIndex);
    }, "every member to match the leader's log");
    assert.equal(list!.leader, leader.id);
    assert.equal(list!.term, leader.raft.status.term);
    assert.equal(list!.lastIndex, lastIndex);
    assert.deepEqual(
      list!.members.map((m) => [m.id, m.role, m.kind, m.lag, m.reachable]),
      nodes.map((n) => [
        n.id,
        n === leader ? "leader" : "follower",
        "voter",
        0,
        true,
      ]),
    );
    for (const member of list!.members) {
      const node = nodes.find((n) => n.id === member.id)!;
      assert.equal(member.clientUrl, node.url);
      assert.equal(member.peerUrl, node.peerUrl);
    }
    // A stopped follower falls behind: its lag grows with each write.
    const follower = nodes.find((n) => n !== leader)!;
    await stop(follower);
    for (let i = 0; i < 3; i++) {
      await callOn(leader, "registry.bind", {
        name: "m",
        endpoint: { id: `x${i}`, url: "tcp://127.0.0.1:9803" },
      });
    }
    const behind = await callOn<MemberListResult>(
      leader,
      "registry.memberList",
    );
    const stopped = behind.members.find((m) => m.id === follower.id)!;
    assert.equal(stopped.matchIndex, lastIndex);
    assert.equal(stopped.lag, behind.lastIndex - lastIndex);
    assert.ok(stopped.lag! >= 3, String(stopped.lag));
    const other = nodes.find((n) => n !== leader && n !== follower)!;
    await rejectsWith(
      callOn(other, "registry.memberList"),
      NOT_LEADER,
      /^Not leader: /,
      { leaderId: leader.id, leaderUrl: leader.url },
    );
  });
});

Deno.test("dissertation §3.10 a write reaching a leader that is handing over is held until the new leader leads, then redirected to it", async () => {
  await withThreeNodes(async (nodes, leader) => {
    const target = nodes.find((n) => n !== leader)!;
    const connection = await dial(leader.url);
    try {
      const transfer = leader.raft.transferLeadership({ target: target.id });
      transfer.catch(() => {}); // awaited below, unless an assertion fails
      let roleAtAnswer: string | undefined;
      const bind = connection.call("registry.bind", {
        name: "handover",
        endpoint: { url: "tcp://127.0.0.1:9804" },
      }, { timeoutMs: 5_000 }).finally(() => {
        roleAtAnswer = target.raft.status.role;
      });
      await rejectsWith(
        bind,
        NOT_LEADER,
        `Not leader: node ${leader.id} is a follower; send writes to the leader ${target.id} at ${target.url}`,
        { leaderId: target.id, leaderUrl: target.url },
      );
      // Answered once the target leads, not while it is still a follower
      // (the client would be sent back and forth, then back off).
      assert.equal(roleAtAnswer, "leader");
      assert.equal(await transfer, target.id);
    } finally {
      connection.close();
      await connection.closed;
    }
  });
});

Deno.test("dissertation §4.1 registry.memberAdd/memberPromote/memberRemove: the new member list, clear refusals, an idempotent re-add", async () => {
  await withSingleNode(async (node, connection) => {
    const call = (method: string, params: Record<string, unknown>) =>
      connection.call<MemberListResult>(method, params, { timeoutMs: 5_000 });
    const added = await call("registry.memberAdd", {
      id: "n2",
      peerUrl: "tcp://127.0.0.1:1",
      clientUrl: "tcp://127.0.0.1:2",
    });
    assert.equal(added.clusterId, node.clusterId);
    assert.deepEqual(
      added.members.map((m) => [m.id, m.kind, m.peerUrl, m.matchIndex]),
      [
        ["n1", "voter", node.peerUrl, node.raft.status.lastIndex],
        ["n2", "learner", "tcp://127.0.0.1:1", null],
      ],
    );
    // Replicated state: the configuration carries the URLs.
    const config = node.raft.configuration;
    assert.deepEqual([config.voters, config.learners], [["n1"], ["n2"]]);
    assert.equal(config.peerUrls?.n2, "tcp://127.0.0.1:1");
    assert.deepEqual(config.clientUrls, { n2: "tcp://127.0.0.1:2" });
    // The transport follows: n2 is a member of the peer directory.
    assert.equal(node.transport.directory.peerUrl("n2"), "tcp://127.0.0.1:1");
    const index = node.raft.status.lastIndex;
    // The same learner again (a --join that retries) is answered as done.
    const again = await call("registry.memberAdd", {
      id: "n2",
      peerUrl: "tcp://127.0.0.1:1",
    });
    assert.equal(node.raft.status.lastIndex, index);
    assert.deepEqual(again.members.map((m) => m.id), ["n1", "n2"]);
    await rejectsWith(
      call("registry.memberAdd", { id: "n3", peerUrl: "n3" }),
      INVALID_PARAMS,
      /^Invalid params: "peerUrl" must be a tcp:\/\/host:port URL, not "n3"/,
    );
    await rejectsWith(
      call("registry.memberPromote", { id: "n9" }),
      MEMBERSHIP_CHANGE_FAILED,
      "Membership change failed: n9 is not a member of this registry (members: n1, n2); rafter member list shows them",
      { reason: "unknownMember", member: "n9" },
    );
    await rejectsWith(
      call("registry.memberPromote", { id: "n1" }),
      MEMBERSHIP_CHANGE_FAILED,
      /^Membership change failed: n1 is not a learner/,
      { reason: "notApplicable", member: "n1" },
    );
    // Dissertation §4.2.1: n2 never ran, so it has not caught up; promoting
    // it would make a quorum of 2 out of n1 and a member that is not there.
    await rejectsWith(
      call("registry.memberPromote", { id: "n2" }),
      MEMBERSHIP_CHANGE_FAILED,
      /^Membership change failed: learner n2 has not caught up \(match index 0, commit index \d+\); start it/,
      { reason: "notApplicable", member: "n2" },
    );
    assert.deepEqual(node.raft.configuration.voters, ["n1"]);
    const removed = await call("registry.memberRemove", { id: "n2" });
    assert.deepEqual(removed.members.map((m) => m.id), ["n1"]);
    assert.equal(node.transport.directory.has("n2"), false);
    await rejectsWith(
      call("registry.memberRemove", { id: "n1" }),
      MEMBERSHIP_CHANGE_FAILED,
      /would leave no voter; add another voter first$/,
      { reason: "notApplicable", member: "n1" },
    );
    assert.equal(node.raft.status.role, "leader");
  });
});
