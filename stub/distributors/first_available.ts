/**
 * The first-available distributor.
 *
 * @module
 */

import type { Distributor } from "./distributor.ts";
import { untried } from "./_pick.ts";

/**
 * Sends every call to the first endpoint of the list: the primary, with
 * the others as backups in binding order. This is the replica selection of
 * the RMI registry paper: the client takes the first healthy replica in
 * the vector. The stub passes only the endpoints in play (serving, not
 * evicted after a failure), so the first one listed is the first healthy
 * one; a retry of a call goes to the first endpoint that call has not
 * tried yet (`call.tried`), while there is one.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { firstAvailable } from "./first_available.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = firstAvailable();
 * const [primary, backup] = ["primary", "backup"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * assert.equal(distributor.choose([backup], call), backup);
 * const retry = { ...call, attempt: 1, tried: ["primary"] };
 * assert.equal(distributor.choose([primary, backup], call), primary);
 * assert.equal(distributor.choose([primary, backup], retry), backup);
 * ```
 */
export function firstAvailable(): Distributor {
  return {
    choose: (endpoints, call) => untried(endpoints, call)[0],
    // A first attempt has tried nothing: the first listed.
    pick: (endpoints) => endpoints[0],
  };
}
