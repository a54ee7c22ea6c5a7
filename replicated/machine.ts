/**
 * A replicated service's state machine: the service's own state, changed
 * only by committed Raft entries in log order, so every replica holds the
 * same state after the same entries (Raft paper §5, "replicated state
 * machines"). This module is pure: it encodes write commands, applies
 * them, remembers the outcomes of writes that carry a request id (so a
 * retried write is applied once, Raft dissertation §6.3), and takes and
 * restores snapshots. `ReplicatedService` runs it on a `RaftNode`.
 *
 * @module
 */

import { INTERNAL_ERROR, RpcError } from "../rpc/errors.ts";

/**
 * A write method: changes `state` (in place) and returns the result the
 * caller gets. It runs on every replica, in log order, so it must be
 * deterministic: the same state and arguments give the same change and
 * result everywhere (no clock, no randomness, no I/O). To refuse a call,
 * throw an `RpcError` before changing anything: the caller gets it, and
 * the state stays as it was.
 */
// deno-lint-ignore no-explicit-any
export type WriteMethod<S> = (state: S, ...args: any[]) => unknown;

/**
 * A read method: computes a result from `state`, which it must not change.
 * Runs on the replica the call reached.
 */
// deno-lint-ignore no-explicit-any
export type ReadMethod<S> = (state: S, ...args: any[]) => unknown;

/**
 * A replicated service: its initial state, the methods that change it
 * (proposed through Raft) and those that read it.
 *
 * @example A counter
 * ```ts
 * import assert from "node:assert/strict";
 * import { type ServiceDefinition, StateMachine } from "./machine.ts";
 * const counter: ServiceDefinition<{ value: number }> = {
 *   initial: () => ({ value: 0 }),
 *   writes: { add: (state, by: number) => (state.value += by) },
 *   reads: { get: (state) => state.value },
 * };
 * const machine = new StateMachine(counter);
 * assert.deepEqual(machine.apply(StateMachine.encode("add", [5])), { ok: true, value: 5 });
 * assert.equal(machine.read("get", []), 5);
 * ```
 */
export interface ServiceDefinition<S> {
  /** The state of a new service (a replica with an empty log starts from it). */
  initial(): S;
  /** Methods that change the state: proposed, then applied on every replica. */
  writes: Readonly<Record<string, WriteMethod<S>>>;
  /**
   * Methods that read the state. Linearizable by default: the replica
   * first makes sure it has applied every write committed before the call
   * (ReadIndex, Raft dissertation §6.4), so a read never misses an
   * acknowledged write, on the leader or a follower.
   */
  reads?: Readonly<Record<string, ReadMethod<S>>>;
  /**
   * Methods that read the replica's state as it is, without the barrier:
   * fast, and may miss the latest writes (a follower can lag, and a
   * replica cut off from the others serves what it had).
   */
  localReads?: Readonly<Record<string, ReadMethod<S>>>;
  /**
   * The state as a JSON value, for snapshots. Default: the state itself,
   * which must then be plain JSON data (objects, arrays, numbers…).
   */
  snapshot?(state: S): unknown;
  /** The state from what {@link snapshot} returned. Default: that value itself. */
  restore?(value: unknown): S;
}

/** A write's outcome, as the Raft entry's result carries it to the proposer. */
export type WriteOutcome =
  | { ok: true; value: unknown }
  | { ok: false; error: { code: number; message: string; data?: unknown } };

/** Settings of a {@link StateMachine}. */
export interface StateMachineOptions {
  /**
   * How many request ids' outcomes are remembered (the oldest are
   * forgotten first): a write retried with the same id after more than
   * this many other such writes is applied again.
   * @default 10_000
   */
  maxRequestIds?: number;
  /** Called when a write method throws something other than an `RpcError` (a bug). */
  onInternalError?(error: unknown, method: string): void;
}

/** The version of the snapshot layout {@link StateMachine.snapshotJson} writes. */
const SNAPSHOT_VERSION = 1;

/** The JSON layout of a snapshot. */
interface SnapshotLayout {
  v: number;
  state: unknown;
  /** Remembered request ids and their outcomes, oldest first. */
  requests: [string, WriteOutcome][];
}

/** One decoded write command. */
interface Command {
  m: string;
  a: unknown[];
  r?: string;
}

/** Method names a service may not define: the RPC layer's and the replica's own. */
export const RESERVED_PREFIXES: readonly string[] = ["rpc.", "replica."];

/**
 * The longest request id kept, in characters; a longer one is refused
 * (`INVALID_PARAMS`) before it is proposed.
 */
export const MAX_REQUEST_ID_LENGTH = 128;

/**
 * A service's state on one replica, with the outcomes of recent writes
 * that carried a request id.
 */
