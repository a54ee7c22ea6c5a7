/**
 * A registry cluster of real processes in a chaos network ({@link
 * ChaosCluster}), used inside the network's client namespace: each node
 * runs in its own namespace (`ip netns exec <ns> deno run -A
 * registry/main.ts …`; `ip netns exec` execs, so the child's PID is
 * deno's and kills and pauses reach it), listening on its namespace's
 * address with plain TCP and `--insecure` (the subnet is reachable only
 * from the namespaces of the run; TLS would only slow the nodes down).
 *
 * It is {@link LocalCluster} (process handling, output, status polls)
 * with a wrapper command and a listen host per node, plus faults: kill,
 * pause, restart, leadership transfer, and a member removed and brought
 * back as a fresh one. Every method has a deadline: none hangs, each
 * throws (a {@link ChaosClusterError}, or an `Error` "timed out after N
 * ms: what") once it passes.
 *
 * @example
 * ```ts ignore
 * // not run: needs a chaos network (root); _netns_smoke.ts runs it.
 * import { ChaosNetwork } from "./netns.ts";
 * import { ChaosCluster } from "./cluster.ts";
 * const cluster = await ChaosCluster.start({ network: ChaosNetwork.fromEnv() });
 * try {
 *   const leader = await cluster.waitForLeader();
 *   await cluster.kill(leader);
 *   await cluster.start(leader);
 *   await cluster.waitHealthy();
 * } finally {
 *   await cluster.stop();
 * }
 * ```
 *
 * @module
 */

import { LocalCluster } from "../../testing/cluster.ts";
import { ConnectionPool } from "../../stub/connection_pool.ts";
import { RegistryClient } from "../../stub/registry_client/registry_client.ts";
import {
  type LeaderTransferResult,
  type MemberListResult,
  REGISTRY_METHODS,
  type RegistryStatus,
} from "../../protocol/registry.ts";
import type { ChaosNetwork } from "./netns.ts";
import { within } from "../../testing/time.ts";

/** A cluster operation that did not finish in time or could not be done. */
export class ChaosClusterError extends Error {
  /** @param message what was asked, what went wrong. */
  constructor(message: string) {
    super(message);
    this.name = "ChaosClusterError";
  }
}

/** Settings of a {@link ChaosCluster}. */
export interface ChaosClusterOptions {
  /** The network the nodes run in (from {@link ChaosNetwork.fromEnv}). */
  network: ChaosNetwork;
  /** How many nodes, n1..nN of the network (3 or 5). Default every node of the network. */
  size?: number;
  /** Raft tick, ms. Default 50. */
  tickMs?: number;
  /** Election timeout in ticks. Default 10 (500..1000 ms elections). */
  electionTicks?: number;
  /** Extra options for every node. */
  nodeArgs?: string[];
  /** Folder for the nodes' data; default a fresh temporary folder, removed by `stop()`. */
  dataDir?: string;
  /** Receives each line a node prints. */
  onOutput?(name: string, line: string): void;
  /** Default deadline of admin calls (transfer, member changes), ms. Default 10 000. */
  callTimeoutMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The nodes of a registry cluster in a chaos network, and the faults that
 * act on processes and membership (the network's own faults are on
 * {@link ChaosNetwork}).
 */
export class ChaosCluster {
  /** The network the nodes run in. */
  readonly network: ChaosNetwork;
  /** The underlying processes (use with care: bypasses the bookkeeping here). */
  readonly local: LocalCluster;
  /** Node ids, n1..nN. */
  readonly ids: readonly string[];
  readonly #paused = new Set<string>();
  /** Nodes removed from the membership and not brought back yet. */
  readonly #removed = new Set<string>();
  readonly #pool = new ConnectionPool();
  readonly #admin: RegistryClient;
  readonly #callTimeoutMs: number;
  readonly #electionMs: number;

