/**
 * The chaos suite's nemesis (Jepsen's name for it): every 1–4 s it
 * applies one fault to a {@link ChaosCluster} and its network, holds it
 * 1–4 s, and heals it, drawing kinds, targets and times from a seeded
 * PRNG (`testing/prng.ts`), so a seed names a schedule (the cluster's own
 * timing still varies from run to run).
 *
 * Every fault is recorded ({@link FaultRecord}) with `performance.now()`
 * times, the clock of the workload's history when both run in the same
 * process. One fault at a time; each heal undoes everything (the
 * network's rules flushed, paused nodes resumed, killed nodes started,
 * removed nodes brought back), so no fault outlives its record, and
 * {@link Nemesis.stop} heals once more and waits until a leader is
 * known and every member has caught up. Admin calls that fail during a
 * fault are recorded (`error`) and the run goes on.
 *
 * @example
 * ```ts ignore
 * // not run: needs a chaos network (root); _netns_smoke.ts runs it.
 * import { ChaosNetwork } from "./netns.ts";
 * import { ChaosCluster } from "./cluster.ts";
 * import { Nemesis } from "./nemesis.ts";
 * const cluster = await ChaosCluster.start({ network: ChaosNetwork.fromEnv() });
 * const nemesis = new Nemesis(cluster, { seed: 7, kinds: ["kill-leader", "isolate-leader"] });
 * nemesis.start();
 * await new Promise((r) => setTimeout(r, 20_000));
 * const faults = await nemesis.stop();
 * console.log(faults.map((f) => `${f.kind} ${f.target}`));
 * await cluster.stop();
 * ```
 *
 * @module
 */

import { seeded } from "../../testing/prng.ts";
import type { ChaosCluster } from "./cluster.ts";

/** What the nemesis can do. */
export const FAULT_KINDS = [
  "partition-halves",
  "isolate-leader",
  "bridge",
  "one-way",
  "ring",
  "kill-leader",
  "kill-random",
  "kill-majority",
  "pause-leader",
  "pause-random",
  "restart-graceful",
  "transfer-leader",
  "member-remove-readd",
  "client-cut",
] as const;

/**
 * One kind of fault:
 * - `partition-halves`: the members split in two (a minority and a
 *   majority, at random), both ways;
 * - `isolate-leader`: the leader cut off every other node;
 * - `bridge`: one node sees both halves, the others only their half;
 * - `one-way`: packets from one node to another dropped (half the time
 *   from the leader to a follower), the other way delivered;
 * - `ring`: each node sees only its two neighbours (a no-op with 3 nodes);
 * - `kill-leader`, `kill-random`, `kill-majority`: SIGKILL, started again
 *   from their folders at the heal;
 * - `pause-leader`, `pause-random`: SIGSTOP, SIGCONT at the heal;
 * - `restart-graceful`: SIGTERM and start again (healed when it listens);
 * - `transfer-leader`: `registry.leaderTransfer` to a random other member;
 * - `member-remove-readd`: a member (a third of the time the leader)
 *   removed, then brought back with a wiped folder (`--join`, promoted);
 * - `client-cut`: the client namespace cut off one member (half the time
 *   the leader), both ways; the nodes still talk.
 */
export type FaultKind = typeof FAULT_KINDS[number];

/** The partitions of the nemesis, for a run of network faults only. */
export const PARTITION_KINDS: readonly FaultKind[] = [
  "partition-halves",
  "isolate-leader",
  "bridge",
  "one-way",
  "ring",
  "client-cut",
];

/** One fault the nemesis applied. */
export interface FaultRecord {
  /** Which fault. */
  kind: FaultKind;
  /** The nodes it acted on (for a partition: every node cut off something). */
  target: string[];
  /** `performance.now()` when the fault began (just before its first action). */
  startedAt: number;
  /**
   * `performance.now()` once its heal finished (rules flushed, nodes
   * resumed, killed ones listening again; for `member-remove-readd`, the
   * node a voter again); null while it holds. A leader may still be
   * being elected then.
   */
  healedAt: number | null;
  /** What exactly: the groups, the direction, the signal, who led. */
  detail: string;
  /** Why applying or healing it failed, if it did (the run went on). */
  error?: string;
}

/** Settings of a {@link Nemesis}. */
export interface NemesisOptions {
  /** Kinds to draw from (uniformly). Default every kind ({@link FAULT_KINDS}). */
  kinds?: readonly FaultKind[];
  /** PRNG seed. Default drawn from the clock (read it back: {@link Nemesis.seed}). */
  seed?: number;
  /** Quiet time between a heal and the next fault, ms: [min, max]. Default [1000, 4000]. */
  intervalMs?: [number, number];
  /** How long a fault holds before its heal, ms: [min, max]. Default [1000, 4000]. */
  holdMs?: [number, number];
  /** Apply no new fault after this long, ms (the loop ends; {@link Nemesis.stop} still heals). Default no limit. */
  durationMs?: number;
  /** How long {@link Nemesis.stop} waits for a healthy cluster, ms. Default 60 000. */
  healthyTimeoutMs?: number;
  /** Told of each fault as it starts and once it is healed. */
  onFault?(record: FaultRecord, phase: "start" | "healed"): void;
}

