/**
 * Cluster stubs against real server processes that are killed and
 * stopped: fail-over that never runs a call twice, typed failures, new
 * servers picked up through the watch, a hung server ejected and
 * re-admitted.
 *
 * The kill run lasts `STUB_CHAOS_SECONDS` (default 8 in `deno task test`;
 * `deno task chaos:stub` runs the 20 s); the SIGSTOP run with
 * default options runs `STUB_PAUSE_RUNS` times (default 1; 5 in
 * `deno task chaos:stub`). Every test prints what it measured
 * ("measured:").
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { connect } from "../stub/client.ts";
import { AmbiguousError, NotSentError } from "../stub/call/call_errors.ts";
import { waitFor } from "../testing/time.ts";
import { readExecLogs } from "./_exec_logs.ts";

const CHAOS_SECONDS = Number(Deno.env.get("STUB_CHAOS_SECONDS") ?? "8");
const PAUSE_RUNS = Number(Deno.env.get("STUB_PAUSE_RUNS") ?? "1");

interface Exec {
  exec(callId: string, delayMs?: number): { server: string; callId: string };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

Deno.test(`servers killed with SIGKILL every 2 s in turn for ${CHAOS_SECONDS} s: no idempotent call fails, no call runs twice, failures are typed; a new server gets calls within a second`, async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const logs = await Deno.makeTempDir({ prefix: "rafter_chaos_" });
  const start = (id: string) =>
    cluster.startExecServer(id, 2000, ["--log", `${logs}/${id}.log`]);
  const client = { close() {} };
  try {
    await cluster.startRegistryWithLeader(3);
    await Promise.all(["s1", "s2", "s3"].map(start));
    const rafter = connect(cluster.registryUrls);
    client.close = () => rafter.close();
    const safe = rafter.stub<Exec>("exec", { idempotent: true });
    const unsafe = rafter.stub<Exec>("exec");
    await safe.exec("warm-up");

    let stop = false;
    let sequence = 0;
    const safeFailures: string[] = [];
    const unsafeOutcomes = {
      ok: 0,
      notSent: 0,
      ambiguous: 0,
      other: [] as string[],
    };
    const unsafeOk: string[] = [];
    const callers = [
      ...Array.from({ length: 8 }, async () => {
        while (!stop) {
          const callId = `i${++sequence}`;
          try {
            await safe.exec(callId);
          } catch (error) {
            safeFailures.push(`${callId}: ${(error as Error).message}`);
          }
        }
      }),
      ...Array.from({ length: 8 }, async () => {
        while (!stop) {
          const callId = `n${++sequence}`;
          try {
            await unsafe.exec(callId);
            unsafeOutcomes.ok++;
            unsafeOk.push(callId);
          } catch (error) {
            if (error instanceof NotSentError) unsafeOutcomes.notSent++;
            else if (error instanceof AmbiguousError) {
              unsafeOutcomes.ambiguous++;
            } else unsafeOutcomes.other.push(String(error));
            await new Promise((r) => setTimeout(r, 5));
          }
        }
      }),
    ];

    // Every 2 s one server (in turn) is killed and started again; half way
    // a fourth one joins.
    const kills: string[] = [];
    let fourthBoundAt = 0;
    const started = Date.now();
    for (let round = 0; Date.now() - started < CHAOS_SECONDS * 1000; round++) {
      await new Promise((r) => setTimeout(r, 2000));
      const victim = ["s1", "s2", "s3"][round % 3];
      await cluster.kill(victim, "SIGKILL");
      kills.push(victim);
      await start(victim);
      if (round === Math.floor(CHAOS_SECONDS / 4) && fourthBoundAt === 0) {
        await start("s4");
        fourthBoundAt = Date.now();
      }
    }
    stop = true;
    await Promise.all(callers);

    const { runs, firstAt } = await readExecLogs(logs, [
      "s1",
      "s2",
      "s3",
      "s4",
    ]);
    const twice = [...runs].filter(([id, n]) => id.startsWith("n") && n > 1);
    const safeCalls = [...runs.keys()].filter((id) =>
      id.startsWith("i")
    ).length;
    console.log(
      `measured: ${CHAOS_SECONDS} s, SIGKILLs ${
        kills.join(", ")
      }; idempotent calls ${safeCalls}, failed ${safeFailures.length}; not idempotent: ${unsafeOutcomes.ok} ok, ${unsafeOutcomes.notSent} not sent, ${unsafeOutcomes.ambiguous} ambiguous, ${unsafeOutcomes.other.length} other; ran twice ${twice.length}; s4 ran its first call ${
        (firstAt.get("s4") ?? NaN) - fourthBoundAt
      } ms after it bound`,
    );
    assert.deepEqual(safeFailures.slice(0, 5), []);
    assert.ok(safeCalls > 100, `${safeCalls} idempotent calls`);
    assert.deepEqual(twice, [], "a call that is not idempotent ran twice");
    assert.deepEqual(unsafeOutcomes.other, []);
    // Every non-idempotent call that succeeded ran exactly once.
    for (const callId of unsafeOk.slice(0, 2000)) {
      assert.equal(runs.get(callId), 1, callId);
    }
    assert.ok(firstAt.has("s4"), "s4 never got a call");
    assert.ok(
      firstAt.get("s4")! - fourthBoundAt < 1_000,
      `s4 got its first call ${
        firstAt.get("s4")! - fourthBoundAt
      } ms after it bound`,
    );
  } finally {
    client.close();
    await cluster.stop();
    await Deno.remove(logs, { recursive: true });
  }
});

Deno.test("one of 3 servers stopped with SIGSTOP for 10 s: no idempotent call fails, p99 stays within one attempt timeout, the server is ejected and re-admitted after SIGCONT", async () => {
  const attemptTimeoutMs = 500;
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const logs = await Deno.makeTempDir({ prefix: "rafter_pause_" });
  const client = { close() {} };
  try {
    await cluster.startRegistryWithLeader(3);
    await Promise.all(
      ["p1", "p2", "p3"].map((id) =>
        // A paused server cannot keep its lease alive: outlast the pause.
        cluster.startExecServer(id, 30_000, ["--log", `${logs}/${id}.log`])
      ),
    );
    const rafter = connect(cluster.registryUrls, {
      health: { baseEjectionMs: 500, maxEjectionMs: 1_000 },
    });
    client.close = () => rafter.close();
    const stub = rafter.stub<Exec>("exec", {
      idempotent: true,
      deadlineMs: 30_000,
      attemptTimeoutMs,
    });
    await stub.exec("warm-up");
    let stop = false;
    let sequence = 0;
    const latencies: number[] = [];
    const failures: string[] = [];
    const byServer = new Map<string, number>();
    const callers = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const started = Date.now();
        try {
          const { server } = await stub.exec(`c${++sequence}`);
          byServer.set(server, (byServer.get(server) ?? 0) + 1);
          latencies.push(Date.now() - started);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    });
    await new Promise((r) => setTimeout(r, 1000));
    cluster.pause("p2");
    const pausedAt = Date.now();
    const states = () => rafter.endpointStates("exec");
    await waitFor(
      () => states().find((s) => s.id === "p2")?.state === "ejected",
      "p2 to be ejected",
      5_000,
      20,
    );
    const ejectedAfter = Date.now() - pausedAt;
    await new Promise((r) => setTimeout(r, 10_000 - (Date.now() - pausedAt)));
    const before = byServer.get("p2") ?? 0;
    cluster.resume("p2");
    const resumedAt = Date.now();
    await waitFor(
      () =>
        states().find((s) => s.id === "p2")?.state === "serving" &&
        (byServer.get("p2") ?? 0) > before,
      "p2 to be re-admitted and called",
      10_000,
      20,
    );
    const readmittedAfter = Date.now() - resumedAt;
    stop = true;
    await Promise.all(callers);
    const sorted = [...latencies].sort((a, b) => a - b);
    const p99 = percentile(sorted, 0.99);
    console.log(
      `measured: ${latencies.length} calls, ${failures.length} failed; p50 ${
        percentile(sorted, 0.5)
      } ms, p99 ${p99} ms, max ${
        sorted.at(-1)
      } ms (attempt timeout ${attemptTimeoutMs} ms); p2 ejected ${ejectedAfter} ms after SIGSTOP, re-admitted ${readmittedAfter} ms after SIGCONT`,
    );
    assert.deepEqual(failures.slice(0, 5), []);
    assert.ok(p99 <= attemptTimeoutMs + 100, `p99 ${p99} ms`);
    assert.ok(
      sorted.at(-1)! <= 2 * attemptTimeoutMs + 500,
      `max ${sorted.at(-1)} ms`,
    );
  } finally {
    client.close();
    await cluster.stop();
    await Deno.remove(logs, { recursive: true });
  }
});

/** What one SIGSTOP run with default options measured. */
interface PauseRun {
  calls: number;
  failures: string[];
  healthyP99: number;
  max: number;
  bound: number;
  ejectedAfter: number;
  readmittedAfter: number;
  unsafe: { calls: number; ok: number; failed: string[]; max: number };
}

