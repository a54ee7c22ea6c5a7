/**
 * Lease timing: when each lease was last renewed, and the load its server
 * reported, kept in memory on every registry node (keep-alives are never
 * written to the Raft log). The leader times leases and proposes the
 * expiry of those whose TTL passed; it sends followers what was renewed
 * with every heartbeat ({@link LeaseSync}), so a follower that becomes
 * leader starts from nearly the same times instead of granting every lease
 * a fresh TTL (the behaviour etcd users complain of in etcd issues 9395
 * and 13294).
 *
 * The rules, with `now` a monotonic clock of this node:
 * - A lease expires once `renewedAt + ttlMs <= now` on the leader.
 * - A follower's copy of `renewedAt` comes from the leader's last sync
 *   (`now - ageMs` on receipt), so it lags the leader's by at most one
 *   heartbeat, and from the node's own apply time for leases granted since.
 * - Time without a leader does not count against a lease: a node that
 *   becomes leader shifts every `renewedAt` forward by the time since it
 *   last heard a leader. So a lease kept alive is never expired by a
 *   fail-over (its server can only reach the new leader once it is
 *   elected), and a lease whose server died expires at most one leaderless
 *   gap (one election timeout) plus one heartbeat later than its TTL.
 * - A leader that stalls (GC pause, SIGSTOP) does not count the stall
 *   either: keep-alives sent during it could not be read. Before an expiry
 *   is proposed the leader also confirms it still leads (a ReadIndex
 *   round), so a deposed leader never expires a lease its successor keeps.
 *
 * Clocks (issue 17; tests/registry_clock_faults_e2e_test.ts runs them on
 * real processes under libfaketime). Every decision here, the elections
 * and heartbeats (ticks of a `setInterval`), health probes and call
 * deadlines read the node's monotonic clock, so a wall-clock jump (an NTP
 * step, `date -s`) changes nothing. Linearizable reads are confirmed by a
 * ReadIndex quorum round (Raft dissertation §6.4), never by a time-based
 * leader lease, so no clock fault lets a deposed leader serve a stale
 * read: at worst it answers UNAVAILABLE. What a clock running at rate r
 * (1 = true time) does:
 * - Leader fast (r > 1): every lease ends after TTL / r of real time. A
 *   server keeping alive every TTL / 3 keeps its lease while r stays below
 *   3 less its keep-alive latency and retries: Rafter assumes r < 2.
 * - Leader slow (r < 1): leases end late (TTL / r), never early. Its
 *   heartbeats go out every heartbeat / r: followers keep it while
 *   heartbeat / r < election timeout, so r > heartbeatTicks /
 *   electionTicks (0.1 by default; assume r > 0.2).
 * - Follower: its lease times matter only once it leads (then as above);
 *   ages in a {@link LeaseSync} are the leader's durations, so a fail-over
 *   between clocks of rates r1 and r2 shifts a lease by at most one
 *   heartbeat times |r1 - r2|. A fast follower times out elections early
 *   (PreVote and check-quorum keep it from deposing a healthy leader).
 * Real oscillators drift by parts per million, far inside these bounds;
 * the bounds matter for a broken clock source or a VM's stolen time.
 *
 * Pure: the clock is injected, nothing here starts a timer.
 *
 * @module
 */

/**
 * What the leader sends each follower every heartbeat, as the peer
 * notification `registry.leaseSync`: the leases renewed since the previous
 * sync, and a rolling slice of all the others (so every lease is repeated
 * within `rollTicks` ticks, repairing any sync lost with a connection).
 */
export interface LeaseSync {
  /** The leader's term; a follower ignores a sync of another term. */
  term: number;
  /** `[leaseId, msSinceRenewal, load]` per lease. */
  renewed: [string, number, number | null][];
}

