/**
 * The replicated counter (examples/replicated/) on real processes: three
 * replicas bound in a 3-node registry, 8 callers adding through a stub
 * with the `leader()` distributor, the leader SIGKILLed mid-stream and
 * started again. Every acknowledged add is in the final value, none is
 * applied twice (each carries a `requestId`, and the stub retries it as
 * idempotent), and every caller's linearizable read sees at least what
 * it was last told.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import { connect } from "../stub/client.ts";
import { leader } from "../stub/distributors/mod.ts";
import type { Counter } from "../examples/replicated/counter.ts";
import type { ReplicaStatus } from "../replicated/mod.ts";

const SECRET = "replicated-counter-test-secret-0123456789";

Deno.test("replicated counter: the leader SIGKILLed under 8 callers loses no acknowledged add, applies none twice, and reads stay linearizable", async () => {
  const cluster = new LocalCluster({
    tickMs: 50,
    electionTicks: 10,
    childEnv: (name) =>
      name.startsWith("c") ? { RAFTER_SERVICE_SECRET: SECRET } : undefined,
  });
  const ports = freePorts(3);
  const ids = ["c1", "c2", "c3"];
  const peers = ids.map((id, i) => `${id}=tcp://127.0.0.1:${ports[i]}`).join(
    ",",
  );
  const dataDirs = new Map<string, string>();
  const startReplica = async (id: string) => {
    dataDirs.set(id, dataDirs.get(id) ?? await Deno.makeTempDir());
    await cluster.spawn(id, "examples/replicated/replica.ts", [
      "--id",
      id,
      "--peers",
      peers,
      "--data",
      dataDirs.get(id)!,
      "--registry",
      cluster.registryUrls.join(","),
      "--tick-ms",
      "50",
    ], /ready on/);
  };
  const client = { close() {} } as { close(): void };
  try {
    await cluster.startRegistryWithLeader(3);
    await Promise.all(ids.map(startReplica));
    const rafter = connect(cluster.registryUrls);
    client.close = () => rafter.close();
    const distributor = leader({ reads: ["get", "peek"] });
    const stub = rafter.stub<Counter>("counter", {
      distributor,
      idempotent: true,
      deadlineMs: 20_000,
      // Longer than an election (10 to 20 ticks of 50 ms): a replica holds
      // a write while no leader is known.
      attemptTimeoutMs: 5_000,
    });
    const status = rafter.stub<{ "replica.status"(): ReplicaStatus }>(
      "counter",
      { idempotent: true },
    );
    // The three are bound and one leads.
    await waitFor(
      async () =>
        (await rafter.registry.lookup("counter")).endpoints.length === 3,
      "the three replicas to be bound",
      20_000,
    );
    assert.equal(await stub.add({ counter: "n", requestId: "warm-up" }), 1);

    let acknowledged = 1;
    let failed = 0;
    let readsFailed = 0;
    let slowestMs = 0;
    let killed = false;
    let afterKill = 0;
    const readErrors: string[] = [];
    const stopAt = { time: Infinity };
    const caller = async (c: number) => {
      let seen = 0;
      for (let n = 0; n < 100_000 && Date.now() < stopAt.time; n++) {
        const started = performance.now();
        try {
          const value = await stub.add({
            counter: "n",
            by: 1,
            requestId: `w${c}-${n}`,
          });
          acknowledged++;
          if (killed) afterKill++;
          seen = Math.max(seen, value);
        } catch (error) {
          failed++;
          console.log(`add failed: ${(error as Error).message}`);
        }
        slowestMs = Math.max(slowestMs, performance.now() - started);
        if (n % 5 === 4) {
          try {
            const read = await stub.get({ counter: "n" });
            if (read < seen) {
              readErrors.push(`caller ${c} read ${read} after it saw ${seen}`);
            }
            seen = read;
          } catch (error) {
            readsFailed++;
            console.log(`get failed: ${(error as Error).message}`);
          }
        }
      }
    };
    const callers = Array.from({ length: 8 }, (_, c) => caller(c));

    // Let writes flow, then SIGKILL the leader.
    await waitFor(() => acknowledged > 300, "300 adds", 20_000, 10);
    const leaderId = (await status["replica.status"]()).leaderId!;
    assert.ok(ids.includes(leaderId), `leader ${leaderId}`);
    const atKill = acknowledged;
    await cluster.kill(leaderId, "SIGKILL");
    killed = true;
    const killedAt = Date.now();
    await waitFor(
      () => afterKill > 300,
      "300 adds after the kill",
      30_000,
      10,
    );
    const failOverMs = Date.now() - killedAt;
    // The killed replica comes back on its folder and catches up.
    await startReplica(leaderId);
    stopAt.time = Date.now() + 1_000;
    await Promise.all(callers);

    const final = await stub.get({ counter: "n" });
    console.log(
      `measured: ${acknowledged} adds acknowledged (${atKill} before the SIGKILL of leader ${leaderId}, ${afterKill} after), ${failed} failed; final value ${final}; slowest add ${
        slowestMs.toFixed(0)
      } ms; 300 adds after the kill within ${failOverMs} ms; ${readsFailed} reads failed; new leader ${distributor.leaderId}`,
    );
    assert.deepEqual(readErrors, []);
    // No acknowledged add lost; none applied twice (a failed one may or
    // may not have been applied).
    assert.ok(
      final >= acknowledged,
      `final ${final} < acknowledged ${acknowledged}`,
    );
    assert.ok(
      final <= acknowledged + failed,
      `final ${final} > acknowledged ${acknowledged} + failed ${failed}: an add applied twice`,
    );

    // The restarted replica caught up: its local read (peek) reaches the value.
    const back = rafter.stub<{ peek(p: { counter: string }): number }>(
      `counter`,
      { distributor: { choose: (es) => es.find((e) => e.id === leaderId) } },
    );
    await waitFor(
      async () => (await back.peek({ counter: "n" })) === final,
      `${leaderId} to catch up to ${final}`,
      20_000,
    );
  } finally {
    client.close();
    await cluster.stop();
    for (const dir of dataDirs.values()) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  }
});
