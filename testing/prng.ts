/**
 * Seeded pseudo-random numbers for tests that draw inputs: the simulator's
 * generator (`raft/sim/prng.ts`), so a failing seed replays exactly.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { seeded } from "./prng.ts";
 * const a = seeded(42);
 * const b = seeded(42);
 * assert.equal(a(), b());
 * ```
 *
 * @module
 */

export { mulberry32 as seeded } from "../raft/sim/prng.ts";