/** Applies and heals faults on a {@link ChaosCluster}; see the module doc. */
export class Nemesis {
  /** The seed of this run's draws. */
  readonly seed: number;
  /** Every fault applied so far, in order. */
  readonly faults: FaultRecord[] = [];
  readonly #cluster: ChaosCluster;
  readonly #random: () => number;
  readonly #kinds: readonly FaultKind[];
  readonly #interval: [number, number];
  readonly #hold: [number, number];
  readonly #durationMs: number;
  readonly #healthyTimeoutMs: number;
  readonly #onFault: NemesisOptions["onFault"];
  #loop: Promise<void> | null = null;
  #stopping = false;
  #wake: (() => void) | null = null;

  /** @param cluster the cluster to act on (started). @param options kinds, seed, timing. */
  constructor(cluster: ChaosCluster, options: NemesisOptions = {}) {
    this.#cluster = cluster;
    this.seed = options.seed ?? (Date.now() % 2 ** 31);
    this.#random = seeded(this.seed);
    this.#kinds = options.kinds ?? FAULT_KINDS;
    for (const kind of this.#kinds) {
      if (!(FAULT_KINDS as readonly string[]).includes(kind)) {
        throw new Error(
          `Nemesis: unknown fault kind ${JSON.stringify(kind)}; known: ${
            FAULT_KINDS.join(", ")
          }`,
        );
      }
    }
    if (this.#kinds.length === 0) {
      throw new Error("Nemesis: no fault kinds given");
    }
    this.#interval = options.intervalMs ?? [1_000, 4_000];
    this.#hold = options.holdMs ?? [1_000, 4_000];
    this.#durationMs = options.durationMs ?? Infinity;
    this.#healthyTimeoutMs = options.healthyTimeoutMs ?? 60_000;
    this.#onFault = options.onFault;
  }

  /** `performance.now()` when the last heal finished, or null before any. */
  get lastHealedAt(): number | null {
    const healed = this.faults.filter((f) => f.healedAt !== null);
    return healed.length === 0
      ? null
      : Math.max(...healed.map((f) => f.healedAt!));
  }

  /** Starts the fault loop in the background (once). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /**
   * Resolves when the loop has ended on its own (`durationMs` passed) or
   * after {@link stop}.
   */
  async done(): Promise<void> {
    this.start();
    await this.#loop;
  }

