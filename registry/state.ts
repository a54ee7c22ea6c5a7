/**
 * The registry state machine: service name → bindings, leases, the
 * revision, and a window of recent changes for watches. It changes only by
 * commands applied from the Raft log, so every replica holds the same state
 * at the same log index; a snapshot of it, restored and fed the rest of the
 * log, gives the same state as the whole log.
 *
 * Nothing here reads a clock: lease timing is the leader's business
 * (`lease_keeper.ts`); an expiry reaches the state as a command.
 *
 * @module
 */

import {
  type Attributes,
  DEFAULT_HEALTH_CHECK,
  type DeleteReason,
  type Endpoint,
  type EndpointState,
  type HealthCheck,
  ID_IN_USE,
  type IdInUseData,
  LEASE_NOT_FOUND,
  matchesQuery,
  type WatchEvent,
} from "../protocol/registry.ts";
import {
  CHECK_KINDS,
  MAX_TTL_MS,
  SETTABLE_STATES,
} from "../protocol/registry_params.ts";
import {
  BOOTSTRAP_TOKEN_NAME,
  digestsEqual,
  hashToken,
  MAX_TOKEN_NAME_LENGTH,
  parsePermission,
  type Permission,
  tokenIdOf,
} from "../protocol/auth.ts";
import {
  LIMIT_EXCEEDED,
  type LimitExceededData,
  PERMISSION_DENIED,
  type PermissionDeniedData,
} from "../rpc/errors.ts";

/** The fields of an endpoint a bind command carries (validated by the service). */
export interface EndpointRecord {
  /** Instance id. */
  id: string;
  /** `tcp://host:port`. */
  url: string;
  /** Attributes lookups can match. @default {} */
  attrs?: Attributes;
  /** Relative share of calls for weighted distributors. @default 1 */
  weight?: number;
  /** Failure zone or locality. @default null */
  zone?: string | null;
  /** Active health check. @default null */
  check?: HealthCheck | null;
}

/**
 * A token as the replicated state keeps it: its public id, label, the
 * SHA-256 hash of its text (never the text), permissions and creation time
 * (the proposing leader's clock).
 */
export interface TokenRecord {
  /** Public id, 16 hex digits. */
  tokenId: string;
  /** Label given at creation. */
  name: string;
  /** SHA-256 of the token's text, lowercase hex. */
  hash: string;
  /** Normalized permission strings. */
  permissions: Permission[];
  /** Creation time, ms since the epoch (the proposer's clock). */
  createdAt: number;
}

/**
 * A command as it is stored in a Raft log entry (JSON).
 *
 * Ownership (auth): `owner` is the token id recorded on what the command
 * creates (a binding, a lease); `guard` is the token id the command acts
 * for, checked at apply time against the owner of what it touches (an
 * existing binding, the lease it binds with or revokes), so that the check
 * and the change are one step on every replica. No `guard` (auth off, or
 * an admin) checks nothing: entries an earlier version wrote apply as
 * before.
 */
export type Command =
  | {
    op: "bind";
    name: string;
    endpoint: EndpointRecord;
    leaseId?: string;
    /** Grant this lease in the same step and attach the binding to it. */
    grant?: { id: string; ttlMs: number };
    /** Token id recorded as the binding's (and a granted lease's) owner. */
    owner?: string;
    /** Token id that must own the binding it replaces and the lease. */
    guard?: string;
    /** Most bindings the lease may carry (the leader's setting). */
    maxLeaseBindings?: number;
    /**
     * Refuse the bind (ID_IN_USE) when another live lease holds the id
     * at another url (see {@link idInUse}). The service sets it on every
     * bind; an entry an earlier version wrote has none and replaces the
     * binding as it did then, so its log replays to the same state.
     */
    exclusiveId?: boolean;
  }
  | {
    op: "unbind";
    name: string;
    id: string;
    leaseId?: string;
    guard?: string;
  }
  | {
    op: "setState";
    name: string;
    id: string;
    state: "serving" | "draining";
    leaseId?: string;
    guard?: string;
  }
  | {
    op: "health";
    name: string;
    id: string;
    /** The binding instance the probe result is about. */
    createRevision: number;
    healthy: boolean;
  }
  | { op: "leaseGrant"; id: string; ttlMs: number; owner?: string }
  | { op: "leaseRevoke"; id: string; guard?: string }
  | { op: "leaseExpire"; ids: string[] }
  | { op: "tokenCreate"; token: TokenRecord; maxTokens?: number }
  | { op: "tokenRevoke"; tokenId: string }
  | { op: "authSet"; enabled: boolean }
  | {
    /**
     * The first leader's bootstrap admin token: applied only while the
     * state is not bootstrapped (a second leader's proposal changes
     * nothing).
     */
    op: "authBootstrap";
    tokenId: string;
    hash: string;
    enable: boolean;
    createdAt: number;
  };

/** Encodes a command as log entry data. */
export function encodeCommand(command: Command): string {
  return JSON.stringify(command);
}

/**
 * A binding as the state stores it: the name it is bound under, and the
 * endpoint without its volatile load.
 */
export interface Binding extends Omit<Endpoint, "load" | "scope"> {
  /** The base name it is bound under. */
  name: string;
  /** The token id that bound it (auth); absent when bound anonymously. */
  owner?: string;
}

/** An error a command can end with, identically on every replica. */
export interface CommandError {
  /** JSON-RPC code: -32602 for a command that makes no sense, or a registry code. */
  code: number;
  /** What was wrong and what to do. */
  message: string;
  /** Structured detail (e.g. `{ leaseId }`). */
  data?: unknown;
}

/** What applying one entry returned to its proposer. */
export type ApplyResult =
  | { ok: true; value: CommandValue }
  | { ok: false; error: CommandError };

/** The value of a successful command. */
export interface CommandValue {
  /** Revision after the entry (unchanged when it changed no binding). */
  revision: number;
  /** bind, setState, health: the binding after the command. */
  binding?: Binding;
  /** unbind, lease revoke/expire: bindings removed. */
  removed?: number;
  /** bind with grant, leaseGrant: the lease granted. */
  lease?: { id: string; ttlMs: number };
  /** tokenCreate: the token made; authBootstrap: the bootstrap token, when applied. */
  token?: TokenRecord;
  /** tokenRevoke: whether the token existed. */
  revoked?: boolean;
}

