/**
 * The registry's JSON-RPC contract, shared by the registry service (which
 * declares its methods against it) and every client (the registry client,
 * the cluster stubs, the CLI): method names, the params and result of each
 * method, the notifications of a watch, and the registry's error codes.
 *
 * Web-standard and dependency-free, so an edge bundle can import it without
 * pulling in the server.
 *
 * Conventions: durations are in milliseconds (`…Ms`); a *revision* is the
 * registry's change counter, bumped once by every applied log entry that
 * changes a binding (like etcd's store revision), and every event of that
 * entry carries it; lease ids are strings.
 *
 * @module
 */

// --- error codes -----------------------------------------------------------

/**
 * A write (or a lease operation) reached a follower. `data` is
 * {@link NotLeaderData}: send it to `data.leaderUrl`.
 */
export const NOT_LEADER: -32001 = -32001;
/** Nothing is bound under the name a stub calls. `data: { name }`. */
export const NO_ENDPOINTS: -32002 = -32002;
/**
 * The registry cannot answer now: no quorum, a leader election, or no
 * registry node reachable. Retry after `data.retryAfterMs`
 * ({@link UnavailableData}).
 */
export const UNAVAILABLE: -32006 = -32006;
/**
 * The lease does not exist: never granted, revoked, or expired.
 * `data` is {@link LeaseNotFoundData}; grant a new lease and bind again.
 */
export const LEASE_NOT_FOUND: -32007 = -32007;
/**
 * A watch asked for a revision older than the node's history window.
 * `data` is {@link CompactedData}: list the prefix (its result carries a
 * revision), then watch from that revision + 1.
 */
export const COMPACTED: -32008 = -32008;
/**
 * A watch was cancelled by the server (sent in a
 * {@link WatchCancelledNotification}): the watcher read too slowly, or
 * the node is shutting down. Watch again from `resumeRevision`.
 */
export const WATCH_CANCELLED: -32009 = -32009;

/**
 * A `registry.leaderTransfer` did not hand leadership over: there is no
 * other voter to hand it to, or no other member took over within the
 * call's `timeoutMs` (the leader then leads on, Raft dissertation §3.10).
 * `data` is {@link LeaderTransferFailedData}. Not retried by the clients:
 * a transfer to "any" member repeated elsewhere would move leadership
 * twice.
 */
export const LEADER_TRANSFER_FAILED: -32010 = -32010;

/**
 * A `registry.memberAdd`, `memberPromote` or `memberRemove` was refused
 * (Raft dissertation §4.1): the member is unknown, it already has that
 * role, or the change would leave no voter. `data` is
 * {@link MembershipChangeFailedData}. Not retryable as is. (A change
 * refused because another one is still committing is UNAVAILABLE, with
 * `retryAfterMs`.)
 */
export const MEMBERSHIP_CHANGE_FAILED: -32011 = -32011;

/**
 * A bind was refused because another live lease holds the same instance
 * id under the name, at another URL: two servers were started with one
 * id. `data` is {@link IdInUseData}. Start the new server with another id,
 * stop the other one, or wait for its lease to expire (`data.ttlMs` after
 * its last keep-alive). A bind at the SAME url as the held binding is not
 * refused (a server restarted with its old id and port takes its binding
 * over), nor is one replacing a lease-less binding.
 */
export const ID_IN_USE: -32015 = -32015;

/** Data of an {@link ID_IN_USE} error: the binding that holds the id. */
export interface IdInUseData {
  /** The base name bound under. */
  name: string;
  /** The instance id asked for. */
  id: string;
  /** The live lease that holds it. */
  leaseId: string;
  /** The URL the id is bound at (the other server's). */
  url: string;
  /** The holding lease's time to live, ms: it expires this long after its last keep-alive. */
  ttlMs: number;
}

/** Data of a {@link MEMBERSHIP_CHANGE_FAILED} error. */
export interface MembershipChangeFailedData {
  /**
   * `unknownMember`: no member has that id; `notApplicable`: the change
   * does not apply (already that role, a voter added as a learner, no
   * voter left...; the message says which).
   */
  reason: "unknownMember" | "notApplicable";
  /** The member the change was about. */
  member: string;
}

/** Data of a {@link LEADER_TRANSFER_FAILED} error. */
export interface LeaderTransferFailedData {
  /** `noOtherVoter`: a single-member registry; `timeout`: no one took over in time. */
  reason: "noOtherVoter" | "timeout";
  /** The member leadership was to go to, or null when none was picked. */
  target: string | null;
  /** Who leads after the failed attempt (usually the same leader), or null. */
  leader: string | null;
}

/**
 * Data of a {@link NOT_LEADER} error: where to send the write. A write
 * answered NOT_LEADER was not applied (a follower proposes nothing).
 */
export interface NotLeaderData {
  /** The leader's node id, or null when unknown. */
  leaderId: string | null;
  /** The leader's client URL (`tcp://host:port`), or null when unknown. */
  leaderUrl: string | null;
}

/** Data of an {@link UNAVAILABLE} error. */
export interface UnavailableData {
  /** How long to wait before retrying, ms. */
  retryAfterMs: number;
  /** Registry URLs the client tried, when the client raised the error. */
  tried?: string[];
  /**
   * For a write: `false` when it was definitely not applied (no leader, no
   * quorum before it was proposed, a leadership hand-over, its entry
   * replaced by a new leader's): retrying is safe; `"unknown"` when it may
   * have been (it was proposed, then timed out or leadership was lost):
   * a retry of a write that is not idempotent (`lease.grant`, `bind` with
   * `grant`) may apply it twice, so check first (a lookup, `lease.list`).
   * Absent for reads.
   */
  applied?: false | "unknown";
  /**
   * `"storageFailed"`: the node that answered stopped because its disk
   * could not persist a write (full, read-only, failing; the message names
   * the file, the errno and what to do). It acknowledged nothing it did
   * not persist and refuses writes until an operator fixes the disk and
   * restarts it; the other members keep serving, so send the write to
   * another node. Absent otherwise.
   */
  reason?: "storageFailed";
  /**
   * Set by the client when no node could be reached because TLS with them
   * failed (see `TlsFailure`): `"untrusted"` means the registry is up but
   * its certificate does not chain to a CA this client trusts (pass
   * `tls.caFile`). Absent otherwise.
   */
  tlsFailure?:
    | "untrusted"
    | "nameMismatch"
    | "expired"
    | "clientCertificate"
    | "handshake";
}

