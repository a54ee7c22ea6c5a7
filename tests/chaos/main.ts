/**
 * `deno task chaos`: Jepsen-style runs of real registry processes under
 * real faults, each history checked for linearizability (see
 * `tests/chaos/README.md`). As root (it makes network namespaces):
 *
 * ```sh
 * deno task chaos                          # one 3-node and one 5-node run, 60 s each
 * deno task chaos --runs 5 --seconds 120   # five of each size
 * deno task chaos --size 3 --kinds partition-halves,kill-leader --seed 42
 * deno task chaos --partitions             # network faults only
 * ```
 *
 * Each run's files (history, faults, log, report) go to
 * `<out>/<size>n-<i>` (`--out` default `chaos-runs/<time>`); the reports
 * are also printed. Exit 0 when every history checked out, 1 on a violation, 2
 * when a run could not be made or checked.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { FAULT_KINDS, type FaultKind, PARTITION_KINDS } from "./nemesis.ts";
import { chaosNetworkSupport } from "./netns.ts";
import { formatRun, runChaos } from "./run.ts";

const USAGE = `usage: deno task chaos [options]   (as root)

  --runs N         runs of each size (default 1)
  --seconds S      how long faults are injected per run, 5..3600 (default 60)
  --size 3,5       cluster sizes: 3, 5 or 3,5 (default 3,5)
  --seed N         seed of the first run (the next runs take N+1, N+2…);
                   default drawn from the clock, printed to replay
  --kinds a,b      fault kinds to draw from (default every kind):
                   ${FAULT_KINDS.join(", ")}
  --partitions     network faults only (exclusive with --kinds)
  --out DIR        folder for the runs (default chaos-runs/<time>); each run
                   goes to DIR/<size>n-<i>
  --verbose        echo every node's and the nemesis's lines as they come`;

const fail = (message: string): never => {
  console.error(`chaos: ${message}\n\n${USAGE}`);
  Deno.exit(2);
};

let parsed;
try {
  parsed = parseArgs({
    args: Deno.args,
    options: {
      runs: { type: "string", default: "1" },
      seconds: { type: "string", default: "60" },
      size: { type: "string", default: "3,5" },
      seed: { type: "string" },
      kinds: { type: "string" },
      partitions: { type: "boolean", default: false },
      out: { type: "string" },
      verbose: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
const { values } = parsed!;
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const runs = Number(values.runs);
const seconds = Number(values.seconds);
const sizes = values.size.split(",").map(Number);
if (!Number.isInteger(runs) || runs < 1 || runs > 1_000) {
  fail(`--runs ${values.runs}: give 1..1000`);
}
if (!(seconds >= 5 && seconds <= 3_600)) {
  fail(`--seconds ${values.seconds}: give 5..3600`);
}
if (sizes.some((n) => n !== 3 && n !== 5)) {
  fail(`--size ${values.size}: give 3, 5 or 3,5`);
}
if (
  values.seed !== undefined &&
  !(/^\d+$/.test(values.seed) && Number(values.seed) < 2 ** 31)
) {
  fail(`--seed ${values.seed}: give an integer 0..2147483647`);
}
if (values.partitions && values.kinds !== undefined) {
  fail("--partitions and --kinds: give one of them");
}
let kinds: readonly FaultKind[] = values.partitions
  ? PARTITION_KINDS
  : FAULT_KINDS;
if (values.kinds !== undefined) {
  const asked = values.kinds.split(",");
  const unknown = asked.filter((k) =>
    !(FAULT_KINDS as readonly string[]).includes(k)
  );
  if (unknown.length > 0) {
    fail(
      `unknown fault kinds ${unknown.join(", ")}; known: ${
        FAULT_KINDS.join(", ")
      }`,
    );
  }
  kinds = asked as FaultKind[];
}
const support = await chaosNetworkSupport();
if (!support.ok) fail(support.reason);

const root = values.out ??
  `chaos-runs/${new Date().toISOString().replace(/[:.]/g, "-")}`;
const baseSeed = values.seed === undefined
  ? Date.now() % 2 ** 31
  : Number(values.seed);
let violations = 0;
let broken = 0;
let n = 0;
// Ctrl-C: the network of the run under way removes itself and exits
// (130); between runs, stop at once.
let interrupted = false;
Deno.addSignalListener("SIGINT", () => {
  interrupted = true;
});
const plural = (count: number, word: string) =>
  `${count} ${word}${count === 1 ? "" : "s"}`;
for (let i = 0; i < runs && !interrupted; i++) {
  for (const size of sizes) {
    if (interrupted) break;
    const seed = baseSeed + n++;
    const out = `${root}/${size}n-${i + 1}`;
    console.log(
      `\n# run ${n}: ${size} nodes, ${seconds} s, seed ${seed} → ${out}`,
    );
    try {
      const result = await runChaos({
        size,
        seconds,
        seed,
        kinds,
        out,
        verbose: values.verbose,
      });
      console.log(formatRun(result));
      if (result.check.valid === false) violations++;
      else if (result.check.valid === "unknown") broken++;
    } catch (error) {
      broken++;
      console.error(
        `run ${n} broke: ${error instanceof Error ? error.message : error}`,
      );
    }
  }
}
console.log(
  `\n${
    plural(n, "run")
  }: ${violations} with violations, ${broken} not checked; files in ${root}`,
);
Deno.exit(interrupted ? 130 : violations > 0 ? 1 : broken > 0 ? 2 : 0);
