/**
 * End-to-end tests of a 3-node registry run as real `deno run` processes:
 * not-leader redirects, failover, durability across SIGKILL of every node,
 * and bad input.
 */

import assert from "node:assert/strict";
import { withLocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import { RpcError } from "../rpc/errors.ts";
import { NOT_LEADER } from "../protocol/registry.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { parseTcpUrl } from "../rpc/transport/transport.ts";
import type { LookupResult, NotLeaderData } from "../protocol/registry.ts";
import { connect } from "../stub/client.ts";
import { onlyOn, testEngine } from "../testing/engine.ts";

/** The engine under test (`deno task test:etcd` runs this file on etcd). */
const ENGINE = testEngine();

async function withConnection<T>(
  url: string,
  use: (connection: RpcConnection) => Promise<T>,
): Promise<T> {
  const connection = await dial(url, { connectTimeoutMs: 1000 });
  try {
    return await use(connection);
  } finally {
    connection.close();
  }
}

function lookup(url: string, consistency = "linearizable") {
  return withConnection(
    url,
    (c) =>
      c.call<LookupResult>("registry.lookup", { name: "svc", consistency }, {
        timeoutMs: 3000,
      }),
  );
}

Deno.test(
  "a follower refuses a write with NOT_LEADER naming the leader's URL; the leader accepts it",
  onlyOn(
    "raft",
    "fronts over etcd have no leader of their own: each takes writes and etcd orders them",
  ),
  async () => {
    await withLocalCluster({}, async (cluster) => {
      const leader = await cluster.startRegistryWithLeader(3);
      const follower = [...cluster.registry.keys()].find((id) =>
        id !== leader
      )!;
      const params = {
        name: "svc",
        endpoint: { id: "a", url: "tcp://127.0.0.1:9001" },
      };
      const error = await withConnection(
        cluster.registry.get(follower)!,
        (c) => c.call("registry.bind", params).then(() => null, (e) => e),
      );
      assert.ok(error instanceof RpcError, String(error));
      assert.equal(error.code, NOT_LEADER);
      const data = error.data as NotLeaderData;
      assert.equal(data.leaderId, leader);
      assert.equal(data.leaderUrl, cluster.registry.get(leader));
      assert.match(
        error.message,
        new RegExp(`send writes to the leader ${leader}`),
      );

      const written = await withConnection(
        data.leaderUrl!,
        (c) => c.call<{ revision: number }>("registry.bind", params),
      );
      assert.equal(written.revision, 1);
      // Linearizable lookups on every node see the acknowledged write at once.
      for (const url of cluster.registryUrls) {
        const result = await lookup(url);
        assert.deepEqual(
          result.endpoints.map((e) => ({ id: e.id, url: e.url })),
          [params.endpoint],
        );
        assert.equal(result.revision, 1);
      }
    });
  },
);

Deno.test("acknowledged binds survive SIGKILL of the leader and then of every node", async () => {
  await withLocalCluster({}, async (cluster) => {
    await cluster.startRegistry(3);
    const rafter = connect(cluster.registryUrls, { deadlineMs: 15_000 });
    try {
      for (let i = 1; i <= 5; i++) {
        await rafter.bind("svc", {
          id: `s${i}`,
          url: `tcp://127.0.0.1:${9000 + i}`,
        });
      }
      const leader = await cluster.waitForLeader();
      await cluster.kill(leader, "SIGKILL");
      // Writes go on through the new leader.
      await rafter.bind("svc", { id: "s6", url: "tcp://127.0.0.1:9006" });
      const { revision } = await rafter.unbind("svc", "s1");
      const survivors = [...cluster.registry.keys()].filter((id) =>
        id !== leader
      );
      // The survivors saw the leader's connection end with its process and
      // stood without waiting out an election timeout
      // (RaftCore.leaderConnectionLost).
      for (const id of ENGINE === "raft" ? survivors : []) {
        await cluster.waitForLine(
          id,
          new RegExp(`the connection to leader ${leader} ended`),
          5_000,
        );
      }
      for (const id of survivors) {
        const result = await lookup(cluster.registry.get(id)!);
        assert.deepEqual(result.endpoints.map((e) => e.id), [
          "s2",
          "s3",
          "s4",
          "s5",
          "s6",
        ]);
      }
      // Kill everything, restart everything from the data folders.
      for (const id of survivors) await cluster.kill(id, "SIGKILL");
      for (const id of cluster.registry.keys()) await cluster.startNode(id);
      await cluster.waitForLeader(15_000);
      for (const url of cluster.registryUrls) {
        const result = await lookup(url);
        assert.deepEqual(result.endpoints.map((e) => e.id), [
          "s2",
          "s3",
          "s4",
          "s5",
          "s6",
        ]);
        if (ENGINE === "raft") assert.equal(result.revision, 7);
        else assert.ok(result.revision >= revision);
      }
    } finally {
      rafter.close();
    }
  });
});

Deno.test("garbage and oversized frames get errors and the node keeps serving", async () => {
  await withLocalCluster({}, async (cluster) => {
    await cluster.startRegistryWithLeader(3);
    const url = cluster.registryUrls[0];
    const conn = await Deno.connect(parseTcpUrl(url));
    try {
      const huge = "x".repeat(9 * 1024 * 1024);
      const bytes = new TextEncoder().encode(
        'not json\n{"jsonrpc":"2.0","method":"registry.bind","params":{"name":""},"id":1}\n' +
          `{"jsonrpc":"2.0","method":"x","params":"${huge}","id":2}\n` +
          '{"jsonrpc":"2.0","method":"raft.step","params":[[{"type":"append"}]],"id":3}\n' +
          '{"jsonrpc":"2.0","method":"rpc.ping","id":4}\n',
      );
      // Write and read at once: the server answers while the frame arrives.
      const writing = (async () => {
        for (let sent = 0; sent < bytes.length;) {
          sent += await conn.write(bytes.subarray(sent));
        }
      })();
      const lines: string[] = [];
      const buffer = new Uint8Array(64 * 1024);
      const decoder = new TextDecoder();
      let partial = "";
      const deadline = Date.now() + 10_000;
      while (lines.length < 5 && Date.now() < deadline) {
        const read = await Promise.race([
          conn.read(buffer),
          new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 500)),
        ]);
        if (read === "timeout") continue;
        if (read === null) break;
        partial += decoder.decode(buffer.subarray(0, read), { stream: true });
        const parts = partial.split("\n");
        partial = parts.pop()!;
        lines.push(...parts);
      }
      await writing;
      // Responses may come in any order; match them by id.
      const responses = lines.map((line) => JSON.parse(line));
      const byId = (id: number | null) =>
        responses.filter((r) => r.id === id).map((r) =>
          r.error?.code ?? r.result
        )
          .sort();
      assert.deepEqual(byId(null), [-32700, -32600].sort(), lines.join("\n"));
      assert.deepEqual(byId(1), [-32602]);
      // The client port has no raft.step (peers use the peer port).
      assert.deepEqual(byId(3), [-32601]);
      assert.deepEqual(byId(4), ["pong"]);
      const text = lines.join("\n");
      assert.match(text, /"name\\" must be a non-empty string/);
      assert.match(text, /frame exceeds 8388608 bytes/);
    } finally {
      conn.close();
    }
    // Every node still runs and agrees on a leader.
    await cluster.waitForLeader();
    for (const id of cluster.registry.keys()) {
      assert.equal(cluster.child(id).running, true);
    }
  });
});
