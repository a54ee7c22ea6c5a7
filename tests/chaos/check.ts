/**
 * Checks a chaos run's recorded history (JSON, `tests/chaos/history.ts`)
 * and prints the report:
 *
 * ```sh
 * deno task chaos:check chaos-runs/<time>/3n-1/history.json
 * deno task chaos:check chaos-runs/<time>/3n-1      # a run's folder: its history.json
 * ```
 *
 * Exit status: 0 when every check passed, 1 when a violation was found,
 * 2 when a check could not decide or the input is not a history.
 *
 * @module
 */

import type { History } from "./history.ts";
import { checkHistory, formatReport, historyProblems } from "./checker/mod.ts";

/** Runs the checker on the file `args[0]`; returns the exit status. */
export async function main(args: string[]): Promise<number> {
  if (args.length !== 1 || args[0].startsWith("-")) {
    console.error(
      "usage: deno task chaos:check RUN_FOLDER | HISTORY.json\n  checks a chaos run's history (a run folder's history.json); exit 0 valid, 1 violations, 2 undecided or bad input",
    );
    return 2;
  }
  let path = args[0];
  const isFolder = await Deno.stat(path).then(
    (s) => s.isDirectory,
    () => false,
  );
  if (isFolder) path = `${path.replace(/\/$/, "")}/history.json`;
  let value: unknown;
  try {
    value = JSON.parse(await Deno.readTextFile(path));
  } catch (error) {
    console.error(
      `check: cannot read ${path} as JSON: ${
        error instanceof Error ? error.message : error
      }; pass the history file the chaos workload wrote`,
    );
    return 2;
  }
  const problems = historyProblems(value);
  if (problems.length > 0) {
    console.error(
      `check: ${path} is not a chaos history (tests/chaos/history.ts):\n${
        problems.map((p) => `  - ${p}`).join("\n")
      }${
        path.endsWith("faults.json")
          ? "\nthis is a run's faults.json: pass its history.json, or the run's folder"
          : ""
      }`,
    );
    return 2;
  }
  const report = checkHistory(value as History);
  console.log(formatReport(report));
  return report.valid === true ? 0 : report.valid === false ? 1 : 2;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