/** Data of a {@link LEASE_NOT_FOUND} error. */
export interface LeaseNotFoundData {
  /** The lease id asked for. */
  leaseId: string;
}

/** Data of a {@link COMPACTED} error. */
export interface CompactedData {
  /** Oldest revision whose events the node still holds. */
  compactRevision: number;
  /** The node's current revision. */
  revision: number;
}

// --- method names ----------------------------------------------------------

/** Every method of the registry's client port, by purpose. */
export const REGISTRY_METHODS = {
  /** Binds an endpoint under a name: {@link BindParams} → {@link BindResult}. */
  bind: "registry.bind",
  /** Removes a binding: {@link UnbindParams} → {@link UnbindResult}. */
  unbind: "registry.unbind",
  /** Marks a binding serving or draining: {@link SetStateParams} → {@link WriteResult}. */
  setState: "registry.setState",
  /** The stubs list of a name: {@link LookupParams} → {@link LookupResult}. */
  lookup: "registry.lookup",
  /** Names under a prefix: {@link ListParams} → {@link ListResult}. */
  list: "registry.list",
  /** Streams changes under a prefix: {@link WatchParams} → {@link WatchResult}. */
  watch: "registry.watch",
  /** Stops a watch: {@link UnwatchParams} → {@link UnwatchResult}. */
  unwatch: "registry.unwatch",
  /** The node's consensus and membership view: → {@link RegistryStatus}. */
  status: "registry.status",
  /**
   * Hands leadership to another member (Raft dissertation §3.10):
   * {@link LeaderTransferParams} → {@link LeaderTransferResult}.
   */
  leaderTransfer: "registry.leaderTransfer",
  /** Every member with its role and replication progress: → {@link MemberListResult}. */
  memberList: "registry.memberList",
  /**
   * Adds a member, as a learner by default (dissertation §4.2.1):
   * {@link MemberAddParams} → {@link MemberListResult}.
   */
  memberAdd: "registry.memberAdd",
  /** Makes a learner a voter: {@link MemberIdParams} → {@link MemberListResult}. */
  memberPromote: "registry.memberPromote",
  /**
   * Removes a member, the leader included (it steps down once the removal
   * commits, §4.2.2): {@link MemberIdParams} → {@link MemberListResult}.
   */
  memberRemove: "registry.memberRemove",
  /** Grants a lease: {@link LeaseGrantParams} → {@link LeaseGrantResult}. */
  leaseGrant: "lease.grant",
  /** Renews a lease: {@link LeaseKeepAliveParams} → {@link LeaseKeepAliveResult}. */
  leaseKeepAlive: "lease.keepAlive",
  /** Revokes a lease: {@link LeaseIdParams} → {@link LeaseRevokeResult}. */
  leaseRevoke: "lease.revoke",
  /** Time left on a lease: {@link LeaseIdParams} → {@link LeaseInfo}. */
  leaseTimeToLive: "lease.timeToLive",
  /** Every lease: → {@link LeaseListResult}. */
  leaseList: "lease.list",
  /**
   * Takes a consistent snapshot of the registry (admin), held by the
   * leader for fetching in chunks: → {@link SnapshotResult}.
   */
  snapshot: "registry.snapshot",
  /**
   * One chunk of a snapshot `registry.snapshot` took:
   * {@link SnapshotChunkParams} → {@link SnapshotChunkResult}.
   */
  snapshotChunk: "registry.snapshotChunk",
} as const;

/** A registry method name. */
export type RegistryMethod =
  (typeof REGISTRY_METHODS)[keyof typeof REGISTRY_METHODS];

/** The notification that carries watch events (server → client). */
export const WATCH_EVENTS_NOTIFICATION = "registry.events";
/**
 * The notification that carries load changes to a watch opened with
 * `loads: true` (server → client): {@link WatchLoadsNotification}.
 */
export const WATCH_LOADS_NOTIFICATION = "registry.loads";
/** The notification that ends a watch from the server side. */
export const WATCH_CANCELLED_NOTIFICATION = "registry.watchCancelled";

// --- endpoints ---------------------------------------------------------------

/**
 * Whether an endpoint takes calls: `serving`; `draining` (its server is
 * shutting down: finish calls under way, pick it for no new ones);
 * `unhealthy` (its health check fails; left out of lookups unless asked
 * for).
 */
export type EndpointState = "serving" | "draining" | "unhealthy";

/**
 * Where a binding lives: `global` (replicated through Raft, seen by every
 * node) or `local` (only on the node that received it, never replicated;
 * gone when that node restarts or the binding's lease lapses).
 */
export type Scope = "global" | "local";

/** Attribute name → value (from a name's query string or `attrs`). */
export type Attributes = Record<string, string>;

/**
 * An active health check the registry leader runs against an endpoint:
 * `tcp` opens a TCP connection, `ping` calls `rpc.ping` over JSON-RPC (it
 * also catches a server that accepts connections but does not answer, such
 * as a stopped process).
 */
export interface HealthCheck {
  /** How to probe. */
  kind: "tcp" | "ping";
  /** Time between probes, ms. @default 1000 */
  intervalMs: number;
  /** A probe that takes longer fails, ms; below `intervalMs`. @default 500 */
  timeoutMs: number;
  /** Consecutive failed probes that mark the endpoint unhealthy. @default 3 */
  failuresBeforeUnhealthy: number;
}

/** One server bound under a name, as lookups and watch events return it. */
export interface Endpoint {
  /**
   * Instance id, unique within its name (e.g. `"hello-7f3a"`). Binding the
   * same id again replaces the binding.
   */
  id: string;
  /** Where the server listens: `tcp://host:port`. */
  url: string;
  /** Attributes a query can match (`name?version=1.0`). */
  attrs: Attributes;
  /** Relative share of calls for weighted distributors, 1..1_000_000. @default 1 */
  weight: number;
  /** Failure zone or locality (e.g. `"eu-west-1a"`), or null. */
  zone: string | null;
  /** The lease that keeps the binding alive, or null for a permanent binding. */
  leaseId: string | null;
  /** Revision at which this binding was created (stays across state changes). */
  createRevision: number;
  /** Revision of the binding's last change. */
  modRevision: number;
  /** Whether it takes calls; see {@link EndpointState}. */
  state: EndpointState;
  /**
   * Load its server last reported with a keep-alive (any scale the server
   * chooses; lower is less loaded), or null. Not replicated through the
   * log: it may lag by one keep-alive interval plus one registry heartbeat.
   * A watch opened with `loads: true` gets its changes
   * ({@link WATCH_LOADS_NOTIFICATION}).
   */
  load: number | null;
  /** Where the binding lives; see {@link Scope}. */
  scope: Scope;
  /** The active health check, or null. */
  check: HealthCheck | null;
}

