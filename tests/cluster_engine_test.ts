/**
 * `LocalCluster` on the etcd engine (`engine: "etcd"`, Debian's
 * `etcd-server`; skipped, saying why, without it): a registry node is an
 * etcd member and a front; the leader is the node whose member leads;
 * killing a node kills both; a restarted node comes back from its data;
 * `stop()` leaves no process and no data folder. What a test written
 * against `LocalCluster` needs to run on both engines.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { etcdMemberStatus, findEtcd } from "../testing/etcd.ts";
import { connect } from "../stub/client.ts";
import { waitFor } from "../testing/time.ts";

const etcd = await findEtcd((line) => console.log(line));
if ("skipped" in etcd) {
  console.log(`cluster_engine_test.ts skipped: ${etcd.skipped}`);
}

/** Bound ids and URLs of `name` through a client of `urls`. */
async function boundAt(urls: string[], name: string): Promise<string[]> {
  const client = connect(urls);
  try {
    const found = await client.lookup(name);
    return found.endpoints.map((e) => `${e.id} ${e.url}`).sort();
  } finally {
    client.close();
  }
}

/** The state letter of process `pid` (`/proc/PID/stat`: R, S, T...), or null when it is gone. */
function processState(pid: number): string | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return null;
  }
}

/** PIDs of the processes whose command line mentions `text`. */
function processesMentioning(text: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name) || Number(entry.name) === Deno.pid) continue;
    try {
      const argv = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      if (argv.includes(text)) found.push(Number(entry.name));
    } catch {
      // It ended while we looked.
    }
  }
  return found;
}

Deno.test({
  name:
    "LocalCluster on etcd: nodes are member + front pairs; the leader's SIGKILL elects another and writes go on; a restarted node serves the bindings from its data; stop() leaves no process",
  ignore: "skipped" in etcd,
  async fn() {
    assert.throws(
      () => new LocalCluster({ engine: "etcd", secure: true }),
      /secure: true is not supported by the etcd engine/,
    );
    const cluster = new LocalCluster({ engine: "etcd" });
    const pids: number[] = [];
    let root = "";
    try {
      assert.equal(cluster.engine, "etcd");
      const leader = await cluster.startRegistryWithLeader(3);
      root = (await cluster.dataDirOf("n1")).replace(/\/n1$/, "");
      const ids = ["n1", "n2", "n3"];
      assert.deepEqual([...cluster.registry.keys()], ids);
      assert.ok(ids.includes(leader), leader);
      assert.equal(await cluster.leader(), leader);
      for (const id of ids) {
        assert.match(cluster.registry.get(id)!, /^tcp:\/\/127\.0\.0\.1:\d+$/);
        assert.match(
          cluster.etcdMembers.get(id)!.clientUrl,
          /^http:\/\/127\.0\.0\.1:\d+$/,
        );
        assert.equal(cluster.child(id).running, true);
        assert.equal(cluster.child(`${id}-etcd`).running, true);
        pids.push(cluster.child(id).pid, cluster.child(`${id}-etcd`).pid);
        // registry.status is the front's, on the node's client URL.
        assert.equal(
          (await cluster.status(id))?.url,
          cluster.registry.get(id),
        );
        // Each member has its data in the node's data folder.
        assert.ok(
          (await Deno.stat(`${await cluster.dataDirOf(id)}/member`))
            .isDirectory,
        );
      }
      assert.equal(new Set(pids).size, 6);
      // Every member has a guard that kills it should this process die.
      for (const id of ids) {
        const member = cluster.child(`${id}-etcd`).pid;
        assert.equal(
          processesMentioning(`\0rafter-guard\0${member}\0`).length,
          1,
        );
      }
      assert.throws(
        () => cluster.planJoiner("n4"),
        /planJoiner is not supported by the etcd engine/,
      );

      const client = connect(cluster.registryUrls);
      try {
        await client.bind("svc/a", { id: "a1", url: "tcp://127.0.0.1:9201" });
        assert.deepEqual(
          (await client.lookup("svc/a")).endpoints.map((e) => e.id),
          ["a1"],
        );

        // A follower node paused: its front and its member freeze, and run
        // again on resume.
        const follower = ids.find((id) => id !== leader)!;
        const pair = [
          cluster.child(follower).pid,
          cluster.child(`${follower}-etcd`).pid,
        ];
        cluster.pause(follower);
        // (A signal takes effect a moment later.)
        await waitFor(
          () => pair.every((pid) => processState(pid) === "T"),
          `${follower}'s front and member to stop`,
        );
        cluster.resume(follower);
        await waitFor(
          () => pair.every((pid) => !["T", null].includes(processState(pid))),
          `${follower}'s front and member to run again`,
        );

        // The leader node dies as a whole: front and member.
        const memberUrl = cluster.etcdMembers.get(leader)!.clientUrl;
        const memberId = (await etcdMemberStatus(memberUrl))?.id;
        assert.match(memberId ?? "", /^\d+$/);
        await cluster.kill(leader, "SIGKILL");
        assert.equal(cluster.child(leader).running, false);
        assert.equal(cluster.child(`${leader}-etcd`).running, false);
        const next = await cluster.waitForLeader(15_000);
        assert.notEqual(next, leader);
        assert.ok(ids.includes(next), next);
        assert.equal(await cluster.leader(), next);
        await client.bind("svc/a", { id: "a2", url: "tcp://127.0.0.1:9202" });
        assert.deepEqual(
          (await client.lookup("svc/a")).endpoints.map((e) => e.id).sort(),
          ["a1", "a2"],
        );

        // Back from its data folder: its front alone serves both bindings.
        await cluster.startNode(leader);
        pids.push(
          cluster.child(leader).pid,
          cluster.child(`${leader}-etcd`).pid,
        );
        assert.equal(new Set(pids).size, 8);
        await cluster.waitCaughtUp(leader);
        // The same member (not a new one): it came back from its data.
        assert.equal((await etcdMemberStatus(memberUrl))?.id, memberId);
        assert.deepEqual(
          await boundAt([cluster.registry.get(leader)!], "svc/a"),
          ["a1 tcp://127.0.0.1:9201", "a2 tcp://127.0.0.1:9202"],
        );
        assert.ok(ids.includes(await cluster.waitForLeader()));
      } finally {
        client.close();
      }
    } finally {
      await cluster.stop();
    }
    assert.deepEqual(
      pids.filter((pid) => processState(pid) !== null),
      [],
      "every front and member has ended",
    );
    // No member (its command line names its data folder) nor a member's
    // guard (`sh -c … rafter-guard PID`) is left.
    assert.notEqual(root, "");
    assert.deepEqual(processesMentioning(root), []);
    assert.deepEqual(
      pids.flatMap((pid) => processesMentioning(`\0rafter-guard\0${pid}\0`)),
      [],
    );
    await assert.rejects(Deno.stat(root), Deno.errors.NotFound);
  },
});
