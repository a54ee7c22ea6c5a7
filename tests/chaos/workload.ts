/**
 * The chaos suite's clients: concurrent logical clients that bind,
 * unbind, look up, grant, keep alive and revoke leases against a registry
 * cluster, one operation at a time each, recording every operation's
 * invocation, completion and outcome (`history.ts`), and watchers that
 * record every event they see. Run it while a nemesis injects faults; hand
 * the {@link History} to the checker.
 *
 * Each operation is ONE request to one node (following NOT_LEADER hints
 * and refused connections, which are definitely not applied), so its
 * outcome is exact: the registry client's retries would hide whether a
 * retried unbind or revoke had already taken effect. A write whose answer
 * was lost (timeout, connection closed after sending, UNAVAILABLE with
 * `applied: "unknown"`) is `unknown`; a refusal that says nothing was
 * applied (`applied: false`, NOT_LEADER, not sent) is `fail`.
 *
 * @module
 */

import { ConnectionPool } from "../../stub/connection_pool.ts";
import { RegistryClient } from "../../stub/registry_client/registry_client.ts";
import { WatchClient } from "../../stub/registry_client/watch.ts";
import {
  ConnectionError,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  RpcError,
} from "../../rpc/errors.ts";
import {
  ID_IN_USE,
  LEASE_NOT_FOUND,
  NOT_LEADER,
  type NotLeaderData,
  REGISTRY_METHODS,
  UNAVAILABLE,
  type UnavailableData,
} from "../../protocol/registry.ts";
import type { Endpoint, LookupResult } from "../../protocol/registry.ts";
import { seeded } from "../../testing/prng.ts";
import type {
  History,
  Operation,
  OpInput,
  OpOutput,
  WatchLog,
} from "./history.ts";

/** Settings of a {@link Workload}. */
export interface WorkloadOptions {
  /** Client URLs of every registry member. */
  urls: string[];
  /** Every name is `<prefix>k<i>`. @default "chaos/" */
  prefix?: string;
  /** How many names. @default 5 */
  keys?: number;
  /** Concurrent clients. @default 6 */
  clients?: number;
  /** Watchers (each on its own connection). @default 2 */
  watchers?: number;
  /** PRNG seed. @default 1 */
  seed?: number;
  /** Time one request may take before its outcome is unknown, ms. @default 1_500 */
  requestTimeoutMs?: number;
  /** TTL of the leases the clients grant, ms. @default 3_000 */
  ttlMs?: number;
  /** The clock of the history. @default performance.now */
  now?: () => number;
  /**
   * Pause of a client between two operations, ms: bounds the history's
   * size (the checker's work) more than the cluster's speed does. @default 10
   */
  thinkMs?: number;
}

/** What a client believes of one lease of a key (to choose its next step). */
interface LeaseBelief {
  id: string;
  /** Kept alive by the key's keeper until abandoned. */
  abandonedAt: number | null;
}

/** A key's leases as the clients believe them: the current one first. */
interface KeyState {
  name: string;
  leases: LeaseBelief[];
  nextLease: number;
}

/** The recorded registry workload; see the module doc. */
export class Workload {
  readonly #urls: string[];
  readonly #prefix: string;
  readonly #requestTimeoutMs: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #pool: ConnectionPool;
  readonly #operations: Operation[] = [];
  readonly #watches: WatchLog[] = [];
  readonly #keys: KeyState[] = [];
  readonly #finalIndexes: number[] = [];
  readonly #stopping = new AbortController();
  readonly #loops: Promise<void>[] = [];
  readonly #watchClients: { client: WatchClient; registry: RegistryClient }[] =
    [];
  readonly #clients: number;
  readonly #watchers: number;
  readonly #thinkMs: number;
  #nextProcess = 0;
  #nextUrl = 0;
  #leaderUrl: string;
  #startRevision = 0;
  /** Count of requests answered with an error the workload did not expect. */
  unexpectedErrors: string[] = [];

