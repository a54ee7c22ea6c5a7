/**
 * Active health checks, run by the registry leader (after the RMI registry
 * paper's "runtime socket … to detect if the server is available", and
 * Consul's checks). Each binding with a `check` is probed every
 * `intervalMs`: `tcp` opens a TCP connection, `ping` calls `rpc.ping` over
 * a kept-open JSON-RPC connection. After `failuresBeforeUnhealthy`
 * consecutive failures the leader proposes the endpoint `unhealthy`; the
 * first success after that proposes it `serving` again: one log entry per
 * transition, never one per probe.
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";
import { messageOf } from "../rpc/errors.ts";
import type { Dialer } from "../rpc/transport/transport.ts";
import type { Binding, Command } from "./state.ts";
import type { LogLevel } from "./node/log.ts";

/** Settings of a {@link HealthChecker}. */
export interface HealthCheckerOptions {
  /** Proposes a health transition; rejects when it could not commit (it is retried). */
  propose(command: Extract<Command, { op: "health" }>): Promise<unknown>;
  /** Opens connections; default TCP through `Deno.connect`. */
  dialer?: Dialer;
  /** Most probes under way at once. @default 64 */
  maxConcurrentProbes?: number;
  /**
   * Monotonic clock, ms: probe intervals and timeouts must not move when
   * the wall clock jumps. @default performance.now
   */
  now?: () => number;
  /** Receives a line for each transition proposed (`warn` when failing). */
  log?(line: string, level?: LogLevel): void;
}

interface Target {
  binding: Binding;
  failures: number;
  nextAt: number;
  probing: boolean;
  proposing: boolean;
}

/**
 * Probes the checked bindings while this node leads. Call {@link update}
 * whenever the set of checked bindings may have changed, {@link tick}
 * often (every registry tick), and {@link stop} when leadership ends.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { HealthChecker } from "./_health_checker.ts";
 * import { encodeCommand, RegistryState } from "./state.ts";
 * // A port nothing listens on.
 * const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * listener.close();
 * const state = new RegistryState();
 * state.apply(encodeCommand({
 *   op: "bind", name: "hello", endpoint: {
 *     id: "h1", url: `tcp://127.0.0.1:${listener.addr.port}`,
 *     check: { kind: "tcp", intervalMs: 1000, timeoutMs: 500, failuresBeforeUnhealthy: 1 },
 *   },
 * }));
 * // A leader proposes through Raft (node.propose(encodeCommand(command))).
 * const proposed = Promise.withResolvers<unknown>();
 * const checker = new HealthChecker({
 *   propose: (command) => Promise.resolve(proposed.resolve(command)),
 * });
 * checker.update(state.checkedBindings());
 * checker.start(); // this node leads
 * checker.tick(); // every registry tick, in a node
 * assert.deepEqual(await proposed.promise, {
 *   op: "health", name: "hello", id: "h1", createRevision: 1, healthy: false,
 * });
 * checker.stop();
 * ```
 */
export class HealthChecker {
  readonly #options: HealthCheckerOptions;
  readonly #now: () => number;
  readonly #maxConcurrent: number;
  readonly #targets = new Map<string, Target>();
  readonly #connections = new Map<string, Promise<RpcConnection>>();
  #probing = 0;
  #running = false;

  /** Makes an idle checker; {@link start} makes it probe. */
  constructor(options: HealthCheckerOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
    this.#maxConcurrent = options.maxConcurrentProbes ?? 64;
  }

  /** Whether it probes (this node leads). */
  get running(): boolean {
    return this.#running;
  }

  /** How many endpoints it checks. */
  get size(): number {
    return this.#targets.size;
  }

  /** Starts probing (this node became leader), counting failures from zero. */
  start(): void {
    this.#running = true;
    for (const target of this.#targets.values()) {
      target.failures = 0;
      target.nextAt = this.#now();
    }
  }

  /** Stops probing and closes its connections (leadership ended, or the node stops). */
  stop(): void {
    this.#running = false;
    for (const opening of this.#connections.values()) {
      opening.then((c) => c.close(), () => {});
    }
    this.#connections.clear();
  }

