/**
 * Command-line flags of a benchmark script (private to `bench/`).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { selectedScenarios } from "./report.ts";

/** A flag: a string value or a boolean switch, with its default. */
export interface Flag {
  type: "string" | "boolean";
  default?: string | boolean;
}

/**
 * `Deno.args` parsed against `flags` plus `--help`: on `--help` prints
 * `usage` and exits 0; on an unknown flag or a missing value prints the
 * error and `usage` to stderr and exits 2.
 */
export function benchArgs(
  usage: string,
  flags: Record<string, Flag>,
): Record<string, string | boolean | undefined> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: { ...flags, help: { type: "boolean", default: false } },
      strict: true,
    }));
  } catch (error) {
    return usageError((error as Error).message, usage);
  }
  if (values.help === true) {
    console.log(usage);
    Deno.exit(0);
  }
  return values;
}

/** Prints `message` and `usage` to stderr and exits 2. */
export function usageError(message: string, usage: string): never {
  console.error(`bench: ${message}\n\n${usage}`);
  Deno.exit(2);
}

/**
 * The scenarios the `--scenarios a,b` flag selects out of `known` (all
 * when absent; see {@link selectedScenarios}); an unknown name prints the
 * error and `usage` to stderr and exits 2.
 */
export function benchScenarios<T extends string>(
  flag: string | boolean | undefined,
  known: readonly T[],
  usage: string,
): Set<T> {
  try {
    return selectedScenarios(
      typeof flag === "string" ? flag : undefined,
      known,
    );
  } catch (error) {
    return usageError((error as Error).message, usage);
  }
}
