/**
 * The registry on one node, as the Raft log builds it: the replicated
 * state, lease timing, local-area bindings and watches, and how a log
 * entry or a snapshot changes them ({@link Replica}); and what a snapshot
 * of it holds ({@link RegistryNodeSnapshot}).
 *
 * @module
 */

import type { Entry, Snapshot } from "../../raft/types.ts";
import type { EndpointLoad } from "../../protocol/registry.ts";
import {
  type ApplyResult,
  type RegistrySnapshot,
  RegistryState,
  snapshotProblem,
} from "../state.ts";
import { LeaseKeeper } from "../lease_keeper.ts";
import { WatchHub } from "../watch_hub.ts";
import { LocalArea } from "../local_area.ts";
import type { HealthChecker } from "../_health_checker.ts";
import type { NodeSettings } from "./options.ts";

/**
 * A registry snapshot as a node takes it: the Raft index it reflects, the
 * state (a deterministic function of the log up to `index`), and each
 * lease's remaining time, ms, when it was taken (volatile: not part of the
 * deterministic state).
 */
export interface RegistryNodeSnapshot {
  /** The last Raft log index applied to `state`. */
  index: number;
  /** The replicated state. */
  state: RegistrySnapshot;
  /** `[leaseId, remainingMs]` for every lease. */
  leaseRemainingMs: [string, number][];
}

/**
 * Why `data` is not a {@link RegistryNodeSnapshot} this node can restore
 * (not JSON, or a state `RegistryState.load` refuses, or malformed lease
 * times), or null when it is one: a snapshot from the leader is checked
 * before it is stored, so a broken or forged one never stops the node.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { snapshotDataProblem } from "./replica.ts";
 * assert.match(snapshotDataProblem("not json")!, /not JSON/);
 * assert.match(snapshotDataProblem('{"state":{}}')!, /version is not 1/);
 * ```
 */
export function snapshotDataProblem(data: string): string | null {
  let taken: unknown;
  try {
    taken = JSON.parse(data);
  } catch {
    return "the snapshot is not JSON";
  }
  return snapshotValueProblem(taken);
}

/**
 * {@link snapshotDataProblem} of a snapshot already parsed from JSON (a
 * caller that needs the value parses a large snapshot once).
 */
export function snapshotValueProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null) {
    return "the snapshot is not an object";
  }
  const taken = value as Partial<RegistryNodeSnapshot>;
  const problem = snapshotProblem(taken.state);
  if (problem !== null) return problem;
  const times = taken.leaseRemainingMs;
  if (
    !Array.isArray(times) ||
    !times.every((pair) =>
      Array.isArray(pair) && typeof pair[0] === "string" &&
      typeof pair[1] === "number"
    )
  ) {
    return "leaseRemainingMs must be [leaseId, ms] pairs";
  }
  return null;
}

/**
 * Rebuilds a node's registry from a {@link RegistryNodeSnapshot}: the state,
 * and lease timing that gives each lease the time it had left (but at
 * least `minRemainingMs`, so its server has time to find the new node).
 *
 * @throws {TypeError} when `snapshot.state` is not a registry snapshot.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RegistryState } from "../state.ts";
 * import { restoreRegistrySnapshot } from "./replica.ts";
 * const { state, leases } = restoreRegistrySnapshot(
 *   { index: 1, state: new RegistryState().snapshot(), leaseRemainingMs: [] },
 *   { tickMs: 100, minRemainingMs: 1500 },
 * );
 * assert.equal(state.revision, 0);
 * assert.equal(leases.size, 0);
 * ```
 */
export function restoreRegistrySnapshot(
  snapshot: RegistryNodeSnapshot,
  options: { tickMs: number; minRemainingMs: number; historyEvents?: number },
): { state: RegistryState; leases: LeaseKeeper } {
  const state = RegistryState.restore(snapshot.state, {
    historyEvents: options.historyEvents,
  });
  const leases = new LeaseKeeper({ tickMs: options.tickMs });
  for (const { id, ttlMs } of state.leases()) leases.granted(id, ttlMs);
  leases.restoreTimes(snapshot.leaseRemainingMs, options.minRemainingMs);
  return { state, leases };
}

/**
 * The registry on this node. The Raft node calls {@link apply} for each
 * committed entry and {@link restore} for a snapshot; watch events go out
 * after the writer's answer (a timer runs after the microtasks that send
 * it), once per batch of applied entries.
 */
