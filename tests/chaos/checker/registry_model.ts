/**
 * The sequential model of ONE registry name and its leases, for
 * {@link checkLinearizable}: what `registry/state.ts` does with each
 * command, seen from one name (the leases of a name are used by its
 * operations only, so the name is an independent object).
 *
 * State: the endpoints bound under the name (`id → url, leaseId`) and the
 * live leases. Revisions are global across names, so this model does not
 * check revision numbers (`revisions.ts` and `watch.ts` do).
 *
 * Semantics (from `RegistryState`):
 * - bind `id` with `leaseId`: LEASE_NOT_FOUND when the lease does not
 *   exist (nothing changes); else ID_IN_USE when `id` is bound with
 *   another live lease (not `leaseId`; none counts as another) at another
 *   url (nothing changes; the registry's `idInUse` rule: the same url is
 *   the same server restarted, a lease-less binding has no holder); else
 *   upsert: the endpoint's url and lease are replaced (a re-bind with
 *   another lease detaches it from the old one). A bind identical to what
 *   is bound changes nothing (and does not bump the revision), which the
 *   model shows as the same state. A bind applied where the id is held
 *   means the holder's lease expired first.
 * - unbind `id`: `removed: 1` and the endpoint is gone when it was bound,
 *   else `removed: 0` and nothing changes.
 * - lease grant of an id that exists: refused (-32602 "exists already");
 *   else the lease exists, with no binding.
 * - lease revoke: LEASE_NOT_FOUND when it does not exist; else the lease
 *   and every endpoint attached to it are gone.
 * - keep-alive: answered by the leader from its own state (no log entry):
 *   `ok` when the lease exists; LEASE_NOT_FOUND when it does not, or while
 *   its expiry is being committed (`lease.ts` refuses keep-alives of an
 *   expiring lease), so LEASE_NOT_FOUND is allowed on a live lease too
 *   (the expiry itself is then linearized where it happens).
 * - lookup: the endpoints (id, url, leaseId), compared as a set (the order
 *   is the binding order, which the workload does not rely on).
 * - lease expiry: nondeterministic: at any moment any live lease may
 *   expire, removing its endpoints. A state of the model stands for
 *   itself and for every state its leases' expiries make of it (its
 *   closure under expiry), and each step gives the most-alive states
 *   compatible with the answer: a lookup that misses an endpoint bound
 *   with a lease makes that lease expired; a LEASE_NOT_FOUND, an unbind
 *   that removed nothing make the lease (or the endpoint's lease) gone.
 *   So expiry costs no extra states (no subsets of leases to try), and a
 *   lease is taken as expired only when an answer needs it. Operations
 *   that change nothing (lookups, keep-alives, an unbind that removed
 *   nothing, answers of LEASE_NOT_FOUND, ID_IN_USE or "exists") are declared
 *   {@link Model.readOnly}, which lets the search linearize them
 *   greedily.
 *
 * ## What a workload must record (`OpOutput`)
 *
 * | call | registry answer | `outcome` / `output` |
 * |---|---|---|
 * | `registry.bind` (`leaseId` or none) | result `{ revision }` | ok `{ f: "bind", revision }` |
 * | `registry.bind` | error -32007 LEASE_NOT_FOUND | ok `{ f: "bind", leaseNotFound: true }` |
 * | `registry.bind` | error -32015 ID_IN_USE | ok `{ f: "bind", idInUse: true }` |
 * | `registry.unbind` | result `{ revision, removed }` | ok `{ f: "unbind", revision, removed }` |
 * | `registry.lookup` | result `{ revision, endpoints }` | ok `{ f: "lookup", revision, endpoints: endpoints.map(({ id, url, leaseId }) => ({ id, url, leaseId })) }` |
 * | `lease.grant` (explicit `id`) | result `{ id, ttlMs, revision }` | ok `{ f: "leaseGrant", revision, ttlMs }` |
 * | `lease.grant` | error -32602 whose message contains "exists already" | ok `{ f: "leaseGrant", exists: true }` |
 * | `lease.keepAlive` | result `{ id, ttlMs }` | ok `{ f: "leaseKeepAlive", ttlMs }` |
 * | `lease.keepAlive` | error -32007 LEASE_NOT_FOUND | ok `{ f: "leaseKeepAlive", leaseNotFound: true }` |
 * | `lease.revoke` | result `{ revision, removed }` | ok `{ f: "leaseRevoke", revision }` |
 * | `lease.revoke` | error -32007 LEASE_NOT_FOUND | ok `{ f: "leaseRevoke", leaseNotFound: true }` |
 * | any write | NOT_LEADER -32001 (a follower proposes nothing), an error with `data.applied: false`, NotSent (nothing reached a server), an invalid-params error other than the grant's | `fail` |
 * | any write | a timeout, a closed connection, `data.applied: "unknown"`, any other error | `unknown` (`completedAt: null`) |
 *
 * Reads (`lookup`, `keepAlive`) that end in an error may be recorded as
 * `fail` (a read changes nothing). `endpoints[].leaseId` is the endpoint's
 * `leaseId` as the lookup returned it (null for none; the workload runs
 * without auth, or as an admin, so lease ids are shown). A lookup must ask
 * for the whole name (no `limit`, no query, `includeUnhealthy` irrelevant:
 * no health checks in the chaos run).
 *
 * @module
 */

