/**
 * Self-binding servers (Ubik's auto-bind): {@link bindServer} grants a
 * lease and binds a server under a name in one step, keeps the lease alive
 * (reporting the server's load), binds again by itself when the lease was
 * lost (the registry was down longer than the TTL, or the lease expired
 * while the server was paused), and on close drains (endpoints marked
 * `draining`, so stubs stop picking them while calls under way finish),
 * then revokes the lease.
 *
 * @module
 */

import { RpcError } from "../../rpc/errors.ts";
import { abortableSleep, backoffDelay } from "../../internal/timing.ts";
import {
  type Attributes,
  type BindResult,
  type Endpoint,
  type EndpointSpec,
  type HealthCheck,
  ID_IN_USE,
  LEASE_NOT_FOUND,
  type Scope,
} from "../../protocol/registry.ts";
import type { RegistryClient } from "../registry_client/registry_client.ts";

/** The server to bind: anything with a URL (e.g. the result of `serve()`). */
export interface BindableServer {
  /** `tcp://host:port` clients dial. */
  readonly url: string;
  /** True when `url` names a wildcard address (refused: set `advertise`). */
  readonly wildcard?: boolean;
  /** Graceful shutdown of the server itself, called on close after draining. */
  drain?(graceMs?: number): Promise<void>;
}

/** Settings of {@link bindServer}. */
export interface BindServerOptions {
  /**
   * Instance id, unique within the name. Default: the name and 8 random
   * hex digits, so two copies of a server never replace each other.
   */
  id?: string;
  /** Lease TTL, ms: the server leaves lookups this long after it dies. @default 10_000 */
  ttlMs?: number;
  /** Keep-alive period, ms. @default ttlMs / 3 */
  keepAliveIntervalMs?: number;
  /** Attributes lookups can match (`name?key=value`). */
  attrs?: Attributes;
  /** Relative share of calls for weighted distributors. @default 1 */
  weight?: number;
  /** Failure zone or locality. */
  zone?: string;
  /** Active health check the registry leader runs. */
  check?: Partial<HealthCheck> & Pick<HealthCheck, "kind">;
  /**
   * `local` binds in the local area of one registry node (`node`, default
   * the client's first registry URL), which only that node's lookups see.
   * @default "global"
   */
  scope?: Scope;
  /** The registry node of a local binding. */
  node?: string;
  /** The server's current load, sent with each keep-alive (lower is less loaded). */
  load?: () => number | undefined;
  /**
   * On close, how long to wait after marking the endpoint draining before
   * revoking, so clients stop picking it and finish their calls, ms.
   * @default 1_000
   */
  drainMs?: number;
  /** Passed to the server's own `drain()` on close, ms. @default 5_000 */
  serverGraceMs?: number;
  /**
   * When the id is held by another live lease (ID_IN_USE: typically this
   * server's previous process, which died without unbinding), bind again
   * every 250 ms for up to this long, as that lease runs out, instead of
   * failing at once. For servers whose id is their own (a replica, a
   * fixed instance name). @default 0 (fail at once)
   */
  waitForIdMs?: number;
  /** Told of the first ID_IN_USE refusal while waiting (`waitForIdMs`). */
  onIdInUse?(error: RpcError): void;
  /** Told what happens (bound, lost and bound again, keep-alive trouble), for logs. */
  onEvent?(event: BindServerEvent): void;
}

/** Something a {@link ServerBinding} went through. */
export type BindServerEvent =
  | { type: "bound"; leaseId: string; revision: number }
  | { type: "rebound"; leaseId: string; revision: number; why: string }
  | { type: "keptAlive"; leaseId: string }
  | { type: "keepAliveFailed"; error: unknown }
  | { type: "drained" }
  | { type: "revoked" };

/** A server bound with a lease that {@link bindServer} keeps alive. */
export interface ServerBinding {
  /** The name bound under (as given, with any query). */
  readonly name: string;
  /** The instance id. */
  readonly id: string;
  /** The current lease (a new one after a re-bind). */
  readonly leaseId: string;
  /** The endpoint as last bound. */
  readonly endpoint: Endpoint;
  /** Aborts once the binding is closed. */
  readonly signal: AbortSignal;
  /**
   * Graceful shutdown: marks the endpoint draining, waits `drainMs`, drains
   * the server (if it has `drain()`), then revokes the lease. Safe to call
   * twice; never rejects (a registry that cannot be reached lets the lease
   * lapse instead).
   */
  close(): Promise<void>;
}

