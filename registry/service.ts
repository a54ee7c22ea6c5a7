/**
 * The registry's client API, implemented against the contract of
 * `protocol.ts`: validates params, turns writes into Raft proposals, serves
 * lookups and lists from the replicated state (merged with this node's
 * local area), leases from the leader's timing, and watches from the
 * history window.
 *
 * @module
 */

import type { Methods } from "../rpc/server/dispatcher.ts";
import { RpcError } from "../rpc/errors.ts";
import type {
  RpcSession,
  SessionMethods,
} from "../rpc/server/server_connection.ts";
import { LeadershipTransferError, NotLeaderError } from "../raft/core.ts";
import { type RaftNode, RaftUnavailableError } from "../raft/node.ts";
import {
  type ConfChange,
  ConfChangeError,
  type Configuration,
  isMember,
} from "../raft/configuration.ts";
import { formatTcpUrl, parseTcpUrl } from "../rpc/transport/transport.ts";
import {
  type BindResult,
  type Endpoint,
  LEADER_TRANSFER_FAILED,
  type LeaderTransferFailedData,
  type LeaderTransferResult,
  LEASE_NOT_FOUND,
  type LeaseInfo,
  type ListedName,
  type MemberInfo,
  type MemberListResult,
  MEMBERSHIP_CHANGE_FAILED,
  type MembershipChangeFailedData,
  NOT_LEADER,
  type NotLeaderData,
  REGISTRY_METHODS,
  type RegistryApi,
  type RegistryMethod,
  type RegistryStatus,
  UNAVAILABLE,
  type UnavailableData,
} from "../protocol/registry.ts";
import type { LeaseKeeper } from "./lease_keeper.ts";
import { type LocalArea, localEndpoint } from "./local_area.ts";
import {
  invalid,
  optionalBoolean,
  optionalLeaseId,
  optionalLimit,
  optionalLoad,
  optionalRevision,
  paramsObject,
  requireBase,
  requireConsistency,
  requireEndpoint,
  requireLeaseId,
  requireName,
  requirePrefix,
  requireScope,
  requireTtl,
} from "./_params.ts";
import {
  type ApplyResult,
  type Binding,
  type Command,
  type CommandValue,
  encodeCommand,
  type RegistryState,
  toEndpoint,
} from "./state.ts";
import type { WatchHub } from "./watch_hub.ts";

/**
 * Most entries a learner's match index may lag the commit index for
 * `registry.memberPromote` to promote it (dissertation §4.2.1).
 */
const PROMOTE_MAX_LAG = 1_000;

/** What the registry's methods need from the node that serves them. */
export interface RegistryContext {
  /** The node's Raft driver, applying entries to `state`. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated state. */
  readonly state: RegistryState;
  /** Lease timing and reported loads. */
  readonly leases: LeaseKeeper;
  /** Watches open on this node. */
  readonly watches: WatchHub;
  /** This node's local-area bindings. */
  readonly local: LocalArea;
  /** Whether this node leads and has applied the first entry of its term. */
  leaderReady(): boolean;
  /** The client URL of member `id`, if known. */
  clientUrlOf(id: string): string | null;
  /** The node's status, for `registry.status`. */
  status(): RegistryStatus;
  /** The cluster's id (16 hex digits), told to joining nodes. */
  readonly clusterId: string;
  /**
   * Asks this leader to promote learner `member` once its match index
   * reaches the commit index (the `--join` policy, checked every tick).
   */
  promoteWhenCaughtUp(member: string): void;
  /** Tells `member`, just removed (committed), that it is no member any more. */
  memberRemoved(member: string): void;
  /**
   * Resolves at the next change of this node's term, role or leader, or
   * after `timeoutMs`, whichever comes first.
   */
  nextSoftState(timeoutMs: number): Promise<void>;
  /**
   * Why no leader can be elected, when this node reaches too few members
   * for a quorum (e.g. "this node reaches 1 of 3 members …"), or null.
   */
  quorumProblem?(): string | null;
  /** Smallest lease TTL accepted, ms (1.5 × the election timeout). */
  readonly minTtlMs: number;
  /** The election timeout, ms; a retry hint while a leader is elected. */
  readonly electionTimeoutMs: number;
  /**
   * How long a write waits to commit, ms. @default 3000 (under the registry
   * client's 4000 ms per attempt: a client waits longer than the server it
   * calls).
   */
  readonly writeTimeoutMs?: number;
  /** How long a linearizable read waits for the leader's confirmation, ms. @default 2000 */
  readonly readTimeoutMs?: number;
}

/** A method of the contract, as the service declares it. */
type Handler<M extends RegistryMethod> = (
  ...args: unknown[]
) => Promise<RegistryApi[M]["result"]> | RegistryApi[M]["result"];

