/**
 * The smoke run of `netns_e2e_test.ts`, run inside the chaos network's
 * client namespace (`ip netns exec <client ns> deno run -A
 * _netns_smoke.ts [--seconds 20] [--seed N] [--size 3]`, with
 * `RAFTER_CHAOS_NET` set): a registry cluster under the {@link Nemesis}
 * for `--seconds`, a writer binding ids one after another meanwhile
 * (`connect(urls)` of `mod.ts`), then the nemesis stopped (everything
 * healed, the cluster healthy), binds until a few are acknowledged after
 * the last heal, and a linearizable lookup. Prints one JSON line of
 * {@link SmokeResult} last; exit 0 unless the run itself broke.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { connect } from "../../mod.ts";
import { ChaosNetwork } from "./netns.ts";
import { ChaosCluster } from "./cluster.ts";
import { type FaultRecord, Nemesis } from "./nemesis.ts";

/** What the smoke run found. */
export interface SmokeResult {
  seed: number;
  faults: FaultRecord[];
  /** Distinct fault kinds applied. */
  kinds: string[];
  acknowledged: number;
  failed: number;
  /** Binds acknowledged after the last heal finished. */
  acknowledgedAfterLastHeal: number;
  /** Acknowledged ids missing from the final linearizable lookup. */
  missing: string[];
  /** The first few write errors, for the report. */
  errors: string[];
  /** `performance.now()` of the last heal. */
  lastHealedAt: number | null;
  /** What was left of the faults once the nemesis stopped (all empty when it healed everything). */
  leftover: {
    cuts: Array<[string, string]>;
    paused: string[];
    stopped: string[];
    removed: string[];
    notVoters: string[];
  };
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "20" },
    seed: { type: "string" },
    size: { type: "string", default: "3" },
  },
});
const seconds = Number(values.seconds);
const seed = values.seed === undefined ? undefined : Number(values.seed);

const network = ChaosNetwork.fromEnv();
const cluster = await ChaosCluster.start({
  network,
  size: Number(values.size),
});
const client = connect(cluster.urls, {
  deadlineMs: 5_000,
  attemptTimeoutMs: 1_500,
});
const acknowledged: Array<{ id: string; at: number }> = [];
const errors: string[] = [];
let failed = 0;
let writing = true;
const writer = (async () => {
  for (let n = 0; writing; n++) {
    const id = `e${n}`;
    try {
      await client.bind("smoke", { id, url: `tcp://10.0.0.1:${1000 + n}` });
      acknowledged.push({ id, at: performance.now() });
    } catch (error) {
      failed++;
      if (errors.length < 10) errors.push((error as Error).message);
    }
  }
})();

const nemesis = new Nemesis(cluster, {
  seed,
  intervalMs: [500, 1_500],
  holdMs: [1_000, 2_500],
  durationMs: seconds * 1_000,
  onFault: (record, phase) =>
    console.error(
      `${
        (performance.now() / 1000).toFixed(1)
      } ${phase} ${record.kind} ${record.detail}${
        record.error ? ` (error: ${record.error})` : ""
      }`,
    ),
});
let result: SmokeResult;
try {
  await nemesis.done();
  await nemesis.stop();
  const list = await cluster.memberList();
  const leftover = {
    cuts: network.cuts(),
    paused: cluster.ids.filter((id) => cluster.isPaused(id)),
    stopped: cluster.ids.filter((id) => !cluster.isRunning(id)),
    removed: cluster.removed,
    notVoters: cluster.ids.filter((id) =>
      list.members.find((m) => m.id === id)?.kind !== "voter"
    ),
  };
  const lastHealedAt = nemesis.lastHealedAt;
  const after = () =>
    acknowledged.filter((a) => lastHealedAt === null || a.at > lastHealedAt)
      .length;
  const deadline = Date.now() + 15_000;
  while (after() < 5 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  writing = false;
  await writer;
  const found = await client.lookup("smoke", {
    consistency: "linearizable",
    deadlineMs: 10_000,
  });
  const ids = new Set(found.endpoints.map((e) => e.id));
  result = {
    seed: nemesis.seed,
    faults: nemesis.faults,
    kinds: [...new Set(nemesis.faults.map((f) => f.kind))].sort(),
    acknowledged: acknowledged.length,
    failed,
    acknowledgedAfterLastHeal: after(),
    missing: acknowledged.map((a) => a.id).filter((id) => !ids.has(id)),
    errors,
    lastHealedAt,
    leftover,
  };
} finally {
  writing = false;
  await writer;
  client.close();
  await cluster.stop();
}
console.log(JSON.stringify(result));
