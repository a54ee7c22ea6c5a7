/**
 * A member that missed a membership change catches up from a leader it does
 * not know yet (Raft dissertation §4.1), on real processes: n3 is stopped,
 * n4 joins (added and promoted while n3 is down) and becomes the leader;
 * when n3 comes back, its configuration does not list n4, yet it admits
 * n4's authenticated peer connection (n4 announces its peer URL in the
 * handshake) and catches up with every acknowledged bind.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster, waitForEndpoints } from "../testing/cluster.ts";
import { ConnectionPool } from "../stub/connection_pool.ts";
import { RegistryClient } from "../stub/registry_client/registry_client.ts";
import { REGISTRY_METHODS } from "../protocol/registry.ts";
import { connect } from "../mod.ts";
import { waitFor } from "../testing/time.ts";

Deno.test("dissertation §4.1 a member that missed the change adding the current leader admits it and catches up", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const pool = new ConnectionPool();
  try {
    await cluster.startWithJoiners(3, "n4");
    const first = await cluster.waitForLeader(15_000);
    const registry = new RegistryClient(cluster.registryUrls, pool);
    const bound: string[] = [];
    const bind = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const id = `e${bound.length}`;
        await registry.call(REGISTRY_METHODS.bind, {
          name: "stale",
          endpoint: { id, url: "tcp://10.0.0.1:1" },
        }, { deadlineMs: 10_000 });
        bound.push(id);
      }
    };
    await bind(20);
    // n3 (a follower) is down while n4 joins, is promoted and takes over.
    const stale = ["n1", "n2", "n3"].find((id) => id !== first && id !== "n1")!;
    await cluster.kill(stale, "SIGTERM");
    await cluster.startNode("n4", { join: cluster.registry.get(first)! });
    await waitFor(
      async () => {
        const list = await registry.call(REGISTRY_METHODS.memberList, {}, {
          deadlineMs: 3_000,
        }).catch(() => null);
        return list?.members.find((m) => m.id === "n4")?.kind === "voter";
      },
      "n4 to be promoted",
      20_000,
    );
    const moved = await registry.call(REGISTRY_METHODS.leaderTransfer, {
      to: "n4",
    }, { deadlineMs: 10_000 });
    assert.equal(moved.leader, "n4");
    await bind(20);

    // n3 comes back knowing only n1..n3; n4 leads.
    await cluster.startNode(stale);
    const local = connect(cluster.registry.get(stale)!, { deadlineMs: 3_000 });
    try {
      await waitForEndpoints(
        local,
        "stale",
        bound.length,
        `${stale} to catch up from n4 with all ${bound.length} binds`,
        20_000,
      );
    } finally {
      local.close();
    }
    const output = cluster.child(stale).output.join("\n");
    assert.match(output, /admitted peer n4 \(tcp:\/\/127\.0\.0\.1:\d+\)/);
    const status = await cluster.status(stale, 2_000);
    assert.equal(status?.leader, "n4");
    assert.equal(status?.kind, "voter");
  } finally {
    pool.close();
    await cluster.stop();
  }
});
