/**
 * The sequential specification of a counter for {@link checkLinearizable}:
 * `add` answers the value after it (adding 1), `get` the value. An add
 * whose outcome is unknown may have been applied or not.
 *
 * @module
 */

import type { Model } from "./wgl.ts";

/** An add (with its request id) or a read. */
export type CounterInput = { f: "add"; requestId: string } | { f: "get" };

/**
 * The counter model.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkLinearizable } from "./wgl.ts";
 * import { counterModel, type CounterInput } from "./counter_model.ts";
 * const add: CounterInput = { f: "add", requestId: "a" };
 * const get: CounterInput = { f: "get" };
 * // A read after an acknowledged add that misses it: stale.
 * const stale = [
 *   { input: add, output: 1, call: 0, return: 1 },
 *   { input: get, output: 0, call: 2, return: 3 },
 * ];
 * assert.equal(checkLinearizable(counterModel, stale).ok, false);
 * // An unknown add may show up later, or never.
 * const unknown = [
 *   { input: add, call: 0, return: null },
 *   { input: get, output: 0, call: 1, return: 2 },
 *   { input: get, output: 1, call: 3, return: 4 },
 * ];
 * assert.equal(checkLinearizable(counterModel, unknown).ok, true);
 * ```
 */
export const counterModel: Model<number, CounterInput, number> = {
  init: () => 0,
  step(state, op) {
    if (op.input.f === "get") {
      return op.output === undefined || op.output === state ? [state] : [];
    }
    return op.output === undefined || op.output === state + 1
      ? [state + 1]
      : [];
  },
  key: (state) => String(state),
  readOnly: (op) => op.input.f === "get",
};
