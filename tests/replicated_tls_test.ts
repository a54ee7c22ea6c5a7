/**
 * A replicated service over TLS: mutual TLS between the replicas (each
 * certificate naming its replica) and TLS on the client ports. A replica
 * whose certificate comes from another CA takes no part although it knows
 * the cluster secret; a plaintext client cannot call.
 */

import assert from "node:assert/strict";
import { dial } from "../adapter/deno/mod.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import { makeTestPki } from "../testing/certs.ts";
import { withTempDir } from "../testing/temp.ts";
import { type ReplicatedService, startReplica } from "../replicated/mod.ts";
import { counter, type Counters } from "../examples/replicated/counter.ts";

const SECRET = "tls-test-secret-0123456789abcdef012345";

Deno.test("replicas over mutual TLS commit writes a TLS client sends; a replica certified by another CA is kept out although it has the secret; plaintext is refused", async () => {
  await withTempDir(async (dir) => {
    await Deno.mkdir(`${dir}/pki`);
    await Deno.mkdir(`${dir}/other`);
    const pki = await makeTestPki(`${dir}/pki`, {
      members: ["r1", "r2", "r3"],
    });
    const foreign = await makeTestPki(`${dir}/other`, {
      members: ["r3"],
      caName: "another CA",
    });
    const ports = freePorts(3);
    const peers: Record<string, string> = {};
    ["r1", "r2", "r3"].forEach((id, i) =>
      peers[id] = `tcp://127.0.0.1:${ports[i]}`
    );
    const replicas: ReplicatedService<Counters>[] = [];
    try {
      for (const id of ["r1", "r2", "r3"]) {
        const certs = id === "r3" ? foreign : pki;
        replicas.push(
          await startReplica<Counters>({
            id,
            peers,
            dataDir: `${dir}/${id}`,
            clusterSecret: SECRET,
            service: counter,
            tickMs: 20,
            log: () => {},
            tls: {
              certFile: certs.certs[id].certFile,
              keyFile: certs.certs[id].keyFile,
            },
            peerTls: {
              certFile: certs.certs[id].certFile,
              keyFile: certs.certs[id].keyFile,
              caFile: certs.caFile,
            },
            tlsCaFile: certs.caFile,
          }),
        );
      }
      const [r1, r2, r3] = replicas;
      assert.match(r1.url, /^tls:\/\//);
      const leader = await waitFor(
        () => [r1, r2].find((r) => r.status().role === "leader"),
        "r1 or r2 to lead",
        20_000,
      );
      const connection = await dial(leader.url, {
        tls: { caFile: pki.caFile },
      });
      try {
        for (let i = 1; i <= 20; i++) {
          assert.equal(
            await connection.call("add", [{
              counter: "n",
              requestId: `t${i}`,
            }]),
            i,
          );
        }
        assert.equal(await connection.call("get", [{ counter: "n" }]), 20);
      } finally {
        connection.close();
      }
      await waitFor(
        () => (r1.state.n ?? 0) === 20 && (r2.state.n ?? 0) === 20,
        "r1 and r2 to apply the 20 adds",
        10_000,
      );
      // r3 knows the secret, but its certificate is not from the members' CA.
      assert.equal(r3.state.n ?? 0, 0);
      assert.equal(r3.status().leaderId, null);
      // A plaintext client gets nowhere on a TLS port.
      const plain = leader.url.replace(/^tls:/, "tcp:");
      const attempt = await dial(plain, { connectTimeoutMs: 1_000 })
        .then((c) =>
          c.call("get", [{ counter: "n" }], { timeoutMs: 1_000 }).finally(() =>
            c.close()
          )
        )
        .then(() => "answered", (e: Error) => `refused: ${e.message}`);
      assert.match(attempt, /^refused/);
      console.log(
        `measured: 20 adds over TLS, applied on r1 and r2; r3 (another CA) at ${
          r3.state.n ?? 0
        }; plaintext: ${attempt.slice(0, 80)}`,
      );
    } finally {
      for (const replica of replicas) await replica.close();
    }
  });
});
