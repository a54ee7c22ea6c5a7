/**
 * A node that joins with `--join` is promoted even when the leader changes
 * before it has caught up (Raft dissertation §4.2.1), on real processes:
 * the leader that added the learner keeps "promote once caught up" in its
 * memory only, so the joiner asks again (an idempotent `memberAdd`) while
 * it is a learner, and the new leader promotes it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { ConnectionPool } from "../stub/connection_pool.ts";
import { RegistryClient } from "../stub/registry_client/registry_client.ts";
import { REGISTRY_METHODS } from "../protocol/registry.ts";
import { waitFor } from "../testing/time.ts";

Deno.test("dissertation §4.2.1 a learner that joined is promoted by the next leader when the one that added it hands over before it caught up", async () => {
  // Snapshots every 200 entries: the joiner catches up through
  // InstallSnapshot, which takes longer than the hand-over below.
  const cluster = new LocalCluster({
    tickMs: 50,
    electionTicks: 10,
    nodeArgs: ["--snapshot-entries", "200"],
  });
  const pool = new ConnectionPool();
  try {
    await cluster.startWithJoiners(3, "n4");
    const first = await cluster.waitForLeader(15_000);
    const registry = new RegistryClient(cluster.registryUrls, pool);
    // A log worth catching up on.
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < 3_000) {
        const id = `e${next++}`;
        await registry.call(REGISTRY_METHODS.bind, {
          name: "join",
          endpoint: { id, url: "tcp://10.0.0.1:1" },
        }, { deadlineMs: 10_000 });
      }
    }));
    const other = ["n1", "n2", "n3"].find((id) => id !== first)!;
    await cluster.startNode("n4", {
      join: cluster.registry.get(first)!,
      ready: /added as a learner/,
    });
    // At once, before n4 has caught up: leadership moves elsewhere.
    const moved = await registry.call(REGISTRY_METHODS.leaderTransfer, {
      to: other,
    }, { deadlineMs: 10_000 });
    assert.equal(moved.leader, other);
    const kind = async () =>
      (await registry.call(REGISTRY_METHODS.memberList, {}, {
        deadlineMs: 3_000,
      }).catch(() => null))?.members.find((m) => m.id === "n4")?.kind;
    await waitFor(
      async () => await kind() === "voter",
      "n4 to be promoted by the new leader",
      15_000,
    );
    const list = await registry.call(REGISTRY_METHODS.memberList, {});
    assert.equal(list.leader, other);
    assert.deepEqual(list.members.map((m) => [m.id, m.kind]), [
      ["n1", "voter"],
      ["n2", "voter"],
      ["n3", "voter"],
      ["n4", "voter"],
    ]);
  } finally {
    pool.close();
    await cluster.stop();
  }
});

Deno.test("--join takes several members' URLs, as rafter member add prints them, and moves past one that does not answer", async () => {
  // A port that was free a moment ago: nothing listens there.
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadUrl = `tcp://127.0.0.1:${(dead.addr as Deno.NetAddr).port}`;
  dead.close();
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const pool = new ConnectionPool();
  try {
    await cluster.startWithJoiners(3, "n4");
    await cluster.waitForLeader(15_000);
    // The dead URL first, then every member, comma-separated.
    await cluster.startNode("n4", {
      join: [deadUrl, ...cluster.registryUrls.slice(0, 3)].join(","),
      ready: /added as a learner/,
    });
    const registry = new RegistryClient(cluster.registryUrls, pool);
    await waitFor(
      async () =>
        (await registry.call(REGISTRY_METHODS.memberList, {}, {
          deadlineMs: 3_000,
        }).catch(() => null))?.members.find((m) => m.id === "n4")?.kind ===
          "voter",
      "n4 to be promoted",
      15_000,
    );
  } finally {
    pool.close();
    await cluster.stop();
  }
});