/** The observable effect of one applied entry. */
export interface StateChange {
  /** Revision after the entry. */
  revision: number;
  /** Binding events of the entry, all at `revision`; empty when none. */
  events: WatchEvent[];
  /** Leases created by the entry, with their TTLs. */
  granted: { id: string; ttlMs: number }[];
  /** Leases that ended with the entry (revoked or expired). */
  removed: string[];
}

/** What {@link RegistryState.apply} returns. */
export interface ApplyOutcome {
  /** The proposer's answer. */
  result: ApplyResult;
  /** The change, or null when the entry changed nothing. */
  change: StateChange | null;
}

/** A lease in the replicated state. */
export interface LeaseRecord {
  /** Lease id. */
  id: string;
  /** Time to live, ms. */
  ttlMs: number;
  /** Keys (`name\nid`) of the global bindings attached to it, in attach order. */
  bindings: string[];
  /** The token id that granted it (auth); absent when granted anonymously. */
  owner?: string;
}

/** The events of one revision, kept for watches. */
export interface HistoryItem {
  /** The revision. */
  revision: number;
  /** Its events. */
  events: WatchEvent[];
}

/** Settings of a {@link RegistryState}. */
export interface RegistryStateOptions {
  /**
   * Most events kept for watches to resume from; older revisions are
   * dropped whole (the newest revision is always kept). Part of the
   * deterministic state: every replica must use the same value.
   * @default 10_000
   */
  historyEvents?: number;
}

/** A snapshot of the state: JSON-serializable, a deterministic function of the applied log. */
export interface RegistrySnapshot {
  /** Format version. */
  version: 1;
  /** Revision of the state. */
  revision: number;
  /** Oldest revision whose events are kept. */
  compactRevision: number;
  /** Every name's bindings, in binding order. */
  bindings: Binding[];
  /** Every lease, in grant order, with its bindings (`[name, id]`) in attach order. */
  leases: {
    id: string;
    ttlMs: number;
    bindings: [string, string][];
    /** The granting token's id; absent when granted anonymously. */
    owner?: string;
  }[];
  /** Events of the kept revisions, oldest first. */
  history: HistoryItem[];
  /**
   * Access control: absent in snapshots of states that never saw an auth
   * command (and of versions before auth), which load with auth off.
   */
  auth?: AuthSnapshot;
}

/** The access-control part of a {@link RegistrySnapshot}. */
export interface AuthSnapshot {
  /** Whether auth is on (`registry.authEnable`). */
  enabled: boolean;
  /** Whether the bootstrap admin token was made. */
  bootstrapped: boolean;
  /** Every token, in creation order. */
  tokens: TokenRecord[];
}

/**
 * The bindings of every name, the leases, the revision (bumped once by each
 * entry that changes a binding, as etcd's store revision) and the history
 * window.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeCommand, RegistryState } from "./state.ts";
 * const state = new RegistryState();
 * state.apply(encodeCommand({
 *   op: "bind", name: "hello", endpoint: { id: "h1", url: "tcp://127.0.0.1:9001" },
 * }));
 * assert.equal(state.bindings("hello").length, 1);
 * assert.equal(state.revision, 1);
 * ```
 */
export class RegistryState {
  readonly #bindings = new Map<string, Map<string, Binding>>();
  readonly #leases = new Map<string, LeaseRecord>();
  #revision = 0;
  #changes = 0;
  #compactRevision = 1;
  /** Kept revisions are `#history[#historyStart..]`, oldest first. */
  #history: HistoryItem[] = [];
  #historyStart = 0;
  #historyEventCount = 0;
  readonly #historyEvents: number;
  readonly #tokens = new Map<string, TokenRecord>();
  #authEnabled = false;
  #bootstrapped = false;
  /** Whether any auth command was applied (the snapshot then has `auth`). */
  #authUsed = false;
  #authChanges = 0;
  #leasesExpired = 0;