/**
 * Grants a lease, binds `server` under `name` with it (one atomic step),
 * and keeps it alive until `close()`.
 *
 * @param registry the registry client (`client.registry`). With access
 * control on, its `token` (`connect(urls, { token })`) authenticates every
 * call, keep-alives included, and must carry `bind:<prefix>` for `name`;
 * a refused token or a missing permission fails the first bind at once
 * (UNAUTHENTICATED or PERMISSION_DENIED, not retried).
 * @param name service name; `name?key=value` adds attributes.
 * @param server what to bind: a server from `serve()`, or a URL.
 * @throws {RpcError} INVALID_PARAMS for a bad name, URL or TTL, or a
 * wildcard server address (listen with `advertise`); ID_IN_USE (-32015)
 * when another live server holds `options.id` under `name` at another URL
 * (past `options.waitForIdMs`; its one-line message names that server's URL and lease, and what to
 * do; a restart at the same URL takes the binding over instead); the
 * registry's errors (UNAVAILABLE…) when the first bind fails.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { serve } from "@rafter/rpc/deno";
 * import { bindServer, connect } from "@rafter/rpc";
 * import { startRegistryNode } from "@rafter/rpc/registry";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect([node.url]);
 * const binding = await bindServer(client.registry, "greeter", server, { ttlMs: 5_000 });
 * const { endpoints } = await client.lookup("greeter");
 * assert.deepEqual(endpoints.map((endpoint) => endpoint.url), [server.url]);
 * // At SIGTERM (Deno.addSignalListener): drain the server, revoke the lease.
 * await binding.close();
 * client.close();
 * await server.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export async function bindServer(
  registry: RegistryClient,
  name: string,
  server: BindableServer | string,
  options: BindServerOptions = {},
): Promise<ServerBinding> {
  const target: BindableServer = typeof server === "string"
    ? { url: server }
    : server;
  if (target.wildcard === true) {
    throw new RpcError(
      -32602,
      `Invalid params: the server listens on ${target.url}, a wildcard address no client can dial; serve it with advertise (the host's reachable address) or bind a URL`,
    );
  }
  const base = name.split("?")[0];
  const id = options.id ?? `${base.split("/").at(-1)}-${randomHex(4)}`;
  const ttlMs = options.ttlMs ?? 10_000;
  const spec: EndpointSpec = { id, url: target.url };
  if (options.attrs !== undefined) spec.attrs = options.attrs;
  if (options.weight !== undefined) spec.weight = options.weight;
  if (options.zone !== undefined) spec.zone = options.zone;
  if (options.check !== undefined) spec.check = options.check;
  const binding = new KeptBinding(registry, name, spec, target, {
    ...options,
    ttlMs,
  });
  const until = Date.now() + (options.waitForIdMs ?? 0);
  for (let round = 0;; round++) {
    try {
      await binding.bind(undefined);
      break;
    } catch (error) {
      const inUse = error instanceof RpcError && error.code === ID_IN_USE;
      if (!inUse || Date.now() >= until || round >= 10_000) throw error;
      if (round === 0) options.onIdInUse?.(error);
      await abortableSleep(250);
    }
  }
  binding.keepAlive();
  return binding;
}

class KeptBinding implements ServerBinding {
  readonly name: string;
  readonly id: string;
  readonly #registry: RegistryClient;
  readonly #spec: EndpointSpec;
  readonly #server: BindableServer;
  readonly #options: BindServerOptions & { ttlMs: number };
  readonly #closing = new AbortController();
  #result: BindResult | null = null;
  #closed: Promise<void> | null = null;
  #loop: Promise<void> = Promise.resolve();

  constructor(
    registry: RegistryClient,
    name: string,
    spec: EndpointSpec,
    server: BindableServer,
    options: BindServerOptions & { ttlMs: number },
  ) {
    this.#registry = registry;
    this.name = name;
    this.id = spec.id!;
    this.#spec = spec;
    this.#server = server;
    this.#options = options;
  }

  get leaseId(): string {
    return this.#result?.leaseId ?? "";
  }

  get endpoint(): Endpoint {
    return this.#result!.endpoint;
  }

  get signal(): AbortSignal {
    return this.#closing.signal;
  }

  /** Grant + bind in one step. */
  async bind(why: string | undefined): Promise<void> {
    const signal = this.#closing.signal;
    let result: BindResult;
    if (this.#options.scope === "local") {
      // The lease is global (granted through the leader), the binding lives
      // on one node.
      const lease = await this.#registry.grantLease(this.#options.ttlMs, {
        signal,
      });
      try {
        result = await this.#registry.bind(this.name, this.#spec, {
          leaseId: lease.id,
          scope: "local",
          node: this.#node(),
          signal,
        });
      } catch (error) {
        // Refused (ID_IN_USE…): the lease would linger for its TTL.
        await this.#registry.revokeLease(lease.id).catch(() => {});
        throw error;
      }
    } else {
      result = await this.#registry.bind(this.name, this.#spec, {
        grant: { ttlMs: this.#options.ttlMs },
        signal,
      });
    }
    this.#result = result;
    const leaseId = result.leaseId!;
    this.#options.onEvent?.(
      why === undefined
        ? { type: "bound", leaseId, revision: result.revision }
        : { type: "rebound", leaseId, revision: result.revision, why },
    );
  }

  #node(): string {
    return this.#options.node ?? this.#registry.urls[0];
  }

  keepAlive(): void {
    this.#loop = this.#keepAliveLoop();
  }

  async #keepAliveLoop(): Promise<void> {
    const { ttlMs } = this.#options;
    const interval = this.#options.keepAliveIntervalMs ?? ttlMs / 3;
    const signal = this.#closing.signal;
    let failures = 0;
    // When the last keep-alive was sent (performance.now): the next one is
    // due `interval` after it, however long its answer took, so the gap
    // the leader sees stays one interval (a leader whose clock runs fast
    // by r counts r intervals of its TTL's three).
    let sentAt = performance.now();
    while (!signal.aborted) {
      // The first retries come quickly: a fail-over must not eat the TTL.
      const wait = failures === 0
        ? Math.max(0, sentAt + interval - performance.now())
        : backoffDelay(failures - 1, 50, Math.min(1_000, interval));
      await abortableSleep(wait, signal);
      if (signal.aborted) return;
      sentAt = performance.now();
      try {
        // A registry node that stopped answering (e.g. a leader paused by
        // SIGSTOP) must cost a fraction of the TTL, not all of it.
        await this.#registry.keepAlive(this.leaseId, this.#load(), {
          deadlineMs: Math.max(interval, 1_000),
          attemptTimeoutMs: Math.min(Math.max(interval / 3, 100), 2_000),
          signal,
        });
        failures = 0;
        this.#options.onEvent?.({ type: "keptAlive", leaseId: this.leaseId });
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof RpcError && error.code === LEASE_NOT_FOUND) {
          try {
            await this.bind(`lease ${this.leaseId} was lost: ${error.message}`);
            failures = 0;
          } catch (bindError) {
            failures++;
            this.#options.onEvent?.({
              type: "keepAliveFailed",
              error: bindError,
            });
          }
          continue;
        }
        failures++;
        this.#options.onEvent?.({ type: "keepAliveFailed", error });
      }
    }
  }

  #load(): number | undefined {
    try {
      const load = this.#options.load?.();
      return typeof load === "number" && Number.isFinite(load)
        ? load
        : undefined;
    } catch {
      return undefined;
    }
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  async #shutdown(): Promise<void> {
    this.#closing.abort();
    await this.#loop;
    const leaseId = this.leaseId;
    const deadline = { deadlineMs: 3_000 };
    try {
      await this.#registry.setState(this.name, this.id, "draining", {
        ...deadline,
        leaseId,
        scope: this.#options.scope,
        node: this.#options.scope === "local" ? this.#node() : undefined,
      });
      this.#options.onEvent?.({ type: "drained" });
      await abortableSleep(this.#options.drainMs ?? 1_000);
    } catch {
      // Unreachable registry or a lost lease: nothing to drain.
    }
    await this.#server.drain?.(this.#options.serverGraceMs ?? 5_000);
    try {
      if (this.#options.scope === "local") {
        await this.#registry.unbind(this.name, this.id, {
          ...deadline,
          leaseId,
          scope: "local",
          node: this.#node(),
        });
      }
      await this.#registry.revokeLease(leaseId, deadline);
      this.#options.onEvent?.({ type: "revoked" });
    } catch {
      // The lease lapses by itself within its TTL.
    }
  }
}

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) =>
    b.toString(16).padStart(2, "0")
  ).join("");
}