/**
 * An endpoint with the defaults of a fresh global binding (serving,
 * weight 1, no attributes, zone, lease or check) and the fields given: for
 * tests, examples and distributors written by hand.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { makeEndpoint } from "./registry.ts";
 * const endpoint = makeEndpoint({ id: "a", url: "tcp://127.0.0.1:9001", zone: "eu-1" });
 * assert.equal(endpoint.state, "serving");
 * assert.equal(endpoint.weight, 1);
 * assert.equal(endpoint.zone, "eu-1");
 * ```
 */
export function makeEndpoint(
  fields: Pick<Endpoint, "id" | "url"> & Partial<Endpoint>,
): Endpoint {
  return {
    attrs: {},
    weight: 1,
    zone: null,
    leaseId: null,
    createRevision: 0,
    modRevision: 0,
    state: "serving",
    load: null,
    scope: "global",
    check: null,
    ...fields,
  };
}

/** What a client gives to bind an endpoint. */
export interface EndpointSpec {
  /** Instance id; defaults to the URL. Give each server instance its own. */
  id?: string;
  /**
   * `tcp://host:port`, no path or query (attributes go in the name or in
   * `attrs`); never a wildcard address such as 0.0.0.0.
   */
  url: string;
  /** Attributes, merged with those of the name's query string. */
  attrs?: Attributes;
  /** Relative share of calls for weighted distributors. @default 1 */
  weight?: number;
  /** Failure zone or locality. @default null */
  zone?: string | null;
  /** Optional active health check; unset fields take their defaults. */
  check?: Partial<HealthCheck> & Pick<HealthCheck, "kind">;
}

// --- writes ----------------------------------------------------------------

/** Params of `registry.bind`. */
export interface BindParams {
  /**
   * Service name, optionally with attributes as a query string
   * (`services/db?version=1.0&team=blue`).
   */
  name: string;
  /** The endpoint to bind. */
  endpoint: EndpointSpec;
  /** Attach the binding to this existing lease. */
  leaseId?: string;
  /**
   * Grant a new lease of this TTL and attach the binding to it, in one
   * atomic step (one log entry). Exclusive with `leaseId`.
   */
  grant?: { ttlMs: number };
  /** Where the binding lives (see Scope). @default "global" */
  scope?: Scope;
}

/** Result of `registry.bind`. */
export interface BindResult {
  /** Registry revision after the write. */
  revision: number;
  /** The base name bound under (without the query string). */
  name: string;
  /** The binding as stored. */
  endpoint: Endpoint;
  /** The lease the binding is attached to, or null. */
  leaseId: string | null;
  /** TTL of a lease granted by this bind (with `grant`), ms. */
  ttlMs?: number;
}

/** Params of `registry.unbind`. */
export interface UnbindParams {
  /** Service name (a query string is ignored). */
  name: string;
  /** Instance id of the endpoint to remove. */
  id: string;
  /**
   * Remove it only if it is still attached to this lease: a server that
   * was replaced by a newer instance under the same id then removes nothing.
   */
  leaseId?: string;
  /** Where the binding lives (see Scope). @default "global" */
  scope?: Scope;
}

/** Result of writes that need say no more than the revision. */
export interface WriteResult {
  /** Registry revision after the write (unchanged when nothing changed). */
  revision: number;
}

/** Result of `registry.unbind`. */
export interface UnbindResult extends WriteResult {
  /** How many endpoints were removed: 0 or 1. */
  removed: number;
}

/** Params of `registry.setState`. */
export interface SetStateParams {
  /** Service name. */
  name: string;
  /** Instance id. */
  id: string;
  /** `draining` before a graceful shutdown; `serving` to take calls again. */
  state: "serving" | "draining";
  /** Only if still attached to this lease (see {@link UnbindParams.leaseId}). */
  leaseId?: string;
  /** Where the binding lives (see Scope). @default "global" */
  scope?: Scope;
}

// --- reads -----------------------------------------------------------------

/**
 * Read consistency: `linearizable` (default) reflects every write
 * acknowledged before the read began (ReadIndex through the leader, Raft
 * dissertation §6.4); `serializable` answers from the node's own state at
 * once, which may lag but works without a quorum.
 */
export type Consistency = "linearizable" | "serializable";

/** Params of `registry.lookup`. */
export interface LookupParams {
  /**
   * Service name, optionally with a query: only endpoints whose attributes
   * match every pair are returned (`services/db?version=1.0`).
   */
  name: string;
  /** Read consistency. @default "linearizable" */
  consistency?: Consistency;
  /**
   * Rotate the list by one position on each lookup, so clients that take
   * the first endpoint spread over all of them. @default true
   */
  rotate?: boolean;
  /** Include endpoints whose health check fails. @default false */
  includeUnhealthy?: boolean;
  /**
   * At most this many endpoints: the first `limit` of the answer (serving
   * ones first, rotated as asked), as etcd's range `limit`. A client of a
   * large fleet that needs a few servers asks for a subset; with `rotate`
   * each node starts a name's answer one further on per lookup (its own
   * counter), so successive lookups get overlapping windows and clients
   * spread over the fleet; `total` tells how many matched. An integer
   * >= 1. @default every endpoint
   */
  limit?: number;
}

/** Result of `registry.lookup`: the stubs list of a name. */
export interface LookupResult {
  /** The base name looked up (without the query string). */
  name: string;
  /** The query's attributes ({} when none). */
  query: Attributes;
  /**
   * Matching endpoints: global and (on this node) local ones, in binding
   * order rotated as asked; empty when none.
   */
  endpoints: Endpoint[];
  /**
   * How many endpoints matched before `limit` cut the answer (equal to
   * `endpoints.length` without a limit).
   */
  total: number;
  /** Revision of the state the answer was read from. */
  revision: number;
}

/** Params of `registry.list`. */
export interface ListParams {
  /** Names that start with this; "" (the default) lists every name. */
  prefix?: string;
  /** Read consistency. @default "linearizable" */
  consistency?: Consistency;
  /** Include each name's endpoints (all states, this node's local ones too). @default false */
  endpoints?: boolean;
}