  /**
   * Makes an empty state.
   *
   * @throws {RangeError} when `historyEvents` is not a positive integer.
   */
  constructor(options: RegistryStateOptions = {}) {
    this.#historyEvents = options.historyEvents ?? 10_000;
    if (!Number.isSafeInteger(this.#historyEvents) || this.#historyEvents < 1) {
      throw new RangeError(
        `historyEvents must be a positive integer, got ${this.#historyEvents}`,
      );
    }
  }

  /** Revision of the last change applied, 0 when nothing was ever bound. */
  get revision(): number {
    return this.#revision;
  }

  /**
   * Counts every change of content (each applied change, each snapshot
   * loaded): while it stays the same, so do the bindings, so an answer
   * built from them may be reused.
   */
  get changes(): number {
    return this.#changes;
  }

  /** Oldest revision whose events {@link eventsFrom} can still give. */
  get compactRevision(): number {
    return this.#compactRevision;
  }

  /** How many names have at least one global binding. */
  get nameCount(): number {
    return this.#bindings.size;
  }

  /** How many global bindings exist, under every name (counts on each call). */
  get bindingCount(): number {
    let count = 0;
    for (const bindings of this.#bindings.values()) count += bindings.size;
    return count;
  }

  /**
   * Leases this state saw expire (applied `leaseExpire` entries) since it
   * was made; a snapshot loaded later does not change it.
   */
  get leasesExpired(): number {
    return this.#leasesExpired;
  }

  /** How many leases exist. */
  get leaseCount(): number {
    return this.#leases.size;
  }

  /** Whether auth is on in the replicated state. */
  get authEnabled(): boolean {
    return this.#authEnabled;
  }

  /** Whether the bootstrap admin token was made. */
  get bootstrapped(): boolean {
    return this.#bootstrapped;
  }

  /**
   * Counts every change of access control (token made or revoked, auth
   * switched, snapshot loaded): when it moves, what a connection may see
   * may have changed.
   */
  get authChanges(): number {
    return this.#authChanges;
  }

  /** How many tokens exist. */
  get tokenCount(): number {
    return this.#tokens.size;
  }

  /** The token `tokenId`, if it exists (a copy). */
  token(tokenId: string): TokenRecord | undefined {
    const token = this.#tokens.get(tokenId);
    return token === undefined ? undefined : copyToken(token);
  }

  /**
   * The token a client presents (`rft_<tokenId>_<secret>`), when its id is
   * known and its secret hashes to the stored hash (a copy); else
   * undefined. The secret is hashed even for an unknown id.
   */
  async verifyToken(token: string): Promise<TokenRecord | undefined> {
    const tokenId = tokenIdOf(token);
    const known = tokenId === null ? undefined : this.token(tokenId);
    const hash = await hashToken(token);
    return known !== undefined && digestsEqual(hash, known.hash)
      ? known
      : undefined;
  }

  /** Every token, in creation order (copies). */
  tokens(): TokenRecord[] {
    return [...this.#tokens.values()].map(copyToken);
  }

  /**
   * Applies one log entry's data. The empty string (a new leader's entry)
   * changes nothing. Data that is not a valid command also changes nothing
   * and yields an error result, identically on every replica, rather than
   * stopping the node: a command is checked whole before any of it is
   * applied.
   */
  apply(data: string): ApplyOutcome {
    if (data === "") return this.#unchanged();
    let command: unknown;
    try {
      command = JSON.parse(data);
    } catch {
      return fail(-32602, "log entry is not JSON");
    }
    const problem = commandProblem(command);
    if (problem !== null) return fail(-32602, problem);
    const checked = command as Command;
    switch (checked.op) {
      case "bind":
        return this.#bind(checked);
      case "unbind":
        return this.#unbind(checked);
      case "setState":
        return this.#setState(checked);
      case "health":
        return this.#health(checked);
      case "leaseGrant":
        return this.#grant(checked.id, checked.ttlMs, checked.owner);
      case "leaseRevoke": {
        const lease = this.#leases.get(checked.id);
        if (lease !== undefined && !owns(checked.guard, lease.owner)) {
          return notOwner("lease.revoke", `lease ${checked.id}`);
        }
        return this.#endLeases([checked.id], "leaseRevoked", true);
      }
      case "leaseExpire": {
        const outcome = this.#endLeases(checked.ids, "leaseExpired", false);
        this.#leasesExpired += outcome.change?.removed.length ?? 0;
        return outcome;
      }
      case "tokenCreate":
        return this.#tokenCreate(checked);
      case "tokenRevoke":
        return this.#tokenRevoke(checked.tokenId);
      case "authSet":
        return this.#authSet(checked.enabled);
      case "authBootstrap":
        return this.#authBootstrap(checked);
    }
  }

  /** The bindings of base name `name` in binding order (copies). */
  bindings(name: string, query: Attributes = {}): Binding[] {
    const bound = this.#bindings.get(name);
    if (bound === undefined) return [];
    const result: Binding[] = [];
    for (const binding of bound.values()) {
      if (matchesQuery(binding.attrs, query)) result.push(copyBinding(binding));
    }
    return result;
  }

  /**
   * The bindings of `name` matching `query`, in binding order, not copied:
   * for an answer built from a part of them (a lookup's `limit`). Read
   * them; never change them or keep them past the current turn.
   */
  matchingBindings(
    name: string,
    query: Attributes = {},
  ): readonly Readonly<Binding>[] {
    const bound = this.#bindings.get(name);
    if (bound === undefined) return [];
    const result: Binding[] = [];
    for (const binding of bound.values()) {
      if (matchesQuery(binding.attrs, query)) result.push(binding);
    }
    return result;
  }

  /** The binding `id` of `name`, if any (a copy). */
  binding(name: string, id: string): Binding | undefined {
    const binding = this.#bindings.get(name)?.get(id);
    return binding === undefined ? undefined : copyBinding(binding);
  }

  /** Names with at least one binding that start with `prefix`, sorted, with their counts. */
  names(prefix = ""): { name: string; count: number }[] {
    const names: { name: string; count: number }[] = [];
    for (const [name, bound] of this.#bindings) {
      if (name.startsWith(prefix)) names.push({ name, count: bound.size });
    }
    return names.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }

  /** Every binding that has a health check (for the leader's checker). */
  checkedBindings(): Binding[] {
    const result: Binding[] = [];
    for (const bound of this.#bindings.values()) {
      for (const binding of bound.values()) {
        if (binding.check !== null) result.push(copyBinding(binding));
      }
    }
    return result;
  }

  /** The lease `id`, if it exists (a copy). */
  lease(id: string): LeaseRecord | undefined {
    const lease = this.#leases.get(id);
    return lease === undefined
      ? undefined
      : { ...lease, bindings: [...lease.bindings] };
  }

  /** Every lease's id and TTL (and owner, if any), in grant order. */
  leases(): { id: string; ttlMs: number; owner?: string }[] {
    return [...this.#leases.values()].map(({ id, ttlMs, owner }) =>
      owner === undefined ? { id, ttlMs } : { id, ttlMs, owner }
    );
  }

  /**
   * The kept events of revisions `fromRevision` and later under `prefix`,
   * grouped by revision, oldest first; revisions with no matching event
   * are left out.
   *
   * @returns null when `fromRevision` is older than {@link compactRevision}
   * (those events are gone: list, then watch from the list's revision + 1).
   */
  eventsFrom(fromRevision: number, prefix = ""): HistoryItem[] | null {
    if (fromRevision < this.#compactRevision) return null;
    const result: HistoryItem[] = [];
    for (
      let i = this.#firstHistoryIndexAt(fromRevision);
      i < this.#history.length;
      i++
    ) {
      const item = this.#history[i];
      const events = prefix === ""
        ? item.events
        : item.events.filter((event) => event.name.startsWith(prefix));
      if (events.length > 0) {
        result.push({ revision: item.revision, events: events.map(copyEvent) });
      }
    }
    return result;
  }

  /** The deterministic state as plain data (a copy). */
  snapshot(): RegistrySnapshot {
    return this.#snapshotOf(copyBinding, copyEvent);
  }

  /**
   * {@link snapshot}'s text (JSON), written from the live bindings and
   * events without copying them first: the snapshot a Raft node takes
   * every few thousand entries, where a copy of 100k bindings would hold
   * the event loop some 50 ms longer.
   */
  snapshotJson(
    wrap: (state: RegistrySnapshot) => unknown = (state) => state,
  ): string {
    return JSON.stringify(wrap(this.#snapshotOf((b) => b, (e) => e)));
  }

  #snapshotOf(
    binding: (binding: Binding) => Binding,
    event: (event: WatchEvent) => WatchEvent,
  ): RegistrySnapshot {
    const bindings: Binding[] = [];
    for (const bound of this.#bindings.values()) {
      for (const b of bound.values()) bindings.push(binding(b));
    }
    return {
      version: 1,
      revision: this.#revision,
      compactRevision: this.#compactRevision,
      bindings,
      leases: [...this.#leases.values()].map((lease) => {
        const taken: RegistrySnapshot["leases"][number] = {
          id: lease.id,
          ttlMs: lease.ttlMs,
          bindings: lease.bindings.map(splitKey),
        };
        if (lease.owner !== undefined) taken.owner = lease.owner;
        return taken;
      }),
      history: this.#history.slice(this.#historyStart).map((item) => ({
        revision: item.revision,
        events: item.events.map(event),
      })),
      ...(this.#authUsed
        ? {
          auth: {
            enabled: this.#authEnabled,
            bootstrapped: this.#bootstrapped,
            tokens: [...this.#tokens.values()].map(copyToken),
          },
        }
        : {}),
    };
  }

  /**
   * Rebuilds a state from {@link snapshot}'s output (which may have gone
   * through JSON).
   *
   * @throws {TypeError} when the snapshot is not of this format (the message
   * names what is wrong).
   */
  static restore(
    snapshot: RegistrySnapshot,
    options: RegistryStateOptions = {},
  ): RegistryState {
    const state = new RegistryState(options);
    state.load(snapshot);
    return state;
  }

  /**
   * Replaces this state's content, in place, with {@link snapshot}'s output
   * (a Raft node installing a snapshot from its leader, Raft paper §7:
   * everything that holds this state object sees the new content).
   *
   * @throws {TypeError} when the snapshot is not of this format (the message
   * names what is wrong); the state is then unchanged.
   */
  load(snapshot: RegistrySnapshot): void {
    const problem = snapshotProblem(snapshot);
    if (problem !== null) {
      throw new TypeError(`not a registry snapshot: ${problem}`);
    }
    // deno-lint-ignore no-this-alias
    const state = this;
    state.#bindings.clear();
    state.#leases.clear();
    state.#history = [];
    state.#historyStart = 0;
    state.#historyEventCount = 0;
    state.#revision = snapshot.revision;
    state.#changes++;
    state.#compactRevision = snapshot.compactRevision;
    state.#tokens.clear();
    state.#authChanges++;
    state.#authUsed = snapshot.auth !== undefined;
    state.#authEnabled = snapshot.auth?.enabled ?? false;
    state.#bootstrapped = snapshot.auth?.bootstrapped ?? false;
    for (const token of snapshot.auth?.tokens ?? []) {
      state.#tokens.set(token.tokenId, copyToken(token));
    }
    for (const lease of snapshot.leases) {
      const record: LeaseRecord = {
        id: lease.id,
        ttlMs: lease.ttlMs,
        bindings: lease.bindings.map(([name, id]) => keyOf(name, id)),
      };
      if (typeof lease.owner === "string") record.owner = lease.owner;
      state.#leases.set(lease.id, record);
    }
    for (const binding of snapshot.bindings) {
      let bound = state.#bindings.get(binding.name);
      if (bound === undefined) {
        bound = new Map();
        state.#bindings.set(binding.name, bound);
      }
      bound.set(binding.id, copyBinding(binding));
    }
    for (const item of snapshot.history) {
      state.#history.push({
        revision: item.revision,
        events: item.events.map(copyEvent),
      });
      state.#historyEventCount += item.events.length;
    }
    state.#trimHistory();
  }

