/**
 * Rafter's version, read from `deno.json` when the module is loaded (a
 * JSON import, so it is the same in a clone and in the published
 * package), and the line every program prints for `--version`.
 *
 * @module
 */

import config from "../deno.json" with { type: "json" };

/** Rafter's version, as `deno.json` states it (`0.1.0`). */
export const VERSION: string = config.version;

/** The versions of the runtime, as `Deno.version` has them. */
export interface RuntimeVersions {
  deno: string;
  v8: string;
  typescript: string;
}

/**
 * The `--version` line: Rafter's version and the runtime's.
 *
 * @param runtime the runtime's versions (default `Deno.version`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { VERSION, versionLine } from "./version.ts";
 * assert.equal(
 *   versionLine({ deno: "2.9.6", v8: "14.0", typescript: "5.9.2" }),
 *   `rafter ${VERSION} (deno 2.9.6, v8 14.0, typescript 5.9.2)`,
 * );
 * ```
 */
export function versionLine(
  runtime: RuntimeVersions = (globalThis as unknown as {
    Deno: { version: RuntimeVersions };
  }).Deno.version,
): string {
  return `rafter ${VERSION} (deno ${runtime.deno}, v8 ${runtime.v8}, typescript ${runtime.typescript})`;
}
