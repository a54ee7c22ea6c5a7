import assert from "node:assert/strict";
import { INVALID_PARAMS, METHOD_NOT_FOUND } from "../../rpc/errors.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import { cleanSecurity, rejectsWith, withSingleNode } from "./_test_util.ts";

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
      // Index 1 is the leader's empty entry, 2 the bootstrap admin token
      // (authBootstrap), 3 the bind, 4 the grant.
      commitIndex: 4,
      appliedIndex: 4,
      snapshotIndex: 0,
      revision: 1,
      compactRevision: 1,
      leases: 1,
      watchers: 1,
      electionTimeoutMs: 50,
      federation: null,
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
      // A single node: no peer ever spoke to it.
      security: cleanSecurity(0),
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

Deno.test("registry.status refuses an unknown param, naming it", async () => {
  await withSingleNode(async (_node, connection) => {
    await rejectsWith(
      connection.call("registry.status", { verbose: true }),
      INVALID_PARAMS,
      'Invalid params: "verbose" is not a param: registry.status takes no params',
    );
  });
});