/** One name in a {@link ListResult}. */
export interface ListedName {
  /** The base name. */
  name: string;
  /** How many endpoints are bound under it (all states). */
  count: number;
  /** Its endpoints, when asked for with `endpoints: true`. */
  endpoints?: Endpoint[];
}

/** Result of `registry.list`. */
export interface ListResult {
  /** Revision of the state listed; watch from `revision + 1` to follow it. */
  revision: number;
  /** Names with at least one endpoint, sorted. */
  names: ListedName[];
}

// --- watch -----------------------------------------------------------------

/** Params of `registry.watch`. */
export interface WatchParams {
  /** Names that start with this ("" watches everything). */
  prefix: string;
  /**
   * First revision to deliver (inclusive). Omit for changes after the
   * current revision only. Older than the node's history window: the
   * call fails with {@link COMPACTED}.
   */
  fromRevision?: number;
  /**
   * The watch's id, unique on this connection, chosen by the client (so
   * events can be routed before the response arrives). Default: the
   * server picks one.
   */
  watchId?: string;
  /**
   * Also send the loads servers report with their keep-alives, as they
   * change on this node: {@link WATCH_LOADS_NOTIFICATION}s between the
   * events (loads are not replicated through the log and carry no
   * revision). A node older than this param refuses it (INVALID_PARAMS
   * naming "loads"): watch again without it. @default false
   */
  loads?: boolean;
}

/** Result of `registry.watch`. */
export interface WatchResult {
  /** The watch's id, as carried by its notifications. */
  watchId: string;
  /** The node's current revision when the watch started. */
  revision: number;
  /** Oldest revision whose events the node holds. */
  compactRevision: number;
}

/** Params of `registry.unwatch`. */
export interface UnwatchParams {
  /** The id {@link WatchResult} gave. */
  watchId: string;
}

/** Result of `registry.unwatch`. */
export interface UnwatchResult {
  /** Whether a watch was stopped (false: unknown or already gone). */
  cancelled: boolean;
}

/** Why a binding went away. */
export type DeleteReason = "unbound" | "leaseRevoked" | "leaseExpired";

/** One change under a watched prefix. */
export interface WatchEvent {
  /** `put`: bound or changed (state, attributes…); `delete`: gone. */
  type: "put" | "delete";
  /** Base name. */
  name: string;
  /** The endpoint after a put; as it was before a delete. */
  endpoint: Endpoint;
  /** Revision of the change. */
  revision: number;
  /** Why a delete happened. */
  reason?: DeleteReason;
}

/**
 * Params of the {@link WATCH_EVENTS_NOTIFICATION}: events in revision
 * order, each revision whole (never split across notifications), none
 * repeated. An empty `events` is a progress notification: nothing changed
 * under the prefix up to `revision`.
 */
export interface WatchEventsNotification {
  /** The watch these events belong to. */
  watchId: string;
  /** The watcher has now seen everything up to this revision. */
  revision: number;
  /** The changes, in revision order. */
  events: WatchEvent[];
}

/** One endpoint's new load, in a {@link WatchLoadsNotification}. */
export interface EndpointLoad {
  /** Base name. */
  name: string;
  /** Instance id. */
  id: string;
  /** The load its server reported last, or null (see {@link Endpoint.load}). */
  load: number | null;
}

/**
 * Params of the {@link WATCH_LOADS_NOTIFICATION}: the global endpoints
 * under the watched prefix whose lease's load changed on the node (a
 * keep-alive on the leader; a follower learns it from the leader's next
 * heartbeat). Volatile: no revision, never replayed; a watch resumed
 * elsewhere gets the loads of that node from its next change on (and the
 * current loads in the endpoints of its events and listings).
 */
export interface WatchLoadsNotification {
  /** The watch these loads belong to. */
  watchId: string;
  /** The changed loads. */
  loads: EndpointLoad[];
}

/** Params of the {@link WATCH_CANCELLED_NOTIFICATION}. */
export interface WatchCancelledNotification {
  /** The watch that ended. */
  watchId: string;
  /** {@link WATCH_CANCELLED}. */
  code: number;
  /** Why, and what to do. */
  message: string;
  /** Watch again from this revision to miss nothing. */
  resumeRevision: number;
}

// --- leases ----------------------------------------------------------------

/** Params of `lease.grant`. */
export interface LeaseGrantParams {
  /**
   * Time to live, ms: the lease expires this long after its last
   * keep-alive. At least 1.5 × the registry's election timeout.
   */
  ttlMs: number;
  /** Lease id to use (1..64 of `[A-Za-z0-9_-]`); default a random one. */
  id?: string;
}

/** Result of `lease.grant`. */
export interface LeaseGrantResult {
  /** The lease's id. */
  id: string;
  /** Its TTL, ms. */
  ttlMs: number;
  /** Registry revision after the grant (a grant alone does not bump it). */
  revision: number;
}

/** Params of `lease.keepAlive`. */
export interface LeaseKeepAliveParams {
  /** The lease to renew. */
  id: string;
  /**
   * The server's current load, returned by lookups on its endpoints and
   * sent to the watches that ask for loads when it changes.
   */
  load?: number;
}

/** Result of `lease.keepAlive`. */
export interface LeaseKeepAliveResult {
  /** The lease renewed. */
  id: string;
  /** Its TTL, ms: renew again well before this passes (a third of it). */
  ttlMs: number;
}

/** Params of `lease.revoke` and `lease.timeToLive`. */
export interface LeaseIdParams {
  /** The lease. */
  id: string;
}

/** Result of `lease.revoke`. */
export interface LeaseRevokeResult extends WriteResult {
  /** How many bindings went with the lease. */
  removed: number;
}

/** A lease as `lease.timeToLive` and `lease.list` report it. */
export interface LeaseInfo {
  /** The lease's id. */
  id: string;
  /** Its TTL, ms. */
  ttlMs: number;
  /**
   * Time left before it expires, as the leader times it, ms (0 while its
   * expiry is being committed).
   */
  remainingMs: number;
  /** The global bindings attached to it. */
  bindings: { name: string; id: string }[];
}

/** Result of `lease.list`. */
export interface LeaseListResult {
  /** Every lease, by id. */
  leases: LeaseInfo[];
}

// --- status ----------------------------------------------------------------