export class StateMachine<S> {
  readonly #definition: ServiceDefinition<S>;
  readonly #maxRequestIds: number;
  readonly #onInternalError: (error: unknown, method: string) => void;
  #state: S;
  /** Request id → outcome, oldest first (Map keeps insertion order). */
  #requests = new Map<string, WriteOutcome>();

  /**
   * A machine at the definition's initial state.
   *
   * @throws {TypeError} when a method name is reserved, defined twice, or
   * not a function.
   */
  constructor(
    definition: ServiceDefinition<S>,
    options: StateMachineOptions = {},
  ) {
    checkDefinition(definition);
    this.#definition = definition;
    this.#maxRequestIds = options.maxRequestIds ?? 10_000;
    this.#onInternalError = options.onInternalError ??
      ((error, method) =>
        console.error(`replicated write ${method} threw:`, error));
    this.#state = definition.initial();
  }

  /** The state now (read it, do not change it). */
  get state(): S {
    return this.#state;
  }

  /** Names of the write methods. */
  get writes(): string[] {
    return Object.keys(this.#definition.writes);
  }

  /** Names of the linearizable read methods. */
  get reads(): string[] {
    return Object.keys(this.#definition.reads ?? {});
  }

  /** Names of the local read methods. */
  get localReads(): string[] {
    return Object.keys(this.#definition.localReads ?? {});
  }

  /** How many request ids' outcomes are remembered now. */
  get rememberedRequests(): number {
    return this.#requests.size;
  }

  /**
   * A write command as a Raft entry's data. A request id (see
   * {@link requestIdOf}) makes retries of the write apply once.
   */
  static encode(
    method: string,
    args: readonly unknown[],
    requestId?: string,
  ): string {
    const command: Command = { m: method, a: [...args] };
    if (requestId !== undefined) command.r = requestId;
    return JSON.stringify(command);
  }

  /**
   * The outcome already recorded for `requestId` (the write was applied),
   * or undefined.
   */
  outcomeOf(requestId: string): WriteOutcome | undefined {
    return this.#requests.get(requestId);
  }

  /**
   * Applies one committed entry's data (what {@link encode} made); `""`
   * (a leader's empty entry) changes nothing. A write whose request id
   * was applied before returns the first outcome without running again.
   * Never throws: a refused or failed write is an outcome, the same on
   * every replica.
   */
  apply(data: string): WriteOutcome | null {
    if (data === "") return null;
    let command: Command;
    try {
      command = JSON.parse(data) as Command;
    } catch {
      return failed(INTERNAL_ERROR, "the log entry is not a write command");
    }
    const requestId = typeof command.r === "string" ? command.r : undefined;
    if (requestId !== undefined) {
      const earlier = this.#requests.get(requestId);
      if (earlier !== undefined) return earlier;
    }
    const outcome = this.#run(command);
    if (requestId !== undefined) this.#remember(requestId, outcome);
    return outcome;
  }

  /**
   * Runs read method `method` (linearizable or local: the caller made
   * sure of the barrier) on the state now.
   *
   * @throws {RpcError} what the method threw.
   */
  read(method: string, args: readonly unknown[]): unknown {
    const run = own(this.#definition.reads, method) ??
      own(this.#definition.localReads, method);
    if (run === undefined) {
      throw new TypeError(`${method} is not a read method of this service`);
    }
    return run(this.#state, ...args);
  }

  /** The state and remembered outcomes as JSON, for a Raft snapshot. */
  snapshotJson(): string {
    const snapshot = this.#definition.snapshot;
    const layout: SnapshotLayout = {
      v: SNAPSHOT_VERSION,
      state: snapshot === undefined ? this.#state : snapshot(this.#state),
      requests: [...this.#requests],
    };
    return JSON.stringify(layout);
  }

  /**
   * Replaces the state with a snapshot's.
   *
   * @throws {TypeError} when `data` is not one ({@link snapshotProblem}).
   */
  restoreJson(data: string): void {
    const problem = snapshotProblem(data);
    if (problem !== null) throw new TypeError(problem);
    const layout = JSON.parse(data) as SnapshotLayout;
    const restore = this.#definition.restore;
    this.#state = restore === undefined
      ? layout.state as S
      : restore(layout.state);
    this.#requests = new Map(layout.requests);
  }

  #run(command: Command): WriteOutcome {
    const method = typeof command.m === "string" ? command.m : "";
    const write = own(this.#definition.writes, method);
    if (write === undefined) {
      return failed(
        INTERNAL_ERROR,
        `the log holds a write to ${
          JSON.stringify(method)
        }, which this service does not define: run the same service definition on every replica`,
      );
    }
    try {
      const args = Array.isArray(command.a) ? command.a : [];
      const value = write(this.#state, ...args);
      return { ok: true, value: value === undefined ? null : value };
    } catch (error) {
      if (error instanceof RpcError) {
        return error.data === undefined
          ? failed(error.code, error.message)
          : failed(error.code, error.message, error.data);
      }
      this.#onInternalError(error, method);
      return failed(INTERNAL_ERROR, `write ${method} failed on the replica`);
    }
  }

  #remember(requestId: string, outcome: WriteOutcome): void {
    this.#requests.set(requestId, outcome);
    if (this.#requests.size > this.#maxRequestIds) {
      const oldest = this.#requests.keys().next().value!;
      this.#requests.delete(oldest);
    }
  }
}

/**
 * Why `data` is not a snapshot {@link StateMachine.restoreJson} can read,
 * or null: a snapshot from the leader is checked before it is stored.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { snapshotProblem } from "./machine.ts";
 * assert.match(snapshotProblem("{")!, /not JSON/);
 * assert.equal(snapshotProblem('{"v":1,"state":0,"requests":[]}'), null);
 * ```
 */
export function snapshotProblem(data: string): string | null {
  let layout: Partial<SnapshotLayout>;
  try {
    layout = JSON.parse(data);
  } catch {
    return "the service snapshot is not JSON";
  }
  if (typeof layout !== "object" || layout === null) {
    return "the service snapshot is not an object";
  }
  if (layout.v !== SNAPSHOT_VERSION) {
    return `the service snapshot's version is ${
      JSON.stringify(layout.v)
    }, not ${SNAPSHOT_VERSION}: take it with this version of Rafter`;
  }
  if (
    !Array.isArray(layout.requests) ||
    !layout.requests.every((pair) =>
      Array.isArray(pair) && typeof pair[0] === "string" &&
      typeof pair[1] === "object" && pair[1] !== null
    )
  ) {
    return "the service snapshot's requests must be [requestId, outcome] pairs";
  }
  return null;
}

/**
 * The request id of a write called with `args`: the `requestId` member of
 * a single named-params object (`{ requestId: "…", … }`), or undefined.
 *
 * @throws {RangeError} when it is there but not a non-empty string of at
 * most {@link MAX_REQUEST_ID_LENGTH} characters.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { requestIdOf } from "./machine.ts";
 * assert.equal(requestIdOf([{ requestId: "c1-17", by: 2 }]), "c1-17");
 * assert.equal(requestIdOf([2]), undefined);
 * ```
 */
export function requestIdOf(args: readonly unknown[]): string | undefined {
  if (args.length !== 1) return undefined;
  const params = args[0];
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    return undefined;
  }
  if (!Object.hasOwn(params, "requestId")) return undefined;
  const id = (params as { requestId: unknown }).requestId;
  if (
    typeof id !== "string" || id.length === 0 ||
    id.length > MAX_REQUEST_ID_LENGTH
  ) {
    throw new RangeError(
      `requestId must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters (got ${
        typeof id === "string" ? `${id.length} characters` : typeof id
      }): give each logical write its own id, the same on every retry`,
    );
  }
  return id;
}

function failed(code: number, message: string, data?: unknown): WriteOutcome {
  return data === undefined
    ? { ok: false, error: { code, message } }
    : { ok: false, error: { code, message, data } };
}

function own<F>(
  table: Readonly<Record<string, F>> | undefined,
  name: string,
): F | undefined {
  return table !== undefined && Object.hasOwn(table, name)
    ? table[name]
    : undefined;
}

function checkDefinition<S>(definition: ServiceDefinition<S>): void {
  if (typeof definition?.initial !== "function") {
    throw new TypeError(
      "a service definition needs initial(): the state a new replica starts from",
    );
  }
  const seen = new Set<string>();
  for (
    const [kind, table] of [
      ["writes", definition.writes],
      ["reads", definition.reads],
      ["localReads", definition.localReads],
    ] as const
  ) {
    if (table === undefined) continue;
    for (const [name, fn] of Object.entries(table)) {
      if (typeof fn !== "function") {
        throw new TypeError(`${kind}.${name} is not a function`);
      }
      if (RESERVED_PREFIXES.some((prefix) => name.startsWith(prefix))) {
        throw new TypeError(
          `${kind}.${name}: method names starting with ${
            RESERVED_PREFIXES.join(" or ")
          } are reserved; rename it`,
        );
      }
      if (seen.has(name)) {
        throw new TypeError(
          `${name} is defined twice (in writes, reads or localReads): a method is one or the other`,
        );
      }
      seen.add(name);
    }
  }
  if (definition.writes === undefined) {
    throw new TypeError(
      "a service definition needs writes (an empty object for none)",
    );
  }
}
