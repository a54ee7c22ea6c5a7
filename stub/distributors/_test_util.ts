/**
 * Helpers shared by the tests of this folder (not part of the public API).
 *
 * @module
 */

import {
  type CallInfo,
  type Candidate,
  type Distributor,
  type EndpointStats,
  makeCandidate,
} from "./distributor.ts";

/** A seeded PRNG in [0, 1), for repeatable spreads. */
export { seeded } from "../../testing/prng.ts";

/** A first attempt at `hello.greet` with `overrides`. */
export function callInfo(overrides: Partial<CallInfo> = {}): CallInfo {
  return {
    name: "hello",
    method: "greet",
    params: [],
    attempt: 0,
    idempotent: false,
    tried: [],
    remainingMs: 30_000,
    ...overrides,
  };
}

/** A candidate `id` at a port of its own, with `fields`. */
export function candidate(
  id: string,
  fields: Partial<Omit<Candidate, "stats">> & {
    stats?: Partial<EndpointStats>;
  } = {},
): Candidate {
  return makeCandidate({ id, url: `tcp://127.0.0.1:${port(id)}`, ...fields });
}

/** Candidates of these ids with default fields. */
export function candidates(...ids: string[]): Candidate[] {
  return ids.map((id) => candidate(id));
}

/** The ids `distributor` picks in `count` calls on `list` ("undefined" for none). */
export function picks(
  distributor: Distributor,
  list: readonly Candidate[],
  count: number,
  call: CallInfo = callInfo(),
): string[] {
  return Array.from(
    { length: count },
    () => String(distributor.choose(list, call)?.id),
  );
}

/** How many times each id was picked, keys in first-pick order. */
export function tally(ids: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** A PRNG that returns `values` in turn (then again from the start). */
export function sequence(...values: number[]): () => number {
  let next = 0;
  return () => values[next++ % values.length];
}

function port(id: string): number {
  let sum = 0;
  for (const char of id) sum = (sum * 31 + char.charCodeAt(0)) % 50_000;
  return 10_000 + sum;
}
