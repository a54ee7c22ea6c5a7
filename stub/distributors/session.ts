/**
 * The session distributor: a session's calls go to the server that holds
 * it, and to its backup when that server fails (see `SessionStore`).
 *
 * @module
 */

import type {
  CallInfo,
  Candidate,
  Distributor,
  FailureInfo,
} from "./distributor.ts";
import { roundRobin } from "./round_robin.ts";
import { RpcError } from "../../rpc/errors.ts";
import { SESSION_NOT_FOUND } from "../sessions/session_store.ts";

/** Where a session lives, as its last answer said. */
export interface SessionPlacement {
  /** The endpoint id of the server holding it. */
  primary: string;
  /** The endpoint id of its backup, or null. */
  backup: string | null;
}

/** Options of {@link session}. */
export interface SessionOptions {
  /** Most sessions whose placement is remembered (the oldest forgotten first). @default 10_000 */
  maxSessions?: number;
}

/** A {@link session} distributor, with the placements it learnt. */
export interface SessionDistributor extends Distributor {
  /** Where session `id` lives, as far as this client knows, or undefined. */
  placementOf(id: string): SessionPlacement | undefined;
}

/**
 * Sends each session's calls (`method(sessionId, …)`) to the server that
 * holds the session, and when that server fails, to the backup that holds
 * its copy, which then takes the session over. It learns both from the
 * answers (a session server answers `{ value, session: { id, primary,
 * backup } }`; this distributor hands the caller `value`), and from the
 * session id itself (`<server id>.<uuid>`, so a new client tries the
 * server that opened it first). A server that answers SESSION_NOT_FOUND
 * (-32016) ran nothing, so the call moves on to the next server: a new
 * client finds a session that moved after a fail-over. `session.open`
 * goes to the servers in turn. {@link SessionDistributor.placementOf}
 * tells where a session lives as far as this client knows.
 *
 * It does not hedge. A change that may have run on a failed server is
 * retried on the backup only for methods the stub declares idempotent:
 * the backup may hold that change already.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { session } from "./session.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = session();
 * const [s1, s2, s3] = ["s1", "s2", "s3"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "cart", method: "add", params: ["s2.1f0c", "tea"], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * // A new client: the server that opened it.
 * assert.equal(distributor.choose([s1, s2, s3], call), s2);
 * // An answer says where it lives now; the caller gets the value.
 * const answer = { value: 1, session: { id: "s2.1f0c", primary: "s2", backup: "s3" } };
 * assert.equal(distributor.onReturn!(answer, { ...call, endpoint: s2 }), 1);
 * // s2 failed (the retry's list leaves it out): its backup.
 * assert.equal(distributor.choose([s1, s3], { ...call, attempt: 1, tried: ["s2"] }), s3);
 * ```
 */
export function session(options: SessionOptions = {}): SessionDistributor {
  const max = options.maxSessions ?? 10_000;
  const placements = new Map<string, SessionPlacement>();
  const spread = roundRobin();
  const remember = (id: string, placement: SessionPlacement) => {
    placements.delete(id);
    placements.set(id, placement);
    if (placements.size > max) {
      placements.delete(placements.keys().next().value!);
    }
  };
  const sessionOf = (call: CallInfo): string | undefined => {
    const params = call.params;
    const first = Array.isArray(params) ? params[0] : undefined;
    return typeof first === "string" ? first : undefined;
  };
  const find = (endpoints: readonly Candidate[], id: string | null) =>
    id === null ? undefined : endpoints.find((e) => e.id === id);

  return {
    hedge: false,
    choose(endpoints, call) {
      const id = sessionOf(call);
      if (id === undefined) return spread.choose(endpoints, call);
      const placement = placements.get(id);
      const opener = id.includes(".") ? id.slice(0, id.indexOf(".")) : null;
      return find(endpoints, placement?.primary ?? null) ??
        find(endpoints, placement?.backup ?? null) ??
        find(endpoints, opener) ??
        spread.choose(endpoints, call);
    },
    onReturn(result, call) {
      const answer = result as {
        value?: unknown;
        session?: { id?: unknown; primary?: unknown; backup?: unknown };
      } | null;
      const route = answer?.session;
      if (
        typeof answer !== "object" || answer === null ||
        typeof route !== "object" || route === null ||
        typeof route.id !== "string" || typeof route.primary !== "string"
      ) {
        return undefined;
      }
      if (call.method === "session.close") placements.delete(route.id);
      else {
        remember(route.id, {
          primary: route.primary,
          backup: typeof route.backup === "string" ? route.backup : null,
        });
      }
      return answer.value ?? null;
    },
    onError(error: unknown, failure: FailureInfo) {
      // A server that does not hold the session ran nothing: another may
      // (the session moved after a fail-over, and its opener is back).
      if (error instanceof RpcError && error.code === SESSION_NOT_FOUND) {
        return "retry";
      }
      // The server is gone or cut off: its backup is the session's best
      // place (the retry's list leaves the failed one out).
      const id = sessionOf(failure);
      const placement = id === undefined ? undefined : placements.get(id);
      if (
        placement !== undefined && failure.kind !== "server" &&
        placement.primary === failure.endpoint.id && placement.backup !== null
      ) {
        remember(id!, { primary: placement.backup, backup: null });
      }
      return undefined;
    },
    placementOf: (id) => placements.get(id),
  };
}
