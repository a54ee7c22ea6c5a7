/**
 * A replica joins a running replicated service (dissertation §4.2.1): it
 * proves the cluster secret to the leader, is added as a learner, catches
 * up through the leader's snapshot (the log was compacted), and is
 * promoted to voter; a replica with the wrong secret is refused.
 */

import assert from "node:assert/strict";
import { dial } from "../adapter/deno/mod.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import {
  removeReplica,
  type ReplicaOptions,
  type ReplicatedService,
  startReplica,
} from "../replicated/mod.ts";
import { counter, type Counters } from "../examples/replicated/counter.ts";

const SECRET = "join-test-secret-0123456789abcdef0123";

Deno.test("a new replica joins through a snapshot, is promoted once caught up, and counts for the quorum; a wrong secret is refused; it leaves again, and only it can ask", async () => {
  const ports = freePorts(5);
  const peers: Record<string, string> = {};
  ["r1", "r2", "r3"].forEach((id, i) =>
    peers[id] = `tcp://127.0.0.1:${ports[i]}`
  );
  const dirs: string[] = [];
  const replicas: ReplicatedService<Counters>[] = [];
  const quiet = () => {};
  const start = async (
    id: string,
    own: Record<string, string>,
    extra: Partial<ReplicaOptions<Counters>> = {},
  ) => {
    const dataDir = await Deno.makeTempDir();
    dirs.push(dataDir);
    const replica = await startReplica<Counters>({
      id,
      peers: own,
      dataDir,
      clusterSecret: SECRET,
      service: counter,
      tickMs: 20,
      snapshotEntries: 50,
      log: quiet,
      ...extra,
    });
    replicas.push(replica);
    return replica;
  };
  try {
    const [r1] = await Promise.all(
      ["r1", "r2", "r3"].map((id) => start(id, peers)),
    );
    const connection = await dial(r1.url);
    const add = async (n: number) => {
      for (let i = 0; i < n; i++) {
        for (let round = 0; round < 500; round++) {
          const status = r1.status();
          const target = status.leaderUrl;
          if (target === null) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          const leaderConnection = target === r1.url
            ? connection
            : await dial(target);
          try {
            await leaderConnection.call("add", [{
              counter: "n",
              requestId: `a${i}-${n}`,
            }]);
            break;
          } finally {
            if (leaderConnection !== connection) leaderConnection.close();
          }
        }
      }
    };
    await add(200);
    const leader = replicas.find((r) => r.status().role === "leader")!;
    await waitFor(
      () => leader.status().snapshotIndex > 0,
      "a snapshot",
      10_000,
    );

    // The wrong secret: refused, with what to do.
    await assert.rejects(
      start("bad", { bad: `tcp://127.0.0.1:${ports[4]}` }, {
        clusterSecret: "another secret entirely, 32+ chars long",
        join: { via: [r1.url] },
      }),
      /does not match this service's cluster secret/,
    );

    const r4 = await start("r4", { r4: `tcp://127.0.0.1:${ports[3]}` }, {
      join: { via: [r1.url] },
    });
    await waitFor(() => r4.state.n === 200, "r4 to catch up to 200", 20_000);
    assert.ok(r4.status().snapshotIndex > 0, "r4 caught up through a snapshot");
    await waitFor(
      () =>
        leader.status().learners.length === 0 &&
        Object.keys(leader.status().members).length === 4,
      "r4 to be promoted",
      20_000,
    );
    assert.deepEqual(Object.keys(leader.status().members).sort(), [
      "r1",
      "r2",
      "r3",
      "r4",
    ]);
    // Two of the first three stop: r4 and the last one are not a majority
    // of 4, so writes wait; with r4 a voter, stopping one keeps 3 of 4.
    const others = replicas.filter((r) => r !== r4 && r !== leader);
    await others[0].close();
    await add(10);
    await waitFor(() => r4.state.n === 210, "r4 to apply the new adds", 20_000);
    console.log(
      `measured: r4 joined through a snapshot at index ${r4.status().snapshotIndex}, caught up to 200 adds and was promoted; with ${
        others[0].id
      } stopped, 3 of 4 voters committed 10 more`,
    );
    // Nobody but the replica itself can take it out…
    const survivor = replicas.find((r) => r !== r4 && r !== others[0])!;
    const asked = await dial(survivor.url);
    try {
      const { configIndex, configTerm } = survivor.status();
      await assert.rejects(
        asked.call("replica.remove", {
          id: "r4",
          configIndex,
          configTerm,
          proof: "forged",
        }),
        /does not match this service's cluster secret/,
      );
    } finally {
      asked.close();
    }
    // …and it can: it leaves, and the others go on without it.
    await r4.leave();
    await waitFor(
      () => !Object.hasOwn(survivor.status().members, "r4"),
      "r4 to be out of the configuration",
      20_000,
    );
    // The stopped replica is gone for good: an operator with the secret
    // takes it out (a wrong secret cannot).
    const dead = others[0].id;
    await assert.rejects(
      removeReplica({
        via: [survivor.url],
        id: dead,
        clusterSecret: "not the secret, but 32 characters long",
      }),
      /does not match this service's cluster secret/,
    );
    await removeReplica({
      via: [survivor.url],
      id: dead,
      clusterSecret: SECRET,
    });
    await waitFor(
      () => !Object.hasOwn(survivor.status().members, dead),
      `${dead} to be out of the configuration`,
      20_000,
    );
    await add(5);
    console.log(
      `measured: r4 left; ${dead} removed by the operator; members now ${
        Object.keys(survivor.status().members).sort()
      }`,
    );
    connection.close();
  } finally {
    for (const replica of replicas) await replica.close();
    for (const dir of dirs) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  }
});