import type { Operation, OpInput, OpOutput, SeenEndpoint } from "../history.ts";
import type { Model, WglOperation } from "./wgl.ts";

/** One name's state: its endpoints by id and its live leases (both sorted). */
export interface NameState {
  /** `[id, url, leaseId]`, sorted by id. */
  endpoints: readonly (readonly [string, string, string | null])[];
  /** Live lease ids, sorted. */
  leases: readonly string[];
}

/** An operation of the history as the model reads it. */
export type RegistryOp = WglOperation<OpInput, OpOutput> & {
  /** The history operation it came from. */
  source: Operation;
};

/** Settings of {@link registryModel}. */
export interface RegistryModelOptions {
  /**
   * `"strict"` (default): an `ok` keep-alive means the lease exists.
   * `"lenient"`: keep-alive answers constrain nothing (keep-alives are
   * answered by whichever node believes it leads, without a ReadIndex
   * round, so a deposed leader's answer may be stale).
   */
  keepAlive?: "strict" | "lenient";
  /**
   * For each lease, a time after which no operation names it (the latest
   * return of those that do; leave out a lease that an unknown operation
   * names). A lease past its time with no endpoint attached is dropped
   * from the state once an operation invoked later is linearized: no
   * later operation can tell it from an expired one, and without this a
   * long history keeps every lease it ever granted possibly alive (the
   * model never forces an expiry), which the expiry subsets multiply.
   */
  retiredAfter?: ReadonlyMap<string, number>;
}

const EMPTY: NameState = { endpoints: [], leases: [] };