/** One cluster member as a node sees it. */
export interface MemberStatus {
  /** Member id (e.g. `"n2"`). */
  id: string;
  /** Where peers reach it (its peer port). */
  peerUrl: string;
  /** Its client URL, once learnt (peers announce it when they connect), or null. */
  clientUrl: string | null;
  /** Whether this entry is the node answering. */
  self: boolean;
  /**
   * Whether this node can reach it now: the last connection attempt
   * succeeded and the peer proved the cluster secret (always true for self).
   */
  reachable: boolean;
  /** Milliseconds since a message from it last arrived, or null if never. */
  lastHeardMsAgo: number | null;
  /** Why it is unreachable (connect error, wrong secret), or null. */
  lastError: string | null;
}

/** Result of `registry.status`. */
export interface RegistryStatus {
  /** This node's id. */
  id: string;
  /** This node's client URL. */
  url: string;
  /** This node's peer URL. */
  peerUrl: string;
  /** Current Raft term. */
  term: number;
  /** This node's Raft role in the current term. */
  role: "follower" | "candidate" | "leader";
  /**
   * Whether this node votes (`voter`), only replicates (`learner`), or is
   * no member (null): a node started with `--join` before the cluster added
   * it, or a removed node (it stays up but takes no part; stop it).
   */
  kind: MemberKind | null;
  /** Leader id, or null during an election. */
  leader: string | null;
  /** Leader's client URL, or null when unknown. */
  leaderUrl: string | null;
  /** Highest Raft log index known to be committed. */
  commitIndex: number;
  /** Highest Raft log index applied to this node's registry state. */
  appliedIndex: number;
  /**
   * Index of this node's newest snapshot (taken here or installed from the
   * leader; Raft paper §7); 0 for none.
   */
  snapshotIndex: number;
  /** Registry revision applied on this node. */
  revision: number;
  /** Oldest revision whose events this node holds for watches. */
  compactRevision: number;
  /** Leases in the replicated state. */
  leases: number;
  /** Watches open on this node. */
  watchers: number;
  /** Election timeout this node runs with (the base; randomized up to twice it), ms. */
  electionTimeoutMs: number;
  /** Smallest lease TTL this registry accepts, ms. */
  minTtlMs: number;
  /** Every voter, this node included. */
  members: MemberStatus[];
  /**
   * What this node refused or dropped on its peer links since it started:
   * forged or impossible Raft messages and peer connections that could not
   * prove who they are. Zero in a healthy cluster; a count that grows
   * means a broken or hostile member (see {@link PeerSecurityStatus}).
   */
  security: PeerSecurityStatus;
  /**
   * The domain this registry cluster belongs to, and its siblings (other
   * registry clusters, each its own consensus group) with their client
   * URLs: what a client needs to reach a service in another cluster
   * (`name@cluster`, or fail-over); null when not federated.
   */
  federation?: FederationStatus | null;
}

/** A registry cluster's place in a federation (`--domain`, `--cluster-name`, `--siblings`). */
export interface FederationStatus {
  /** The domain's name. */
  domain: string;
  /** This cluster's name within the domain. */
  cluster: string;
  /** Every other cluster of the domain → its registry client URLs. */
  siblings: Record<string, string[]>;
}

/**
 * The drop and refusal counters of one registry node (its
 * `registry.status`), since the process started; they only grow. Each
 * source keeps its own: the peer port (connections it accepted), the
 * peer dialer (connections it opened) and the Raft core (messages that
 * passed both and were still impossible).
 */
export interface PeerSecurityStatus {
  /** The peer port: connections accepted from members, and their messages. */
  peerServer: PeerServerCounters;
  /** The connections this node opens to its peers. */
  peerTransport: PeerTransportCounters;
  /** Raft messages the consensus core dropped. */
  raft: RaftDropCounters;
}

/** Counters of the peer port ({@link PeerSecurityStatus.peerServer}). */
export interface PeerServerCounters {
  /** Raft messages taken in (for comparison with the drops below). */
  delivered: number;
  /**
   * Raft messages (or peer notifications) whose `from` is not the member
   * the connection authenticated as: a member speaking for another.
   * Dropped.
   */
  forgedFrom: number;
  /** Raft messages addressed (`to`) to another member than this node. Dropped. */
  wrongTo: number;
  /** Raft messages from a member removed since it connected. Dropped. */
  notMember: number;
  /** `raft.step` calls refused whole: malformed params or messages. */
  invalid: number;
  /**
   * Connections closed before or during the handshake (wrong cluster,
   * wrong secret, a hello that names this node or no member, a call
   * before authenticating, …), `identityRefused` included.
   */
  refusedConnections: number;
  /**
   * Of `refusedConnections`: hellos whose `from` is not the member the
   * connection's client certificate names (SAN
   * `URI:rafter://member/<id>`), or that came without a member
   * certificate where one is required.
   */
  identityRefused: number;
}

/** Counters of the peer dialer ({@link PeerSecurityStatus.peerTransport}). */
export interface PeerTransportCounters {
  /**
   * Connections this node dropped because the peer's certificate named
   * another member than the one dialed (or none, with peer TLS), or
   * because the peer refused this node's certificate.
   */
  identityRefused: number;
  /**
   * New connections dialled because a ping on the open one went
   * unanswered (a healed partition is rejoined on the new one).
   */
  redials: number;
}

/**
 * Raft messages the consensus core dropped
 * ({@link PeerSecurityStatus.raft}); the names are those of the core's
 * `RaftCoreStats`.
 */
export interface RaftDropCounters {
  /** From a member not in the current configuration. */
  droppedNotMember: number;
  /** Addressed to another node. */
  droppedMisaddressed: number;
  /** Of an older term (answered with the current term, not acted on). */
  droppedStale: number;
  /** Messages a correct cluster never sends. */
  anomalies: RaftAnomalyCounters;
}

/** Messages a correct Raft cluster never sends ({@link RaftDropCounters.anomalies}). */
export interface RaftAnomalyCounters {
  /** A follower acknowledged an index beyond this leader's last one. */
  ackBeyondLastIndex: number;
  /** A snapshot larger than the node accepts was refused. */
  snapshotTooLarge: number;
  /** A snapshot whose data the registry cannot read was refused. */
  snapshotUnreadable: number;
  /** A message whose term was more than 2^24 past this node's was dropped. */
  termJump: number;
  /** A `timeoutNow` (leadership hand-over) not from this term's leader. */
  timeoutNowNotFromLeader: number;
  /**
   * An append, heartbeat or snapshot chunk of this node's term from
   * another member than the term's leader (a term has one leader).
   */
  appendNotFromLeader: number;
  /** A ReadIndex answer not from this term's leader. */
  readIndexNotFromLeader: number;
  /** A granted vote or successful append answer of a later term than this node's. */
  successFromLaterTerm: number;
  /** A vote for this candidate from a member that is not a voter. */
  voteFromNonVoter: number;
  /** A message claiming to come from this node itself. */
  fromSelf: number;
  /** A snapshot acknowledged beyond the end of what was sent. */
  snapshotAckBeyondEnd: number;
}