/** Every registry method, each declared against its contract type. */
type RegistryHandlers = { [M in RegistryMethod]: Handler<M> };

/**
 * Builds the registry's JSON-RPC methods for each client connection. Params
 * are named (an object); `registry.bind`, `registry.unbind` and
 * `registry.lookup` also take them by position in the order the contract
 * lists them.
 *
 * Errors: -32602 for bad params (the message names the field);
 * NOT_LEADER (-32001) on a follower for writes and lease calls, with
 * `data: { leaderId, leaderUrl }`; UNAVAILABLE (-32006) when no leader is
 * known or a write or linearizable read could not complete in time (retry
 * after `data.retryAfterMs`); LEASE_NOT_FOUND (-32007); COMPACTED (-32008)
 * for a watch from a revision older than the history window.
 *
 * @example
 * ```ts ignore
 * import { serve } from "../adapter/deno/serve.ts";
 * const server = serve({ port: 7001, methods: registryMethods(context) });
 * ```
 */
export function registryMethods(context: RegistryContext): SessionMethods {
  const service = new RegistryService(context);
  return (session) => service.methods(session);
}

/** A lookup's bindings sorted by state, and the content they were read from. */
interface SortedBindings {
  stateChanges: number;
  localChanges: number;
  serving: Readonly<Binding>[];
  draining: Readonly<Binding>[];
  unhealthy: Readonly<Binding>[];
  /** Which of them are this node's local bindings (copies). */
  locals: Set<Readonly<Binding>>;
}

/** Names (with their query) whose sorted bindings are kept for lookups. */
const SORTED_CACHE_ENTRIES = 256;

class RegistryService {
  readonly #context: RegistryContext;
  readonly #rotation = new Map<string, number>();
  readonly #sortedCache = new Map<string, SortedBindings>();

  constructor(context: RegistryContext) {
    this.#context = context;
  }