/** The model of one registry name (see the module doc). */
export function registryModel(
  options: RegistryModelOptions = {},
): Model<NameState, OpInput, OpOutput> {
  const strictKeepAlive = (options.keepAlive ?? "strict") === "strict";
  const retiredAfter = options.retiredAfter;
  /** `state` without the leases no operation from `now` on can tell apart from expired. */
  function retire(state: NameState, now: number): NameState {
    const kept = state.leases.filter((lease) =>
      !((retiredAfter!.get(lease) ?? Infinity) < now) ||
      state.endpoints.some(([, , attached]) => attached === lease)
    );
    return kept.length === state.leases.length
      ? state
      : { endpoints: state.endpoints, leases: kept };
  }
  return {
    init: () => EMPTY,
    key: stateKey,
    step(state, op) {
      const result: NameState[] = [];
      for (const after of apply(state, op.input, op.output)) {
        result.push(
          retiredAfter === undefined ? after : retire(after, op.call),
        );
      }
      return result;
    },
    readOnly: (op) => readOnly(op.input, op.output),
  };

  /**
   * The most-alive states `state` (itself most-alive: any of its leases
   * may have expired) can be in after the operation; each stands for
   * itself and every state its leases' expiries make of it.
   */
  function apply(
    state: NameState,
    input: OpInput,
    output: OpOutput | undefined,
  ): NameState[] {
    switch (input.f) {
      case "bind": {
        const lease = input.leaseId;
        const live = lease === null || state.leases.includes(lease);
        // ID_IN_USE: another live lease holds the id at another url (an
        // endpoint's lease is live in a most-alive state).
        const held = state.endpoints.find(([id]) => id === input.id);
        const holder = held !== undefined && held[2] !== null &&
            held[2] !== lease && held[1] !== input.url
          ? held[2]
          : null;
        // Applied over a holder: its lease expired first.
        const applied = !live
          ? []
          : holder === null
          ? [putEndpoint(state, input)]
          : [putEndpoint(endLeases(state, [holder]), input)];
        const refused = live && holder !== null ? [state] : [];
        // LEASE_NOT_FOUND: the lease is gone (expired by now, if it was live).
        const missing = lease === null ? [] : [endLeases(state, [lease])];
        if (output === undefined) return [...applied, ...refused, ...missing];
        if (output.f !== "bind") return [];
        if (output.leaseNotFound === true) return missing;
        if (output.idInUse === true) return refused;
        return applied;
      }
      case "unbind": {
        const bound = state.endpoints.find(([id]) => id === input.id);
        if (output === undefined) {
          return [
            bound === undefined ? state : withoutEndpoints(state, [input.id]),
          ];
        }
        if (output.f !== "unbind") return [];
        if (output.removed === 1) {
          return bound === undefined
            ? []
            : [withoutEndpoints(state, [input.id])];
        }
        // Removed nothing: not bound, or its lease expired first.
        if (bound === undefined) return [state];
        return bound[2] === null ? [] : [endLeases(state, [bound[2]])];
      }
      case "lookup": {
        if (output === undefined) return [state];
        if (output.f !== "lookup") return [];
        // The leases whose endpoints it does not show must have expired.
        const shown = new Map(output.endpoints.map((e) => [e.id, e]));
        const expired = new Set<string>();
        for (const [id, url, lease] of state.endpoints) {
          const seen = shown.get(id);
          if (
            seen !== undefined && seen.url === url &&
            (seen.leaseId ?? null) === lease
          ) {
            continue;
          }
          if (lease === null) return [];
          expired.add(lease);
        }
        const next = expired.size === 0
          ? state
          : endLeases(state, [...expired]);
        return sameEndpoints(next, output.endpoints) ? [next] : [];
      }
      case "leaseGrant": {
        const lease = input.leaseId;
        const exists = state.leases.includes(lease);
        const fresh = {
          endpoints: endLeases(state, [lease]).endpoints,
          leases: [...state.leases.filter((l) => l !== lease), lease].sort(),
        };
        if (output === undefined) return exists ? [state, fresh] : [fresh];
        if (output.f !== "leaseGrant") return [];
        if (output.exists === true) return exists ? [state] : [];
        return [fresh];
      }
      case "leaseKeepAlive": {
        // LEASE_NOT_FOUND also while a live lease's expiry is committed.
        if (output === undefined || !strictKeepAlive) return [state];
        if (output.f !== "leaseKeepAlive") return [];
        if (output.leaseNotFound === true) return [state];
        return state.leases.includes(input.leaseId) ? [state] : [];
      }
      case "leaseRevoke": {
        const exists = state.leases.includes(input.leaseId);
        const gone = endLeases(state, [input.leaseId]);
        if (output === undefined) return [gone];
        if (output.f !== "leaseRevoke") return [];
        // LEASE_NOT_FOUND: gone already (expired by now, if it was live).
        return output.leaseNotFound === true || exists ? [gone] : [];
      }
    }
  }
}

