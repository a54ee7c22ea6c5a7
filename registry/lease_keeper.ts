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
 * Pure: the clock is injected, nothing here starts a timer.
 *
 * @module
 */

/**
 * What the leader sends each follower every heartbeat, as the peer
 * notification `registry.leaseSync`.
 */
export interface LeaseSync {
  /** The leader's term; a follower ignores a sync of another term. */
  term: number;
  /**
   * Leases renewed since the previous sync (or every lease, when `full`):
   * `[leaseId, msSinceRenewal, load]`.
   */
  renewed: [string, number, number | null][];
  /** Whether `renewed` lists every lease the leader times. */
  full: boolean;
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
 * import { LeaseKeeper } from "./lease_keeper.ts";
 * let now = 0;
 * const keeper = new LeaseKeeper({ tickMs: 100, now: () => now });
 * keeper.granted("L1");
 * now = 900;
 * keeper.keepAlive("L1", 0.5);
 * now = 1500;
 * console.log(keeper.remainingMs("L1", 1000), keeper.load("L1")); // 400 0.5
 * ```
 */
export class LeaseKeeper {
  readonly #now: () => number;
  readonly #tickMs: number;
  readonly #stallMs: number;
  readonly #renewedAt = new Map<string, number>();
  readonly #load = new Map<string, number>();
  readonly #expiring = new Set<string>();
  #dirty = new Set<string>();
  #lastLeaderTick: number | null = null;
  #leaderContactAt: number;

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
    this.#leaderContactAt = this.#now();
  }

  /**
   * A lease was granted (its entry applied): renewed now, unless a sync
   * from the leader already timed it (a follower that applies late).
   */
  granted(id: string): void {
    if (!this.#renewedAt.has(id)) this.#renewedAt.set(id, this.#now());
  }

  /** A lease ended (revoked or expired): forget it. */
  removed(id: string): void {
    this.#renewedAt.delete(id);
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
    if (load !== undefined) this.#load.set(id, load);
    this.#dirty.add(id);
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
    return credit;
  }

  /** Leases among `leases` whose TTL has passed and that are not being expired already. */
  due(leases: Iterable<{ id: string; ttlMs: number }>): string[] {
    const now = this.#now();
    const due: string[] = [];
    for (const { id, ttlMs } of leases) {
      if (this.#expiring.has(id)) continue;
      const renewedAt = this.#renewedAt.get(id);
      if (renewedAt === undefined) {
        // Known to the state but not here (cannot happen once every apply
        // is reported): start timing it now rather than expire it blind.
        this.#renewedAt.set(id, now);
      } else if (renewedAt + ttlMs <= now) {
        due.push(id);
      }
    }
    return due;
  }

  /** Marks leases as being expired: keep-alives for them are refused. */
  markExpiring(ids: readonly string[]): void {
    for (const id of ids) this.#expiring.add(id);
  }

  /** The expiry of these leases was not committed (leadership lost): time them again. */
  unmarkExpiring(ids: readonly string[]): void {
    for (const id of ids) this.#expiring.delete(id);
  }

  /**
   * The next sync for followers: the leases renewed since the last call,
   * or every lease when `full`, each with the time since its renewal.
   */
  sync(term: number, full: boolean): LeaseSync {
    const now = this.#now();
    const ids = full ? this.#renewedAt.keys() : this.#dirty.values();
    const renewed: LeaseSync["renewed"] = [];
    for (const id of ids) {
      const at = this.#renewedAt.get(id);
      if (at === undefined) continue;
      renewed.push([id, Math.max(0, Math.round(now - at)), this.load(id)]);
    }
    this.#dirty = new Set();
    return { term, renewed, full };
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
    if (sync.full) {
      const listed = new Set(sync.renewed.map(([id]) => id));
      for (const id of [...this.#renewedAt.keys()]) {
        if (!listed.has(id)) this.#renewedAt.delete(id);
      }
    }
    for (const [id, ageMs, load] of sync.renewed) {
      this.#renewedAt.set(id, now - ageMs);
      if (load === null) this.#load.delete(id);
      else this.#load.set(id, load);
    }
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
  remainingTimes(
    leases: Iterable<{ id: string; ttlMs: number }>,
  ): [string, number][] {
    const times: [string, number][] = [];
    for (const { id, ttlMs } of leases) {
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
    ttlOf: (id: string) => number | undefined,
    minRemainingMs: number,
  ): void {
    const now = this.#now();
    for (const [id, remainingMs] of times) {
      const ttlMs = ttlOf(id);
      if (ttlMs === undefined) continue;
      const left = Math.min(ttlMs, Math.max(remainingMs, minRemainingMs));
      this.#renewedAt.set(id, now - (ttlMs - left));
    }
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
  if (typeof sync.full !== "boolean") return '"full" must be a boolean';
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
