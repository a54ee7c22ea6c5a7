/**
 * One attempt of a call on one endpoint: the candidates (looking the name
 * up within the deadline when due), the distributor's pick, the pooled
 * connection, the send with the attempt's timeout, and its outcome.
 *
 * @module
 */

import { DEADLINE_EXCEEDED } from "../../rpc/errors.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { withDeadline } from "../../internal/timing.ts";
import type { ClusterMap } from "../cluster_map/cluster_map.ts";
import type { ConnectionPool } from "../connection_pool.ts";
import type {
  CallInfo,
  Candidate,
  Distributor,
} from "../distributors/distributor.ts";
import type {
  EndpointHealth,
  HealthBook,
} from "../cluster_map/endpoint_health.ts";
import { NotSentError } from "./call_errors.ts";
import { cancelled, classify, deadlineError, type Outcome } from "./outcome.ts";
import { type Latencies, type LatencyBook, latencyBook } from "./latencies.ts";

/** What a stub asks of its name's endpoints: a cluster map, or several (fail-over). */
export type StubMap = Pick<
  ClusterMap,
  "candidates" | "needsLookup" | "endpoints" | "close"
>;

/** What a stub needs from its client. */
export interface StubContext {
  /** The name's cluster map. */
  map: StubMap;
  /** The client's connections. */
  pool: ConnectionPool;
  /** The client's records of every server. */
  health: HealthBook;
  /**
   * Aborts when the client is closed: calls reject with CANCELLED from
   * then on, and one under way is not retried.
   */
  closed?: AbortSignal;
}

/** Sends one attempt on a connection: a call, or a batch. */
export type Send = (
  connection: RpcConnection,
  options: { timeoutMs: number; signal: AbortSignal | undefined },
) => Promise<unknown>;

/** Methods whose error label a stub keeps (callers may make up method names). */
const MAX_LABELS = 256;

/** The attempts of one stub's calls: its name, client, distributor and its cluster's latencies. */
export class Attempts {
  /** The service name. */
  readonly name: string;
  /** The client's map, pool and health records. */
  readonly context: StubContext;
  /** Picks the endpoint of each attempt. */
  readonly distributor: Distributor;
  readonly #labels = new Map<string, string>();
  /** The answered attempts' latencies of each method, shared by the name's stubs. */
  readonly #latencies: LatencyBook;

  /** Attempts for `name` through `context`, picked by `distributor`. */
  constructor(name: string, context: StubContext, distributor: Distributor) {
    this.name = name;
    this.context = context;
    this.distributor = distributor;
    this.#latencies = latencyBook(context.map);
  }

  /** The latencies of `method` on the name's cluster (null past 256 methods). */
  latencies(method: string): Latencies | null {
    return this.#latencies.of(method);
  }

