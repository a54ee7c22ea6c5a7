/**
 * Small hand-written histories for the checker's tests.
 *
 * @module
 */

import type {
  History,
  Operation,
  OpInput,
  OpOutput,
  WatchLog,
  WatchRecord,
} from "../history.ts";

/** An event of a watch log, as written in a test. */
export type Ev = Omit<Extract<WatchRecord, { kind: "event" }>, "kind">;

/** Builds a history one operation at a time. */
export class HistoryBuilder {
  readonly operations: Operation[] = [];
  readonly watches: WatchLog[] = [];
  finalIndexes: number[] = [];
  startRevision = 0;

  /** An `ok` operation. */
  ok(
    process: number,
    input: OpInput,
    invokedAt: number,
    completedAt: number,
    output: OpOutput,
  ): number {
    return this.#push({
      process,
      input,
      invokedAt,
      completedAt,
      outcome: "ok",
      output,
    });
  }

  /** An `ok` grant of `leaseId` on chaos/k1, at revision 0. */
  granted(
    process: number,
    leaseId: string,
    ttlMs: number,
    invokedAt: number,
  ): number {
    return this.ok(process, grant(leaseId, ttlMs), invokedAt, invokedAt + 1, {
      f: "leaseGrant",
      revision: 0,
      ttlMs,
    });
  }

  /** An `unknown` operation. */
  unknown(process: number, input: OpInput, invokedAt: number): number {
    return this.#push({
      process,
      input,
      invokedAt,
      completedAt: null,
      outcome: "unknown",
      error: { code: null, message: "timed out" },
    });
  }

  /** A `fail` operation. */
  fail(
    process: number,
    input: OpInput,
    invokedAt: number,
    completedAt: number,
  ): number {
    return this.#push({
      process,
      input,
      invokedAt,
      completedAt,
      outcome: "fail",
      error: { code: -32001, message: "not leader" },
    });
  }

  /** A watch log: one open from `fromRevision`, then `events`. */
  watch(fromRevision: number, events: Ev[], more: WatchRecord[] = []): this {
    this.watches.push({
      watcher: this.watches.length,
      prefix: "chaos/",
      records: [
        { kind: "open", at: 0, fromRevision, node: "n1" },
        ...events.map((e): WatchRecord => ({ kind: "event", ...e })),
        ...more,
      ],
    });
    return this;
  }

  /** The history. */
  build(): History {
    return {
      prefix: "chaos/",
      startRevision: this.startRevision,
      operations: this.operations,
      watches: this.watches,
      finalIndexes: this.finalIndexes,
    };
  }

  #push(op: Omit<Operation, "index">): number {
    const index = this.operations.length;
    this.operations.push({ index, ...op });
    return index;
  }
}

/** `bind` input. */
export function bind(
  id: string,
  url: string,
  leaseId: string | null = null,
  name = "chaos/k1",
): OpInput {
  return { f: "bind", name, id, url, leaseId };
}

/** `unbind` input. */
export function unbind(id: string, name = "chaos/k1"): OpInput {
  return { f: "unbind", name, id };
}

/** `lookup` input. */
export function lookup(
  consistency: "linearizable" | "serializable" = "linearizable",
  name = "chaos/k1",
): OpInput {
  return { f: "lookup", name, consistency };
}

/** `leaseGrant` input. */
export function grant(
  leaseId: string,
  ttlMs = 1000,
  name = "chaos/k1",
): OpInput {
  return { f: "leaseGrant", name, leaseId, ttlMs };
}

/** `leaseKeepAlive` input. */
export function keepAlive(leaseId: string, name = "chaos/k1"): OpInput {
  return { f: "leaseKeepAlive", name, leaseId };
}

/** `leaseRevoke` input. */
export function revoke(leaseId: string, name = "chaos/k1"): OpInput {
  return { f: "leaseRevoke", name, leaseId };
}

/** A lookup's output. */
export function seen(
  revision: number,
  ...endpoints: [string, string, string?][]
): OpOutput {
  return {
    f: "lookup",
    revision,
    endpoints: endpoints.map(([id, url, leaseId]) => ({
      id,
      url,
      leaseId: leaseId ?? null,
    })),
  };
}

/** A put event. */
export function put(
  revision: number,
  id: string,
  url: string,
  at: number,
  leaseId: string | null = null,
  name = "chaos/k1",
): Ev {
  return { at, revision, type: "put", name, id, url, leaseId };
}

/** A delete event. */
export function del(
  revision: number,
  id: string,
  url: string,
  at: number,
  reason: "unbound" | "leaseRevoked" | "leaseExpired",
  leaseId: string | null = null,
  name = "chaos/k1",
): Ev {
  return { at, revision, type: "delete", name, id, url, leaseId, reason };
}
