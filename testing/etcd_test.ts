/**
 * Tests of the etcd cluster the registry benchmarks compare with: real
 * `etcd` processes on 127.0.0.1 (ignored when `etcd` is not on PATH; the
 * test never installs it).
 *
 * @module
 */

import assert from "node:assert/strict";
import { EtcdCluster, onPath } from "./etcd.ts";

const etcd = onPath("etcd");

Deno.test({
  name:
    "Raft §5.2 leader election (etcd as the bench's peer): 3 members elect one leader; after its SIGKILL the survivors elect another, and the killed member restarts from its data folder with the acknowledged write",
  ignore: etcd === null,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cluster = new EtcdCluster(etcd!, {
      heartbeatMs: 100,
      electionMs: 1000,
    });
    try {
      await cluster.start(3);
      assert.deepEqual(cluster.names, ["e1", "e2", "e3"]);
      const leader = await cluster.waitForLeader(10_000);
      assert.ok(cluster.names.includes(leader));
      const put = await fetch(`${cluster.clientUrl(leader)}/v3/kv/put`, {
        method: "POST",
        body: JSON.stringify({ key: btoa("k"), value: btoa("v") }),
      });
      assert.equal(put.status, 200);
      await put.body?.cancel();

      await cluster.kill(leader);
      assert.equal(cluster.running(leader), false);
      assert.equal(cluster.pid(leader), null);
      const next = await cluster.waitForLeader(10_000);
      assert.notEqual(next, leader);

      await cluster.restart(leader);
      assert.ok(cluster.names.includes(await cluster.waitForLeader(10_000)));
      const range = await fetch(`${cluster.clientUrl(leader)}/v3/kv/range`, {
        method: "POST",
        body: JSON.stringify({ key: btoa("k") }),
      });
      const body = await range.json();
      assert.equal(atob(body.kvs[0].value), "v");
    } finally {
      await cluster.stop();
    }
    assert.equal(cluster.dataDir, "");
  },
});