  /** `"name.method"`, as errors name a call; one string per method. */
  label(method: string): string {
    let label = this.#labels.get(method);
    if (label === undefined) {
      label = `"${this.name}.${method}"`;
      if (this.#labels.size < MAX_LABELS) this.#labels.set(method, label);
    }
    return label;
  }

  /** The candidates in play, looking the name up (within the deadline) when needed. */
  async lookup(
    deadline: number,
    signal: AbortSignal | undefined,
    label: string,
    deadlineMs: number,
    ranOn: string | null,
    attempted: readonly Candidate[] = [],
  ): Promise<readonly Candidate[]> {
    const { map } = this.context;
    // The fast path: no timer, no lookup.
    if (!map.needsLookup()) return map.candidates();
    return await withDeadline(
      map.endpoints(),
      deadline,
      signal,
      () =>
        deadlineError(
          label,
          deadlineMs,
          ranOn,
          null,
          "looking up the name in the registry",
          attempted,
        ),
      () => cancelled(label, ranOn),
    );
  }

  /**
   * The distributor's pick among `candidates`.
   *
   * @throws {TypeError} when it returned none of them.
   */
  choose(
    candidates: readonly Candidate[],
    info: CallInfo,
    label: string,
  ): Candidate {
    const chosen = this.distributor.choose(candidates, info);
    return listed(candidates, chosen) ?? unlisted("choose", chosen, label);
  }

  /**
   * The distributor's `pick` among `candidates`, for a first attempt of
   * `method` (the distributor has one).
   *
   * @throws {TypeError} when it returned none of them.
   */
  pick(candidates: readonly Candidate[], method: string): Candidate {
    const chosen = this.distributor.pick!(candidates);
    return listed(candidates, chosen) ??
      unlisted("pick", chosen, this.label(method));
  }

  /**
   * The pool's connection to `url`, opened by `deadline`.
   *
   * @throws {NotSentError} when it could not be opened in time, refused,
   * or the caller aborted.
   */
  async connection(
    url: string,
    deadline: number,
    signal: AbortSignal | undefined,
    label: string,
  ): Promise<RpcConnection> {
    return this.context.pool.ready(url) ??
      await withDeadline(
        this.context.pool.get(url),
        deadline,
        signal,
        () =>
          new NotSentError(
            `Deadline exceeded: ${label} could not connect to ${url} in time`,
            {
              code: DEADLINE_EXCEEDED,
              endpoint: url,
              data: { step: `connecting to ${url}` },
            },
          ),
        () => cancelled(label, null),
      );
  }

  /** One attempt on one endpoint, its failure classified; its latency sampled in `latencies`. */
  async attempt(
    endpoint: Candidate,
    label: string,
    send: Send,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    latencies: Latencies | null = null,
  ): Promise<Outcome> {
    const { url } = endpoint;
    const health = this.context.health.of(url);
    health.started();
    const started = Date.now();
    try {
      const connection = this.context.pool.ready(url) ??
        await this.connection(url, started + timeoutMs, signal, label);
      // The latency sample leaves out opening the connection: a first
      // call's dial must not make its server look slow.
      // performance.now(): local calls take well under a millisecond.
      const sentAt = performance.now();
      const value = await send(connection, {
        timeoutMs: Math.max(1, started + timeoutMs - Date.now()),
        signal,
      });
      this.answered(health, sentAt, latencies);
      return { ok: true, value };
    } catch (error) {
      return classify(error, url, label, started, health);
    } finally {
      health.ended();
    }
  }

  /** Records an answer `sentAt` (performance.now()) in the endpoint's health and the method's `latencies`. */
  answered(
    health: EndpointHealth,
    sentAt: number,
    latencies: Latencies | null,
  ): void {
    // One clock read for the latency and the health record.
    const now = performance.now();
    const latency = now - sentAt;
    health.answered(latency, now);
    latencies?.add(latency);
  }

  /** The value a call answers: `value`, or what the distributor's `onReturn` makes of it. */
  returned<R>(value: unknown, info: CallInfo, endpoint: Candidate): R {
    const onReturn = this.distributor.onReturn;
    if (onReturn === undefined) return value as R;
    const replaced = onReturn(value, { ...info, endpoint });
    return (replaced === undefined ? value : replaced) as R;
  }
}

/**
 * `chosen` as listed in `candidates` (itself, or the one of the same id
 * and URL), or undefined.
 */
function listed(
  candidates: readonly Candidate[],
  chosen: Candidate | undefined,
): Candidate | undefined {
  if (chosen === undefined) return undefined;
  // The common case first: one of the list's own objects, often the first.
  if (candidates[0] === chosen || candidates.includes(chosen)) return chosen;
  return candidates.find((c) => c.id === chosen.id && c.url === chosen.url);
}

/** The error of a distributor's `hook` that returned `chosen`, not listed. */
function unlisted(
  hook: "choose" | "pick",
  chosen: Candidate | undefined,
  label: string,
): never {
  throw new TypeError(
    `the distributor's ${hook}() returned ${
      JSON.stringify(chosen === undefined ? undefined : chosen.id)
    } for ${label}; it must return one of the endpoints it was given`,
  );
}