  // --- commands ------------------------------------------------------------

  #bind(command: Extract<Command, { op: "bind" }>): ApplyOutcome {
    const granted: { id: string; ttlMs: number }[] = [];
    let leaseId: string | null = command.leaseId ?? null;
    if (command.grant !== undefined) {
      if (this.#leases.has(command.grant.id)) {
        return fail(
          -32602,
          `lease ${command.grant.id} exists already; grant another id`,
        );
      }
      leaseId = command.grant.id;
    } else if (leaseId !== null && !this.#leases.has(leaseId)) {
      return leaseNotFound(leaseId);
    }
    const { name } = command;
    const spec = command.endpoint;
    const bound = this.#bindings.get(name);
    const previous = bound?.get(spec.id);
    if (previous !== undefined && !owns(command.guard, previous.owner)) {
      return notOwner(
        "registry.bind",
        `endpoint ${JSON.stringify(spec.id)} of ${JSON.stringify(name)}`,
        name,
      );
    }
    if (command.exclusiveId === true && previous !== undefined) {
      const held = previous.leaseId === null
        ? undefined
        : this.#leases.get(previous.leaseId);
      const refusal = idInUse(previous, leaseId, spec.url, held?.ttlMs);
      if (refusal !== null) {
        return { result: { ok: false, error: refusal }, change: null };
      }
    }
    if (command.leaseId !== undefined) {
      const lease = this.#leases.get(command.leaseId)!;
      if (!owns(command.guard, lease.owner)) {
        return notOwner("registry.bind", `lease ${command.leaseId}`, name);
      }
      const limit = command.maxLeaseBindings;
      const rebinding = previous?.leaseId === command.leaseId;
      if (limit !== undefined && !rebinding && lease.bindings.length >= limit) {
        const data: LimitExceededData = {
          limit: "maxBindingsPerLease",
          value: limit,
        };
        return fail(
          LIMIT_EXCEEDED,
          `Limit exceeded: lease ${command.leaseId} already carries ${lease.bindings.length} bindings, the most this registry allows (maxBindingsPerLease, --max-bindings-per-lease ${limit}); bind the rest with another lease`,
          data,
        );
      }
    }
    const next: Binding = {
      name,
      id: spec.id,
      url: spec.url,
      attrs: { ...(spec.attrs ?? {}) },
      weight: spec.weight ?? 1,
      zone: spec.zone ?? null,
      leaseId,
      createRevision: 0,
      modRevision: 0,
      state: "serving",
      check: spec.check === undefined || spec.check === null
        ? null
        : { ...spec.check },
    };
    if (command.owner !== undefined) next.owner = command.owner;
    if (command.grant !== undefined) {
      const record: LeaseRecord = {
        id: command.grant.id,
        ttlMs: command.grant.ttlMs,
        bindings: [],
      };
      if (command.owner !== undefined) record.owner = command.owner;
      this.#leases.set(command.grant.id, record);
      granted.push({ id: command.grant.id, ttlMs: command.grant.ttlMs });
    }
    const lease = command.grant === undefined
      ? undefined
      : { id: command.grant.id, ttlMs: command.grant.ttlMs };
    if (previous !== undefined && sameBinding(previous, next)) {
      return {
        result: ok({
          revision: this.#revision,
          binding: copyBinding(previous),
          lease,
        }),
        change: granted.length === 0
          ? null
          : { revision: this.#revision, events: [], granted, removed: [] },
      };
    }
    const revision = this.#revision + 1;
    // The same instance (same lease) keeps its creation revision; a new
    // lease means a new instance.
    next.createRevision = previous !== undefined &&
        previous.leaseId === next.leaseId
      ? previous.createRevision
      : revision;
    next.modRevision = revision;
    if (previous !== undefined && previous.leaseId !== null) {
      this.#detach(previous.leaseId, name, spec.id);
    }
    if (next.leaseId !== null) {
      this.#leases.get(next.leaseId)!.bindings.push(keyOf(name, spec.id));
    }
    if (bound === undefined) {
      this.#bindings.set(name, new Map([[spec.id, next]]));
    } else {
      bound.set(spec.id, next);
    }
    const events: WatchEvent[] = [{
      type: "put",
      name,
      endpoint: toEndpoint(next),
      revision,
    }];
    return this.#commit(events, granted, [], {
      revision,
      binding: copyBinding(next),
      lease,
    });
  }

  #unbind(command: Extract<Command, { op: "unbind" }>): ApplyOutcome {
    const binding = this.#bindings.get(command.name)?.get(command.id);
    if (binding !== undefined && !owns(command.guard, binding.owner)) {
      return notOwner(
        "registry.unbind",
        `endpoint ${JSON.stringify(command.id)} of ${
          JSON.stringify(command.name)
        }`,
        command.name,
      );
    }
    if (
      binding === undefined ||
      (command.leaseId !== undefined && binding.leaseId !== command.leaseId)
    ) {
      return {
        result: ok({ revision: this.#revision, removed: 0 }),
        change: null,
      };
    }
    const revision = this.#revision + 1;
    this.#remove(binding);
    return this.#commit(
      [deleteEvent(binding, revision, "unbound")],
      [],
      [],
      { revision, removed: 1 },
    );
  }

  #setState(command: Extract<Command, { op: "setState" }>): ApplyOutcome {
    const binding = this.#bindings.get(command.name)?.get(command.id);
    if (binding !== undefined && !owns(command.guard, binding.owner)) {
      return notOwner(
        "registry.setState",
        `endpoint ${JSON.stringify(command.id)} of ${
          JSON.stringify(command.name)
        }`,
        command.name,
      );
    }
    if (
      binding === undefined ||
      (command.leaseId !== undefined && binding.leaseId !== command.leaseId)
    ) {
      return fail(
        -32602,
        `no endpoint ${JSON.stringify(command.id)} is bound under ${
          JSON.stringify(command.name)
        }${
          command.leaseId === undefined ? "" : ` with lease ${command.leaseId}`
        }`,
      );
    }
    // Serving again after draining; an unhealthy endpoint stays unhealthy
    // until its checks pass, unless it drains.
    const state: EndpointState = command.state === "draining"
      ? "draining"
      : binding.state === "draining"
      ? "serving"
      : binding.state;
    return this.#changeState(binding, state);
  }

  #health(command: Extract<Command, { op: "health" }>): ApplyOutcome {
    const binding = this.#bindings.get(command.name)?.get(command.id);
    if (
      binding === undefined ||
      binding.createRevision !== command.createRevision ||
      binding.state === "draining"
    ) {
      return { result: ok({ revision: this.#revision }), change: null };
    }
    return this.#changeState(
      binding,
      command.healthy ? "serving" : "unhealthy",
    );
  }

  #changeState(binding: Binding, state: EndpointState): ApplyOutcome {
    if (binding.state === state) {
      return {
        result: ok({ revision: this.#revision, binding: copyBinding(binding) }),
        change: null,
      };
    }
    const revision = this.#revision + 1;
    binding.state = state;
    binding.modRevision = revision;
    return this.#commit(
      [{
        type: "put",
        name: binding.name,
        endpoint: toEndpoint(binding),
        revision,
      }],
      [],
      [],
      { revision, binding: copyBinding(binding) },
    );
  }

  #grant(id: string, ttlMs: number, owner: string | undefined): ApplyOutcome {
    if (this.#leases.has(id)) {
      return fail(-32602, `lease ${id} exists already; grant another id`);
    }
    const lease: LeaseRecord = { id, ttlMs, bindings: [] };
    if (owner !== undefined) lease.owner = owner;
    this.#leases.set(id, lease);
    return {
      result: ok({ revision: this.#revision, lease: { id, ttlMs } }),
      change: {
        revision: this.#revision,
        events: [],
        granted: [{ id, ttlMs }],
        removed: [],
      },
    };
  }

  #endLeases(
    ids: readonly string[],
    reason: DeleteReason,
    mustExist: boolean,
  ): ApplyOutcome {
    const leases = ids.map((id) => this.#leases.get(id)).filter((l) =>
      l !== undefined
    );
    if (mustExist && leases.length === 0) return leaseNotFound(ids[0]);
    const revision = this.#revision + 1;
    const events: WatchEvent[] = [];
    const removed: string[] = [];
    for (const lease of leases) {
      for (const key of lease.bindings) {
        const [name, id] = splitKey(key);
        const binding = this.#bindings.get(name)?.get(id);
        if (binding === undefined) continue;
        this.#removeBinding(binding);
        events.push(deleteEvent(binding, revision, reason));
      }
      this.#leases.delete(lease.id);
      removed.push(lease.id);
    }
    if (removed.length === 0) {
      return {
        result: ok({ revision: this.#revision, removed: 0 }),
        change: null,
      };
    }
    if (events.length === 0) {
      return {
        result: ok({ revision: this.#revision, removed: 0 }),
        change: { revision: this.#revision, events: [], granted: [], removed },
      };
    }
    return this.#commit(events, [], removed, {
      revision,
      removed: events.length,
    });
  }

  #tokenCreate(command: Extract<Command, { op: "tokenCreate" }>): ApplyOutcome {
    const { token, maxTokens } = command;
    if (this.#tokens.has(token.tokenId)) {
      return fail(
        -32602,
        `token ${token.tokenId} exists already; create another`,
      );
    }
    if (maxTokens !== undefined && this.#tokens.size >= maxTokens) {
      const data: LimitExceededData = { limit: "maxTokens", value: maxTokens };
      return fail(
        LIMIT_EXCEEDED,
        `Limit exceeded: the registry holds ${this.#tokens.size} tokens, the most allowed (maxTokens ${maxTokens}); revoke unused ones (rafter token list, rafter token revoke ID)`,
        data,
      );
    }
    this.#authUsed = true;
    this.#tokens.set(token.tokenId, copyToken(token));
    return this.#authChanged({ token: copyToken(token) });
  }

  #tokenRevoke(tokenId: string): ApplyOutcome {
    const token = this.#tokens.get(tokenId);
    if (token === undefined) return this.#authChanged({ revoked: false });
    const admins = [...this.#tokens.values()].filter((t) =>
      t.permissions.includes("admin")
    );
    if (
      this.#authEnabled && admins.length === 1 && admins[0] === token
    ) {
      return fail(
        -32602,
        `token ${tokenId} is the last admin token and auth is on: revoking it would lock every admin out; create another admin token first (rafter token create NAME admin), or turn auth off`,
      );
    }
    this.#tokens.delete(tokenId);
    return this.#authChanged({ revoked: true });
  }

  #authSet(enabled: boolean): ApplyOutcome {
    this.#authUsed = true;
    this.#authEnabled = enabled;
    return this.#authChanged({});
  }

  #authBootstrap(
    command: Extract<Command, { op: "authBootstrap" }>,
  ): ApplyOutcome {
    if (this.#bootstrapped) return this.#authChanged({});
    const token: TokenRecord = {
      tokenId: command.tokenId,
      name: BOOTSTRAP_TOKEN_NAME,
      hash: command.hash,
      permissions: ["admin"],
      createdAt: command.createdAt,
    };
    this.#authUsed = true;
    this.#bootstrapped = true;
    this.#tokens.set(token.tokenId, token);
    if (command.enable) this.#authEnabled = true;
    return this.#authChanged({ token: copyToken(token) });
  }

  /** The outcome of an auth command: no binding changed, no revision. */
  #authChanged(value: Omit<CommandValue, "revision">): ApplyOutcome {
    this.#authChanges++;
    return { result: ok({ revision: this.#revision, ...value }), change: null };
  }

  // --- helpers -------------------------------------------------------------

  #unchanged(): ApplyOutcome {
    return { result: ok({ revision: this.#revision }), change: null };
  }

  /** Bumps the revision, records the events, and builds the outcome. */
  #commit(
    events: WatchEvent[],
    granted: { id: string; ttlMs: number }[],
    removed: string[],
    value: CommandValue,
  ): ApplyOutcome {
    this.#revision = value.revision;
    this.#changes++;
    this.#history.push({ revision: value.revision, events });
    this.#historyEventCount += events.length;
    this.#trimHistory();
    return {
      result: ok(value),
      change: {
        revision: value.revision,
        events: events.map(copyEvent),
        granted,
        removed,
      },
    };
  }

  #trimHistory(): void {
    while (
      this.#history.length - this.#historyStart > 1 &&
      this.#historyEventCount > this.#historyEvents
    ) {
      const dropped = this.#history[this.#historyStart++];
      this.#historyEventCount -= dropped.events.length;
      this.#compactRevision = dropped.revision + 1;
    }
    // Drop the dead head now and then, not on every write.
    if (
      this.#historyStart > 1024 &&
      this.#historyStart * 2 > this.#history.length
    ) {
      this.#history = this.#history.slice(this.#historyStart);
      this.#historyStart = 0;
    }
  }

  /** Index of the first kept item with revision >= `revision` (binary search). */
  #firstHistoryIndexAt(revision: number): number {
    let low = this.#historyStart;
    let high = this.#history.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#history[middle].revision < revision) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  #remove(binding: Binding): void {
    if (binding.leaseId !== null) {
      this.#detach(binding.leaseId, binding.name, binding.id);
    }
    this.#removeBinding(binding);
  }

  #removeBinding(binding: Binding): void {
    const bound = this.#bindings.get(binding.name);
    bound?.delete(binding.id);
    if (bound?.size === 0) this.#bindings.delete(binding.name);
  }

  #detach(leaseId: string, name: string, id: string): void {
    const lease = this.#leases.get(leaseId);
    if (lease === undefined) return;
    const key = keyOf(name, id);
    lease.bindings = lease.bindings.filter((k) => k !== key);
  }
}

