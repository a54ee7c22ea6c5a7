/**
 * The chaos slice of CI (issue 17): a 3-node registry of real processes
 * in network namespaces this test makes, 60 s of faults drawn mostly from
 * real partitions (iptables inside the namespaces), with kills, pauses,
 * restarts, leadership transfers and a member removed and brought back,
 * while 6 clients and 2 watchers record a history; the checker must find
 * it linearizable, the watch streams whole, revisions monotonic and no
 * lease expired while kept alive. Longer and 5-node runs: `deno task
 * chaos` (tests/chaos/README.md).
 *
 * `RAFTER_CHAOS_SECONDS` changes the length (at least 60 in CI);
 * `RAFTER_CHAOS_SEED` replays a seed (printed at the start). Skipped,
 * saying why, when not root or iproute2/iptables are missing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { chaosNetworkSupport } from "./netns.ts";
import { type FaultKind, PARTITION_KINDS } from "./nemesis.ts";
import { formatRun, runChaos } from "./run.ts";

const support = await chaosNetworkSupport();
if (!support.ok) console.log(`chaos_e2e_test.ts skipped: ${support.reason}`);

const SECONDS = Number(Deno.env.get("RAFTER_CHAOS_SECONDS") ?? 60);
const SEED = Number(Deno.env.get("RAFTER_CHAOS_SEED") ?? Date.now() % 2 ** 31);

/** Partitions twice as likely as each other kind. */
const KINDS: FaultKind[] = [
  ...PARTITION_KINDS,
  ...PARTITION_KINDS,
  "kill-leader",
  "kill-random",
  "pause-leader",
  "restart-graceful",
  "transfer-leader",
  "member-remove-readd",
];

Deno.test({
  name:
    `chaos slice: 3 real nodes under ${SECONDS} s of partitions, kills, pauses and membership changes stay linearizable (seed ${SEED})`,
  ignore: !support.ok,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    console.log(`chaos seed ${SEED} (replay: RAFTER_CHAOS_SEED=${SEED})`);
    const result = await runChaos({
      size: 3,
      seconds: SECONDS,
      seed: SEED,
      kinds: KINDS,
    });
    const report = formatRun(result);
    console.log(report);
    assert.equal(
      result.check.valid,
      true,
      `the checker did not accept the history (files in ${result.out}):\n${report}`,
    );
    for (
      const check of [
        "linearizability",
        "watch",
        "revisions",
        "leases",
        "final",
      ]
    ) {
      assert.equal(
        result.check.checks.find((c) => c.check === check)?.status,
        "ok",
        check,
      );
    }
    assert.deepEqual(result.summary.unexpectedErrors, []);
    assert.equal(result.summary.nemesisError, undefined);
    const partitions = result.faults.filter((f) =>
      (PARTITION_KINDS as readonly string[]).includes(f.kind)
    );
    assert.ok(
      partitions.length >= 2,
      `only ${partitions.length} partitions in ${result.faults.length} faults`,
    );
    assert.ok(
      result.faults.every((f) => f.healedAt !== null),
      "every fault healed",
    );
    // The run did real work on both sides of its faults.
    assert.ok(
      result.history.operations.length > 1_000,
      `${result.history.operations.length} operations`,
    );
    assert.ok((result.figures.byOutcome.ok ?? 0) > 1_000);
    assert.equal(
      result.history.finalIndexes.length,
      5,
      "a final lookup of every name",
    );
    assert.ok(
      result.history.watches.every((w) =>
        w.records.some((r) => r.kind === "event")
      ),
    );
    await Deno.remove(result.out, { recursive: true });
  },
});