// --- operations: leadership and members ------------------------------------

/** Params of `registry.leaderTransfer`. */
export interface LeaderTransferParams {
  /**
   * The member to hand leadership to. Default: the most up-to-date other
   * voter (the highest match index). Naming the current leader is a no-op.
   */
  to?: string;
  /**
   * How long to wait for another member to take over, ms (1..60_000).
   * @default two election timeouts
   */
  timeoutMs?: number;
}

/** Result of `registry.leaderTransfer`. */
export interface LeaderTransferResult {
  /** Who leads now. */
  leader: string;
  /** The new leader's client URL, or null when not known yet. */
  leaderUrl: string | null;
  /** Who led when the call arrived. */
  previousLeader: string;
  /** The term the answering node is in after the transfer (the new leader's). */
  term: number;
  /** How long the hand-over took, ms (0 when `to` already led). */
  tookMs: number;
}

/**
 * Whether a member votes (`voter`) or only receives the log (`learner`, a
 * non-voting member catching up before it is promoted, Raft dissertation
 * §4.2.1).
 */
export type MemberKind = "voter" | "learner";

/** One member in a {@link MemberListResult}. */
export interface MemberInfo {
  /** Member id (e.g. `"n2"`). */
  id: string;
  /** Where peers reach it (its peer port). */
  peerUrl: string;
  /** Its client URL, once learnt, or null. */
  clientUrl: string | null;
  /** Its role in the leader's term. */
  role: "leader" | "follower";
  /** Voter or learner; see {@link MemberKind}. */
  kind: MemberKind;
  /**
   * Highest log index the leader knows this member holds in agreement with
   * its own log (Raft paper §5.3 matchIndex; the leader's own last index
   * for the leader), or null before the member has acknowledged an append
   * in this term.
   */
  matchIndex: number | null;
  /** How many entries it is behind the leader's last index (`lastIndex - matchIndex`), or null. */
  lag: number | null;
  /** Whether the leader reaches it now (always true for the leader). */
  reachable: boolean;
  /** Milliseconds since the leader last heard from it (0 for the leader), or null if never. */
  lastHeardMsAgo: number | null;
}

/** Params of `registry.memberAdd`. */
export interface MemberAddParams {
  /** The new member's id (non-empty, no `|`). */
  id: string;
  /** Its peer URL (`tcp://host:port` of its peer port), replicated to every member. */
  peerUrl: string;
  /** Its client URL (`tcp://host:port`), replicated too. @default none */
  clientUrl?: string;
  /**
   * Add it as a learner, which receives the log but does not vote, to be
   * promoted once caught up (dissertation §4.2.1); false adds a voter at
   * once. @default true
   */
  learner?: boolean;
  /**
   * With `learner`: the leader promotes it to voter on its own once its
   * match index reaches the leader's commit index (checked every tick).
   * `--join` asks for this. @default false
   */
  promoteWhenCaughtUp?: boolean;
}

/** Params of `registry.memberPromote` and `registry.memberRemove`. */
export interface MemberIdParams {
  /** The member's id. */
  id: string;
}

/** Result of `registry.memberList`, answered by the leader. */
export interface MemberListResult {
  /** The cluster's id (16 hex digits), which a joining node records in its data folder. */
  clusterId: string;
  /** The leader's id. */
  leader: string;
  /** The leader's term. */
  term: number;
  /** Index of the last entry in the leader's log. */
  lastIndex: number;
  /** The leader's commit index. */
  commitIndex: number;
  /** Every member, sorted by id. */
  members: MemberInfo[];
}

// --- operations: backup --------------------------------------------------

/**
 * Result of `registry.snapshot`: the leader confirmed its leadership and
 * applied every committed entry (a ReadIndex barrier), then took the
 * registry as it stands after entry `index`: a snapshot at `revision`,
 * held on that node for a minute after its last chunk is fetched.
 * Fetch chunks 0..chunks-1 with `registry.snapshotChunk`; their bytes,
 * concatenated, are the payload, whose SHA-256 is `sha256`.
 */
export interface SnapshotResult {
  /** Names the snapshot in `registry.snapshotChunk`. */
  snapshotId: string;
  /** The cluster's id (16 hex digits). */
  clusterId: string;
  /** The member that took it (the leader). */
  member: string;
  /** The registry revision it is at. */
  revision: number;
  /** The Raft log index of the last entry it reflects. */
  index: number;
  /** The term of that entry. */
  term: number;
  /** Payload size, bytes (UTF-8 JSON of the node snapshot). */
  bytes: number;
  /** How many chunks to fetch. */
  chunks: number;
  /** Bytes per chunk (the last may be shorter). */
  chunkBytes: number;
  /** SHA-256 of the payload, hex. */
  sha256: string;
  /** Names with bindings. */
  names: number;
  /** Global bindings. */
  bindings: number;
  /** Leases. */
  leases: number;
  /** When it was taken (ISO 8601). */
  takenAt: string;
}

/** Params of `registry.snapshotChunk`. */
export interface SnapshotChunkParams {
  /** The `snapshotId` `registry.snapshot` answered. */
  snapshotId: string;
  /** The chunk's number, 0-based. */
  n: number;
}

/** Result of `registry.snapshotChunk`. */
export interface SnapshotChunkResult {
  /** The chunk's number. */
  n: number;
  /** The chunk's bytes, base64. */
  data: string;
}

// --- the typed contract ----------------------------------------------------

/**
 * Params and result of every registry method: the one contract the
 * service implements and clients call through.
 *
 * @example A typed call
 * ```ts
 * import assert from "node:assert/strict";
 * import { REGISTRY_METHODS, type RegistryApi } from "./registry.ts";
 * type Lookup = RegistryApi[typeof REGISTRY_METHODS.lookup];
 * const params: Lookup["params"] = { name: "hello?version=1" };
 * assert.equal(REGISTRY_METHODS.lookup, "registry.lookup");
 * assert.equal(params.name, "hello?version=1");
 * ```
 */