  /**
   * Stops applying faults: waits for the fault in hand to be healed, heals
   * everything once more, and waits until there is a leader and every
   * member has caught up (`healthyTimeoutMs`). @returns every fault.
   *
   * @throws {Error} when the cluster is not healthy again in time (the
   * records are still in {@link faults}).
   */
  async stop(): Promise<FaultRecord[]> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
    const deadline = Date.now() + this.#healthyTimeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    let last: unknown = null;
    while (Date.now() < deadline) {
      try {
        await this.#healAll(left());
        await this.#cluster.waitHealthy(Math.min(left(), 20_000));
        return this.faults;
      } catch (error) {
        last = error;
      }
    }
    throw new Error(
      `Nemesis.stop: the cluster is not healthy ${this.#healthyTimeoutMs} ms after the last heal: ${
        (last as Error)?.message ?? last
      }`,
    );
  }

  async #run(): Promise<void> {
    const began = performance.now();
    while (!this.#stopping) {
      await this.#sleep(this.#between(this.#interval));
      if (this.#stopping || performance.now() - began >= this.#durationMs) {
        break;
      }
      const kind = this.#kinds[Math.floor(this.#random() * this.#kinds.length)];
      const record: FaultRecord = {
        kind,
        target: [],
        startedAt: performance.now(),
        healedAt: null,
        detail: "",
      };
      this.faults.push(record);
      try {
        await this.#apply(record);
      } catch (error) {
        record.error = `apply: ${(error as Error)?.message ?? error}`;
      }
      this.#onFault?.(record, "start");
      await this.#sleep(this.#between(this.#hold));
      const failed = (what: string) => (error: unknown) => {
        record.error = [
          record.error,
          `${what}: ${(error as Error)?.message ?? error}`,
        ].filter((e) => e !== undefined).join("; ");
      };
      await this.#undo().catch(failed("heal"));
      // A removed member's heal is its return; other faults are healed
      // once undone, and the return of any member a removal took out
      // after all (an unknown outcome) is waited for before the next.
      if (record.kind === "member-remove-readd") {
        await this.#cluster.reconcile(60_000).catch(failed("rejoin"));
      }
      record.healedAt = performance.now();
      this.#onFault?.(record, "healed");
      if (record.kind !== "member-remove-readd") {
        await this.#cluster.reconcile(60_000).catch(failed("reconcile"));
      }
    }
  }

  /** Undoes every fault ({@link #undo}) and brings removed nodes back. */
  async #healAll(timeoutMs: number): Promise<void> {
    await this.#undo();
    await this.#cluster.reconcile(timeoutMs);
  }

  /** Flushes the network's rules, resumes paused nodes, starts stopped members. */
  async #undo(): Promise<void> {
    const cluster = this.#cluster;
    await cluster.network.heal();
    for (const id of cluster.ids) {
      if (cluster.isPaused(id)) cluster.resume(id);
    }
    await Promise.all(
      cluster.members.filter((id) => !cluster.isRunning(id)).map((id) =>
        cluster.start(id)
      ),
    );
  }

  /** Applies `record.kind`, filling in its target and detail ({@link #healAll} undoes it). */
  async #apply(record: FaultRecord): Promise<void> {
    const cluster = this.#cluster;
    const net = cluster.network;
    const members = cluster.members;
    const leaderOr = async () => {
      const leader = await cluster.leader();
      if (leader !== null) return { id: leader, note: "the leader" };
      return { id: this.#pick(members), note: "no leader known: a random one" };
    };
    switch (record.kind) {
      case "partition-halves": {
        const shuffled = this.#shuffle(members);
        const small = shuffled.slice(0, Math.floor(members.length / 2));
        const big = shuffled.slice(small.length);
        record.target = [...members];
        record.detail = `${small.join(" ")} | ${big.join(" ")}`;
        await net.partition([small, big]);
        return;
      }
      case "isolate-leader": {
        const { id, note } = await leaderOr();
        record.target = [id];
        record.detail = `${id} isolated (${note})`;
        await net.isolate(id);
        return;
      }
      case "bridge": {
        const middle = this.#pick(members);
        const others = this.#shuffle(members.filter((m) => m !== middle));
        const left = others.slice(0, Math.ceil(others.length / 2));
        const right = others.slice(left.length);
        record.target = [...members];
        record.detail = `${left.join(" ")} | ${middle} | ${right.join(" ")}`;
        await net.bridge(middle, left, right);
        return;
      }
      case "one-way": {
        let from: string;
        let note: string;
        if (this.#random() < 0.5) {
          ({ id: from, note } = await leaderOr());
        } else {
          from = this.#pick(members);
          note = "a random node";
        }
        const to = this.#pick(members.filter((m) => m !== from));
        record.target = [from, to];
        record.detail = `${from} → ${to} dropped (from ${note})`;
        await net.cut(from, to);
        return;
      }
      case "ring": {
        const order = this.#shuffle(members);
        record.target = [...order];
        record.detail = `ring ${order.join(" - ")}${
          order.length <= 3 ? " (with 3 nodes nothing is cut)" : ""
        }`;
        await net.ring(order);
        return;
      }
      case "kill-leader":
      case "kill-random": {
        const { id, note } = record.kind === "kill-leader"
          ? await leaderOr()
          : { id: this.#pick(members), note: "a random node" };
        record.target = [id];
        record.detail = `SIGKILL ${id} (${note})`;
        await cluster.kill(id, "SIGKILL");
        return;
      }
      case "kill-majority": {
        const victims = this.#shuffle(members).slice(
          0,
          Math.floor(members.length / 2) + 1,
        );
        record.target = victims;
        record.detail = `SIGKILL ${victims.join(" ")}`;
        await Promise.all(victims.map((id) => cluster.kill(id, "SIGKILL")));
        return;
      }
      case "pause-leader":
      case "pause-random": {
        const { id, note } = record.kind === "pause-leader"
          ? await leaderOr()
          : { id: this.#pick(members), note: "a random node" };
        record.target = [id];
        record.detail = `SIGSTOP ${id} (${note})`;
        cluster.pause(id);
        return;
      }
      case "restart-graceful": {
        const id = this.#pick(members);
        record.target = [id];
        record.detail = `SIGTERM ${id}, started again`;
        await cluster.restart(id);
        return;
      }
      case "transfer-leader": {
        const leader = await cluster.leader();
        const to = this.#pick(members.filter((m) => m !== leader));
        record.target = [to];
        const moved = await cluster.transferLeader(to);
        record.detail = `${moved.previousLeader} → ${moved.leader} in ${
          moved.tookMs.toFixed(0)
        } ms`;
        return;
      }
      case "member-remove-readd": {
        let id: string;
        let note: string;
        if (this.#random() < 1 / 3) {
          ({ id, note } = await leaderOr());
        } else {
          id = this.#pick(members);
          note = "a random node";
        }
        record.target = [id];
        record.detail =
          `${id} removed (${note}), then back with a wiped folder`;
        // reconcile() in the heal brings it back, whatever happens here.
        await cluster.removeMember(id);
        return;
      }
      case "client-cut": {
        let id: string;
        let note: string;
        if (this.#random() < 0.5) {
          ({ id, note } = await leaderOr());
        } else {
          id = this.#pick(members);
          note = "a random node";
        }
        record.target = [id];
        record.detail = `client ↔ ${id} cut (${note})`;
        await net.cutClient(id);
        return;
      }
    }
  }

  #between([min, max]: [number, number]): number {
    return min + this.#random() * (max - min);
  }

  #pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#random() * items.length)];
  }

  #shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.#random() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  /** Sleeps `ms`, or less when {@link stop} is called. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}
