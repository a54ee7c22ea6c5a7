/**
 * A chaos history made by running a simple in-memory registry (with the
 * semantics of `registry/state.ts`) one operation at a time, with random
 * overlapping timings: every operation takes effect at one instant
 * between its invocation and its completion, so the history is valid by
 * construction. For the checker's tests and its measurement.
 *
 * @module
 */

import type {
  History,
  Operation,
  OpInput,
  OpOutput,
  SeenEndpoint,
  WatchLog,
  WatchRecord,
} from "../history.ts";

/** Settings of {@link simulate}. */
export interface SimulateOptions {
  /** Seed of the pseudo-random choices. */
  seed: number;
  /** Operations before the final lookups. */
  operations: number;
  /** Names (`chaos/k0`…). @default 2 */
  names?: number;
  /** Concurrent clients. @default 6 */
  clients?: number;
  /** Endpoint ids per name. @default 3 */
  ids?: number;
  /** Share of operations ending unknown (half of those applied). @default 0.05 */
  unknownRate?: number;
  /** Share of writes ending fail (not applied). @default 0.03 */
  failRate?: number;
  /** Share of lookups that are serializable (may be stale). @default 0.2 */
  serializableRate?: number;
  /** Whether leases are used (granted, kept alive, expiring). @default true */
  leases?: boolean;
  /** Lease TTL, ms of the simulated clock. @default 40 */
  ttlMs?: number;
  /** Watchers. @default 2 */
  watchers?: number;
}

interface Lease {
  name: string;
  ttlMs: number;
  renewedAt: number;
}

type Event = Extract<WatchRecord, { kind: "event" }>;

