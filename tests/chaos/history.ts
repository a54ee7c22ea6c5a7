/**
 * The recorded history of a chaos run (Jepsen's shape): every operation a
 * client invoked, when, and how it ended, plus what every watcher saw.
 * The workload writes it; the checker (`checker/`) reads it.
 *
 * Times are milliseconds on the recorder's monotonic clock
 * (`performance.now()` of the one process that runs every client and
 * watcher), so they order invocations and completions in real time.
 *
 * Objects: every operation belongs to one registry name (`input.name`,
 * under the run's prefix, e.g. `chaos/k3`); the leases of a name are used
 * by that name's operations only (lease ids are `<key>-l<n>`), so each
 * name is an independent object and the history can be checked one name
 * at a time (linearizability is compositional, Herlihy & Wing 1990 §3.3).
 *
 * @module
 */

/** Binds endpoint `id` under `name`, attached to `leaseId` (or to none). */
export interface BindInput {
  f: "bind";
  name: string;
  id: string;
  /** Unique per operation: a watch event's url names the bind that made it. */
  url: string;
  leaseId: string | null;
}

/** Removes endpoint `id` from `name`. */
export interface UnbindInput {
  f: "unbind";
  name: string;
  id: string;
}

/** The endpoints of `name`. */
export interface LookupInput {
  f: "lookup";
  name: string;
  consistency: "linearizable" | "serializable";
}

/** Grants lease `leaseId` (an explicit id) with `ttlMs`. */
export interface LeaseGrantInput {
  f: "leaseGrant";
  /** The name whose operations use this lease. */
  name: string;
  leaseId: string;
  ttlMs: number;
}

/** Renews lease `leaseId`. */
export interface LeaseKeepAliveInput {
  f: "leaseKeepAlive";
  name: string;
  leaseId: string;
}

/** Revokes lease `leaseId`, removing every binding attached to it. */
export interface LeaseRevokeInput {
  f: "leaseRevoke";
  name: string;
  leaseId: string;
}

/** What a client asked for. */
export type OpInput =
  | BindInput
  | UnbindInput
  | LookupInput
  | LeaseGrantInput
  | LeaseKeepAliveInput
  | LeaseRevokeInput;

/** One endpoint as a lookup returned it. */
export interface SeenEndpoint {
  id: string;
  url: string;
  leaseId: string | null;
}

/**
 * What the registry answered, for an operation that completed with a
 * definite answer. `leaseNotFound: true` is the registry's
 * LEASE_NOT_FOUND answer (the lease does not exist: bind, keep-alive and
 * revoke of such a lease change nothing); `exists: true` on a grant is
 * its answer that the lease id is taken; `idInUse: true` on a bind is the
 * registry's ID_IN_USE answer (another live lease holds the id at another
 * url: nothing changes).
 */
export type OpOutput =
  | { f: "bind"; revision: number; leaseNotFound?: false; idInUse?: false }
  | { f: "bind"; leaseNotFound: true; idInUse?: false }
  | { f: "bind"; idInUse: true; leaseNotFound?: false }
  | { f: "unbind"; revision: number; removed: number }
  | { f: "lookup"; revision: number; endpoints: SeenEndpoint[] }
  | { f: "leaseGrant"; revision: number; ttlMs: number; exists?: false }
  | { f: "leaseGrant"; exists: true }
  | { f: "leaseKeepAlive"; ttlMs: number; leaseNotFound?: false }
  | { f: "leaseKeepAlive"; leaseNotFound: true }
  | { f: "leaseRevoke"; revision: number; leaseNotFound?: false }
  | { f: "leaseRevoke"; leaseNotFound: true };

/**
 * How an operation ended:
 * - `ok`: a definite answer (`output`), applied as it says;
 * - `fail`: definitely not applied (an error with `data.applied: false`,
 *   or one sent before anything reached a server: NotSent);
 * - `unknown`: may or may not have been applied (a timeout, a closed
 *   connection, `applied: "unknown"`); for the checker it is pending
 *   forever (completedAt is null), as Jepsen's `:info`.
 */
export type Outcome = "ok" | "fail" | "unknown";

/** One operation of the history. */
export interface Operation {
  /** Position in the history, 0-based, in order of invocation. */
  index: number;
  /**
   * The logical client (Jepsen's process): one operation at a time. A
   * client whose operation ended `unknown` continues as a new process, as
   * its old one may still be pending.
   */
  process: number;
  input: OpInput;
  invokedAt: number;
  /** When the answer arrived; null for `unknown`. */
  completedAt: number | null;
  outcome: Outcome;
  /** Present when `outcome` is `ok`. */
  output?: OpOutput;
  /** Present when `outcome` is `fail` or `unknown`. */
  error?: { code: number | null; message: string };
}

/** One thing a watcher saw. */
export type WatchRecord =
  /** A (re)started watch from `fromRevision` (inclusive), on `node`. */
  | { kind: "open"; at: number; fromRevision: number; node: string }
  /** One event, in the order received. */
  | {
    kind: "event";
    at: number;
    revision: number;
    type: "put" | "delete";
    name: string;
    id: string;
    url: string;
    leaseId: string | null;
    reason?: "unbound" | "leaseRevoked" | "leaseExpired";
  }
  /** The stream ended (connection lost, cancelled); the watcher resumes. */
  | { kind: "close"; at: number; reason: string };

/** Everything one watcher saw, in order. */
export interface WatchLog {
  watcher: number;
  /** The prefix watched; every write of the run is under it. */
  prefix: string;
  records: WatchRecord[];
}

/** A whole run, as the workload writes it (JSON). */
export interface History {
  /** The prefix every name of the run is under (`chaos/`). */
  prefix: string;
  /** The registry revision before the first operation. */
  startRevision: number;
  operations: Operation[];
  watches: WatchLog[];
  /**
   * Linearizable lookups of every name made after the last fault healed,
   * once the cluster settled (they are also in `operations`): the final
   * state that no acknowledged write may be missing from.
   */
  finalIndexes: number[];
}
