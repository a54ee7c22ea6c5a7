/**
 * Sums up chaos runs for `RESULTS.md`: every run folder given (or found
 * under a folder given) is checked again with the current checker, and
 * measured, then printed as Markdown: one row per run, faults by kind over
 * all runs with availability, and the checker's verdicts.
 *
 * ```sh
 * deno run -A tests/chaos/results.ts chaos-runs/2026-12-02T…   # every run below it
 * ```
 *
 * @module
 */

import type { History } from "./history.ts";
import type { FaultRecord } from "./nemesis.ts";
import { checkHistory } from "./checker/mod.ts";
import { ms, runFigures } from "./report.ts";

/** The run folders under `path` (itself, if it holds a history). */
async function runFolders(path: string): Promise<string[]> {
  try {
    await Deno.stat(`${path}/history.json`);
    return [path];
  } catch { /* not a run: look below */ }
  const found: string[] = [];
  for await (const entry of Deno.readDir(path)) {
    if (entry.isDirectory) {
      found.push(...await runFolders(`${path}/${entry.name}`));
    }
  }
  return found.sort();
}

interface KindTotals {
  count: number;
  totalMs: number;
  gaps: number[];
  recoveries: number[];
}

if (import.meta.main) {
  if (Deno.args.length === 0) {
    console.error("usage: deno run -A tests/chaos/results.ts RUN_FOLDER…");
    Deno.exit(2);
  }
  const folders = (await Promise.all(Deno.args.map(runFolders))).flat();
  const rows: string[] = [];
  const kinds = new Map<string, KindTotals>();
  let operations = 0;
  let unknown = 0;
  let violations = 0;
  let undecided = 0;
  let seconds = 0;
  const nodes = new Map<number, number>();
  for (const folder of folders) {
    const history = JSON.parse(
      await Deno.readTextFile(`${folder}/history.json`),
    ) as History;
    const faults = JSON.parse(
      await Deno.readTextFile(`${folder}/faults.json`),
    ) as FaultRecord[];
    const size = Number(/(\d)n-\d+$/.exec(folder)?.[1] ?? 0);
    nodes.set(size, (nodes.get(size) ?? 0) + 1);
    const check = checkHistory(history);
    const figures = runFigures(history, faults);
    operations += figures.operations;
    unknown += figures.byOutcome.unknown ?? 0;
    seconds += figures.durationMs / 1000;
    if (check.valid === false) violations++;
    if (check.valid === "unknown") undecided++;
    for (const fault of figures.faults) {
      const totals = kinds.get(fault.kind) ??
        { count: 0, totalMs: 0, gaps: [], recoveries: [] };
      totals.count += fault.count;
      totals.totalMs += fault.totalMs;
      totals.gaps.push(fault.maxUnavailableMs);
      totals.recoveries.push(fault.maxRecoveryMs);
      kinds.set(fault.kind, totals);
    }
    const watchEvents = history.watches.reduce(
      (n, w) => n + w.records.filter((r) => r.kind === "event").length,
      0,
    );
    rows.push(
      `| ${folder.split("/").slice(-2).join("/")} | ${size} | ${
        (figures.durationMs / 1000).toFixed(0)
      } s | ${figures.operations} | ${figures.byOutcome.ok ?? 0} / ${
        figures.byOutcome.fail ?? 0
      } / ${
        figures.byOutcome.unknown ?? 0
      } | ${faults.length} | ${watchEvents} | ${
        check.valid === true
          ? "linearizable, all checks pass"
          : check.valid === false
          ? "**VIOLATION**"
          : "undecided"
      } (${(check.timeMs / 1000).toFixed(1)} s) |`,
    );
  }
  console.log(
    `${folders.length} runs (${
      [...nodes].map(([n, c]) => `${c} of ${n} nodes`).join(", ")
    }), ${
      (seconds / 60).toFixed(1)
    } min of faults and settling, ${operations} operations (${unknown} of unknown outcome); ${violations} histories with a violation, ${undecided} undecided.\n`,
  );
  console.log(
    "| run | nodes | length | operations | ok / fail / unknown | faults | watch events | checker |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|---|");
  for (const row of rows) console.log(row);
  console.log(
    "\n| fault | count | time under it | longest time without an acknowledged write: median of runs / max | heal → next acknowledged write: max |",
  );
  console.log("|---|---:|---:|---:|---:|");
  for (const [kind, totals] of [...kinds].sort()) {
    const gaps = [...totals.gaps].sort((a, b) => a - b);
    console.log(
      `| ${kind} | ${totals.count} | ${
        (totals.totalMs / 1000).toFixed(0)
      } s | ${ms(gaps[Math.floor(gaps.length / 2)])} / ${ms(gaps.at(-1)!)} | ${
        ms(Math.max(...totals.recoveries))
      } |`,
    );
  }
}