/** Settings of a {@link LeaseKeeper}. */
export interface LeaseKeeperOptions {
  /** Monotonic clock, ms. @default performance.now */
  now?: () => number;
  /** The node's tick, ms: how often the leader calls {@link LeaseKeeper.tickLeader}. */
  tickMs: number;
  /**
   * A gap between two leader ticks longer than this many ticks is a stall,
   * and the time beyond one tick is not counted against any lease.
   * @default 3
   */
  stallTicks?: number;
  /**
   * Every lease is repeated in the syncs at least once per this many ticks
   * (a slice each tick, so there is no burst). @default 60
   */
  rollTicks?: number;
  /**
   * Told of each lease whose reported load changed on this node (a
   * keep-alive on the leader, a sync on a follower), with the new load;
   * the node tells its watchers (`registry.loads`).
   */
  onLoadChange?: (id: string, load: number | null) => void;
}

/** The peer notification method of a {@link LeaseSync}. */
export const LEASE_SYNC_METHOD = "registry.leaseSync";

/**
 * One node's lease timing. The registry node calls {@link granted} and
 * {@link removed} as entries are applied, {@link keepAlive} for each
 * keep-alive the leader accepts, {@link becomeLeader} when it wins an
 * election, {@link tickLeader} every tick while it leads, and
 * {@link absorb} for each sync a follower receives.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { LeaseKeeper } from "./lease_keeper.ts";
 * let now = 0;
 * const keeper = new LeaseKeeper({ tickMs: 100, now: () => now });
 * keeper.granted("L1", 1000);
 * now = 900;
 * keeper.keepAlive("L1", 0.5);
 * now = 1500;
 * assert.equal(keeper.remainingMs("L1", 1000), 400); // renewed at 900
 * assert.equal(keeper.load("L1"), 0.5);
 * ```
 */
export class LeaseKeeper {
  readonly #now: () => number;
  readonly #tickMs: number;
  readonly #stallMs: number;
  readonly #rollTicks: number;
  readonly #onLoadChange:
    | ((id: string, load: number | null) => void)
    | undefined;
  readonly #renewedAt = new Map<string, number>();
  readonly #ttl = new Map<string, number>();
  readonly #load = new Map<string, number>();
  readonly #expiring = new Set<string>();
  #dirty = new Set<string>();
  #lastLeaderTick: number | null = null;
  #leaderContactAt: number;
  /**
   * No lease is due before this time (a lower bound: keep-alives only push
   * expiries later), so {@link due} scans only when it has passed.
   */
  #nextDueAt = -Infinity;
  /** The ids of the rolling sync, and where the next slice starts. */
  #rollIds: string[] = [];
  #rollIndex = 0;

  /**
   * Makes a keeper that knows no lease yet.
   *
   * @throws {RangeError} when `tickMs` is not positive.
   */
  constructor(options: LeaseKeeperOptions) {
    this.#now = options.now ?? (() => performance.now());
    if (!(options.tickMs > 0)) {
      throw new RangeError(`tickMs must be positive, got ${options.tickMs}`);
    }
    this.#tickMs = options.tickMs;
    this.#stallMs = (options.stallTicks ?? 3) * options.tickMs;
    this.#rollTicks = Math.max(1, options.rollTicks ?? 60);
    this.#onLoadChange = options.onLoadChange;
    this.#leaderContactAt = this.#now();
  }

  /**
   * A lease was granted (its entry applied): renewed now, unless a sync
   * from the leader already timed it (a follower that applies late).
   */
  granted(id: string, ttlMs: number): void {
    if (!this.#renewedAt.has(id)) this.#renewedAt.set(id, this.#now());
    this.#ttl.set(id, ttlMs);
    this.#nextDueAt = Math.min(
      this.#nextDueAt,
      this.#renewedAt.get(id)! + ttlMs,
    );
  }

  /** A lease ended (revoked or expired): forget it. */
  removed(id: string): void {
    this.#renewedAt.delete(id);
    this.#ttl.delete(id);
    this.#load.delete(id);
    this.#expiring.delete(id);
    this.#dirty.delete(id);
  }

