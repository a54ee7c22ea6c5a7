/**
 * The leader distributor: writes to the leader of a Raft-replicated
 * service (or of the registry), reads anywhere.
 *
 * @module
 */

import { RpcError } from "../../rpc/errors.ts";
import { NOT_LEADER } from "../../protocol/registry.ts";
import type {
  CallInfo,
  Candidate,
  Distributor,
  ErrorDecision,
  FailureInfo,
} from "./distributor.ts";
import { roundRobin } from "./round_robin.ts";

/** Options of {@link leader}. */
export interface LeaderOptions {
  /**
   * The methods any replica can answer (reads), by name or as a test of
   * the method name; every other method is a write and goes to the
   * leader. A read that fails on one replica is retried on another (a
   * read changes nothing). @default none: every call goes to the leader
   */
  reads?: readonly string[] | ((method: string) => boolean);
  /** How reads are spread over the replicas. @default roundRobin() */
  readDistributor?: Distributor;
}

/** A {@link leader} distributor, with the leader it follows. */
export interface LeaderDistributor extends Distributor {
  /** The endpoint id it sends writes to, or null until it learns one. */
  readonly leaderId: string | null;
}

/**
 * Sends writes to the leader of a replicated service, reads anywhere.
 *
 * It learns the leader from the answers: a replica that is not the leader
 * answers a write with `NOT_LEADER` (-32001), whose data names the leader
 * (`{ leaderId, leaderUrl }`); the write was not run there, so the stub
 * retries it on the leader at once, and every later write goes straight
 * there. A write that succeeds confirms its replica as the leader; one
 * whose attempt could not reach the leader (refused, timed out) forgets
 * it, so the next write asks another replica. Until it knows, it tries the
 * replicas in turn. Endpoint ids must be the replicas' ids, as
 * `startReplica({ bind })` binds them.
 *
 * It does not hedge (`hedge: false`): a write belongs on the leader, and
 * a second attempt on a follower would only come back `NOT_LEADER`. A
 * write that may have run (its connection broke) is retried only when the
 * stub says the method is idempotent: give writes a `requestId` and
 * declare them idempotent to make them safe to retry.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RpcError } from "../../rpc/errors.ts";
 * import { leader } from "./leader.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = leader({ reads: ["get"] });
 * const [r1, r2, r3] = ["r1", "r2", "r3"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "counter", method: "add", params: [1], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * // Unknown leader: the first replica; it answers NOT_LEADER naming r3.
 * assert.equal(distributor.choose([r1, r2, r3], call), r1);
 * const notLeader = new RpcError(-32001, "not the leader", { leaderId: "r3", leaderUrl: null });
 * const decision = distributor.onError!(notLeader, {
 *   ...call, endpoint: r1, kind: "server", safeToRetry: false,
 * });
 * assert.equal(decision, "retry");
 * assert.equal(distributor.leaderId, "r3");
 * assert.equal(distributor.choose([r2, r3], { ...call, attempt: 1, tried: ["r1"] }), r3);
 * // Reads spread.
 * const reads = [1, 2, 3].map(() => distributor.choose([r1, r2, r3], { ...call, method: "get" })!.id);
 * assert.deepEqual(reads.sort(), ["r1", "r2", "r3"]);
 * ```
 */
export function leader(options: LeaderOptions = {}): LeaderDistributor {
  const reads = options.reads;
  const isRead: (method: string) => boolean = reads === undefined
    ? () => false
    : typeof reads === "function"
    ? reads
    : ((names) => (method: string) => names.has(method))(new Set(reads));
  const spread = options.readDistributor ?? roundRobin();
  let leaderId: string | null = null;
  /** Where the next write goes while the leader is unknown. */
  let turn = 0;

  const choose = (
    endpoints: readonly Candidate[],
    call: CallInfo,
  ): Candidate | undefined => {
    if (endpoints.length === 0) return undefined;
    if (isRead(call.method)) return spread.choose(endpoints, call);
    if (leaderId !== null) {
      for (const endpoint of endpoints) {
        if (endpoint.id === leaderId) return endpoint;
      }
    }
    return endpoints[turn++ % endpoints.length];
  };

  const onError = (
    error: unknown,
    failure: FailureInfo,
  ): ErrorDecision | undefined => {
    if (isRead(failure.method)) {
      // A read changes nothing: any failure may go to another replica.
      return spread.onError?.(error, failure) ?? "retry";
    }
    if (error instanceof RpcError && error.code === NOT_LEADER) {
      const hint = (error.data as { leaderId?: unknown } | undefined)
        ?.leaderId;
      leaderId = typeof hint === "string" && hint !== failure.endpoint.id
        ? hint
        : null;
      // Not run on a follower: safe to send on.
      return "retry";
    }
    if (failure.kind !== "server" && failure.endpoint.id === leaderId) {
      leaderId = null;
    }
    return undefined;
  };

  const onReturn = (
    _result: unknown,
    call: CallInfo & { endpoint: Candidate },
  ): undefined => {
    if (!isRead(call.method)) leaderId = call.endpoint.id;
    return undefined;
  };

  return {
    choose,
    onError,
    onReturn,
    hedge: false,
    get leaderId() {
      return leaderId;
    },
  };
}