  constructor(options: WorkloadOptions) {
    this.#urls = [...options.urls];
    this.#leaderUrl = this.#urls[0];
    this.#prefix = options.prefix ?? "chaos/";
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 1_500;
    this.#ttlMs = options.ttlMs ?? 3_000;
    this.#now = options.now ?? (() => performance.now());
    this.#random = seeded(options.seed ?? 1);
    this.#clients = options.clients ?? 6;
    this.#watchers = options.watchers ?? 2;
    this.#thinkMs = options.thinkMs ?? 10;
    this.#pool = new ConnectionPool({
      minReconnectMs: 20,
      maxReconnectMs: 300,
      connectTimeoutMs: 1_000,
    });
    for (let k = 0; k < (options.keys ?? 5); k++) {
      this.#keys.push({
        name: `${this.#prefix}k${k}`,
        leases: [],
        nextLease: 0,
      });
    }
  }

  /** Every operation so far (those still under way have no outcome yet). */
  get operations(): readonly Operation[] {
    return this.#operations;
  }

  /**
   * Reads the current revision (a linearizable list of the prefix, retried
   * until `timeoutMs`), starts the watchers from the revision after it,
   * then the clients and one lease keeper per key.
   */
  async start(timeoutMs = 30_000): Promise<void> {
    const registry = new RegistryClient(this.#urls, this.#pool, {
      deadlineMs: timeoutMs,
      attemptTimeoutMs: this.#requestTimeoutMs,
    });
    try {
      const listed = await registry.list(this.#prefix);
      this.#startRevision = listed.revision;
    } finally {
      registry.close();
    }
    for (let w = 0; w < this.#watchers; w++) this.#startWatcher(w);
    for (let c = 0; c < this.#clients; c++) this.#loops.push(this.#client());
    for (const key of this.#keys) this.#loops.push(this.#keeper(key));
  }

  /**
   * Stops the clients and keepers after their operation under way, makes a
   * final linearizable lookup of every name (retried until one answers,
   * at most `settleMs`), waits until every watcher saw the highest revision
   * any operation returned (at most `settleMs`), and returns the history.
   */
  async stop(settleMs = 30_000): Promise<History> {
    this.#stopping.abort();
    await Promise.all(this.#loops);
    const deadline = this.#now() + settleMs;
    for (const key of this.#keys) {
      for (
        let attempt = 0;
        attempt < 1_000 && this.#now() < deadline;
        attempt++
      ) {
        const op = await this.#run(this.#newProcess(), {
          f: "lookup",
          name: key.name,
          consistency: "linearizable",
        });
        if (op.outcome === "ok") {
          this.#finalIndexes.push(op.index);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const top = Math.max(
      this.#startRevision,
      ...this.#operations.map((op) =>
        op.output !== undefined && "revision" in op.output
          ? op.output.revision
          : 0
      ),
    );
    while (
      this.#now() < deadline &&
      this.#watches.some((log) => lastRevision(log) < top)
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const { client, registry } of this.#watchClients) {
      client.close();
      registry.close();
    }
    this.#pool.close();
    return {
      prefix: this.#prefix,
      startRevision: this.#startRevision,
      operations: this.#operations,
      watches: this.#watches,
      finalIndexes: this.#finalIndexes,
    };
  }

  #newProcess(): number {
    return this.#nextProcess++;
  }

  #pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#random() * items.length)];
  }

  /** One client: a random operation after another until stopped. */
  async #client(): Promise<void> {
    let process = this.#newProcess();
    for (let i = 0; i < 10_000_000 && !this.#stopping.signal.aborted; i++) {
      const op = await this.#run(process, this.#nextInput());
      if (op.outcome === "unknown") process = this.#newProcess();
      const think = this.#thinkMs * (0.5 + this.#random());
      await this.#pause(op.outcome === "ok" ? think : think + 50);
    }
  }

  /** Keeps each key's current lease alive every TTL/4, as a server would. */
  async #keeper(key: KeyState): Promise<void> {
    let process = this.#newProcess();
    for (let i = 0; i < 10_000_000 && !this.#stopping.signal.aborted; i++) {
      await this.#pause(this.#ttlMs / 4);
      const current = key.leases[0];
      if (current === undefined || current.abandonedAt !== null) continue;
      const op = await this.#run(process, {
        f: "leaseKeepAlive",
        name: key.name,
        leaseId: current.id,
      });
      if (op.outcome === "unknown") process = this.#newProcess();
      if (op.output?.f === "leaseKeepAlive" && op.output.leaseNotFound) {
        current.abandonedAt = this.#now(); // expired: grant another
      }
    }
  }

  #pause(ms: number): Promise<void> {
    if (this.#stopping.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.#stopping.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** The next operation a client makes, drawn by weight. */
  #nextInput(): OpInput {
    const key = this.#pick(this.#keys);
    const now = this.#now();
    // Forget leases long gone: abandoned more than two TTLs ago.
    key.leases = key.leases.filter((lease) =>
      lease.abandonedAt === null || now - lease.abandonedAt < 2 * this.#ttlMs
    );
    const current = key.leases[0]?.abandonedAt === null ? key.leases[0] : null;
    const id = `e${Math.floor(this.#random() * 6)}`;
    const roll = this.#random();
    if (roll < 0.3) {
      const withLease = current !== null && this.#random() < 0.5;
      return {
        f: "bind",
        name: key.name,
        id,
        url: this.#uniqueUrl(),
        leaseId: withLease ? current!.id : null,
      };
    }
    if (roll < 0.45) return { f: "unbind", name: key.name, id };
    if (roll < 0.8) {
      return {
        f: "lookup",
        name: key.name,
        consistency: this.#random() < 0.85 ? "linearizable" : "serializable",
      };
    }
    if (roll < 0.88 && key.leases.length < 3) {
      // A new current lease; the old one is abandoned (it expires).
      if (current !== null) current.abandonedAt = now;
      const lease = {
        id: `k${this.#keys.indexOf(key)}-l${key.nextLease++}`,
        abandonedAt: null,
      };
      key.leases.unshift(lease);
      return {
        f: "leaseGrant",
        name: key.name,
        leaseId: lease.id,
        ttlMs: this.#ttlMs,
      };
    }
    if (roll < 0.95 && key.leases.length > 0) {
      const lease = this.#pick(key.leases);
      return { f: "leaseKeepAlive", name: key.name, leaseId: lease.id };
    }
    if (key.leases.length > 0 && this.#random() < 0.5) {
      const lease = this.#pick(key.leases);
      lease.abandonedAt ??= now;
      return { f: "leaseRevoke", name: key.name, leaseId: lease.id };
    }
    return { f: "lookup", name: key.name, consistency: "linearizable" };
  }

  #urlCounter = 0;

  /** A url no other bind uses: its watch event names the bind. */
  #uniqueUrl(): string {
    const n = this.#urlCounter++;
    return `tcp://10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}:${
      1000 + (n % 60_000)
    }`;
  }

  /** Runs one operation, recording it. */
  async #run(process: number, input: OpInput): Promise<Operation> {
    const op: Operation = {
      index: this.#operations.length,
      process,
      input,
      invokedAt: this.#now(),
      completedAt: null,
      outcome: "unknown",
    };
    this.#operations.push(op);
    const [method, params] = request(input);
    const write = input.f !== "lookup";
    let url = write ? this.#leaderUrl : this.#pick(this.#urls);
    for (let hop = 0; hop < this.#urls.length + 2; hop++) {
      try {
        const connection = await this.#pool.get(url);
        const result = await connection.call(method, params as never, {
          timeoutMs: this.#requestTimeoutMs,
        });
        if (write) this.#leaderUrl = url;
        return this.#complete(op, "ok", output(input, result));
      } catch (error) {
        const next = this.#classify(op, input, error);
        if (next === "done") {
          // A leader that timed out or failed is not asked first again
          // (as the registry client does): the next write tries another.
          if (write && op.outcome !== "ok") {
            this.#leaderUrl = this.#urls[
              (this.#urls.indexOf(url) + 1) % this.#urls.length
            ];
          }
          return op;
        }
        if (next === "hint") {
          const hint = (error as RpcError).data as NotLeaderData | undefined;
          if (
            typeof hint?.leaderUrl === "string" &&
            this.#urls.includes(hint.leaderUrl)
          ) {
            url = hint.leaderUrl;
            if (write) this.#leaderUrl = url;
            continue;
          }
        }
        // Not applied anywhere: try the next node.
        if (error instanceof ConnectionError) this.#pool.drop(url);
        url = this.#urls[(this.#urls.indexOf(url) + 1) % this.#urls.length];
        if (write) this.#leaderUrl = url;
      }
    }
    return this.#complete(op, "fail", undefined, {
      code: null,
      message: "no node accepted the request",
    });
  }

  /**
   * What an error means for `op`: `done` (recorded: a definite answer, or
   * an unknown or failed outcome), `hint` (NOT_LEADER: not applied, follow
   * the hint) or `next` (not applied: try the next node).
   */
  #classify(
    op: Operation,
    input: OpInput,
    error: unknown,
  ): "done" | "hint" | "next" {
    const write = input.f !== "lookup";
    const described = {
      code: error instanceof RpcError ? error.code : null,
      message: error instanceof Error ? error.message : String(error),
    };
    if (
      input.f === "bind" && error instanceof RpcError &&
      error.code === ID_IN_USE
    ) {
      this.#complete(op, "ok", { f: "bind", idInUse: true });
      return "done";
    }
    if (error instanceof RpcError && error.code === LEASE_NOT_FOUND) {
      const answer = leaseNotFound(input);
      if (answer !== null) {
        this.#complete(op, "ok", answer);
        return "done";
      }
    }
    if (
      input.f === "leaseGrant" && error instanceof RpcError &&
      error.code === INVALID_PARAMS && /exists already/.test(error.message)
    ) {
      this.#complete(op, "ok", { f: "leaseGrant", exists: true });
      return "done";
    }
    if (error instanceof RpcError && error.code === NOT_LEADER) return "hint";
    if (error instanceof ConnectionError && !error.written) return "next";
    if (!write) {
      // A read changes nothing: any failure is a plain failure.
      if (!(error instanceof RpcError) || !isExpected(error)) {
        this.unexpectedErrors.push(`${input.f}: ${described.message}`);
      }
      this.#complete(op, "fail", undefined, described);
      return "done";
    }
    if (
      error instanceof RpcError && error.code === UNAVAILABLE &&
      (error.data as UnavailableData | undefined)?.applied === false
    ) {
      this.#complete(op, "fail", undefined, described);
      return "done";
    }
    if (
      error instanceof ConnectionError ||
      (error instanceof RpcError &&
        (error.code === UNAVAILABLE || error.code === DEADLINE_EXCEEDED))
    ) {
      this.#complete(op, "unknown", undefined, described);
      return "done";
    }
    // Anything else a node answered: not expected of this workload; it may
    // or may not have been applied, so unknown (and reported).
    this.unexpectedErrors.push(`${input.f}: ${described.message}`);
    this.#complete(op, "unknown", undefined, described);
    return "done";
  }

  #complete(
    op: Operation,
    outcome: Operation["outcome"],
    output?: OpOutput,
    error?: Operation["error"],
  ): Operation {
    op.outcome = outcome;
    if (outcome !== "unknown") op.completedAt = this.#now();
    if (output !== undefined) op.output = output;
    if (error !== undefined) op.error = error;
    return op;
  }

  /** A watcher with its own clients, recording every event. */
  #startWatcher(watcher: number): void {
    const registry = new RegistryClient(this.#urls, this.#pool);
    const log: WatchLog = { watcher, prefix: this.#prefix, records: [] };
    this.#watches.push(log);
    const client = new WatchClient(registry, {
      connectTimeoutMs: 1_000,
      callTimeoutMs: this.#requestTimeoutMs,
      minBackoffMs: 20,
      maxBackoffMs: 300,
      pingIntervalMs: 500,
      onReconnect: (url, error) => {
        log.records.push({
          kind: "close",
          at: this.#now(),
          reason: `${url}: ${error instanceof Error ? error.message : error}`,
        });
      },
    });
    this.#watchClients.push({ client, registry });
    log.records.push({
      kind: "open",
      at: this.#now(),
      fromRevision: this.#startRevision + 1,
      node: "any",
    });
    client.watch(
      this.#prefix,
      { fromRevision: this.#startRevision + 1 },
      (update) => {
        const at = this.#now();
        if (update.kind === "reset") {
          log.records.push({
            kind: "close",
            at,
            reason: `reset: listed at revision ${update.revision}`,
          });
          log.records.push({
            kind: "open",
            at,
            fromRevision: update.revision + 1,
            node: "reset",
          });
          return;
        }
        for (const event of update.events) {
          log.records.push({
            kind: "event",
            at,
            revision: event.revision,
            type: event.type,
            name: event.name,
            id: event.endpoint.id,
            url: event.endpoint.url,
            leaseId: event.endpoint.leaseId,
            ...(event.reason === undefined ? {} : { reason: event.reason }),
          });
        }
      },
    );
  }
}

/** The last revision a watcher saw (its start revision before any). */
function lastRevision(log: WatchLog): number {
  for (let i = log.records.length - 1; i >= 0; i--) {
    const record = log.records[i];
    if (record.kind === "event") return record.revision;
  }
  return 0;
}

/** Errors a read may meet under faults. */
function isExpected(error: RpcError): boolean {
  return error.code === UNAVAILABLE || error.code === DEADLINE_EXCEEDED ||
    error.code === NOT_LEADER || error instanceof ConnectionError;
}

/** The JSON-RPC request of an operation. */
function request(input: OpInput): [string, unknown] {
  switch (input.f) {
    case "bind":
      return [REGISTRY_METHODS.bind, {
        name: input.name,
        endpoint: { id: input.id, url: input.url },
        ...(input.leaseId === null ? {} : { leaseId: input.leaseId }),
      }];
    case "unbind":
      return [REGISTRY_METHODS.unbind, { name: input.name, id: input.id }];
    case "lookup":
      return [REGISTRY_METHODS.lookup, {
        name: input.name,
        consistency: input.consistency,
        rotate: false,
        includeUnhealthy: true,
      }];
    case "leaseGrant":
      return [REGISTRY_METHODS.leaseGrant, {
        ttlMs: input.ttlMs,
        id: input.leaseId,
      }];
    case "leaseKeepAlive":
      return [REGISTRY_METHODS.leaseKeepAlive, { id: input.leaseId }];
    case "leaseRevoke":
      return [REGISTRY_METHODS.leaseRevoke, { id: input.leaseId }];
  }
}

/** The recorded output of a successful answer. */
function output(input: OpInput, result: unknown): OpOutput {
  const r = result as Record<string, unknown>;
  switch (input.f) {
    case "bind":
      return { f: "bind", revision: r.revision as number };
    case "unbind":
      return {
        f: "unbind",
        revision: r.revision as number,
        removed: r.removed as number,
      };
    case "lookup":
      return {
        f: "lookup",
        revision: (result as LookupResult).revision,
        endpoints: (result as LookupResult).endpoints.map((e: Endpoint) => ({
          id: e.id,
          url: e.url,
          leaseId: e.leaseId,
        })),
      };
    case "leaseGrant":
      return {
        f: "leaseGrant",
        revision: r.revision as number,
        ttlMs: r.ttlMs as number,
      };
    case "leaseKeepAlive":
      return { f: "leaseKeepAlive", ttlMs: r.ttlMs as number };
    case "leaseRevoke":
      return { f: "leaseRevoke", revision: r.revision as number };
  }
}

/** The definite LEASE_NOT_FOUND answer of `input`, or null if it has none. */
function leaseNotFound(input: OpInput): OpOutput | null {
  switch (input.f) {
    case "bind":
      return input.leaseId === null ? null : { f: "bind", leaseNotFound: true };
    case "leaseKeepAlive":
      return { f: "leaseKeepAlive", leaseNotFound: true };
    case "leaseRevoke":
      return { f: "leaseRevoke", leaseNotFound: true };
    default:
      return null;
  }
}
