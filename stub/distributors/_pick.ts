/**
 * Helpers the built-in distributors share: a round-robin cursor, weights,
 * random indexes, the endpoints a call has not tried, and the best of a
 * list with round-robin ties (not part of the public API).
 *
 * @module
 */

import type { CallInfo, Candidate } from "./distributor.ts";

/**
 * A round-robin cursor: each call gives the next position modulo `size`,
 * starting at `start` (any number is a position: -1 is the last, 1.5 is 1,
 * NaN is 0). Without `start`, a random one, so that many clients do not
 * all begin on the same server (as gRPC's round_robin policy does).
 */
export function cursor(start?: number): (size: number) => number {
  const first = start ?? Math.floor(Math.random() * 1024);
  let next = Number.isFinite(first) ? Math.trunc(first) : 0;
  return (size) => {
    const position = ((next % size) + size) % size;
    next = (next + 1) % Number.MAX_SAFE_INTEGER;
    return position;
  };
}

/**
 * The weight a distributor uses: the endpoint's, or 1 (the registry's
 * default) when it is not a positive finite number (the registry only
 * binds 1..1_000_000, hand-made candidates may hold anything).
 */
export function weightOf(candidate: Candidate): number {
  const weight = candidate.weight;
  return Number.isFinite(weight) && weight > 0 ? weight : 1;
}

/**
 * A position in 0..size-1 from `random` (a number in [0, 1), as
 * Math.random): one out of range is clamped, NaN gives 0.
 */
export function randomIndex(random: () => number, size: number): number {
  const index = Math.floor(random() * size);
  return Number.isNaN(index) ? 0 : Math.min(size - 1, Math.max(0, index));
}

/**
 * The endpoints `call` has not tried yet (in order), or all of them when
 * it tried every one.
 */
export function untried(
  endpoints: readonly Candidate[],
  call: CallInfo,
): readonly Candidate[] {
  if (call.tried.length === 0) return endpoints;
  const tried = new Set(call.tried);
  const fresh = endpoints.filter((endpoint) => !tried.has(endpoint.id));
  return fresh.length > 0 ? fresh : endpoints;
}

/**
 * The endpoint that `compare` ranks first (negative: `a` is better), the
 * tied ones taken in turn by `next` (a {@link cursor}); undefined for an
 * empty list.
 */
export function bestOf(
  endpoints: readonly Candidate[],
  compare: (a: Candidate, b: Candidate) => number,
  next: (size: number) => number,
): Candidate | undefined {
  // Two passes instead of a list of the ties: no garbage per call.
  let best: Candidate | undefined;
  let ties = 0;
  for (const endpoint of endpoints) {
    const order = best === undefined ? -1 : compare(endpoint, best);
    if (order < 0) {
      best = endpoint;
      ties = 1;
    } else if (order === 0) ties++;
  }
  if (best === undefined) return undefined;
  let skip = next(ties);
  if (skip === 0) return best;
  for (const endpoint of endpoints) {
    if (compare(endpoint, best) === 0 && skip-- === 0) return endpoint;
  }
  return best;
}
