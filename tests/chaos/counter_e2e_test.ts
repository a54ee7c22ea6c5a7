/**
 * A chaos slice of a replicated service: the replicated counter
 * (examples/replicated/) on three replicas in their own network
 * namespaces, under SIGKILLs (restarted from their folders), SIGSTOPs and
 * partitions (halves, an isolated replica, a one-way cut), with four
 * clients adding and reading; the history must be linearizable against a
 * counter (no acknowledged add lost, none applied twice, no stale read).
 * The run itself is `_counter_run.ts`, inside the network's client
 * namespace. Needs root, `ip` and `iptables` (skipped otherwise, saying
 * why). `RAFTER_CHAOS_SECONDS` (default 30) and `RAFTER_CHAOS_SEED` replay
 * a run.
 *
 * @module
 */

import assert from "node:assert/strict";
import { chaosNetworkSupport, createChaosNetwork } from "./netns.ts";

const support = await chaosNetworkSupport();
if (!support.ok) console.log(`counter_e2e_test.ts skipped: ${support.reason}`);

const SECONDS = Number(Deno.env.get("RAFTER_CHAOS_SECONDS") ?? 30);
const SEED = Number(Deno.env.get("RAFTER_CHAOS_SEED") ?? Date.now() % 2 ** 31);
const RUNNER = new URL("./_counter_run.ts", import.meta.url);

Deno.test({
  name:
    `replicated counter under ${SECONDS} s of kills, pauses and partitions: the history is linearizable, no acknowledged add lost (seed ${SEED})`,
  ignore: !support.ok,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    console.log(
      `counter chaos seed ${SEED} (replay: RAFTER_CHAOS_SEED=${SEED})`,
    );
    const network = await createChaosNetwork({ nodes: ["n1", "n2", "n3"] });
    try {
      const output = await network.clientCommand(
        RUNNER,
        [String(SECONDS), String(SEED)],
        {
          stdout: "piped",
          stderr: "piped",
          cwd: new URL("../../", import.meta.url).pathname,
        },
      ).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      const line = text.split("\n").find((l) => l.startsWith("result "));
      assert.ok(
        line !== undefined,
        `no result (exit ${output.code}):\n${text.slice(-20_000)}`,
      );
      const result = JSON.parse(line.slice("result ".length));
      console.log(
        `measured: ${result.operations} operations (${result.acknowledged} adds acknowledged, ${result.unknown} unknown, ${result.reads} reads), final value ${result.final}; ${result.faults.length} faults: ${
          result.faults.join(", ")
        }; checker: ${result.ok} (${result.configurations} configurations)`,
      );
      assert.equal(output.code, 0, text.slice(-20_000));
      assert.equal(result.ok, true);
      assert.ok(result.final >= result.acknowledged);
      assert.ok(result.final <= result.acknowledged + result.unknown);
      assert.ok(result.acknowledged > 100, "too few adds to mean anything");
      assert.ok(result.faults.length >= 5, "too few faults");
    } finally {
      await network.destroy();
    }
  },
});