/** The endpoint shape of a binding (global, no load reported yet). */
export function toEndpoint(
  binding: Binding,
  load: number | null = null,
): Endpoint {
  return {
    id: binding.id,
    url: binding.url,
    attrs: { ...binding.attrs },
    weight: binding.weight,
    zone: binding.zone,
    leaseId: binding.leaseId,
    createRevision: binding.createRevision,
    modRevision: binding.modRevision,
    state: binding.state,
    load,
    scope: "global",
    check: binding.check === null ? null : { ...binding.check },
  };
}

function deleteEvent(
  binding: Binding,
  revision: number,
  reason: DeleteReason,
): WatchEvent {
  return {
    type: "delete",
    name: binding.name,
    endpoint: toEndpoint(binding),
    revision,
    reason,
  };
}

function keyOf(name: string, id: string): string {
  return `${name}\n${id}`;
}

function splitKey(key: string): [string, string] {
  const newline = key.indexOf("\n");
  return [key.slice(0, newline), key.slice(newline + 1)];
}

function ok(value: CommandValue): ApplyResult {
  return { ok: true, value };
}

function fail(code: number, message: string, data?: unknown): ApplyOutcome {
  const error: CommandError = { code, message };
  if (data !== undefined) error.data = data;
  return { result: { ok: false, error }, change: null };
}