  methods(session: RpcSession): Methods {
    const handlers: RegistryHandlers = {
      [REGISTRY_METHODS.bind]: (...args) => this.#bind(args),
      [REGISTRY_METHODS.unbind]: (...args) => this.#unbind(args),
      [REGISTRY_METHODS.setState]: (...args) => this.#setState(args),
      [REGISTRY_METHODS.lookup]: (...args) => this.#lookup(args),
      [REGISTRY_METHODS.list]: (...args) => this.#list(args),
      [REGISTRY_METHODS.watch]: (...args) => this.#watch(session, args),
      [REGISTRY_METHODS.unwatch]: (...args) => {
        const p = paramsObject(args, REGISTRY_METHODS.unwatch, "{ watchId }");
        if (typeof p.watchId !== "string") {
          throw invalid('"watchId" must be a string');
        }
        return {
          cancelled: this.#context.watches.unwatch(session, p.watchId),
        };
      },
      [REGISTRY_METHODS.status]: () => this.#context.status(),
      [REGISTRY_METHODS.leaderTransfer]: (...args) =>
        this.#leaderTransfer(args),
      [REGISTRY_METHODS.memberList]: () => this.#memberList(),
      [REGISTRY_METHODS.memberAdd]: (...args) => this.#memberAdd(args),
      [REGISTRY_METHODS.memberPromote]: (...args) =>
        this.#memberChange(args, REGISTRY_METHODS.memberPromote, "promote"),
      [REGISTRY_METHODS.memberRemove]: (...args) =>
        this.#memberChange(args, REGISTRY_METHODS.memberRemove, "remove"),
      [REGISTRY_METHODS.leaseGrant]: (...args) => this.#grant(args),
      [REGISTRY_METHODS.leaseKeepAlive]: (...args) => this.#keepAlive(args),
      [REGISTRY_METHODS.leaseRevoke]: (...args) => this.#revoke(args),
      [REGISTRY_METHODS.leaseTimeToLive]: (...args) => this.#timeToLive(args),
      [REGISTRY_METHODS.leaseList]: () => {
        this.#requireLeaderReady();
        return {
          leases: this.#context.state.leases().map(({ id }) =>
            this.#leaseInfo(id)!
          ),
        };
      },
    };
    return handlers;
  }

  // --- writes --------------------------------------------------------------

  async #bind(args: unknown[]): Promise<BindResult> {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.bind,
      "{ name, endpoint: { url, id?, attrs?, weight?, zone?, check? }, leaseId?, grant?: { ttlMs }, scope? }",
      ["name", "endpoint"],
    );
    const { base, query } = requireName(p.name);
    const endpoint = requireEndpoint(p.endpoint, query);
    const leaseId = optionalLeaseId(p.leaseId, "leaseId");
    const scope = requireScope(p.scope);
    let grant: { id: string; ttlMs: number } | undefined;
    if (p.grant !== undefined) {
      if (typeof p.grant !== "object" || p.grant === null) {
        throw invalid('"grant" must be { ttlMs }');
      }
      const ttlMs = requireTtl(
        (p.grant as Record<string, unknown>).ttlMs,
        "grant.ttlMs",
        this.#context.minTtlMs,
      );
      grant = { id: newLeaseId(), ttlMs };
    }
    if (grant !== undefined && leaseId !== undefined) {
      throw invalid('give "leaseId" (an existing lease) or "grant", not both');
    }
    if (scope === "local") {
      return await this.#bindLocal(base, endpoint, leaseId, grant);
    }
    const command: Command = { op: "bind", name: base, endpoint };
    if (leaseId !== undefined) command.leaseId = leaseId;
    if (grant !== undefined) command.grant = grant;
    const value = await this.#propose(command);
    const binding = value.binding!;
    const result: BindResult = {
      revision: value.revision,
      name: base,
      endpoint: this.#endpoint(binding),
      leaseId: binding.leaseId,
    };
    if (value.lease !== undefined) result.ttlMs = value.lease.ttlMs;
    return result;
  }

  async #bindLocal(
    name: string,
    endpoint: ReturnType<typeof requireEndpoint>,
    leaseId: string | undefined,
    grant: { id: string; ttlMs: number } | undefined,
  ): Promise<BindResult> {
    if (grant !== undefined) {
      throw invalid(
        'a local binding cannot grant its lease in the same call; call lease.grant (on the leader) first, then bind with "leaseId" on this node',
      );
    }
    if (endpoint.check !== undefined) {
      throw invalid(
        "a local binding cannot have a health check: checks are run by the leader, which does not see local bindings",
      );
    }
    const { state, local } = this.#context;
    if (leaseId !== undefined) {
      await this.#barrier();
      if (state.lease(leaseId) === undefined) throw leaseNotFound(leaseId);
    }
    const binding: Binding = {
      name,
      id: endpoint.id,
      url: endpoint.url,
      attrs: endpoint.attrs ?? {},
      weight: endpoint.weight ?? 1,
      zone: endpoint.zone ?? null,
      leaseId: leaseId ?? null,
      createRevision: state.revision,
      modRevision: state.revision,
      state: "serving",
      check: null,
    };
    local.bind(binding);
    return {
      revision: state.revision,
      name,
      endpoint: localEndpoint(binding, this.#load(binding.leaseId)),
      leaseId: binding.leaseId,
    };
  }

  async #unbind(args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.unbind,
      "{ name, id, leaseId?, scope? }",
      ["name", "id"],
    );
    const { base } = requireName(p.name);
    const id = requireBase(p.id, "id");
    const leaseId = optionalLeaseId(p.leaseId, "leaseId");
    if (requireScope(p.scope) === "local") {
      const removed = this.#context.local.unbind(base, id, leaseId) ? 1 : 0;
      return { revision: this.#context.state.revision, removed };
    }
    const command: Command = { op: "unbind", name: base, id };
    if (leaseId !== undefined) command.leaseId = leaseId;
    const value = await this.#propose(command);
    return { revision: value.revision, removed: value.removed ?? 0 };
  }

  async #setState(args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.setState,
      '{ name, id, state: "serving" | "draining", leaseId?, scope? }',
    );
    const { base } = requireName(p.name);
    const id = requireBase(p.id, "id");
    if (p.state !== "serving" && p.state !== "draining") {
      throw invalid('"state" must be "serving" or "draining"');
    }
    const leaseId = optionalLeaseId(p.leaseId, "leaseId");
    if (requireScope(p.scope) === "local") {
      const changed = this.#context.local.setState(base, id, p.state, leaseId);
      if (changed === undefined) {
        throw invalid(
          `no local endpoint ${JSON.stringify(id)} is bound under ${
            JSON.stringify(base)
          } on this node`,
        );
      }
      return { revision: this.#context.state.revision };
    }
    const command: Command = { op: "setState", name: base, id, state: p.state };
    if (leaseId !== undefined) command.leaseId = leaseId;
    const value = await this.#propose(command);
    return { revision: value.revision };
  }

  // --- reads ---------------------------------------------------------------

  async #lookup(args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.lookup,
      "{ name, consistency?, rotate?, includeUnhealthy?, limit? }",
      ["name", "consistency"],
    );
    const { base, query } = requireName(p.name);
    const consistency = requireConsistency(p.consistency);
    const rotate = optionalBoolean(p.rotate, "rotate", true);
    const includeUnhealthy = optionalBoolean(
      p.includeUnhealthy,
      "includeUnhealthy",
      false,
    );
    const limit = optionalLimit(p.limit, "limit");
    if (consistency === "linearizable") await this.#barrier();
    const { state } = this.#context;
    const { serving, draining, unhealthy, locals } = this.#sorted(
      base,
      query,
      includeUnhealthy,
    );
    let shift = 0;
    if (rotate && serving.length > 1) {
      const turn = this.#rotation.get(base) ?? 0;
      this.#rotation.set(base, (turn + 1) % Number.MAX_SAFE_INTEGER);
      shift = turn % serving.length;
    }
    const total = serving.length + draining.length + unhealthy.length;
    const count = Math.min(limit ?? total, total);
    const picked: Readonly<Binding>[] = [];
    for (let i = 0; i < count; i++) {
      picked.push(
        i < serving.length
          ? serving[(shift + i) % serving.length]
          : i < serving.length + draining.length
          ? draining[i - serving.length]
          : unhealthy[i - serving.length - draining.length],
      );
    }
    return {
      name: base,
      query,
      endpoints: picked.map((binding) =>
        locals.has(binding)
          ? localEndpoint(binding, this.#load(binding.leaseId))
          : this.#endpoint(binding)
      ),
      total,
      revision: state.revision,
    };
  }

  async #list(args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.list,
      "{ prefix?, consistency?, endpoints? }",
    );
    const prefix = requirePrefix(p.prefix, "prefix");
    const consistency = requireConsistency(p.consistency);
    const withEndpoints = optionalBoolean(p.endpoints, "endpoints", false);
    if (consistency === "linearizable") await this.#barrier();
    const { state, local } = this.#context;
    const counts = new Map<string, number>();
    for (const { name, count } of state.names(prefix)) counts.set(name, count);
    for (const { name, count } of local.names(prefix)) {
      counts.set(name, (counts.get(name) ?? 0) + count);
    }
    const names: ListedName[] = [...counts.keys()].sort().map((name) => {
      const listed: ListedName = { name, count: counts.get(name)! };
      if (withEndpoints) listed.endpoints = this.#endpointsOf(name, {});
      return listed;
    });
    return { revision: state.revision, names };
  }

  #watch(session: RpcSession, args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.watch,
      "{ prefix, fromRevision?, watchId? }",
    );
    const prefix = requirePrefix(p.prefix, "prefix");
    const fromRevision = optionalRevision(p.fromRevision, "fromRevision");
    if (p.watchId !== undefined && typeof p.watchId !== "string") {
      throw invalid('"watchId" must be a string');
    }
    return this.#context.watches.watch(session, {
      prefix,
      fromRevision,
      watchId: p.watchId as string | undefined,
    });
  }

  /**
   * The bindings a lookup of `base?query` answers from, sorted by state in
   * binding order (global ones, then this node's local ones), not copied.
   * Sorted once per content: reused while neither the replicated state
   * nor the local area changed, so a lookup of 100 endpoints out of
   * 10,000 does not walk the 10,000 every time.
   */
  #sorted(
    base: string,
    query: Record<string, string>,
    includeUnhealthy: boolean,
  ): SortedBindings {
    const { state, local } = this.#context;
    const key = `${includeUnhealthy ? "u" : "s"} ${base} ${
      JSON.stringify(Object.entries(query).sort())
    }`;
    const cached = this.#sortedCache.get(key);
    if (
      cached !== undefined && cached.stateChanges === state.changes &&
      cached.localChanges === local.changes
    ) {
      return cached;
    }
    const localBindings = local.bindings(base, query);
    const localIds = new Set(localBindings.map((b) => b.id));
    const sorted: SortedBindings = {
      stateChanges: state.changes,
      localChanges: local.changes,
      serving: [],
      draining: [],
      unhealthy: [],
      locals: new Set(localBindings),
    };
    const sort = (binding: Readonly<Binding>) => {
      if (binding.state === "serving") sorted.serving.push(binding);
      else if (binding.state === "draining") sorted.draining.push(binding);
      else if (includeUnhealthy) sorted.unhealthy.push(binding);
    };
    for (const binding of state.matchingBindings(base, query)) {
      if (!localIds.has(binding.id)) sort(binding);
    }
    for (const binding of localBindings) sort(binding);
    this.#sortedCache.delete(key);
    this.#sortedCache.set(key, sorted);
    if (this.#sortedCache.size > SORTED_CACHE_ENTRIES) {
      this.#sortedCache.delete(this.#sortedCache.keys().next().value!);
    }
    return sorted;
  }

  /** Global then local endpoints of `name` matching `query`, in binding order. */
  #endpointsOf(name: string, query: Record<string, string>): Endpoint[] {
    const { state, local } = this.#context;
    const locals = local.bindings(name, query);
    const localIds = new Set(locals.map((b) => b.id));
    return [
      ...state.bindings(name, query).filter((b) => !localIds.has(b.id)).map(
        (b) => this.#endpoint(b),
      ),
      ...locals.map((b) => localEndpoint(b, this.#load(b.leaseId))),
    ];
  }

  #endpoint(binding: Binding): Endpoint {
    return toEndpoint(binding, this.#load(binding.leaseId));
  }

  #load(leaseId: string | null): number | null {
    return leaseId === null ? null : this.#context.leases.load(leaseId);
  }

  // --- leases --------------------------------------------------------------

  async #grant(args: unknown[]) {
    const p = paramsObject(args, REGISTRY_METHODS.leaseGrant, "{ ttlMs, id? }");
    const ttlMs = requireTtl(p.ttlMs, "ttlMs", this.#context.minTtlMs);
    const id = p.id === undefined ? newLeaseId() : requireLeaseId(p.id, "id");
    const value = await this.#propose({ op: "leaseGrant", id, ttlMs });
    return { id, ttlMs, revision: value.revision };
  }

  #keepAlive(args: unknown[]) {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.leaseKeepAlive,
      "{ id, load? }",
    );
    const id = requireLeaseId(p.id, "id");
    const load = optionalLoad(p.load);
    this.#requireLeaderReady();
    const lease = this.#context.state.lease(id);
    if (lease === undefined || this.#context.leases.isExpiring(id)) {
      throw leaseNotFound(id);
    }
    this.#context.leases.keepAlive(id, load);
    return { id, ttlMs: lease.ttlMs };
  }

  async #revoke(args: unknown[]) {
    const p = paramsObject(args, REGISTRY_METHODS.leaseRevoke, "{ id }");
    const id = requireLeaseId(p.id, "id");
    const value = await this.#propose({ op: "leaseRevoke", id });
    return { revision: value.revision, removed: value.removed ?? 0 };
  }

  #timeToLive(args: unknown[]): LeaseInfo {
    const p = paramsObject(args, REGISTRY_METHODS.leaseTimeToLive, "{ id }");
    const id = requireLeaseId(p.id, "id");
    this.#requireLeaderReady();
    const info = this.#leaseInfo(id);
    if (info === undefined) throw leaseNotFound(id);
    return info;
  }

  #leaseInfo(id: string): LeaseInfo | undefined {
    const lease = this.#context.state.lease(id);
    if (lease === undefined) return undefined;
    const bindings = lease.bindings.map((key) => {
      const newline = key.indexOf("\n");
      return { name: key.slice(0, newline), id: key.slice(newline + 1) };
    });
    return {
      id,
      ttlMs: lease.ttlMs,
      remainingMs: this.#context.leases.remainingMs(id, lease.ttlMs),
      bindings,
    };
  }

  // --- operations ----------------------------------------------------------

  /**
   * Hands leadership to `to` (default: the most up-to-date other voter) and
   * waits until another member leads (Raft dissertation §3.10).
   */
  async #leaderTransfer(args: unknown[]): Promise<LeaderTransferResult> {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.leaderTransfer,
      "{ to?, timeoutMs? }",
    );
    const members = this.#context.status().members.map((m) => m.id);
    if (
      p.to !== undefined &&
      (typeof p.to !== "string" || !members.includes(p.to))
    ) {
      throw invalid(
        `"to" must name a member of this registry (${
          members.join(", ")
        }), not ${JSON.stringify(p.to)}`,
      );
    }
    const to = p.to as string | undefined;
    const timeoutMs = p.timeoutMs === undefined
      ? 2 * this.#context.electionTimeoutMs
      : requireTimeout(p.timeoutMs);
    const raft = this.#context.raft;
    const before = raft.status;
    if (before.role !== "leader") {
      throw this.#rpcError(new NotLeaderError(before.leader), "write");
    }
    const started = performance.now();
    let leader: string;
    try {
      leader = await raft.transferLeadership({ target: to, timeoutMs });
    } catch (error) {
      if (error instanceof RangeError) {
        throw transferFailed(
          `Leader transfer failed: ${before.id} is the only voter of this registry; there is no other member to hand leadership to`,
          { reason: "noOtherVoter", target: to ?? null, leader: before.id },
        );
      }
      if (
        error instanceof RaftUnavailableError && raft.status.role === "leader"
      ) {
        throw transferFailed(
          `Leader transfer failed: no other member took over from ${before.id}${
            to === undefined ? "" : ` (to ${to})`
          } within ${timeoutMs} ms, so ${before.id} leads on; rafter member list shows how far behind each member is, rafter status whether it is reachable`,
          { reason: "timeout", target: to ?? null, leader: before.id },
        );
      }
      throw this.#rpcError(error, "write");
    }
    return {
      leader,
      leaderUrl: this.#context.clientUrlOf(leader),
      previousLeader: before.id,
      term: raft.status.term,
      tookMs: leader === before.id
        ? 0
        : Math.round(performance.now() - started),
    };
  }

  /**
   * Adds a member (dissertation §4.1), a learner by default (§4.2.1).
   * Adding a learner that is already one, with the same URLs, is answered
   * as done (so a `--join` that retries is harmless).
   */
  async #memberAdd(args: unknown[]): Promise<MemberListResult> {
    const p = paramsObject(
      args,
      REGISTRY_METHODS.memberAdd,
      "{ id, peerUrl, clientUrl?, learner?, promoteWhenCaughtUp? }",
    );
    const id = requireMemberId(p.id);
    const peerUrl = requireUrl(p.peerUrl, "peerUrl");
    const clientUrl = p.clientUrl === undefined
      ? undefined
      : requireUrl(p.clientUrl, "clientUrl");
    const learner = optionalBoolean(p.learner, "learner", true);
    const promote = optionalBoolean(
      p.promoteWhenCaughtUp,
      "promoteWhenCaughtUp",
      false,
    );
    this.#requireLeader();
    const config = this.#context.raft.configuration;
    const already = learner
      ? config.learners.includes(id)
      : config.voters.includes(id);
    if (
      already && config.peerUrls?.[id] === peerUrl &&
      (clientUrl === undefined || config.clientUrls?.[id] === clientUrl)
    ) {
      if (learner && promote) this.#context.promoteWhenCaughtUp(id);
      return this.#memberList();
    }
    const change: ConfChange = {
      type: learner ? "addLearner" : "addVoter",
      node: id,
      peerUrl,
      ...(clientUrl === undefined ? {} : { clientUrl }),
    };
    await this.#changeMembers(change);
    if (learner && promote) this.#context.promoteWhenCaughtUp(id);
    return this.#memberList();
  }

  /**
   * Promotes a learner, or removes a member. Removing the leader itself
   * first hands leadership over (dissertation §3.10) and answers NOT_LEADER
   * naming the new leader, which the client asks again; only when no voter
   * takes over does the leader remove itself (§4.2.2).
   */
  async #memberChange(
    args: unknown[],
    method: string,
    type: "promote" | "remove",
  ): Promise<MemberListResult> {
    const p = paramsObject(args, method, "{ id }", ["id"]);
    const id = requireMemberId(p.id);
    this.#requireLeader();
    const config = this.#context.raft.configuration;
    if (!isMember(config, id)) {
      throw membershipFailed(
        `Membership change failed: ${id} is not a member of this registry (members: ${
          [...config.voters, ...config.learners].join(", ")
        }); rafter member list shows them`,
        { reason: "unknownMember", member: id },
      );
    }
    const self = this.#context.raft.status.id;
    if (type === "promote" && config.learners.includes(id)) {
      // Dissertation §4.2.1: a learner that has not caught up would add a
      // voter the quorum must wait for (or, if it is not running, one that
      // may cost the cluster its quorum).
      const match = this.#context.raft.progress().get(id)?.match ?? 0;
      const commit = this.#context.raft.status.commitIndex;
      if (match === 0 || commit - match > PROMOTE_MAX_LAG) {
        throw membershipFailed(
          `Membership change failed: learner ${id} has not caught up (match index ${match}, commit index ${commit}); start it (or wait until rafter member list shows its lag at most ${PROMOTE_MAX_LAG}) and promote it then`,
          { reason: "notApplicable", member: id },
        );
      }
    }
    if (type === "remove" && id === self && config.voters.length > 1) {
      // Removing the leader: hand leadership to another voter first
      // (dissertation §3.10), so that the cluster does not wait an election
      // timeout once the removal commits (§4.2.2); the new leader then
      // removes this node (the client follows NOT_LEADER). If no one takes
      // over in time, this leader removes itself and steps down.
      let leader: string | null = null;
      try {
        leader = await this.#context.raft.transferLeadership({
          timeoutMs: 2 * this.#context.electionTimeoutMs,
        });
      } catch {
        leader = null;
      }
      if (leader !== null && leader !== self) {
        throw this.#rpcError(new NotLeaderError(leader), "write");
      }
      this.#requireLeader();
    }
    await this.#changeMembers({ type, node: id });
    if (type === "remove" && id !== self) this.#context.memberRemoved(id);
    if (type === "remove" && id === self) {
      // This node removed itself and steps down (§4.2.2): it can no longer
      // say how far the others are.
      return this.#memberListOf(this.#context.raft.configuration);
    }
    return this.#memberList();
  }

  /** Proposes `change` and waits for it to commit, mapping its errors. */
  async #changeMembers(change: ConfChange): Promise<Configuration> {
    const raft = this.#context.raft;
    try {
      // A new leader takes no change before an entry of its term commits
      // (within a round trip): wait for that here, up to an election
      // timeout, rather than answer "retry".
      const deadline = performance.now() + this.#context.electionTimeoutMs;
      for (let attempt = 0;; attempt++) {
        try {
          return await raft.proposeConfChange(change, {
            timeoutMs: this.#context.writeTimeoutMs ?? 3000,
          });
        } catch (error) {
          if (
            !(error instanceof ConfChangeError) ||
            !/has not yet committed/.test(error.message) ||
            performance.now() >= deadline || attempt >= 100
          ) {
            throw error;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    } catch (error) {
      if (error instanceof ConfChangeError) {
        // One change at a time (§4.1), and none before the leader's first
        // entry commits: both pass within a round trip or two.
        if (/not committed yet|has not yet committed/.test(error.message)) {
          throw unavailable(
            `Unavailable: ${error.message}`,
            this.#context.electionTimeoutMs,
          );
        }
        throw membershipFailed(
          `Membership change failed: ${error.message}`,
          { reason: "notApplicable", member: change.node },
        );
      }
      throw this.#rpcError(error, "write");
    }
  }

  #requireLeader(): void {
    const raft = this.#context.raft.status;
    if (raft.role !== "leader") {
      throw this.#rpcError(new NotLeaderError(raft.leader), "write");
    }
  }

  /** Every member as the leader sees it: role, kind, match index, lag. */
  #memberList(): MemberListResult {
    const raft = this.#context.raft.status;
    if (raft.role !== "leader") {
      throw this.#rpcError(new NotLeaderError(raft.leader), "read");
    }
    return this.#memberListOf(this.#context.raft.configuration);
  }

  /** The members of `config`, with the leader's replication progress. */
  #memberListOf(config: Configuration): MemberListResult {
    const raft = this.#context.raft.status;
    const progress = this.#context.raft.progress();
    const status = this.#context.status();
    const members = status.members.filter((m) => isMember(config, m.id)).map((
      m,
    ): MemberInfo => {
      const known = progress.get(m.id);
      const matchIndex = m.self
        ? raft.lastIndex
        : known === undefined || known.match === 0
        ? null
        : known.match;
      return {
        id: m.id,
        peerUrl: m.peerUrl,
        clientUrl: m.clientUrl,
        role: m.self && raft.role === "leader" ? "leader" : "follower",
        kind: config.learners.includes(m.id) ? "learner" : "voter",
        matchIndex,
        lag: matchIndex === null
          ? null
          : Math.max(0, raft.lastIndex - matchIndex),
        reachable: m.reachable,
        lastHeardMsAgo: m.lastHeardMsAgo,
      };
    }).sort((a, b) => a.id.localeCompare(b.id));
    return {
      clusterId: this.#context.clusterId,
      leader: raft.leader ?? raft.id,
      term: raft.term,
      lastIndex: raft.lastIndex,
      commitIndex: raft.commitIndex,
      members,
    };
  }

  // --- consensus -----------------------------------------------------------

  /**
   * Proposes `command` and waits for it to be applied. A write that
   * reaches a leader handing leadership over (Raft dissertation §3.10) is
   * held until the hand-over ends, for up to an election timeout: then it
   * is proposed again, so it commits here if the transfer was abandoned, or
   * is answered NOT_LEADER naming the new leader once one leads. (Answered
   * at once, the client would be sent to the transfer's target before it
   * leads, bounce between the two, and back off.) The wait counts
   * against the write's timeout.
   */
  async #propose(command: Command): Promise<CommandValue> {
    const { raft, electionTimeoutMs } = this.#context;
    const data = encodeCommand(command);
    const writeDeadline = performance.now() +
      (this.#context.writeTimeoutMs ?? 3000);
    const deadline = Math.min(
      performance.now() + electionTimeoutMs,
      writeDeadline,
    );
    let handingOver = false;
    let result: ApplyResult | undefined;
    for (let attempt = 0; result === undefined && attempt < 1_000; attempt++) {
      try {
        result = await raft.propose(data, {
          timeoutMs: Math.max(1, Math.round(writeDeadline - performance.now())),
        });
      } catch (error) {
        // Between the old leader stepping down and the new one's first
        // append, this node knows no leader: wait on, as for the transfer.
        const waiting = error instanceof LeadershipTransferError ||
          (handingOver && error instanceof NotLeaderError &&
            error.leader === null);
        const left = deadline - performance.now();
        if (!waiting || left <= 0) throw this.#rpcError(error, "write");
        handingOver = true;
        // Woken by the step-down and by the new leader's first message; a
        // transfer the core abandons changes no soft state, so look again
        // every tenth of an election timeout.
        await this.#context.nextSoftState(
          Math.min(left, electionTimeoutMs / 10),
        );
      }
    }
    if (result === undefined) {
      throw unavailable(
        "Unavailable: leadership is changing hands; retry shortly",
        electionTimeoutMs / 10,
      );
    }
    if (!result.ok) {
      const { code, message, data } = result.error;
      throw new RpcError(
        code,
        code === -32602 ? `Invalid params: ${message}` : message,
        data,
      );
    }
    return result.value;
  }

  async #barrier(): Promise<void> {
    try {
      await this.#context.raft.readBarrier({
        timeoutMs: this.#context.readTimeoutMs ?? 2000,
      });
    } catch (error) {
      throw this.#rpcError(error, "read");
    }
  }

  /** NOT_LEADER on a follower, UNAVAILABLE on a leader still catching up. */
  #requireLeaderReady(): void {
    const status = this.#context.raft.status;
    if (status.role !== "leader") {
      throw this.#rpcError(new NotLeaderError(status.leader), "write");
    }
    if (!this.#context.leaderReady()) {
      throw unavailable(
        "Unavailable: this node was just elected leader and is applying the log; retry shortly",
        this.#context.electionTimeoutMs / 10,
      );
    }
  }

  #rpcError(error: unknown, kind: "write" | "read"): unknown {
    const retryAfterMs = this.#context.electionTimeoutMs;
    if (error instanceof NotLeaderError) {
      if (error.leader === null) {
        const problem = this.#context.quorumProblem?.() ?? null;
        return unavailable(
          problem === null
            ? "Unavailable: the registry is electing a leader; retry shortly"
            : `Unavailable: no quorum: ${problem}`,
          retryAfterMs,
        );
      }
      const data: NotLeaderData = {
        leaderId: error.leader,
        leaderUrl: this.#context.clientUrlOf(error.leader),
      };
      return new RpcError(
        NOT_LEADER,
        `Not leader: node ${this.#context.raft.status.id} is a follower; send writes to the leader ${error.leader} at ${
          data.leaderUrl ?? "(unknown URL)"
        }`,
        data,
      );
    }
    if (error instanceof RaftUnavailableError) {
      const hint = kind === "read"
        ? ', or pass consistency: "serializable" for a possibly stale answer'
        : "";
      const problem = this.#context.quorumProblem?.() ?? null;
      return unavailable(
        `Unavailable: ${error.message}${hint}${
          problem === null ? "" : ` (no quorum: ${problem})`
        }`,
        retryAfterMs,
      );
    }
    return error;
  }
}