/**
 * What the slowest idempotent call may take: a hedge is sent after about
 * the healthy p99 and answers within about another; a call the hedge
 * could not help waits one attempt timeout, which is about the ejection
 * time (two of them eject the server), and then one healthy attempt. So:
 * the time to the ejection plus 5 × the healthy p99 (at least 10 ms: a
 * p99 of a few ms is timer granularity), plus 500 ms for the stalls of
 * processes starved of CPU on a loaded 2-core machine (seen: every caller
 * waiting 100–400 ms at once, before the pause as well as during it).
 * Without latency-based timeouts and hedging the slowest call took 6 s
 * (30 s ÷ 5 attempts).
 */
function pauseBound(healthyP99: number, ejectedAfter: number): number {
  return ejectedAfter + 5 * Math.max(10, healthyP99) + STALL_MS;
}

/** See {@link pauseBound}. */
const STALL_MS = 500;

/**
 * One run: 8 callers of an idempotent method and 4 of one that is not,
 * through stubs with default options (but `idempotent`) of a fresh
 * client; 2 s healthy, then `victim` is stopped for 8 s, then resumed
 * until it is re-admitted and called again.
 */
async function pauseRun(
  cluster: LocalCluster,
  run: number,
  victim: string,
): Promise<PauseRun> {
  const rafter = connect(cluster.registryUrls);
  try {
    const safe = rafter.stub<Exec>("exec", { idempotent: true });
    const unsafe = rafter.stub<Exec>("exec");
    await safe.exec(`r${run}-warm-up`);
    let stop = false;
    let sequence = 0;
    let pausedAt = Infinity;
    const healthy: number[] = [];
    const latencies: number[] = [];
    const failures: string[] = [];
    const byServer = new Map<string, number>();
    const unsafeRun = { calls: 0, ok: 0, failed: [] as string[], max: 0 };
    const callers = [
      ...Array.from({ length: 8 }, async () => {
        while (!stop) {
          const started = Date.now();
          try {
            const { server } = await safe.exec(`r${run}-i${++sequence}`);
            byServer.set(server, (byServer.get(server) ?? 0) + 1);
            const took = Date.now() - started;
            latencies.push(took);
            if (started + took < pausedAt) healthy.push(took);
          } catch (error) {
            failures.push((error as Error).message);
          }
        }
      }),
      ...Array.from({ length: 4 }, async () => {
        while (!stop) {
          const started = Date.now();
          unsafeRun.calls++;
          try {
            await unsafe.exec(`r${run}-n${++sequence}`);
            unsafeRun.ok++;
          } catch (error) {
            unsafeRun.failed.push((error as Error).message);
            await new Promise((r) => setTimeout(r, 5));
          }
          unsafeRun.max = Math.max(unsafeRun.max, Date.now() - started);
        }
      }),
    ];
    await new Promise((r) => setTimeout(r, 2_000));
    cluster.pause(victim);
    pausedAt = Date.now();
    const state = () =>
      rafter.endpointStates("exec").find((s) => s.id === victim)?.state;
    await waitFor(() => state() === "ejected", `${victim} ejected`, 5_000, 5);
    const ejectedAfter = Date.now() - pausedAt;
    await new Promise((r) => setTimeout(r, 8_000 - (Date.now() - pausedAt)));
    const before = byServer.get(victim) ?? 0;
    cluster.resume(victim);
    const resumedAt = Date.now();
    await waitFor(
      () => state() === "serving" && (byServer.get(victim) ?? 0) > before,
      `${victim} re-admitted and called`,
      20_000,
      20,
    );
    const readmittedAfter = Date.now() - resumedAt;
    stop = true;
    await Promise.all(callers);
    const healthyP99 = percentile(healthy.toSorted((a, b) => a - b), 0.99);
    const max = latencies.reduce((a, b) => Math.max(a, b), 0);
    return {
      calls: latencies.length + failures.length,
      failures,
      healthyP99,
      max,
      bound: pauseBound(healthyP99, ejectedAfter),
      ejectedAfter,
      readmittedAfter,
      unsafe: unsafeRun,
    };
  } finally {
    rafter.close();
  }
}