export interface RegistryApi {
  /** `registry.bind`. */
  "registry.bind": { params: BindParams; result: BindResult };
  /** `registry.unbind`. */
  "registry.unbind": { params: UnbindParams; result: UnbindResult };
  /** `registry.setState`. */
  "registry.setState": { params: SetStateParams; result: WriteResult };
  /** `registry.lookup`. */
  "registry.lookup": { params: LookupParams; result: LookupResult };
  /** `registry.list`. */
  "registry.list": { params: ListParams; result: ListResult };
  /** `registry.watch`. */
  "registry.watch": { params: WatchParams; result: WatchResult };
  /** `registry.unwatch`. */
  "registry.unwatch": { params: UnwatchParams; result: UnwatchResult };
  /** `registry.status`. */
  "registry.status": {
    params: Record<string, never> | undefined;
    result: RegistryStatus;
  };
  /** `registry.leaderTransfer`. */
  "registry.leaderTransfer": {
    params: LeaderTransferParams | undefined;
    result: LeaderTransferResult;
  };
  /** `registry.memberList`. */
  "registry.memberList": {
    params: Record<string, never> | undefined;
    result: MemberListResult;
  };
  /** `registry.memberAdd`. */
  "registry.memberAdd": { params: MemberAddParams; result: MemberListResult };
  /** `registry.memberPromote`. */
  "registry.memberPromote": {
    params: MemberIdParams;
    result: MemberListResult;
  };
  /** `registry.memberRemove`. */
  "registry.memberRemove": {
    params: MemberIdParams;
    result: MemberListResult;
  };
  /** `lease.grant`. */
  "lease.grant": { params: LeaseGrantParams; result: LeaseGrantResult };
  /** `lease.keepAlive`. */
  "lease.keepAlive": {
    params: LeaseKeepAliveParams;
    result: LeaseKeepAliveResult;
  };
  /** `lease.revoke`. */
  "lease.revoke": { params: LeaseIdParams; result: LeaseRevokeResult };
  /** `lease.timeToLive`. */
  "lease.timeToLive": { params: LeaseIdParams; result: LeaseInfo };
  /** `lease.list`. */
  "lease.list": {
    params: Record<string, never> | undefined;
    result: LeaseListResult;
  };
  /** `registry.snapshot`. */
  "registry.snapshot": {
    params: Record<string, never> | undefined;
    result: SnapshotResult;
  };
  /** `registry.snapshotChunk`. */
  "registry.snapshotChunk": {
    params: SnapshotChunkParams;
    result: SnapshotChunkResult;
  };
}

/** Params of registry method `M`. */
export type ParamsOf<M extends RegistryMethod> = RegistryApi[M]["params"];
/** Result of registry method `M`. */
export type ResultOf<M extends RegistryMethod> = RegistryApi[M]["result"];

/**
 * Whether a registry method changes state, so it must reach the leader
 * (a client follows NOT_LEADER hints for these). `lease.timeToLive` and
 * `lease.list` are answered by the leader too (it alone times leases), as
 * are `registry.leaderTransfer` (only the leader can hand leadership over)
 * and `registry.memberList` (only the leader knows each member's match
 * index), and `registry.snapshot` with its chunks (the leader takes and
 * holds the snapshot).
 */
export const LEADER_METHODS: ReadonlySet<RegistryMethod> = new Set<
  RegistryMethod
>([
  REGISTRY_METHODS.bind,
  REGISTRY_METHODS.unbind,
  REGISTRY_METHODS.setState,
  REGISTRY_METHODS.leaseGrant,
  REGISTRY_METHODS.leaseKeepAlive,
  REGISTRY_METHODS.leaseRevoke,
  REGISTRY_METHODS.leaseTimeToLive,
  REGISTRY_METHODS.leaseList,
  REGISTRY_METHODS.leaderTransfer,
  REGISTRY_METHODS.memberList,
  REGISTRY_METHODS.memberAdd,
  REGISTRY_METHODS.memberPromote,
  REGISTRY_METHODS.memberRemove,
  REGISTRY_METHODS.snapshot,
  REGISTRY_METHODS.snapshotChunk,
]);

// --- defaults --------------------------------------------------------------

/** Longest base name or endpoint id, in characters. */
export const MAX_NAME_LENGTH = 256;
/** Most attributes on one endpoint. */
export const MAX_ATTRIBUTES = 32;
/** Defaults of a {@link HealthCheck}. */
export const DEFAULT_HEALTH_CHECK: Readonly<Omit<HealthCheck, "kind">> = {
  intervalMs: 1000,
  timeoutMs: 500,
  failuresBeforeUnhealthy: 3,
};
/** Default registry client port. */
export const DEFAULT_REGISTRY_URL = "tcp://127.0.0.1:7001";
/**
 * The peer port of a node defaults to its client port plus this
 * (client 7001 → peer 7101).
 */
export const PEER_PORT_OFFSET = 100;

// --- names with attributes (Ubik) -------------------------------------------
//
// `services/db?version=1.0&team=blue` is the base name `services/db` with the
// attributes `version=1.0` and `team=blue`. Binding under such a name stores
// the attributes on the endpoint; looking one up returns only the endpoints
// whose attributes match every pair.

/** A name split into its base and its query attributes. */
export interface ParsedName {
  /** The name before `?`. */
  base: string;
  /** The query's attributes ({} when there is no query). */
  query: Attributes;
}

/** Longest attribute name, in characters. */
export const MAX_ATTRIBUTE_KEY_LENGTH = 64;
/** Longest attribute value, in characters. */
export const MAX_ATTRIBUTE_VALUE_LENGTH = 256;

