/**
 * A registry leader stopped with SIGTERM hands leadership over first
 * (Raft dissertation §3.10), so the cluster takes writes again well before
 * an election timeout would have passed. Real processes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withLocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";

const TICK_MS = 50;
const ELECTION_TICKS = 20; // election timeouts of 1000..2000 ms

/** One bind attempt at `url`; true when acknowledged. */
async function bindAt(url: string, i: number): Promise<boolean> {
  try {
    const connection = await dial(url, { connectTimeoutMs: 200 });
    try {
      await connection.call("registry.bind", {
        name: "svc",
        endpoint: { id: `e${i}`, url: `tcp://127.0.0.1:${9000 + i}` },
      }, { timeoutMs: 500 });
      return true;
    } finally {
      connection.close();
    }
  } catch {
    return false; // NOT_LEADER, no leader yet, or stopping
  }
}

Deno.test("§3.10 SIGTERM of the registry leader: a new leader acknowledges a write well within the election timeout", async () => {
  const lines: string[] = [];
  await withLocalCluster({
    tickMs: TICK_MS,
    electionTicks: ELECTION_TICKS,
    onOutput: (name, line) => lines.push(`${name}: ${line}`),
  }, async (cluster) => {
    const leader = await cluster.startRegistryWithLeader(3, 15_000);
    assert.ok(await bindAt(cluster.registry.get(leader)!, 0));
    const survivors = [...cluster.registry.entries()]
      .filter(([id]) => id !== leader).map(([, url]) => url);

    const started = performance.now();
    const exited = cluster.kill(leader, "SIGTERM");
    let acknowledged = -1;
    for (let i = 1; performance.now() - started < 10_000; i++) {
      if (await bindAt(survivors[i % survivors.length], i)) {
        acknowledged = performance.now() - started;
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    await exited;
    const electionMs = TICK_MS * ELECTION_TICKS;
    console.log(
      `SIGTERM of leader ${leader} → write acknowledged by the new leader after ${
        acknowledged.toFixed(0)
      } ms (an election would first wait ${electionMs}..${
        2 * electionMs
      } ms without a leader)`,
    );
    assert.ok(acknowledged >= 0, "a new leader acknowledged a write");
    assert.ok(
      acknowledged < electionMs / 2,
      `${acknowledged.toFixed(0)} ms is well under ${electionMs} ms`,
    );
    assert.ok(
      lines.some((l) => /handed leadership to n\d in \d+ ms/.test(l)),
      lines.join("\n"),
    );
  });
});