  /**
   * Renews a lease on the leader, with the load its server reports (kept
   * as it was when `load` is undefined).
   */
  keepAlive(id: string, load?: number): void {
    this.#renewedAt.set(id, this.#now());
    if (load !== undefined) this.#setLoad(id, load);
    this.#dirty.add(id);
  }

  /** Keeps a lease's load, telling `onLoadChange` when it differs. */
  #setLoad(id: string, load: number | null): void {
    const before = this.#load.get(id) ?? null;
    if (load === null) this.#load.delete(id);
    else this.#load.set(id, load);
    if (before !== load) this.#onLoadChange?.(id, load);
  }

  /** The load last reported for the lease, or null. */
  load(id: string): number | null {
    return this.#load.get(id) ?? null;
  }

  /**
   * Time left on the lease, ms (0 once due or while its expiry is being
   * committed). A lease this node never heard of counts as renewed now.
   */
  remainingMs(id: string, ttlMs: number): number {
    if (this.#expiring.has(id)) return 0;
    const renewedAt = this.#renewedAt.get(id) ?? this.#now();
    return Math.max(0, Math.round(renewedAt + ttlMs - this.#now()));
  }

  /** Whether the lease's expiry is being committed (keep-alives are refused). */
  isExpiring(id: string): boolean {
    return this.#expiring.has(id);
  }

  /**
   * This node just became leader: time since it last heard a leader does
   * not count against any lease, and nothing is being expired yet.
   *
   * @returns the leaderless gap credited to every lease, ms.
   */
  becomeLeader(): number {
    const now = this.#now();
    const gap = Math.max(0, now - this.#leaderContactAt);
    for (const [id, at] of this.#renewedAt) this.#renewedAt.set(id, at + gap);
    this.#expiring.clear();
    this.#nextDueAt = -Infinity;
    this.#dirty = new Set(this.#renewedAt.keys());
    this.#lastLeaderTick = now;
    this.#leaderContactAt = now;
    return gap;
  }

  /** This node stopped leading: it times nothing until it leads again. */
  stopLeading(): void {
    this.#expiring.clear();
    this.#lastLeaderTick = null;
  }

  /**
   * One leader tick: credits a stall (a gap between ticks longer than
   * `stallTicks`) to every lease.
   *
   * @returns the stall credited, ms (0 normally).
   */
  tickLeader(): number {
    const now = this.#now();
    const last = this.#lastLeaderTick ?? now;
    this.#lastLeaderTick = now;
    this.#leaderContactAt = now;
    const elapsed = now - last;
    if (elapsed <= this.#stallMs) return 0;
    const credit = elapsed - this.#tickMs;
    for (const [id, at] of this.#renewedAt) {
      this.#renewedAt.set(id, at + credit);
    }
    this.#nextDueAt += credit;
    return credit;
  }

  /**
   * Leases whose TTL has passed and that are not being expired already.
   * Scans the leases only when the earliest expiry it knows of has come.
   */
  due(): string[] {
    const now = this.#now();
    if (now < this.#nextDueAt) return [];
    const due: string[] = [];
    let next = Infinity;
    for (const [id, ttlMs] of this.#ttl) {
      if (this.#expiring.has(id)) continue;
      const renewedAt = this.#renewedAt.get(id) ?? now;
      const expiresAt = renewedAt + ttlMs;
      if (expiresAt <= now) due.push(id);
      else if (expiresAt < next) next = expiresAt;
    }
    this.#nextDueAt = next;
    return due;
  }

  /** Marks leases as being expired: keep-alives for them are refused. */
  markExpiring(ids: readonly string[]): void {
    for (const id of ids) this.#expiring.add(id);
  }

  /** The expiry of these leases was not committed (leadership lost): time them again. */
  unmarkExpiring(ids: readonly string[]): void {
    for (const id of ids) this.#expiring.delete(id);
    this.#nextDueAt = -Infinity;
  }

  /**
   * The next sync for followers: the leases renewed since the last call,
   * and the next slice of all leases (1 / `rollTicks` of them), each with
   * the time since its renewal.
   */
  sync(term: number): LeaseSync {
    const now = this.#now();
    const ids = new Set(this.#dirty);
    this.#dirty = new Set();
    if (this.#rollIndex >= this.#rollIds.length) {
      this.#rollIds = [...this.#renewedAt.keys()];
      this.#rollIndex = 0;
    }
    const slice = Math.ceil(this.#rollIds.length / this.#rollTicks);
    const end = Math.min(this.#rollIndex + slice, this.#rollIds.length);
    for (let i = this.#rollIndex; i < end; i++) ids.add(this.#rollIds[i]);
    this.#rollIndex = end;
    const renewed: LeaseSync["renewed"] = [];
    for (const id of ids) {
      const at = this.#renewedAt.get(id);
      if (at === undefined) continue;
      renewed.push([id, Math.max(0, Math.round(now - at)), this.load(id)]);
    }
    return { term, renewed };
  }

  /**
   * A follower takes the leader's sync: the leases' renewal times (now minus
   * their age) and loads, and notes that it heard a leader now. Leases it
   * does not know yet (their grant not applied here) are timed too, so a
   * later apply of the grant does not reset them.
   */
  absorb(sync: LeaseSync): void {
    const now = this.#now();
    this.#leaderContactAt = now;
    for (const [id, ageMs, load] of sync.renewed) {
      this.#renewedAt.set(id, now - ageMs);
      this.#setLoad(id, load);
    }
    this.#nextDueAt = -Infinity;
  }

  /** This node heard from the leader by other means (e.g. it was just told who leads). */
  heardLeader(): void {
    this.#leaderContactAt = this.#now();
  }

  /** How many leases are timed. */
  get size(): number {
    return this.#renewedAt.size;
  }

  /** Every lease's time left, ms, for a snapshot's volatile part. */
  remainingTimes(): [string, number][] {
    const times: [string, number][] = [];
    for (const [id, ttlMs] of this.#ttl) {
      times.push([id, this.remainingMs(id, ttlMs)]);
    }
    return times;
  }

  /**
   * Starts timing leases from a restored snapshot's volatile part: each
   * expires `remainingMs` from now, but never sooner than `minRemainingMs`
   * (so its server has time to find the node).
   */
  restoreTimes(
    times: Iterable<[string, number]>,
    minRemainingMs: number,
  ): void {
    const now = this.#now();
    for (const [id, remainingMs] of times) {
      const ttlMs = this.#ttl.get(id);
      if (ttlMs === undefined) continue;
      const left = Math.min(ttlMs, Math.max(remainingMs, minRemainingMs));
      this.#renewedAt.set(id, now - (ttlMs - left));
    }
    this.#nextDueAt = -Infinity;
  }
}

/** Why `value` is not a {@link LeaseSync}, or null. */
export function leaseSyncProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return "a lease sync must be an object";
  }
  const sync = value as Record<string, unknown>;
  if (!Number.isSafeInteger(sync.term) || (sync.term as number) < 0) {
    return '"term" must be a count';
  }
  if (!Array.isArray(sync.renewed)) return '"renewed" must be an array';
  for (const item of sync.renewed) {
    if (
      !Array.isArray(item) || item.length !== 3 ||
      typeof item[0] !== "string" || item[0] === "" ||
      !(typeof item[1] === "number" && Number.isFinite(item[1]) &&
        item[1] >= 0) ||
      !(item[2] === null ||
        (typeof item[2] === "number" && Number.isFinite(item[2])))
    ) {
      return `malformed "renewed" item ${JSON.stringify(item).slice(0, 100)}`;
    }
  }
  return null;
}