/**
 * The ID_IN_USE refusal of a bind of `previous`'s (name, id) with lease
 * `leaseId` (null: none) at `url`, or null when the bind may replace it.
 *
 * The rule: a binding attached to a live lease belongs to the server that
 * keeps that lease alive. A bind with the same lease changes it (the same
 * server rebinding); a bind at the same url is the same server restarted
 * (it lost its lease, it listens where the old one did, so the old binding
 * can only point at it) and takes the binding over; any other bind is a
 * second server started with an id in use, and is refused, naming the
 * holder. A lease-less binding (`rafter bind` without a lease, a static
 * endpoint) has no live holder to protect and is replaced, as a put in
 * etcd replaces a key: an operator fixes a static entry by binding it
 * again. `ttlMs` is the holding lease's TTL (for the message), undefined
 * when the lease is gone (then nothing holds the id).
 */
export function idInUse(
  previous: Readonly<Binding>,
  leaseId: string | null,
  url: string,
  ttlMs: number | undefined,
): CommandError | null {
  if (
    previous.leaseId === null || ttlMs === undefined ||
    previous.leaseId === leaseId || previous.url === url
  ) {
    return null;
  }
  const data: IdInUseData = {
    name: previous.name,
    id: previous.id,
    leaseId: previous.leaseId,
    url: previous.url,
    ttlMs,
  };
  const seconds = Math.ceil(ttlMs / 1000);
  return {
    code: ID_IN_USE,
    message: `Id in use: endpoint ${JSON.stringify(previous.id)} of ${
      JSON.stringify(previous.name)
    } is held by another live server at ${previous.url} (lease ${previous.leaseId}); start this one with another id, stop the other server, or wait for its lease to expire (${seconds} s after its last keep-alive)`,
    data,
  };
}