  /** The checked bindings now: new ones are added, gone ones dropped, changed ones updated. */
  update(bindings: readonly Binding[]): void {
    const seen = new Set<string>();
    for (const binding of bindings) {
      if (binding.check === null) continue;
      const key = `${binding.name}\n${binding.id}\n${binding.createRevision}`;
      seen.add(key);
      const target = this.#targets.get(key);
      if (target === undefined) {
        this.#targets.set(key, {
          binding,
          failures: 0,
          nextAt: this.#now(),
          probing: false,
          proposing: false,
        });
      } else {
        target.binding = binding;
      }
    }
    for (const [key, target] of this.#targets) {
      if (!seen.has(key)) {
        this.#targets.delete(key);
        this.#forget(target.binding.url);
      }
    }
  }

  /** Starts the probes that are due, up to the concurrency bound. */
  tick(): void {
    if (!this.#running) return;
    const now = this.#now();
    for (const target of this.#targets.values()) {
      if (this.#probing >= this.#maxConcurrent) return;
      if (target.probing || target.nextAt > now) continue;
      target.probing = true;
      target.nextAt = now + target.binding.check!.intervalMs;
      this.#probing++;
      this.#probe(target.binding).then(
        () => this.#result(target, true, ""),
        (error) => this.#result(target, false, messageOf(error)),
      ).finally(() => {
        target.probing = false;
        this.#probing--;
      });
    }
  }

  #result(target: Target, healthy: boolean, why: string): void {
    if (!this.#running) return;
    const { binding } = target;
    target.failures = healthy ? 0 : target.failures + 1;
    if (binding.state === "draining" || target.proposing) return;
    const wantUnhealthy = !healthy &&
      target.failures >= binding.check!.failuresBeforeUnhealthy &&
      binding.state === "serving";
    const wantServing = healthy && binding.state === "unhealthy";
    if (!wantUnhealthy && !wantServing) return;
    target.proposing = true;
    this.#options.log?.(
      `health: ${binding.name}/${binding.id} at ${binding.url} is ${
        healthy
          ? "answering again"
          : `failing (${target.failures} checks in a row: ${why})`
      }; marking it ${healthy ? "serving" : "unhealthy"}`,
      healthy ? "info" : "warn",
    );
    this.#options.propose({
      op: "health",
      name: binding.name,
      id: binding.id,
      createRevision: binding.createRevision,
      healthy,
    }).catch(() => {
      // Not committed (leadership lost, or a timeout): the next probe
      // proposes again if the state still disagrees.
    }).finally(() => {
      target.proposing = false;
    });
  }

  async #probe(binding: Binding): Promise<void> {
    const check = binding.check!;
    if (check.kind === "tcp") {
      const connection = await dial(binding.url, {
        dialer: this.#options.dialer,
        connectTimeoutMs: check.timeoutMs,
      });
      connection.close();
      return;
    }
    const started = this.#now();
    let connection: RpcConnection;
    try {
      connection = await this.#connection(binding.url, check.timeoutMs);
    } catch (error) {
      this.#forget(binding.url);
      throw error;
    }
    const left = Math.max(1, check.timeoutMs - (this.#now() - started));
    try {
      await connection.call("rpc.ping", undefined, { timeoutMs: left });
    } catch (error) {
      this.#forget(binding.url);
      throw error;
    }
  }

  #connection(url: string, timeoutMs: number): Promise<RpcConnection> {
    const existing = this.#connections.get(url);
    if (existing !== undefined) {
      return existing.then((c) => {
        if (!c.isClosed) return c;
        this.#connections.delete(url);
        return this.#connection(url, timeoutMs);
      });
    }
    const opening = dial(url, {
      dialer: this.#options.dialer,
      connectTimeoutMs: timeoutMs,
    });
    this.#connections.set(url, opening);
    opening.catch(() => {
      if (this.#connections.get(url) === opening) this.#connections.delete(url);
    });
    return opening;
  }

  #forget(url: string): void {
    const opening = this.#connections.get(url);
    if (opening === undefined) return;
    this.#connections.delete(url);
    opening.then((c) => c.close(), () => {});
  }
}