/** Whether an operation never changes a name's state (see {@link Model.readOnly}). */
function readOnly(input: OpInput, output: OpOutput | undefined): boolean {
  switch (input.f) {
    case "lookup":
    case "leaseKeepAlive":
      return true;
    case "bind":
      return output?.f === "bind" &&
        (output.leaseNotFound === true || output.idInUse === true);
    case "unbind":
      return output?.f === "unbind" && output.removed === 0;
    case "leaseGrant":
      return output?.f === "leaseGrant" && output.exists === true;
    case "leaseRevoke":
      return output?.f === "leaseRevoke" && output.leaseNotFound === true;
  }
}

function endLeases(state: NameState, ended: readonly string[]): NameState {
  return {
    endpoints: state.endpoints.filter(([, , lease]) =>
      lease === null || !ended.includes(lease)
    ),
    leases: state.leases.filter((lease) => !ended.includes(lease)),
  };
}

function putEndpoint(
  state: NameState,
  input: { id: string; url: string; leaseId: string | null },
): NameState {
  const endpoints = state.endpoints.filter(([id]) => id !== input.id);
  endpoints.push([input.id, input.url, input.leaseId]);
  endpoints.sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
  return { endpoints, leases: state.leases };
}

function withoutEndpoints(state: NameState, ids: string[]): NameState {
  return {
    endpoints: state.endpoints.filter(([id]) => !ids.includes(id)),
    leases: state.leases,
  };
}

/** Whether a lookup's endpoints are exactly the state's (as sets). */
export function sameEndpoints(
  state: NameState,
  seen: readonly SeenEndpoint[],
): boolean {
  if (seen.length !== state.endpoints.length) return false;
  const want = new Map(
    state.endpoints.map(([id, url, lease]) => [id, [url, lease]]),
  );
  for (const endpoint of seen) {
    const bound = want.get(endpoint.id);
    if (
      bound === undefined || bound[0] !== endpoint.url ||
      bound[1] !== (endpoint.leaseId ?? null)
    ) {
      return false;
    }
    want.delete(endpoint.id);
  }
  return true;
}

const keys = new WeakMap<NameState, string>();

/** The canonical text of a state. */
export function stateKey(state: NameState): string {
  const known = keys.get(state);
  if (known !== undefined) return known;
  let key = "";
  for (const [id, url, lease] of state.endpoints) {
    key += `${id}\u0001${url}\u0001${lease ?? ""}\u0002`;
  }
  key = `${key}|${state.leases.join("\u0001")}`;
  keys.set(state, key);
  return key;
}

/**
 * {@link RegistryModelOptions.retiredAfter} for `operations` (one name's,
 * `fail` ones dropped): each lease's latest return among the operations
 * naming it, none for a lease an unknown operation names.
 */
export function leaseRetirement(
  operations: readonly RegistryOp[],
): Map<string, number> {
  const last = new Map<string, number>();
  const open = new Set<string>();
  for (const op of operations) {
    const input = op.input;
    const lease = input.f === "bind"
      ? input.leaseId
      : input.f === "leaseGrant" || input.f === "leaseKeepAlive" ||
          input.f === "leaseRevoke"
      ? input.leaseId
      : null;
    if (lease === null) continue;
    if (op.return === null) open.add(lease);
    else last.set(lease, Math.max(last.get(lease) ?? -Infinity, op.return));
  }
  for (const lease of open) last.delete(lease);
  return last;
}

/** The history operations of one name as model operations (`fail` ones dropped). */
export function registryOps(operations: readonly Operation[]): RegistryOp[] {
  const result: RegistryOp[] = [];
  for (const operation of operations) {
    if (operation.outcome === "fail") continue;
    const known = operation.outcome === "ok";
    result.push({
      input: operation.input,
      output: known ? operation.output : undefined,
      call: operation.invokedAt,
      return: known ? operation.completedAt : null,
      source: operation,
    });
  }
  return result;
}
