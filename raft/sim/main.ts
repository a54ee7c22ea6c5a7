/**
 * The simulator's command line: runs many seeds of the whole-cluster
 * simulation (see `cluster.ts`) and prints a summary; every failing seed
 * is printed with the one-line command that replays it.
 *
 * ```sh
 * deno task sim --seeds 10000                 # seeds 1..10000, 3 and 5 nodes
 * deno task sim --seeds 500 --nodes 5 --from 9000
 * deno task sim --nodes 3 --from 17 --seeds 1 --steps 3000 --trace 300
 * ```
 *
 * Exit code 0 when every seed passed, 1 when one failed, 2 on bad flags.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { simulateSeed } from "./cluster.ts";
import {
  type FaultCounts,
  type MembershipSummary,
  SimulationError,
  type SimulationResult,
  type SnapshotCounts,
} from "./scenario.ts";

const USAGE =
  `usage: deno task sim [--seeds N] [--nodes 3|5] [--from S] [--steps N] [--trace N]

  --seeds N   how many seeds to run per cluster size (default 100)
  --nodes N   cluster size, 1 to 9 (default: 3 and 5)
  --from S    first seed (default 1)
  --steps N   fault-phase steps per seed before healing (default 3000)
  --trace N   on failure, print the last N events of the run (default 0)`;

/** Totals over the seeds of one cluster size. */
export interface SimSummary {
  /** Cluster size. */
  nodes: number;
  /** Seeds run. */
  seeds: number;
  /** Seeds that failed. */
  failed: number;
  /** Steps over all passing seeds. */
  steps: number;
  /** Terms that had a leader. */
  elections: number;
  /** Proposals committed. */
  commits: number;
  /** Leadership transfers started. */
  transfers: number;
  /** Node crashes. */
  crashes: number;
  /** Read barriers served. */
  reads: number;
  /** Snapshots taken, installed (InstallSnapshot) and loaded at restarts. */
  snapshots: SnapshotCounts;
  /** Seeds whose drivers took snapshots (compacted logs). */
  snapshotSeeds: number;
  /** Membership changes committed. */
  membershipChanges: number;
  /** Membership changes, by kind. */
  membership: MembershipSummary;
  /** Faults by kind. */
  faults: FaultCounts;
  /** Wall-clock time, ms. */
  ms: number;
}

/** Adds one result into a summary. */
function add(summary: SimSummary, r: SimulationResult): void {
  summary.steps += r.steps;
  summary.elections += r.leaderTerms;
  summary.commits += r.committedProposals;
  summary.transfers += r.transfers;
  summary.crashes += r.crashes;
  summary.reads += r.readStatesServed;
  sumInto(summary.snapshots, r.snapshots);
  if (r.snapshots.taken > 0) summary.snapshotSeeds++;
  summary.membershipChanges += r.membershipChanges;
  sumInto(summary.membership, r.membership);
  sumInto(summary.faults, r.faults);
}

/** Adds each count of `from` to the same count of `into`. */
function sumInto<T extends Record<keyof T, number>>(into: T, from: T): void {
  for (const key of Object.keys(from) as (keyof T)[]) {
    (into[key] as number) += from[key];
  }
}

/**
 * Runs `seeds` seeds from `from` on clusters of `nodes`; calls `onFailure`
 * with each failing seed's error.
 */
export async function runSeeds(
  options: {
    nodes: number;
    seeds: number;
    from: number;
    steps: number;
    trace?: number;
    /** Receives each passing seed's result (tests check what was exercised). */
    onResult?: (result: SimulationResult) => void;
  },
  onFailure: (seed: number, error: unknown) => void = () => {},
): Promise<SimSummary> {
  const started = performance.now();
  const summary: SimSummary = {
    nodes: options.nodes,
    seeds: options.seeds,
    failed: 0,
    steps: 0,
    elections: 0,
    commits: 0,
    transfers: 0,
    crashes: 0,
    reads: 0,
    snapshots: { taken: 0, installed: 0, loaded: 0, chunks: 0, chunksLost: 0 },
    snapshotSeeds: 0,
    membershipChanges: 0,
    membership: {
      proposed: 0,
      refused: 0,
      committed: 0,
      joins: 0,
      added: 0,
      readded: 0,
      promotions: 0,
      removals: 0,
      leaderRemovals: 0,
    },
    faults: {
      lost: 0,
      duplicated: 0,
      cut: 0,
      partitions: 0,
      asymmetric: 0,
      flapping: 0,
      crashes: 0,
      lostWrites: 0,
      tornWrites: 0,
      unacknowledgedWrites: 0,
      slowWrites: 0,
      diskFull: 0,
      diskFullStops: 0,
    },
    ms: 0,
  };
  for (let seed = options.from; seed < options.from + options.seeds; seed++) {
    try {
      const result = await simulateSeed(seed, options.nodes, {
        steps: options.steps,
        traceLines: options.trace ?? 0,
      });
      add(summary, result);
      options.onResult?.(result);
    } catch (error) {
      summary.failed++;
      onFailure(seed, error);
    }
  }
  summary.ms = performance.now() - started;
  return summary;
}