function unavailable(message: string, retryAfterMs: number): RpcError {
  const data: UnavailableData = { retryAfterMs: Math.round(retryAfterMs) };
  return new RpcError(UNAVAILABLE, message, data);
}

function membershipFailed(
  message: string,
  data: MembershipChangeFailedData,
): RpcError {
  return new RpcError(MEMBERSHIP_CHANGE_FAILED, message, data);
}

/** A member id: non-empty, at most 64 characters, no `|`. */
function requireMemberId(value: unknown): string {
  if (
    typeof value !== "string" || value.trim() === "" || value.includes("|") ||
    value.length > 64
  ) {
    throw invalid(
      `"id" must be a member id (a non-empty string of at most 64 characters, without "|"), not ${
        JSON.stringify(value)
      }`,
    );
  }
  return value;
}

/** A `tcp://host:port` URL, normalised. */
function requireUrl(value: unknown, field: string): string {
  try {
    if (typeof value !== "string") throw new Error("not a string");
    return formatTcpUrl(parseTcpUrl(value));
  } catch (error) {
    throw invalid(
      `"${field}" must be a tcp://host:port URL, not ${
        JSON.stringify(value)
      } (${(error as Error).message})`,
    );
  }
}

function transferFailed(
  message: string,
  data: LeaderTransferFailedData,
): RpcError {
  return new RpcError(LEADER_TRANSFER_FAILED, message, data);
}

/** Largest `timeoutMs` of a leader transfer, ms. */
const MAX_TRANSFER_TIMEOUT_MS = 60_000;

function requireTimeout(value: unknown): number {
  if (
    typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 ||
    value > MAX_TRANSFER_TIMEOUT_MS
  ) {
    throw invalid(
      `"timeoutMs" must be an integer number of ms from 1 to ${MAX_TRANSFER_TIMEOUT_MS}, not ${
        JSON.stringify(value)
      }`,
    );
  }
  return value;
}

function leaseNotFound(leaseId: string): RpcError {
  return new RpcError(
    LEASE_NOT_FOUND,
    `Lease not found: lease ${leaseId} does not exist (never granted, revoked, or expired); grant a new lease and bind again`,
    { leaseId },
  );
}

/** A random lease id: 16 hex digits (64 bits). */
function newLeaseId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
