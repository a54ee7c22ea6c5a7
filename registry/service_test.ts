import assert from "node:assert/strict";
import { dial } from "../rpc/dial.ts";
import type { RpcConnection } from "../rpc/connection.ts";
import {
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  NOT_LEADER,
  RpcError,
  UNAVAILABLE,
} from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { freePorts, TEST_SECRET, waitFor } from "../raft/_test_util.ts";
import { authenticatePeer, ClusterKey } from "../raft/peer_auth.ts";
import { type RegistryNode, startRegistryNode } from "./registry_node.ts";
import { MAX_NAME_LENGTH } from "./service.ts";
import type { RegistryStatus } from "./types.ts";

/** A single-node registry (elected) and a raw connection to it. */
async function withSingleNode(
  fn: (node: RegistryNode, connection: RpcConnection) => Promise<void>,
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
    connection = await dial(node.url);
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
  message: string,
  data?: unknown,
): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof RpcError, `${error} is an RpcError`);
    assert.equal(error.message, message);
    assert.equal(error.code, code);
    assert.deepEqual(error.data, data);
    return true;
  });
}

const NAME_ERROR = (field: string) =>
  `Invalid params: "${field}" must be a string of 1..${MAX_NAME_LENGTH} characters`;
const BIND_SHAPE =
  "Invalid params: registry.bind takes { name, endpoint: { id?, url } }";

