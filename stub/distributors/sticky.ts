/**
 * The sticky distributor.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { cursor } from "./_pick.ts";

/** Options of {@link sticky}. */
export interface StickyOptions {
  /**
   * Position of the first pick. Default: random, so that many clients do
   * not all stick to the same server.
   */
  start?: number;
}

/**
 * Sends every call to one endpoint, and keeps to it (by id) while it is in
 * the list: for servers that hold per-client state (a session, a warm
 * cache), or to keep one connection busy. When it is no longer listed (it
 * drained, failed a health check, lost its lease, or the stub evicted it
 * after a failed call), the distributor moves once, to the endpoint after
 * it in the last list that held it (round-robin from its old position),
 * and keeps to that one: it does not go back when the old one returns.
 *
 * `onError` also moves it on when an attempt on its endpoint fails with a
 * connection failure (`notSent` or `ambiguous`), even while that endpoint
 * is still listed; an error answer from the server (`server`) does not
 * move it. It returns undefined: the stub's own rules decide whether the
 * call is retried (a retry then goes to the next endpoint). Its calls are
 * not hedged (`hedge: false`) unless the stub is given a `hedge` option.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { sticky } from "./sticky.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = sticky({ start: 1 });
 * const [a, b, c] = ["a", "b", "c"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = [
 *   distributor.choose([a, b, c], call), // b: the start
 *   distributor.choose([c, a, b], call), // b: still listed
 *   distributor.choose([a, c], call), // c: b left, c came after it
 *   distributor.choose([a, b, c], call), // c: b is back, c stays
 * ].map((e) => e?.id);
 * assert.deepEqual(picks, ["b", "b", "c", "c"]);
 * ```
 */
export function sticky(options: StickyOptions = {}): Distributor {
  const firstPick = cursor(options.start);
  /** The id it keeps to, once it picked one. */
  let current: string | undefined;
  /** Ids of the last list that held it, and its position there. */
  let order: string[] = [];
  let position = 0;
  /**
   * The list `order` was read from: the stub hands out the same array
   * while the endpoints in play stay the same (and never changes it), so
   * a call does not copy its ids again.
   */
  let orderOf: readonly Candidate[] | null = null;
  /** Whether an attempt on it failed to connect: move on at the next pick. */
  let leave = false;
  const pick = (endpoints: readonly Candidate[]) => {
    if (endpoints.length === 0) return undefined;
    let index = current === undefined
      ? firstPick(endpoints.length)
      : endpoints.findIndex((e) => e.id === current);
    if (index >= 0 && leave) index = (index + 1) % endpoints.length;
    else if (index < 0) index = successor(endpoints, order, position);
    leave = false;
    const chosen = endpoints[index];
    current = chosen.id;
    if (endpoints !== orderOf || order.length !== endpoints.length) {
      order = endpoints.map((e) => e.id);
      orderOf = endpoints;
    }
    position = index;
    return chosen;
  };
  return {
    choose: pick,
    pick,
    // A hedge would run the call off its endpoint, and move the pick.
    hedge: false,
    onError(_error, failure) {
      if (failure.endpoint.id === current && failure.kind !== "server") {
        leave = true;
      }
      return undefined;
    },
  };
}

/**
 * The position in `endpoints` of the first id after `position` in `order`
 * (cyclically) that is still listed; `position` modulo the size when none
 * of them is.
 */
function successor(
  endpoints: readonly Candidate[],
  order: readonly string[],
  position: number,
): number {
  const listed = new Map(endpoints.map((e, i) => [e.id, i] as const));
  for (let step = 1; step <= order.length; step++) {
    const index = listed.get(order[(position + step) % order.length]);
    if (index !== undefined) return index;
  }
  return position % endpoints.length;
}