export class Replica {
  /** The replicated state. */
  readonly state: RegistryState;
  /** Lease timing and reported loads. */
  readonly leases: LeaseKeeper;
  /** This node's local-area bindings. */
  readonly local = new LocalArea();
  /** The watches this node serves. */
  readonly watches: WatchHub;
  readonly #settings: NodeSettings;
  readonly #checker: HealthChecker;
  /** The last registry entry applied (a snapshot's, after a restore). */
  #lastApplied = 0;
  /** The term of that entry. */
  #lastAppliedTerm = 0;
  /** Binding events applied (what watches are sent), since the start. */
  eventsApplied = 0;
  #fanOutTimer: ReturnType<typeof setTimeout> | undefined;
  /** Leases whose load changed since the last load fan-out. */
  #loadsChanged = new Set<string>();
  #loadsTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(settings: NodeSettings, checker: HealthChecker) {
    this.#settings = settings;
    this.#checker = checker;
    this.state = new RegistryState({
      historyEvents: settings.options.historyEvents,
    });
    this.leases = new LeaseKeeper({
      tickMs: settings.tickMs,
      onLoadChange: (id) => this.#loadChanged(id),
    });
    const { watch, maxWatchesPerConnection } = settings.options;
    this.watches = new WatchHub(this.state, {
      ...watch,
      maxWatchesPerSession: maxWatchesPerConnection ??
        watch?.maxWatchesPerSession,
      loadOf: (leaseId) => this.leases.load(leaseId),
    });
  }

  /** Applies one committed entry; its result answers the proposer. */
  apply(entry: Entry): ApplyResult {
    const { state, leases } = this;
    this.#lastApplied = entry.index;
    this.#lastAppliedTerm = entry.term;
    const authChanges = state.authChanges;
    const outcome = state.apply(entry.data);
    const change = outcome.change;
    // A token revoked, auth turned on: watches check what they may see.
    if (state.authChanges !== authChanges) this.#fanOut();
    if (change !== null) {
      for (const lease of change.granted) {
        leases.granted(lease.id, lease.ttlMs);
      }
      for (const lease of change.removed) {
        leases.removed(lease);
        this.local.leaseEnded(lease);
      }
      if (change.events.length > 0) {
        this.eventsApplied += change.events.length;
        this.#fanOut();
        if (change.events.some((e) => e.endpoint.check !== null)) {
          this.#checker.update(state.checkedBindings());
        }
      }
    }
    return outcome.result;
  }

  /**
   * Replaces the registry, in place, with a Raft snapshot's (at start, or
   * `installed` from the leader): state, lease timing (each lease keeps the
   * time it had left, at least minTtlMs), local bindings of leases gone.
   */
  restore(snapshot: Snapshot, installed: boolean): void {
    const { state, leases } = this;
    const taken = JSON.parse(snapshot.data) as RegistryNodeSnapshot;
    state.load(taken.state);
    const kept = new Set(state.leases().map((lease) => lease.id));
    for (const [lease] of leases.remainingTimes()) {
      leases.removed(lease);
      if (!kept.has(lease)) this.local.leaseEnded(lease);
    }
    for (const lease of state.leases()) leases.granted(lease.id, lease.ttlMs);
    leases.restoreTimes(taken.leaseRemainingMs, this.#settings.minTtlMs);
    this.#lastApplied = snapshot.index;
    this.#lastAppliedTerm = snapshot.term;
    this.#checker.update(state.checkedBindings());
    this.#fanOut();
    this.#settings.log(
      `${this.#settings.id}: ${
        installed
          ? "installed a snapshot from the leader"
          : "loaded the snapshot"
      } at index ${snapshot.index} (revision ${state.revision}, ${state.leaseCount} lease(s))`,
    );
  }

  /** The snapshot the Raft node stores, as JSON (at the last applied entry). */
  snapshotJson(): string {
    return this.state.snapshotJson((taken) => ({
      index: this.#lastApplied,
      state: taken,
      leaseRemainingMs: this.leases.remainingTimes(),
    }));
  }

  /**
   * {@link snapshotJson} with the index and term of the last entry it
   * reflects (for `registry.snapshot`: a backup at a known log position).
   */
  snapshotTaken(): { data: string; index: number; term: number } {
    return {
      data: this.snapshotJson(),
      index: this.#lastApplied,
      term: this.#lastAppliedTerm,
    };
  }

  /** The registry as a {@link RegistryNodeSnapshot} said to be at `index`. */
  snapshotAt(index: number): RegistryNodeSnapshot {
    return {
      index,
      state: this.state.snapshot(),
      leaseRemainingMs: this.leases.remainingTimes(),
    };
  }

  /** Cancels a pending fan-out (the node stops). */
  stopFanOut(): void {
    clearTimeout(this.#fanOutTimer);
    clearTimeout(this.#loadsTimer);
  }

  /**
   * A lease's load changed here: its global bindings' loads go to the
   * watchers that asked for loads, batched per turn of the event loop.
   */
  #loadChanged(leaseId: string): void {
    this.#loadsChanged.add(leaseId);
    this.#loadsTimer ??= setTimeout(() => {
      this.#loadsTimer = undefined;
      const leases = this.#loadsChanged;
      this.#loadsChanged = new Set();
      const loads: EndpointLoad[] = [];
      for (const leaseId of leases) {
        const lease = this.state.lease(leaseId);
        if (lease === undefined) continue;
        const load = this.leases.load(leaseId);
        for (const key of lease.bindings) {
          const newline = key.indexOf("\n");
          loads.push({
            name: key.slice(0, newline),
            id: key.slice(newline + 1),
            load,
          });
        }
      }
      this.watches.loadsChanged(loads);
    }, 0);
  }

  #fanOut(): void {
    this.#fanOutTimer ??= setTimeout(() => {
      this.#fanOutTimer = undefined;
      this.watches.changed();
    }, 0);
  }
}