/** A valid history (see the module doc). */
export function simulate(options: SimulateOptions): History {
  let seed = options.seed >>> 0 || 1;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  const pick = <T>(items: readonly T[]): T =>
    items[Math.floor(random() * items.length)];
  const names = Array.from(
    { length: options.names ?? 2 },
    (_, i) => `chaos/k${i}`,
  );
  const clients = options.clients ?? 6;
  const ids = options.ids ?? 3;
  const unknownRate = options.unknownRate ?? 0.05;
  const failRate = options.failRate ?? 0.03;
  const serializableRate = options.serializableRate ?? 0.2;
  const useLeases = options.leases ?? true;
  const ttlMs = options.ttlMs ?? 40;
  const startRevision = 100;

  let revision = startRevision;
  const bindings = new Map<
    string,
    Map<string, { url: string; leaseId: string | null }>
  >();
  for (const name of names) bindings.set(name, new Map());
  const leases = new Map<string, Lease>();
  const leaseCount = new Map<string, number>(names.map((n) => [n, 0]));
  /** Per name: the endpoints after each revision that changed it. */
  const past = new Map<
    string,
    { revision: number; endpoints: SeenEndpoint[] }[]
  >(
    names.map((n) => [n, [{ revision: startRevision, endpoints: [] }]]),
  );
  const log: { at: number; events: Omit<Event, "at" | "kind">[] }[] = [];
  const operations: Operation[] = [];
  const free = new Array<number>(clients).fill(0);
  const process = Array.from({ length: clients }, (_, i) => i);
  let nextProcess = clients;
  let now = 0;

  const endpointsOf = (name: string): SeenEndpoint[] =>
    [...bindings.get(name)!].map(([id, b]) => ({
      id,
      url: b.url,
      leaseId: b.leaseId,
    }));
  const commit = (at: number, events: Omit<Event, "at" | "kind">[]) => {
    const touched = new Set(events.map((e) => e.name));
    for (const name of touched) {
      past.get(name)!.push({ revision, endpoints: endpointsOf(name) });
    }
    log.push({ at, events });
  };
  const endLeases = (
    ids: string[],
    reason: "leaseRevoked" | "leaseExpired",
    at: number,
  ): boolean => {
    const events: Omit<Event, "at" | "kind">[] = [];
    for (const id of ids) {
      const lease = leases.get(id)!;
      for (const [bid, b] of bindings.get(lease.name)!) {
        if (b.leaseId === id) {
          events.push({
            revision: revision + 1,
            type: "delete",
            name: lease.name,
            id: bid,
            url: b.url,
            leaseId: id,
            reason,
          });
          bindings.get(lease.name)!.delete(bid);
        }
      }
      leases.delete(id);
    }
    if (events.length === 0) return false;
    revision++;
    commit(at, events);
    return true;
  };

  /** Applies `input` at time `at`; returns the answer. */
  const apply = (input: OpInput, at: number): OpOutput => {
    switch (input.f) {
      case "bind": {
        if (input.leaseId !== null && !leases.has(input.leaseId)) {
          return { f: "bind", leaseNotFound: true };
        }
        const bound = bindings.get(input.name)!;
        const previous = bound.get(input.id);
        // ID_IN_USE (state.ts idInUse): another live lease holds the id
        // at another url.
        if (
          previous !== undefined && previous.leaseId !== null &&
          previous.leaseId !== input.leaseId && previous.url !== input.url
        ) {
          return { f: "bind", idInUse: true };
        }
        if (previous?.url === input.url && previous.leaseId === input.leaseId) {
          return { f: "bind", revision };
        }
        bound.set(input.id, { url: input.url, leaseId: input.leaseId });
        revision++;
        commit(at, [{
          revision,
          type: "put",
          name: input.name,
          id: input.id,
          url: input.url,
          leaseId: input.leaseId,
        }]);
        return { f: "bind", revision };
      }
      case "unbind": {
        const bound = bindings.get(input.name)!;
        const previous = bound.get(input.id);
        if (previous === undefined) {
          return { f: "unbind", revision, removed: 0 };
        }
        bound.delete(input.id);
        revision++;
        commit(at, [{
          revision,
          type: "delete",
          name: input.name,
          id: input.id,
          url: previous.url,
          leaseId: previous.leaseId,
          reason: "unbound",
        }]);
        return { f: "unbind", revision, removed: 1 };
      }
      case "lookup": {
        if (input.consistency === "linearizable") {
          return { f: "lookup", revision, endpoints: endpointsOf(input.name) };
        }
        // A follower behind by a few revisions: a real past state.
        const states = past.get(input.name)!;
        const behind = Math.max(
          startRevision,
          revision - Math.floor(random() * 4),
        );
        let state = states[0];
        for (const s of states) if (s.revision <= behind) state = s;
        return {
          f: "lookup",
          revision: behind,
          endpoints: state.endpoints.map((e) => ({ ...e })),
        };
      }
      case "leaseGrant": {
        if (leases.has(input.leaseId)) return { f: "leaseGrant", exists: true };
        leases.set(input.leaseId, {
          name: input.name,
          ttlMs: input.ttlMs,
          renewedAt: at,
        });
        return { f: "leaseGrant", revision, ttlMs: input.ttlMs };
      }
      case "leaseKeepAlive": {
        const lease = leases.get(input.leaseId);
        if (lease === undefined) {
          return { f: "leaseKeepAlive", leaseNotFound: true };
        }
        lease.renewedAt = at;
        return { f: "leaseKeepAlive", ttlMs: lease.ttlMs };
      }
      case "leaseRevoke": {
        if (!leases.has(input.leaseId)) {
          return { f: "leaseRevoke", leaseNotFound: true };
        }
        endLeases([input.leaseId], "leaseRevoked", at);
        return { f: "leaseRevoke", revision };
      }
    }
  };

  const choose = (): OpInput => {
    const name = pick(names);
    const own = [...leases].filter(([, l]) => l.name === name).map(([id]) =>
      id
    );
    const known = Array.from(
      { length: leaseCount.get(name)! },
      (_, i) => `${name}-l${i + 1}`,
    );
    const r = random();
    if (useLeases && r < 0.05 && own.length < 2) {
      const n = leaseCount.get(name)! + 1;
      leaseCount.set(name, n);
      return { f: "leaseGrant", name, leaseId: `${name}-l${n}`, ttlMs };
    }
    if (useLeases && r < 0.15 && known.length > 0) {
      return {
        f: "leaseKeepAlive",
        name,
        leaseId: pick(own.length > 0 && random() < 0.9 ? own : known),
      };
    }
    if (useLeases && r < 0.17 && own.length > 0) {
      return { f: "leaseRevoke", name, leaseId: pick(own) };
    }
    if (r < 0.45) {
      const leaseId = useLeases && known.length > 0 && random() < 0.4
        ? pick(own.length > 0 && random() < 0.8 ? own : known)
        : null;
      return {
        f: "bind",
        name,
        id: `e${Math.floor(random() * ids)}`,
        url: `tcp://u${operations.length}`,
        leaseId,
      };
    }
    if (r < 0.55) {
      return { f: "unbind", name, id: `e${Math.floor(random() * ids)}` };
    }
    return {
      f: "lookup",
      name,
      consistency: random() < serializableRate
        ? "serializable"
        : "linearizable",
    };
  };

  const run = (input: OpInput, client: number, forceOk: boolean) => {
    // The instant it takes effect, after the client is free.
    now = Math.max(now + random() * 0.6, free[client]);
    // Expire due leases first (one entry for all of them, as the leader does).
    const due = [...leases].filter(([, l]) => l.renewedAt + l.ttlMs <= now).map(
      ([id]) => id,
    );
    if (due.length > 0) endLeases(due, "leaseExpired", now);
    const invokedAt = free[client] + random() * (now - free[client]);
    const outcomeRoll = random();
    const write = input.f !== "lookup" && input.f !== "leaseKeepAlive";
    const index = operations.length;
    const op: Operation = {
      index,
      process: process[client],
      input,
      invokedAt,
      completedAt: null,
      outcome: "ok",
    };
    if (!forceOk && outcomeRoll < unknownRate) {
      op.outcome = "unknown";
      op.error = { code: null, message: "timed out" };
      if (random() < 0.5) apply(input, now);
      process[client] = nextProcess++;
      free[client] = now + random() * 3;
    } else if (!forceOk && write && outcomeRoll < unknownRate + failRate) {
      op.outcome = "fail";
      op.error = { code: -32001, message: "not leader" };
      op.completedAt = now + random() * 3;
      free[client] = op.completedAt;
    } else {
      op.output = apply(input, now);
      op.completedAt = now + random() * 3;
      free[client] = op.completedAt;
    }
    operations.push(op);
  };

  for (let i = 0; i < options.operations; i++) {
    // The client free soonest, often; any client, sometimes.
    const client = random() < 0.7
      ? free.indexOf(Math.min(...free))
      : Math.floor(random() * clients);
    run(choose(), client, false);
  }
  const finalIndexes: number[] = [];
  const end = Math.max(now, ...free) + 1;
  now = end;
  for (const name of names) {
    const client = finalIndexes.length % clients;
    free[client] = Math.max(free[client], end);
    finalIndexes.push(operations.length);
    run({ f: "lookup", name, consistency: "linearizable" }, client, true);
  }

  // Watchers: every revision, resuming now and then (sometimes from an
  // older revision, which is re-delivered).
  const watches: WatchLog[] = [];
  for (let w = 0; w < (options.watchers ?? 2); w++) {
    const records: WatchRecord[] = [{
      kind: "open",
      at: 0,
      fromRevision: startRevision + 1,
      node: "n1",
    }];
    let at = 0;
    let lastSeen = startRevision;
    for (const entry of log) {
      at = Math.max(at, entry.at + random() * 2);
      if (random() < 0.02) {
        records.push({ kind: "close", at, reason: "connection lost" });
        const from = Math.max(
          startRevision + 1,
          lastSeen + 1 - Math.floor(random() * 3),
        );
        records.push({
          kind: "open",
          at,
          fromRevision: from,
          node: `n${1 + Math.floor(random() * 3)}`,
        });
        for (const again of log) {
          for (const e of again.events) {
            if (e.revision >= from && e.revision <= lastSeen) {
              records.push({ kind: "event", at, ...e });
            }
          }
        }
      }
      for (const e of entry.events) records.push({ kind: "event", at, ...e });
      lastSeen = entry.events[0].revision;
    }
    watches.push({ watcher: w, prefix: "chaos/", records });
  }
  return { prefix: "chaos/", startRevision, operations, watches, finalIndexes };
}