function leaseNotFound(leaseId: string): ApplyOutcome {
  return fail(
    LEASE_NOT_FOUND,
    `Lease not found: lease ${leaseId} does not exist (never granted, revoked, or expired); grant a new lease and bind again`,
    { leaseId },
  );
}

/** Whether a command acting for `guard` may touch what `owner` owns. */
function owns(guard: string | undefined, owner: string | undefined): boolean {
  return guard === undefined || guard === owner;
}

/** PERMISSION_DENIED for a command on something another token owns. */
function notOwner(method: string, what: string, name?: string): ApplyOutcome {
  return {
    result: { ok: false, error: ownerDenied(method, what, name) },
    change: null,
  };
}

/**
 * The PERMISSION_DENIED error of `method` on `what` (`lease 1f…`, `endpoint
 * "b1" of "billing"`), which another token owns: only its owner or an admin
 * may change it (`data.permission` is `"admin"`, what another token needs).
 */
export function ownerDenied(
  method: string,
  what: string,
  name?: string,
): CommandError {
  const data: PermissionDeniedData = { method, permission: "admin" };
  if (name !== undefined) data.name = name;
  return {
    code: PERMISSION_DENIED,
    message:
      `Permission denied: ${method} on ${what}, which another token (or an anonymous client, before auth was on) made; only its owner or an admin token may change it`,
    data,
  };
}

function copyToken(token: TokenRecord): TokenRecord {
  return { ...token, permissions: [...token.permissions] };
}

function sameBinding(a: Binding, b: Binding): boolean {
  return a.url === b.url && a.leaseId === b.leaseId && a.weight === b.weight &&
    a.owner === b.owner &&
    a.zone === b.zone && a.state === "serving" &&
    JSON.stringify(sortedEntries(a.attrs)) ===
      JSON.stringify(sortedEntries(b.attrs)) &&
    JSON.stringify(a.check) === JSON.stringify(b.check);
}

function sortedEntries(attributes: Attributes): [string, string][] {
  return Object.entries(attributes).sort(([a], [b]) => a < b ? -1 : 1);
}

function copyBinding(binding: Binding): Binding {
  return {
    ...binding,
    attrs: { ...binding.attrs },
    check: binding.check === null ? null : { ...binding.check },
  };
}

function copyEvent(event: WatchEvent): WatchEvent {
  const copy: WatchEvent = {
    type: event.type,
    name: event.name,
    endpoint: {
      ...event.endpoint,
      attrs: { ...event.endpoint.attrs },
      check: event.endpoint.check === null ? null : { ...event.endpoint.check },
    },
    revision: event.revision,
  };
  if (event.reason !== undefined) copy.reason = event.reason;
  return copy;
}