  private constructor(options: ChaosClusterOptions, size: number) {
    this.network = options.network;
    const ids = Array.from({ length: size }, (_, i) => `n${i + 1}`);
    this.ids = ids;
    this.local = new LocalCluster({
      dataDir: options.dataDir,
      tickMs: options.tickMs ?? 50,
      electionTicks: options.electionTicks ?? 10,
      nodeArgs: ["--insecure", ...options.nodeArgs ?? []],
      onOutput: options.onOutput,
      wrapperOf: (name) =>
        ids.includes(name) ? options.network.execIn(name) : [],
      hostOf: (id) => options.network.addressOf(id),
    });
    this.local.planRegistry(size);
    this.#callTimeoutMs = options.callTimeoutMs ?? 10_000;
    this.#electionMs = (options.tickMs ?? 50) * (options.electionTicks ?? 10);
    this.#admin = new RegistryClient(this.urls, this.#pool, {
      attemptTimeoutMs: 2_000,
      deadlineMs: this.#callTimeoutMs,
    });
  }

  /**
   * Starts every node in its namespace and waits for a leader known to
   * all (`timeoutMs` for the whole, default 60 s).
   *
   * @throws {ChaosClusterError} when a node does not start or no leader
   * is elected in time (the nodes started are stopped again).
   */
  static async start(
    options: ChaosClusterOptions,
    timeoutMs = 60_000,
  ): Promise<ChaosCluster> {
    const size = options.size ?? options.network.nodes.length;
    for (let i = 1; i <= size; i++) {
      if (!options.network.nodes.includes(`n${i}`)) {
        throw new ChaosClusterError(
          `ChaosCluster.start: the network has no node n${i} (nodes: ${
            options.network.nodes.join(", ")
          }); make it with nodes n1..n${size}`,
        );
      }
    }
    const cluster = new ChaosCluster(options, size);
    try {
      await within(
        (async () => {
          await Promise.all(
            cluster.ids.map((id) => cluster.local.startNode(id)),
          );
          await cluster.local.waitForLeader(timeoutMs);
        })(),
        timeoutMs,
        `starting ${size} registry nodes with a leader`,
      );
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  /** Client URLs of every node (members and removed ones alike), in node order. */
  get urls(): string[] {
    return this.ids.map((id) => this.urlOf(id));
  }

  /** Client URL of node `id`. */
  urlOf(id: string): string {
    const url = this.local.registry.get(id);
    if (url === undefined) throw new ChaosClusterError(`no node ${id}`);
    return url;
  }

  /** Whether node `id`'s process is running (paused ones too). */
  isRunning(id: string): boolean {
    try {
      return this.local.child(id).running;
    } catch {
      return false;
    }
  }

  /** Whether node `id` is paused ({@link pause}). */
  isPaused(id: string): boolean {
    return this.#paused.has(id);
  }

  /** Nodes removed by {@link removeMember} and not yet back ({@link rejoin}). */
  get removed(): string[] {
    return [...this.#removed];
  }

  /** Nodes that are members (not removed), in node order. */
  get members(): string[] {
    return this.ids.filter((id) => !this.#removed.has(id));
  }

  /** `registry.status` of node `id`, or null when it does not answer within `timeoutMs`. */
  status(id: string, timeoutMs = 1_000): Promise<RegistryStatus | null> {
    return this.local.status(id, timeoutMs);
  }

  /**
   * The leader as the nodes report it now: of the nodes that answer within
   * `timeoutMs` and say they lead, the one in the highest term (a deposed
   * leader cut off in a minority may still think it leads, in an older
   * term); null when none answers as leader.
   */
  async leader(timeoutMs = 1_000): Promise<string | null> {
    const statuses = await Promise.all(
      this.members.map((id) => this.status(id, timeoutMs)),
    );
    const leaders = statuses.filter((s) => s?.role === "leader")
      .sort((a, b) => b!.term - a!.term);
    return leaders[0]?.id ?? null;
  }

  /**
   * Waits until one leader is known to every member that answers;
   * @returns its id. @throws {ChaosClusterError} after `timeoutMs`.
   */
  async waitForLeader(timeoutMs = 20_000): Promise<string> {
    // Removed nodes are stopped, so the nodes that answer are members.
    return await this.local.waitForLeader(timeoutMs).catch((error) => {
      throw new ChaosClusterError(`waitForLeader: ${error.message}`);
    });
  }

  /**
   * Waits until there is a leader and every running member knows it and
   * has applied what the leader had committed (see
   * {@link LocalCluster.waitCaughtUp}). @throws {ChaosClusterError} after
   * `timeoutMs`.
   */
  async waitHealthy(timeoutMs = 30_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    const leader = await this.waitForLeader(left());
    for (const id of this.members) {
      if (!this.isRunning(id)) continue;
      await this.local.waitCaughtUp(id, {
        timeoutMs: left(),
        statusTimeoutMs: 1_000,
      }).catch((error) => {
        throw new ChaosClusterError(`waitHealthy: ${error.message}`);
      });
    }
    return leader;
  }

  /**
   * Sends `signal` to node `id` and waits until it exits (a paused node is
   * resumed first for signals other than SIGKILL). Escalates to SIGKILL
   * after `timeoutMs` (default 10 s). A node not running is left alone.
   */
  async kill(
    id: string,
    signal: Deno.Signal = "SIGKILL",
    timeoutMs = 10_000,
  ): Promise<void> {
    if (!this.isRunning(id)) return;
    const child = this.local.child(id);
    if (signal !== "SIGKILL" && this.#paused.has(id)) this.resume(id);
    const escalate = setTimeout(() => {
      try {
        Deno.kill(child.pid, "SIGKILL");
      } catch { /* gone */ }
    }, timeoutMs);
    try {
      await within(
        this.local.kill(id, signal),
        timeoutMs + 5_000,
        `${id} to exit on ${signal}`,
      );
    } finally {
      clearTimeout(escalate);
    }
    this.#paused.delete(id);
  }

  /** Freezes node `id` (SIGSTOP); {@link resume} undoes it. */
  pause(id: string): void {
    if (!this.isRunning(id)) return;
    this.local.pause(id);
    this.#paused.add(id);
  }

  /** Lets a node frozen by {@link pause} run again (SIGCONT). */
  resume(id: string): void {
    if (this.isRunning(id)) this.local.resume(id);
    this.#paused.delete(id);
  }

  /**
   * Starts node `id` again from its data folder (after {@link kill});
   * waits until it listens. A running node is left alone.
   */
  async start(id: string, timeoutMs = 30_000): Promise<void> {
    if (this.isRunning(id)) return;
    await within(
      this.local.startNode(id),
      timeoutMs,
      `${id} to start again`,
    );
  }

  /** Stops node `id` gracefully (SIGTERM; SIGKILL after `graceMs`) and starts it again from its data folder. */
  async restart(id: string, graceMs = 5_000): Promise<void> {
    await this.kill(id, "SIGTERM", graceMs);
    await this.start(id);
  }

  /** Every member with its role and progress, as the leader sees them. */
  memberList(timeoutMs = this.#callTimeoutMs): Promise<MemberListResult> {
    return this.#call(
      "memberList",
      () =>
        this.#admin.call(REGISTRY_METHODS.memberList, {}, {
          deadlineMs: timeoutMs,
        }),
      timeoutMs,
    );
  }

  /** Hands leadership to `to` (default the most up-to-date other voter). */
  transferLeader(
    to?: string,
    timeoutMs = this.#callTimeoutMs,
  ): Promise<LeaderTransferResult> {
    return this.#call(
      `transferLeader(${to ?? ""})`,
      () =>
        this.#admin.call(
          REGISTRY_METHODS.leaderTransfer,
          to === undefined ? {} : { to },
          { deadlineMs: timeoutMs },
        ),
      timeoutMs,
    );
  }

  /**
   * Removes member `id` (the leader too: it hands over or steps down once
   * the removal commits), waits until the cluster's member list lacks it,
   * then stops its process (a removed node stays up otherwise, taking no
   * part). {@link rejoin} brings it back.
   *
   * @throws {ChaosClusterError} when the removal does not commit in
   * `timeoutMs` (the node may or may not be removed then: see
   * {@link memberList}).
   */
  async removeMember(id: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    await this.#call(
      `removeMember(${id})`,
      async () => {
        let last: unknown = null;
        while (Date.now() < deadline) {
          try {
            const list = await this.#admin.call(
              REGISTRY_METHODS.memberRemove,
              { id },
              { deadlineMs: Math.min(left(), this.#callTimeoutMs) },
            );
            if (!list.members.some((m) => m.id === id)) return;
          } catch (error) {
            last = error;
            // Removed already (a retry after an unknown outcome)?
            const list = await this.#admin.call(
              REGISTRY_METHODS.memberList,
              {},
              { deadlineMs: Math.min(left(), 3_000) },
            ).catch(() => null);
            if (list !== null && !list.members.some((m) => m.id === id)) {
              return;
            }
            await sleep(200);
          }
        }
        throw new ChaosClusterError(
          `memberRemove ${id} failed: ${(last as Error)?.message ?? last}`,
        );
      },
      timeoutMs,
    );
    this.#removed.add(id);
    this.resume(id);
    await this.kill(id, "SIGTERM", 5_000);
  }

  /**
   * Brings removed node `id` back as a fresh member: its data folder
   * wiped, started with `--join` through the leader (which adds it as a
   * learner), promoted once caught up (by the leader on its own, or by
   * `memberPromote` if it has not been within a few election timeouts).
   * Resolves once it is a voter.
   *
   * @throws {ChaosClusterError} after `timeoutMs`.
   */
  async rejoin(id: string, timeoutMs = 45_000): Promise<void> {
    if (!this.#removed.has(id)) {
      throw new ChaosClusterError(
        `rejoin(${id}): ${id} was not removed (removeMember first)`,
      );
    }
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    await this.kill(id, "SIGKILL");
    await Deno.remove(await this.local.dataDirOf(id), { recursive: true })
      .catch((error) => {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
      });
    this.local.markRejoined(id);
    const through = await this.waitForLeader(left());
    await within(
      this.local.startNode(id, {
        join: this.urlOf(through),
        ready: /added as a learner|listening on/,
      }),
      left(),
      `${id} to start with --join`,
    );
    this.#removed.delete(id);
    const askedAt = Date.now();
    let promoted = false;
    while (Date.now() < deadline) {
      const list = await this.memberList(Math.min(left(), 3_000))
        .catch(() => null);
      const kind = list?.members.find((m) => m.id === id)?.kind;
      if (kind === "voter") return;
      if (
        kind === "learner" && !promoted &&
        Date.now() - askedAt > 6 * this.#electionMs
      ) {
        promoted = await this.#admin.call(
          REGISTRY_METHODS.memberPromote,
          { id },
          { deadlineMs: Math.min(left(), 5_000) },
        ).then(() => true, () => false);
      }
      await sleep(100);
    }
    throw new ChaosClusterError(
      `rejoin(${id}): not a voter within ${timeoutMs} ms; its output:\n${
        this.local.child(id).output.slice(-20).join("\n")
      }`,
    );
  }

  /**
   * Brings every node back that is no member: those {@link removeMember}
   * removed, and those a removal whose outcome was unknown (it timed out)
   * took out after all (the leader's member list lacks them). @returns
   * the nodes brought back.
   *
   * @throws {ChaosClusterError} when the member list cannot be read or a
   * rejoin fails within `timeoutMs`.
   */
  async reconcile(timeoutMs = 45_000): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    await this.waitForLeader(left());
    const list = await this.memberList(Math.min(left(), 5_000));
    for (const id of this.ids) {
      if (!list.members.some((m) => m.id === id)) this.#removed.add(id);
    }
    const back = [...this.#removed];
    for (const id of back) await this.rejoin(id, left());
    return back;
  }

  /** Stops every node and removes the data folder (if made here); closes the admin client. */
  async stop(): Promise<void> {
    this.#admin.close();
    this.#pool.close();
    await within(this.local.stop(3_000), 20_000, "stopping the nodes")
      .catch(async () => {
        for (const id of this.ids) {
          if (this.isRunning(id)) {
            try {
              Deno.kill(this.local.child(id).pid, "SIGKILL");
            } catch { /* gone */ }
          }
        }
        await this.local.stop(0);
      });
  }

  async #call<T>(
    what: string,
    run: () => Promise<T>,
    timeoutMs: number,
  ): Promise<T> {
    try {
      return await within(run(), timeoutMs + 1_000, what);
    } catch (error) {
      if (error instanceof ChaosClusterError) throw error;
      throw new ChaosClusterError(
        `${what} failed: ${(error as Error)?.message ?? error}`,
      );
    }
  }
}
