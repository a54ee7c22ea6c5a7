/**
 * Session fail-over (JOnAS CMI's stateful session beans) on real
 * processes: three session servers (examples/sessions/) bound in a
 * 3-node registry; a client opens a session and records 1,000 notes, one
 * call each, through a stub with the `session()` distributor; the
 * session's server is SIGKILLed after note 500. The client carries on at
 * the backup, which holds every acknowledged note, and reads all 1,000.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { connect } from "../stub/client.ts";
import { session } from "../stub/distributors/mod.ts";
import { waitFor } from "../testing/time.ts";
import type { NotesService } from "../examples/sessions/server.ts";

Deno.test("a session with 1,000 acknowledged changes survives the SIGKILL of its server mid-stream: the client carries on at the backup and reads all 1,000", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const startServer = (id: string) =>
    cluster.spawn(id, "examples/sessions/server.ts", [
      "--id",
      id,
      "--registry",
      cluster.registryUrls.join(","),
    ], /ready on/);
  let rafter: ReturnType<typeof connect> | undefined;
  try {
    await cluster.startRegistryWithLeader(3);
    await Promise.all(["s1", "s2", "s3"].map(startServer));
    rafter = connect(cluster.registryUrls);
    await waitFor(
      async () =>
        (await rafter!.registry.lookup("notes")).endpoints.length === 3,
      "the three servers to be bound",
      20_000,
    );
    const distributor = session();
    const notes = rafter.stub<NotesService>("notes", {
      distributor,
      // note(n) twice is note(n) once: safe to retry at the backup.
      idempotent: ["note", "notes", "count"],
      attemptTimeoutMs: 2_000,
    });
    const id = await notes["session.open"]();
    const opener = id.slice(0, id.indexOf("."));
    let killedAt = 0;
    let killed = "";
    let slowestMs = 0;
    for (let n = 1; n <= 1_000; n++) {
      const started = performance.now();
      assert.equal(await notes.note(id, n), n, `note ${n}`);
      slowestMs = Math.max(slowestMs, performance.now() - started);
      if (n === 500) {
        killed = distributor.placementOf(id)!.primary;
        assert.notEqual(distributor.placementOf(id)!.backup, null);
        killedAt = performance.now();
        await cluster.kill(killed, "SIGKILL");
      }
    }
    const after = distributor.placementOf(id)!;
    const all = await notes.notes(id);
    console.log(
      `measured: session opened on ${opener}; ${killed} SIGKILLed after note 500; notes 501-1000 on ${after.primary} (backup ${after.backup}), ${
        (performance.now() - killedAt).toFixed(0)
      } ms; slowest note ${
        slowestMs.toFixed(0)
      } ms; read back ${all.length} notes`,
    );
    assert.notEqual(after.primary, killed);
    assert.equal(all.length, 1_000);
    assert.deepEqual(all, Array.from({ length: 1_000 }, (_, i) => i + 1));
    assert.equal(await notes.count(id), 1_000);
    // The opener comes back: a new client, routed by the session id to
    // it, is told SESSION_NOT_FOUND there and finds the session on.
    await waitFor(
      async () =>
        !(await rafter!.registry.lookup("notes")).endpoints.some((e) =>
          e.id === killed
        ),
      `${killed}'s lease to expire`,
      20_000,
    );
    await startServer(killed);
    const fresh = connect(cluster.registryUrls);
    try {
      const again = fresh.stub<NotesService>("notes", {
        distributor: session(),
        idempotent: ["notes", "count"],
      });
      await waitFor(
        async () =>
          (await fresh.registry.lookup("notes")).endpoints.some((e) =>
            e.id === killed && e.state === "serving"
          ),
        `${killed} to be bound again`,
        20_000,
      );
      assert.equal(await again.count(id), 1_000);
    } finally {
      fresh.close();
    }
    // The new server has a backup of its own: closing works, and the
    // session is gone after.
    assert.equal(await notes["session.close"](id), true);
    await assert.rejects(notes.count(id), /not held here/);
  } finally {
    rafter?.close();
    await cluster.stop();
  }
});