// --- validation of commands (a corrupt or forged entry changes nothing) -----
//
// Commands are not params: they carry what the service made of the params
// (normalized endpoint records, server-chosen lease ids) and ops no client
// sends (health, leaseExpire), and every entry an earlier version wrote must
// still apply. So these guards check the shape a command needs to apply,
// with the enumerations and limits of the params declarations
// (protocol/registry_params.ts), not the params rules themselves.

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isText(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isTtl(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0 &&
    (value as number) <= MAX_TTL_MS;
}

function optional(
  record: Record<string, unknown>,
  key: string,
  check: (value: unknown) => boolean,
): boolean {
  return record[key] === undefined || check(record[key]);
}

function isAttributes(value: unknown): boolean {
  return isRecord(value) &&
    Object.values(value).every((item) => typeof item === "string");
}

function isCheck(value: unknown): boolean {
  return value === null || isRecord(value) &&
      CHECK_KINDS.includes(value.kind as HealthCheck["kind"]) &&
      isTtl(value.intervalMs) && isTtl(value.timeoutMs) &&
      Number.isSafeInteger(value.failuresBeforeUnhealthy) &&
      (value.failuresBeforeUnhealthy as number) >= 1;
}

function isEndpointRecord(value: unknown): boolean {
  return isRecord(value) && isText(value.id) && isText(value.url) &&
    optional(value, "attrs", isAttributes) &&
    optional(
      value,
      "weight",
      (w) => Number.isSafeInteger(w) && (w as number) >= 1,
    ) &&
    optional(value, "zone", (z) => z === null || isText(z)) &&
    optional(value, "check", isCheck);
}

/** Why `value` is not a valid {@link Command}, or null. */
function commandProblem(value: unknown): string | null {
  if (!isRecord(value)) return "a command must be a JSON object";
  const where = `registry command ${JSON.stringify(value).slice(0, 200)}`;
  const valid = (() => {
    switch (value.op) {
      case "bind":
        return isText(value.name) && isEndpointRecord(value.endpoint) &&
          optional(value, "leaseId", isText) &&
          optional(value, "owner", isText) &&
          optional(value, "guard", isText) &&
          optional(value, "maxLeaseBindings", isCount) &&
          optional(value, "exclusiveId", (e) => typeof e === "boolean") &&
          optional(
            value,
            "grant",
            (g) => isRecord(g) && isText(g.id) && isTtl(g.ttlMs),
          ) &&
          !(value.grant !== undefined && value.leaseId !== undefined);
      case "unbind":
        return isText(value.name) && isText(value.id) &&
          optional(value, "leaseId", isText) &&
          optional(value, "guard", isText);
      case "setState":
        return isText(value.name) && isText(value.id) &&
          SETTABLE_STATES.includes(value.state as "serving") &&
          optional(value, "leaseId", isText) &&
          optional(value, "guard", isText);
      case "health":
        return isText(value.name) && isText(value.id) &&
          isCount(value.createRevision) && typeof value.healthy === "boolean";
      case "leaseGrant":
        return isText(value.id) && isTtl(value.ttlMs) &&
          optional(value, "owner", isText);
      case "leaseRevoke":
        return isText(value.id) && optional(value, "guard", isText);
      case "leaseExpire":
        return Array.isArray(value.ids) && value.ids.length > 0 &&
          value.ids.every(isText);
      case "tokenCreate":
        return isToken(value.token) && optional(value, "maxTokens", isCount);
      case "tokenRevoke":
        return isText(value.tokenId);
      case "authSet":
        return typeof value.enabled === "boolean";
      case "authBootstrap":
        return isText(value.tokenId) && isText(value.hash) &&
          typeof value.enable === "boolean" && isCount(value.createdAt);
      default:
        return false;
    }
  })();
  return valid ? null : `unknown or malformed ${where}`;
}

function isToken(value: unknown): value is TokenRecord {
  return isRecord(value) && isText(value.tokenId) && isText(value.name) &&
    (value.name as string).length <= MAX_TOKEN_NAME_LENGTH &&
    isText(value.hash) && isCount(value.createdAt) &&
    Array.isArray(value.permissions) && value.permissions.length > 0 &&
    value.permissions.every((permission) => {
      if (typeof permission !== "string") return false;
      try {
        parsePermission(permission);
        return true;
      } catch {
        return false;
      }
    });
}

/**
 * Why `value` is not a {@link RegistrySnapshot} that `load` takes, or
 * null when it is one.
 */
export function snapshotProblem(value: unknown): string | null {
  if (!isRecord(value) || value.version !== 1) return "version is not 1";
  if (!isCount(value.revision) || !isCount(value.compactRevision)) {
    return "revision and compactRevision must be counts";
  }
  if (!Array.isArray(value.bindings) || !Array.isArray(value.leases)) {
    return "bindings and leases must be arrays";
  }
  if (!Array.isArray(value.history)) return "history must be an array";
  for (const binding of value.bindings) {
    if (
      !isRecord(binding) || !isText(binding.name) ||
      !isEndpointRecord(binding) || !isCount(binding.createRevision) ||
      !isCount(binding.modRevision)
    ) {
      return `malformed binding ${JSON.stringify(binding).slice(0, 200)}`;
    }
  }
  for (const lease of value.leases) {
    if (
      !isRecord(lease) || !isText(lease.id) || !isTtl(lease.ttlMs) ||
      !Array.isArray(lease.bindings) ||
      !lease.bindings.every((pair) =>
        Array.isArray(pair) && pair.length === 2 && isText(pair[0]) &&
        isText(pair[1])
      )
    ) {
      return `malformed lease ${JSON.stringify(lease).slice(0, 200)}`;
    }
  }
  const auth = value.auth;
  if (
    auth !== undefined &&
    (!isRecord(auth) || typeof auth.enabled !== "boolean" ||
      typeof auth.bootstrapped !== "boolean" || !Array.isArray(auth.tokens) ||
      !auth.tokens.every(isToken))
  ) {
    return "auth must be { enabled, bootstrapped, tokens }";
  }
  return null;
}

/** The default check settings merged into a partial check. */
export function withCheckDefaults(
  check: Partial<HealthCheck> & Pick<HealthCheck, "kind">,
): HealthCheck {
  return { ...DEFAULT_HEALTH_CHECK, ...check };
}
