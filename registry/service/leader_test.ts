import assert from "node:assert/strict";
import { dial } from "../../rpc/transport/dial.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { INVALID_PARAMS, METHOD_NOT_FOUND } from "../../rpc/errors.ts";
import { freePorts } from "../../testing/ports.ts";
import { TEST_SECRET } from "../../testing/cluster.ts";
import { waitFor } from "../../testing/time.ts";
import { authenticatePeer, ClusterKey } from "../../raft/peer_auth.ts";
import { startRegistryNode } from "../../testing/registry.ts";
import {
  LEADER_TRANSFER_FAILED,
  type LeaderTransferResult,
  NOT_LEADER,
  type RegistryStatus,
  UNAVAILABLE,
} from "../../protocol/registry.ts";
import {
  callOn,
  cleanSecurity,
  ENDPOINT_SHAPE,
  rejectsWith,
  withSingleNode,
  withThreeNodes,
} from "./_test_util.ts";

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
      { retryAfterMs: 10_000, applied: false },
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
      federation: null,
      minTtlMs: 15_000,
      members: [],
      // The one heartbeat from n2, nothing dropped.
      security: cleanSecurity(1),
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

Deno.test("registry.leaderTransfer refuses an unknown param, naming it and the accepted ones", async () => {
  await withSingleNode(async (_node, connection) => {
    await rejectsWith(
      connection.call("registry.leaderTransfer", { target: "n2" }),
      INVALID_PARAMS,
      'Invalid params: "target" is not a param of registry.leaderTransfer, which takes { to?, timeoutMs? }',
    );
  });
});
