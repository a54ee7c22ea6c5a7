/**
 * The consistent-hash distributor (rendezvous hashing).
 *
 * @module
 */

import type { CallInfo, Candidate, Distributor } from "./distributor.ts";
import { untried, weightOf } from "./_pick.ts";
import { xxhash32 } from "./_xxhash32.ts";

const encoder = new TextEncoder();

/**
 * Sends all calls with the same key to the same endpoint, for caches and
 * sharded state: `keyOf` gives the call's key (e.g. a param), and the
 * endpoint is chosen by rendezvous, or highest random weight, hashing
 * (David G. Thaler and Chinya V. Ravishankar, "A Name-Based Mapping Scheme
 * for Rendezvous", University of Michigan technical report CSE-TR-316-96,
 * 1996): every endpoint gets a pseudo-random score for the key, and the
 * highest score wins.
 *
 * - Stable: the same key goes to the same endpoint while the list holds
 *   the same endpoints, in any order.
 * - Minimal disruption: when an endpoint leaves, only the keys it had move
 *   (each to its next-highest endpoint); when one joins, it takes only the
 *   keys it now scores highest on, from the others in proportion.
 * - Weighted: an endpoint of weight w gets a share w / W of the keys (W
 *   the sum of the weights), with the logarithmic method of weighted
 *   rendezvous hashing (Jason Resch, "New Hashing Algorithms for Data
 *   Storage", SNIA SDC 2015): score = −w / ln(h), h the hash mapped into
 *   (0, 1); changing one weight moves keys only to or from that endpoint.
 *   A weight that is not a positive number counts as 1.
 * - The hash: h = XXH32 (xxHash, 32 bits, Yann Collet; see the
 *   specification in github.com/Cyan4973/xxHash) of the key's UTF-8 bytes,
 *   seeded with the XXH32 of the endpoint's id; equal scores (rare: about
 *   one key in 2^32 per pair) go to the smaller id. Ids, not URLs, are
 *   hashed, so a server that comes back under its id at a new address
 *   keeps its keys.
 * - Retries: a retry of a call goes to the highest-scoring endpoint that
 *   call has not tried (`call.tried`), the same one every client picks.
 *
 * Its calls are not hedged (`hedge: false`): a hedge would run one off
 * its key's owner, unless the stub is given a `hedge` option.
 *
 * `keyOf` may read any part of the call; whatever it returns is turned into
 * a string (a missing param gives "undefined": all such calls share an
 * endpoint). What it throws, the call throws.
 *
 * @param keyOf The key of a call, e.g. `(call) => String(call.params[0])`
 *   for positional params (a stub method's arguments).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { consistentHash } from "./consistent_hash.ts";
 * import { type CallInfo, makeCandidate } from "./distributor.ts";
 * const distributor = consistentHash((call) => String((call.params as unknown[])[0]));
 * const endpoints = ["a", "b", "c"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = (user: string): CallInfo => ({
 *   name: "profiles", method: "get", params: [user], attempt: 0,
 *   idempotent: true, tried: [], remainingMs: 30_000,
 * });
 * const owner = distributor.choose(endpoints, call("ada"));
 * // The same key, the same endpoint, whatever the order.
 * assert.equal(distributor.choose([...endpoints].reverse(), call("ada")), owner);
 * // Another endpoint leaves: "ada" stays where it was.
 * const others = endpoints.filter((e) => e !== owner);
 * assert.equal(distributor.choose([owner!, others[0]], call("ada")), owner);
 * assert.equal(owner?.id, "a");
 * ```
 */
export function consistentHash(
  keyOf: (call: CallInfo) => string,
): Distributor {
  /** Endpoint id → XXH32 of its UTF-8 bytes (the seed of its scores). */
  const seeds = new Map<string, number>();
  const seedOf = (id: string): number => {
    let seed = seeds.get(id);
    if (seed === undefined) {
      seed = xxhash32(encoder.encode(id));
      seeds.set(id, seed);
    }
    return seed;
  };
  return {
    // A hedge would run the call off its key's owner.
    hedge: false,
    choose(endpoints, call) {
      const pool = untried(endpoints, call);
      if (pool.length === 0) return undefined;
      const text = String(keyOf(call));
      // One endpoint owns every key: no hashing to do.
      if (pool.length === 1) return pool[0];
      const length = utf8(text);
      let best: Candidate | undefined;
      let bestScore = -Infinity;
      for (const endpoint of pool) {
        const score = rendezvousScore(length, seedOf(endpoint.id), endpoint);
        if (
          best === undefined || score > bestScore ||
          (score === bestScore && endpoint.id < best.id)
        ) {
          best = endpoint;
          bestScore = score;
        }
      }
      // Keep the seed cache to about the ids in play.
      if (seeds.size > 2 * endpoints.length + 64) seeds.clear();
      return best;
    },
  };
}

/** The bytes of the key being hashed (read before the next one is written). */
let scratch = new Uint8Array(64);

/**
 * Writes the UTF-8 bytes of `text` into {@link scratch} (grown when
 * short; no allocation per call) and returns how many there are.
 */
function utf8(text: string): number {
  const length = text.length;
  if (3 * length > scratch.length) scratch = new Uint8Array(3 * length);
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) return encoder.encodeInto(text, scratch).written;
    scratch[i] = code;
  }
  return length;
}

/**
 * −w / ln(h), h the hash of the key in {@link scratch} under the
 * endpoint's seed, in (0, 1).
 */
function rendezvousScore(
  keyLength: number,
  seed: number,
  endpoint: Candidate,
): number {
  const h = (xxhash32(scratch, seed, keyLength) + 0.5) / 2 ** 32;
  return -weightOf(endpoint) / Math.log(h);
}