const KEY = /^[A-Za-z0-9._-]+$/;
// No whitespace or control characters, no '?' or '#' (query, fragment).
// deno-lint-ignore no-control-regex
const BASE = /^[^\u0000-\u0020\u007f?#]+$/;

/**
 * Checks a base name (no query): 1..256 characters, no whitespace or
 * control characters, no `?` or `#`.
 *
 * @returns an error message naming `field`, or null when it is valid.
 */
export function baseNameProblem(value: unknown, field: string): string | null {
  if (typeof value !== "string" || value.length === 0) {
    return `"${field}" must be a non-empty string`;
  }
  if (value.length > MAX_NAME_LENGTH) {
    return `"${field}" is ${value.length} characters long; at most ${MAX_NAME_LENGTH} are allowed`;
  }
  if (!BASE.test(value)) {
    return `"${field}" ${
      JSON.stringify(value)
    } may not contain whitespace, control characters, "?" or "#"`;
  }
  return null;
}

/**
 * Splits `name?key=value&…` into its base and attributes. Values are
 * percent-decoded (`%20` is a space; `+` stays `+`).
 *
 * @throws {TypeError} naming `field` when the base name is invalid (see
 * {@link baseNameProblem}), or the query is malformed: empty, a pair
 * without `=`, a key outside `[A-Za-z0-9._-]{1,64}`, a value over 256
 * characters or with a bad percent escape, a key given twice, or more than
 * 32 pairs.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseName } from "./registry.ts";
 * const { base, query } = parseName("services/db?version=1.0&team=blue");
 * assert.equal(base, "services/db");
 * assert.deepEqual(query, { version: "1.0", team: "blue" });
 * ```
 */
export function parseName(text: unknown, field = "name"): ParsedName {
  if (typeof text !== "string") {
    throw new TypeError(`"${field}" must be a string`);
  }
  const mark = text.indexOf("?");
  const base = mark === -1 ? text : text.slice(0, mark);
  const problem = baseNameProblem(base, field);
  if (problem !== null) throw new TypeError(problem);
  if (mark === -1) return { base, query: {} };
  return { base, query: parseQuery(text.slice(mark + 1), field) };
}

function parseQuery(query: string, field: string): Attributes {
  if (query === "") {
    throw new TypeError(
      `"${field}" ends with "?" but has no attributes; write name?key=value&key=value`,
    );
  }
  const pairs = query.split("&");
  if (pairs.length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `"${field}" has ${pairs.length} attributes; at most ${MAX_ATTRIBUTES} are allowed`,
    );
  }
  const attributes: Attributes = {};
  for (const pair of pairs) {
    const equals = pair.indexOf("=");
    if (equals === -1) {
      throw new TypeError(
        `"${field}": query item ${
          JSON.stringify(pair)
        } has no "="; write key=value`,
      );
    }
    const key = pair.slice(0, equals);
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(equals + 1));
    } catch {
      throw new TypeError(
        `"${field}": the value of ${
          JSON.stringify(key)
        } has a malformed percent escape`,
      );
    }
    const problem = attributeProblem(key, value);
    if (problem !== null) throw new TypeError(`"${field}": ${problem}`);
    if (Object.hasOwn(attributes, key)) {
      throw new TypeError(
        `"${field}": attribute ${JSON.stringify(key)} is given twice`,
      );
    }
    attributes[key] = value;
  }
  return attributes;
}

/** Why `key=value` is not a valid attribute, or null when it is. */
function attributeProblem(key: string, value: unknown): string | null {
  if (!KEY.test(key) || key.length > MAX_ATTRIBUTE_KEY_LENGTH) {
    return `attribute name ${
      JSON.stringify(key)
    } must be 1..${MAX_ATTRIBUTE_KEY_LENGTH} characters of A-Z a-z 0-9 . _ -`;
  }
  if (typeof value !== "string") {
    return `attribute ${JSON.stringify(key)} must have a string value`;
  }
  if (value.length > MAX_ATTRIBUTE_VALUE_LENGTH) {
    return `the value of attribute ${
      JSON.stringify(key)
    } is longer than ${MAX_ATTRIBUTE_VALUE_LENGTH} characters`;
  }
  return null;
}

/**
 * Checks an `attrs` object: string values under valid keys.
 *
 * @throws {TypeError} naming `field` and the bad attribute.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkAttributes } from "./registry.ts";
 * assert.deepEqual(checkAttributes({ version: "1.0" }, "endpoint.attrs"), {
 *   version: "1.0",
 * });
 * assert.throws(() => checkAttributes({ version: 1 }, "endpoint.attrs"), TypeError);
 * ```
 */
export function checkAttributes(value: unknown, field: string): Attributes {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError(
      `"${field}" must be an object of attribute name to string value`,
    );
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `"${field}" has ${entries.length} attributes; at most ${MAX_ATTRIBUTES} are allowed`,
    );
  }
  const attributes: Attributes = {};
  for (const [key, item] of entries) {
    const problem = attributeProblem(key, item);
    if (problem !== null) throw new TypeError(`"${field}": ${problem}`);
    attributes[key] = item as string;
  }
  return attributes;
}

/**
 * Merges the attributes of a name's query with an `attrs` object.
 *
 * @throws {TypeError} when both give the same key different values, or
 * together they exceed 32 attributes.
 */
export function mergeAttributes(
  fromName: Attributes,
  fromObject: Attributes,
): Attributes {
  const merged: Attributes = { ...fromName };
  for (const [key, value] of Object.entries(fromObject)) {
    if (Object.hasOwn(merged, key) && merged[key] !== value) {
      throw new TypeError(
        `attribute ${JSON.stringify(key)} is ${
          JSON.stringify(merged[key])
        } in the name but ${JSON.stringify(value)} in "endpoint.attrs"`,
      );
    }
    merged[key] = value;
  }
  if (Object.keys(merged).length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `the endpoint has more than ${MAX_ATTRIBUTES} attributes`,
    );
  }
  return merged;
}

/**
 * Whether attributes match a query: every pair of the query is present
 * with the same value (an empty query matches everything).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { matchesQuery } from "./registry.ts";
 * const attrs = { version: "1.0", team: "blue" };
 * assert.equal(matchesQuery(attrs, { version: "1.0" }), true);
 * assert.equal(matchesQuery(attrs, { version: "2.0" }), false);
 * assert.equal(matchesQuery(attrs, {}), true);
 * ```
 */
export function matchesQuery(
  attributes: Attributes,
  query: Attributes,
): boolean {
  for (const key in query) {
    if (!Object.hasOwn(attributes, key) || attributes[key] !== query[key]) {
      return false;
    }
  }
  return true;
}

/**
 * Formats a base name and attributes back as `name?key=value&…` (keys
 * sorted, values percent-encoded), e.g. for display.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatName } from "./registry.ts";
 * assert.equal(
 *   formatName("db", { version: "1.0", team: "a b" }),
 *   "db?team=a%20b&version=1.0",
 * );
 * ```
 */
export function formatName(base: string, query: Attributes): string {
  const keys = Object.keys(query).sort();
  if (keys.length === 0) return base;
  return `${base}?${
    keys.map((key) => `${key}=${encodeURIComponent(query[key])}`).join("&")
  }`;
}