/** The summaries as a Markdown table, one row per cluster size. */
export function formatSummary(summaries: readonly SimSummary[]): string {
  const columns: [string, (s: SimSummary) => number | string][] = [
    ["nodes", (s) => s.nodes],
    ["seeds", (s) => s.seeds],
    ["failed", (s) => s.failed],
    ["steps", (s) => s.steps],
    ["elections", (s) => s.elections],
    ["commits", (s) => s.commits],
    ["reads", (s) => s.reads],
    ["transfers", (s) => s.transfers],
    ["crashes", (s) => s.crashes],
    [
      "snapshots (taken / installed)",
      (s) => `${s.snapshots.taken} / ${s.snapshots.installed}`,
    ],
    ["membership", (s) => s.membershipChanges],
    ["disk full", (s) => s.faults.diskFull],
    ["time s", (s) => (s.ms / 1000).toFixed(1)],
  ];
  const faultKeys = Object.keys(
    summaries[0]?.faults ?? {},
  ) as (keyof FaultCounts)[];
  const table = (cols: [string, (s: SimSummary) => number | string][]) =>
    [
      `| ${cols.map(([name]) => name).join(" | ")} |`,
      `| ${cols.map(() => "---:").join(" | ")} |`,
      ...summaries.map((s) => `| ${cols.map(([, f]) => f(s)).join(" | ")} |`),
    ].join("\n");
  const membershipKeys = Object.keys(
    summaries[0]?.membership ?? {},
  ) as (keyof MembershipSummary)[];
  return table(columns) +
    "\n\nMembership changes (dissertation §4.1, §4.2):\n\n" +
    table([
      ["nodes", (s) => s.nodes],
      ...membershipKeys.map((key) =>
        [key, (s: SimSummary) => s.membership[key]] as [
          string,
          (s: SimSummary) => number,
        ]
      ),
    ]) +
    "\n\nFaults by kind:\n\n" +
    table([
      ["nodes", (s) => s.nodes],
      ...faultKeys.map((key) =>
        [key, (s: SimSummary) => s.faults[key]] as [
          string,
          (s: SimSummary) => number,
        ]
      ),
    ]) +
    "\n\nSnapshots (Raft paper §7):\n\n" +
    table([
      ["nodes", (s) => s.nodes],
      ["seeds snapshotting", (s) => s.snapshotSeeds],
      ["taken", (s) => s.snapshots.taken],
      ["installed", (s) => s.snapshots.installed],
      ["loaded at restart", (s) => s.snapshots.loaded],
      ["chunks sent", (s) => s.snapshots.chunks],
      ["chunks lost", (s) => s.snapshots.chunksLost],
    ]);
}

function parse(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      seeds: { type: "string", default: "100" },
      nodes: { type: "string" },
      from: { type: "string", default: "1" },
      steps: { type: "string", default: "3000" },
      trace: { type: "string", default: "0" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) return null;
  const integer = (name: string, text: string, min: number, max: number) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new RangeError(
        `--${name} must be an integer from ${min} to ${max}, got "${text}"`,
      );
    }
    return value;
  };
  return {
    seeds: integer("seeds", values.seeds, 1, 100_000_000),
    nodes: values.nodes === undefined
      ? [3, 5]
      : [integer("nodes", values.nodes, 1, 9)],
    from: integer("from", values.from, 0, 2 ** 31),
    steps: integer("steps", values.steps, 0, 10_000_000),
    trace: integer("trace", values.trace, 0, 100_000),
  };
}

if (import.meta.main) {
  let options;
  try {
    options = parse(Deno.args);
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    Deno.exit(2);
  }
  if (options === null) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const summaries: SimSummary[] = [];
  const replays: string[] = [];
  for (const nodes of options.nodes) {
    summaries.push(
      await runSeeds({ ...options, nodes }, (seed, error) => {
        const message = error instanceof SimulationError
          ? error.message
          : `seed ${seed} (${nodes} nodes): ${(error as Error).stack ?? error}`;
        console.error(message);
        const replay = /^replay: (.*)$/m.exec(message)?.[1];
        if (replay !== undefined) replays.push(replay);
      }),
    );
  }
  console.log(formatSummary(summaries));
  if (replays.length > 0) {
    console.log(`\n${replays.length} failing seeds; replay each with:`);
    for (const line of replays) console.log(`  ${line}`);
    Deno.exit(1);
  }
}