Deno.test("registry.bind refuses every kind of bad params with -32602", async () => {
  await withSingleNode(async (node, connection) => {
    const bad = (params: Params | undefined, message: string) =>
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
    await bad([[]], BIND_SHAPE);
    await bad({}, NAME_ERROR("name"));
    await bad({ name: 5, endpoint: { url } }, NAME_ERROR("name"));
    await bad({ name: "", endpoint: { url } }, NAME_ERROR("name"));
    await bad(
      { name: "x".repeat(MAX_NAME_LENGTH + 1), endpoint: { url } },
      NAME_ERROR("name"),
    );
    await bad({ name: "hello" }, BIND_SHAPE);
    await bad({ name: "hello", endpoint: url }, BIND_SHAPE);
    await bad({ name: "hello", endpoint: [url] }, BIND_SHAPE);
    await bad(["hello"], BIND_SHAPE);
    await bad(["hello", null], BIND_SHAPE);
    await bad(
      { name: "hello", endpoint: {} },
      'Invalid params: "endpoint.url" must be a string like tcp://127.0.0.1:9001',
    );
    await bad(
      { name: "hello", endpoint: { url: 9001 } },
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
    await bad(
      { name: "hello", endpoint: { url: "::" } },
      'Invalid params: "endpoint.url": invalid endpoint URL "::": expected tcp://host:port',
    );
    await bad(
      { name: "hello", endpoint: { id: "", url } },
      NAME_ERROR("endpoint.id"),
    );
    await bad(
      { name: "hello", endpoint: { id: 7, url } },
      NAME_ERROR("endpoint.id"),
    );
    await bad(
      { name: "hello", endpoint: { id: "i".repeat(MAX_NAME_LENGTH + 1), url } },
      NAME_ERROR("endpoint.id"),
    );
    // Nothing was written.
    assert.equal(node.state.revision, 0);
    assert.deepEqual(node.state.names(), []);
  });
});

Deno.test("registry.unbind and registry.lookup refuse bad params with -32602", async () => {
  await withSingleNode(async (_node, connection) => {
    const bad = (method: string, params: Params | undefined, message: string) =>
      rejectsWith(connection.call(method, params), INVALID_PARAMS, message);
    const unbindShape = "Invalid params: registry.unbind takes { name, id }";
    await bad("registry.unbind", undefined, unbindShape);
    await bad("registry.unbind", [3, "h1"], unbindShape);
    await bad("registry.unbind", { id: "h1" }, NAME_ERROR("name"));
    await bad("registry.unbind", { name: "hello" }, NAME_ERROR("id"));
    await bad("registry.unbind", ["hello"], NAME_ERROR("id"));
    await bad("registry.unbind", ["hello", ""], NAME_ERROR("id"));
    await bad("registry.unbind", ["", "h1"], NAME_ERROR("name"));
    const lookupShape =
      "Invalid params: registry.lookup takes { name, consistency? }";
    await bad("registry.lookup", undefined, lookupShape);
    await bad("registry.lookup", [false], lookupShape);
    await bad("registry.lookup", {}, NAME_ERROR("name"));
    await bad("registry.lookup", [""], NAME_ERROR("name"));
    const consistency =
      'Invalid params: "consistency" must be "linearizable" or "serializable"';
    await bad("registry.lookup", ["hello", "strong"], consistency);
    await bad(
      "registry.lookup",
      { name: "hello", consistency: null },
      consistency,
    );
  });
});

Deno.test("bind, lookup and unbind by name and by position", async () => {
  await withSingleNode(async (node, connection) => {
    const h1 = { id: "h1", url: "tcp://127.0.0.1:9001" };
    const h2url = "tcp://127.0.0.1:9002";
    assert.deepEqual(
      await connection.call("registry.bind", { name: "hello", endpoint: h1 }),
      { revision: 1 },
    );
    // By position; the id defaults to the URL.
    assert.deepEqual(
      await connection.call("registry.bind", ["hello", { url: h2url }]),
      { revision: 2 },
    );
    // The same binding again changes nothing.
    assert.deepEqual(
      await connection.call("registry.bind", ["hello", h1]),
      { revision: 2 },
    );
    const both = {
      name: "hello",
      endpoints: [h1, { id: h2url, url: h2url }],
      revision: 2,
    };
    assert.deepEqual(
      await connection.call("registry.lookup", { name: "hello" }),
      both,
    );
    assert.deepEqual(await connection.call("registry.lookup", ["hello"]), both);
    assert.deepEqual(
      await connection.call("registry.lookup", ["hello", "linearizable"]),
      both,
    );
    assert.deepEqual(
      await connection.call("registry.lookup", {
        name: "hello",
        consistency: "serializable",
      }),
      both,
    );
    assert.deepEqual(
      await connection.call("registry.unbind", { name: "hello", id: "h1" }),
      { revision: 3, removed: 1 },
    );
    assert.deepEqual(
      await connection.call("registry.unbind", ["hello", "h1"]),
      { revision: 3, removed: 0 },
    );
    assert.deepEqual(
      await connection.call("registry.unbind", ["nothing", "h1"]),
      { revision: 3, removed: 0 },
    );
    assert.deepEqual(await connection.call("registry.lookup", ["hello"]), {
      name: "hello",
      endpoints: [{ id: h2url, url: h2url }],
      revision: 3,
    });
    assert.deepEqual(await connection.call("registry.lookup", ["nothing"]), {
      name: "nothing",
      endpoints: [],
      revision: 3,
    });
    // A name of exactly the longest length is fine.
    const long = "n".repeat(MAX_NAME_LENGTH);
    assert.deepEqual(
      await connection.call("registry.bind", [long, { id: long, url: h2url }]),
      { revision: 4 },
    );
    assert.equal(node.state.revision, 4);
  });
});

Deno.test("registry.status reports the node's consensus state and revision", async () => {
  await withSingleNode(async (node, connection) => {
    await connection.call("registry.bind", ["hello", {
      url: "tcp://127.0.0.1:9001",
    }]);
    const status = await connection.call<RegistryStatus>("registry.status");
    // Index 1 is the leader's empty entry, index 2 the bind.
    assert.deepEqual(status, {
      id: "n1",
      url: node.url,
      peerUrl: node.peerUrl,
      term: node.raft.status.term,
      role: "leader",
      leader: "n1",
      leaderUrl: node.url,
      commitIndex: 2,
      appliedIndex: 2,
      revision: 1,
      compactRevision: 0,
      leases: 0,
      watchers: 0,
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
    // The peer port is another, real port.
    assert.match(status.peerUrl, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(status.peerUrl, status.url);
    assert.notEqual(status.peerUrl, "tcp://127.0.0.1:0");
    assert.ok(status.term >= 1);
    assert.match(status.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(status.url, "tcp://127.0.0.1:0");
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
    // No leader known yet.
    await rejectsWith(
      bind(),
      UNAVAILABLE,
      "Unavailable: the registry is electing a leader; retry shortly",
      { retryAfterMs: 10_000 },
    );
    // A linearizable lookup waits for a leader to confirm it, then gives up.
    await rejectsWith(
      connection.call("registry.lookup", ["hello"]),
      UNAVAILABLE,
      'Unavailable: no leader was elected within 2000 ms to confirm the read; retry, or pass consistency: "serializable" for a possibly stale answer',
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
      BIND_SHAPE,
    );
    // A serializable read answers from the follower's own state.
    assert.deepEqual(
      await connection.call("registry.lookup", ["hello", "serializable"]),
      { name: "hello", endpoints: [], revision: 0 },
    );
    const status = await connection.call<RegistryStatus>("registry.status");
    assert.deepEqual({ ...status, members: [] }, {
      id: "n1",
      url: url1,
      peerUrl: peerUrl1,
      term: 2,
      role: "follower",
      leader: "n2",
      leaderUrl: url2,
      commitIndex: 0,
      appliedIndex: 0,
      revision: 0,
      compactRevision: 0,
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

Deno.test("bound URLs are stored in one spelling, so one address is one endpoint", async () => {
  await withSingleNode(async (_node, connection) => {
    await connection.call("registry.bind", ["hello", {
      url: "127.0.0.1:9001",
    }]);
    // The same address spelt the long way is the same endpoint.
    assert.deepEqual(
      await connection.call("registry.bind", ["hello", {
        url: "tcp://127.0.0.1:9001",
      }]),
      { revision: 1 },
    );
    await connection.call("registry.bind", ["hello", {
      id: "v6",
      url: "[::1]:9002",
    }]);
    assert.deepEqual(await connection.call("registry.lookup", ["hello"]), {
      name: "hello",
      endpoints: [
        { id: "tcp://127.0.0.1:9001", url: "tcp://127.0.0.1:9001" },
        { id: "v6", url: "tcp://[::1]:9002" },
      ],
      revision: 2,
    });
  });
});