Deno.test(`one of 3 servers stopped with SIGSTOP for 8 s under default stub options (${PAUSE_RUNS} run(s)): no call fails, the slowest idempotent call stays within the ejection time plus a few healthy p99s, no call that is not idempotent runs twice`, async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const logs = await Deno.makeTempDir({ prefix: "rafter_pause_default_" });
  const servers = ["d1", "d2", "d3"];
  try {
    await cluster.startRegistryWithLeader(3);
    await Promise.all(
      servers.map((id) =>
        // A paused server cannot keep its lease alive: outlast the pause.
        cluster.startExecServer(id, 30_000, ["--log", `${logs}/${id}.log`])
      ),
    );
    const runs: PauseRun[] = [];
    for (let run = 1; run <= PAUSE_RUNS; run++) {
      const r = await pauseRun(cluster, run, servers[(run - 1) % 3]);
      runs.push(r);
      console.log(
        `measured: run ${run}: ${r.calls} idempotent calls, ${r.failures.length} failed; healthy p99 ${r.healthyP99} ms, max ${r.max} ms, bound ${r.bound} ms (ejection ${r.ejectedAfter} ms + 5 × max(10, p99) + ${STALL_MS}); re-admitted ${r.readmittedAfter} ms after SIGCONT; not idempotent: ${r.unsafe.calls} calls, ${r.unsafe.ok} ok, ${r.unsafe.failed.length} failed, max ${r.unsafe.max} ms`,
      );
    }
    const { runs: executed } = await readExecLogs(logs, servers);
    const twice = [...executed].filter(([id, n]) =>
      /^r\d+-n/.test(id) && n > 1
    );
    const unsafeRan = [...executed.keys()].filter((id) => /^r\d+-n/.test(id));
    console.log(
      `measured: not idempotent: ${unsafeRan.length} ran, ${twice.length} ran twice`,
    );
    for (const [i, r] of runs.entries()) {
      assert.deepEqual(r.failures.slice(0, 5), [], `run ${i + 1}`);
      assert.ok(r.calls > 1_000, `run ${i + 1}: ${r.calls} calls`);
      assert.ok(
        r.max <= r.bound,
        `run ${
          i + 1
        }: the slowest call took ${r.max} ms, over the bound ${r.bound} ms`,
      );
      assert.deepEqual(r.unsafe.failed.slice(0, 5), [], `run ${i + 1}`);
    }
    assert.ok(unsafeRan.length > 100, `${unsafeRan.length} ran`);
    assert.deepEqual(twice, [], "a call that is not idempotent ran twice");
  } finally {
    await cluster.stop();
    await Deno.remove(logs, { recursive: true });
  }
});
