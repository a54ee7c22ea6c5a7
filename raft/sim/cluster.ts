/**
 * A deterministic simulator for a cluster of Raft nodes, each the shipping
 * {@link RaftDriver} around a {@link RaftCore}, on a simulated disk
 * ({@link SimDisk}), a simulated network ({@link SimNetwork}) and a virtual
 * clock ({@link SimClock}). Everything is driven by one seed: a PRNG picks
 * message delays, losses, duplicates, partitions (symmetric, asymmetric,
 * flapping), crashes, slow disks and client requests, and gives every core
 * its own random stream, so a seed replays exactly.
 *
 * A crash loses all volatile state and the write in flight (or tears it, or
 * strikes after it was durable but before the driver knew); a restarted
 * node is rebuilt from its disk alone; messages that reach it while it is
 * down are dropped.
 *
 * Raft's safety properties (see `checkers.ts`) are checked after every
 * step, and a run ends with a liveness check once every fault is healed.
 * Any violation throws a {@link SimulationError} naming the seed and step
 * and the command that replays it.
 *
 * @example Replaying one seed
 * ```ts
 * import { simulateSeed } from "./cluster.ts";
 * const result = await simulateSeed(42, 3);
 * console.log(result.finalIndex > 0); // true
 * ```
 *
 * @module
 */

import { RaftCore, type RaftCoreConfig } from "../core.ts";
import {
  RaftDriver,
  type RaftNetwork,
  type RaftStorage,
  RaftUnavailableError,
} from "../driver.ts";
import type { Entry, NodeId } from "../types.ts";
import { type NodeView, type Proposal, SafetyChecker } from "./checkers.ts";
import { SimClock } from "./clock.ts";
import { SimDisk, type SimulatedDisk } from "./disk.ts";
import { SimNetwork } from "./network.ts";
import { mixSeed, mulberry32, Prng } from "./prng.ts";
import {
  type ClusterConfig,
  type FaultConfig,
  type FaultCounts,
  scenarioForSeed,
  SimulationError,
  type SimulationOptions,
  type SimulationResult,
} from "./scenario.ts";

class SimNode implements NodeView {
  driver: RaftDriver<void> | null = null;
  clock: SimClock | null = null;
  incarnation = 0;
  /** Step at which a crashed node comes back. */
  downUntil = 0;
  nextTick = 0;
  applied = 0;
  /** Step at which the disk write in flight was started. */
  writeStarted = 0;
  /** Crash at this step's Ready phase. */
  doomed = false;
  readonly store: SimDisk;

  constructor(
    readonly id: NodeId,
    readonly number: number,
    fail: (detail: string) => never,
  ) {
    this.store = new SimDisk((detail) => fail(`${id} ${detail}`));
  }

  get core(): RaftCore | null {
    return this.driver?.core ?? null;
  }

  get disk(): SimulatedDisk {
    return this.store.durable;
  }
}

/**
 * A simulated cluster. Use {@link ClusterSimulator.run} for the standard
 * fault-phase → heal → settle sequence, or drive it by hand with
 * {@link ClusterSimulator.step}, {@link ClusterSimulator.partition},
 * {@link ClusterSimulator.crash} and {@link ClusterSimulator.heal}.
 *
 * @example
 * ```ts
 * import { ClusterSimulator } from "./cluster.ts";
 * const sim = new ClusterSimulator({ seed: 1, nodes: 3, steps: 500 });
 * const result = await sim.run();
 * console.log(result.finalIndex === sim.appliedLog.length); // true
 * ```
 */
export class ClusterSimulator {
  /** The run's seed. */
  readonly seed: number;
  /** Fault intensities in force until {@link heal}. */
  readonly faults: FaultConfig;
  /** Cluster tuning and workload. */
  readonly cluster: ClusterConfig;
  readonly #options: SimulationOptions;
  readonly #rng: Prng;
  readonly #transferRng: Prng;
  readonly #linkRng: Prng;
  readonly #nodes: SimNode[];
  readonly #voters: NodeId[];
  readonly #byId = new Map<NodeId, SimNode>();
  readonly #network: SimNetwork;
  readonly #checker: SafetyChecker;

  #now = 0;
  #faultsActive = true;
  readonly #postHeal: Proposal[] = [];
  #believedLeader = 0;
  #sequence = 0;
  #healedAt = -1;
  #postHealCommitted = false;
  /** A violation found in a promise callback, thrown at the next check. */
  #late: unknown = null;

  readonly #stats = {
    proposals: 0,
    acknowledged: 0,
    failedOnLeaderLoss: 0,
    reads: 0,
    readStatesServed: 0,
    transfers: 0,
  };
  readonly #faultCounts: Omit<FaultCounts, "lost" | "duplicated" | "cut"> = {
    partitions: 0,
    asymmetric: 0,
    flapping: 0,
    crashes: 0,
    lostWrites: 0,
    tornWrites: 0,
    unacknowledgedWrites: 0,
    slowWrites: 0,
  };
  readonly #proposals: Proposal[] = [];
  readonly #trace: string[] = [];

  /**
   * Builds the cluster and starts every node at step 0.
   *
   * @param options see {@link SimulationOptions}.
   * @throws {RangeError} when `nodes` is not a positive integer.
   * @throws {SimulationError} when a core cannot be built from the cluster
   * settings (e.g. heartbeatTicks >= electionTicks).
   */
  constructor(options: SimulationOptions) {
    if (!Number.isInteger(options.nodes) || options.nodes < 1) {
      throw new RangeError("nodes must be a positive integer");
    }
    this.#options = options;
    this.seed = options.seed;
    const scenario = scenarioForSeed(options.seed);
    this.faults = { ...scenario.faults, ...options.faults };
    this.cluster = { ...scenario.cluster, ...options.cluster };
    this.#rng = new Prng(mixSeed(options.seed, 0x51a1));
    this.#transferRng = new Prng(mixSeed(options.seed, 0x7a45));
    this.#linkRng = new Prng(mixSeed(options.seed, 0x11a4));
    this.#voters = Array.from({ length: options.nodes }, (_, i) => `n${i + 1}`);
    const fail = (detail: string) => this.#fail(detail);
    this.#checker = new SafetyChecker(fail, (line) => this.#log(line));
    this.#network = new SimNetwork(this.#rng, this.#voters, {
      minDelay: this.cluster.minDelay,
      maxDelay: this.cluster.maxDelay,
      lossRate: this.faults.lossRate,
      duplicateRate: this.faults.duplicateRate,
    });
    this.#nodes = this.#voters.map((id, number) =>
      new SimNode(id, number, fail)
    );
    for (const node of this.#nodes) {
      this.#byId.set(node.id, node);
      this.#start(node);
    }
  }

  /** Current step number (0 before the first step). */
  get now(): number {
    return this.#now;
  }
  /** Ids of all nodes. */
  get nodeIds(): readonly NodeId[] {
    return this.#voters;
  }
  /** Every entry applied anywhere so far, in index order. */
  get appliedLog(): readonly Entry[] {
    return this.#checker.applied;
  }
  /** The leader seen in each term. */
  get leaders(): ReadonlyMap<number, NodeId> {
    return this.#checker.leaders;
  }
  /** A running node's core, or null while it is down. */
  core(id: NodeId): RaftCore | null {
    return this.#node(id).core;
  }
  /** A running node's driver, or null while it is down. */
  driver(id: NodeId): RaftDriver<void> | null {
    return this.#node(id).driver;
  }
  /** What a node's disk holds durably (live; do not modify). */
  disk(id: NodeId): SimulatedDisk {
    return this.#node(id).disk;
  }

  /**
   * Splits the network into groups that only talk among themselves; nodes
   * not named form one more group. `partition([])` reconnects the groups.
   */
  partition(groups: readonly (readonly NodeId[])[]): void {
    this.#network.partition(groups);
    this.#log(`partition ${JSON.stringify(groups)}`);
  }

  /** Cuts the link from `from` to `to` only, until {@link heal}. */
  cutOneWay(from: NodeId, to: NodeId): void {
    this.#network.cutOneWay(from, to);
    this.#log(`cut ${from} -> ${to}`);
  }

  /**
   * Dooms a running node: it crashes in this or the next step's Ready
   * phase (with its write in flight lost, torn, or durable but
   * unacknowledged), and restarts after a downtime drawn from
   * [`minDowntime`, `maxDowntime`] steps (or at {@link heal}).
   */
  crash(id: NodeId): void {
    const node = this.#node(id);
    if (node.driver !== null) node.doomed = true;
  }

  /**
   * Stops all faults: reconnects the network, ends loss and duplication,
   * cancels pending crashes and restarts every crashed node now.
   */
  heal(): void {
    this.#faultsActive = false;
    this.#network.faultsActive = false;
    this.#network.heal();
    this.#healedAt = this.#now;
    for (const node of this.#nodes) {
      node.doomed = false;
      if (node.driver === null) this.#start(node);
    }
    this.#log("heal");
  }

  /** Runs one step; throws {@link SimulationError} on any violation. */
  step(): void {
    const now = ++this.#now;
    this.#throwLate();
    try {
      if (this.#faultsActive) this.#injectFaults();
      for (const node of this.#nodes) {
        if (node.driver === null && node.downUntil <= now) this.#start(node);
      }
      this.#network.deliver(now, (message) => {
        this.#node(message.to).driver?.step([message]);
      });
      for (const node of this.#nodes) {
        node.clock?.advance(now);
        if (node.driver !== null && now >= node.nextTick) {
          node.driver.tick();
          this.#scheduleTick(node);
        }
      }
      if (this.#healedAt < 0 || !this.#postHealCommitted) this.#client();
      if (this.#faultsActive) this.#maybeTransfer();
      for (const node of this.#rng.shuffle([...this.#nodes])) {
        if (node.driver !== null) this.#readyPhase(node);
      }
      this.#checker.checkLeaders(this.#nodes);
      if (now % (this.#options.logMatchingEvery ?? 50) === 0) {
        this.#checker.checkLogs(this.#nodes);
      }
    } catch (error) {
      if (error instanceof SimulationError) throw error;
      this.#fail(`exception: ${(error as Error).stack ?? error}`);
    }
  }

  /**
   * After {@link heal}: steps until the cluster is live or `maxSteps` pass.
   * Live means exactly one leader, in the highest term; every node applied
   * the leader's whole log; a proposal made after healing was committed.
   * Lets promise callbacks (acknowledged proposals, served reads) run, and
   * checks them, after every step.
   *
   * @returns the number of steps it took.
   * @throws {SimulationError} when not live within `maxSteps`.
   */
  async settle(maxSteps: number): Promise<number> {
    for (let i = 1; i <= maxSteps; i++) {
      this.step();
      await this.flush();
      if (this.#liveness() === null) {
        this.#checker.checkLogs(this.#nodes);
        return i;
      }
    }
    return this.#fail(
      `not live ${maxSteps} steps after healing: ${this.#liveness()}; ` +
        this.describe(),
    );
  }

  /**
   * Lets the promise callbacks queued so far run (acknowledged proposals,
   * served reads) and throws what they found.
   */
  async flush(): Promise<void> {
    await null;
    this.#throwLate();
  }

  /** The standard run: `steps` steps with faults, heal, settle; checks all. */
  async run(): Promise<SimulationResult> {
    for (let i = 0; i < this.#options.steps; i++) {
      this.step();
      await this.flush();
    }
    this.heal();
    const settleSteps = await this.settle(this.#options.settleSteps ?? 6000);
    const terms = this.#nodes.map((n) => n.core!.term);
    const net = this.#network.stats;
    return {
      seed: this.seed,
      nodes: this.#nodes.length,
      steps: this.#now,
      settleSteps,
      proposals: this.#stats.proposals,
      committedProposals:
        this.#proposals.filter((p) => this.#checker.isCommitted(p)).length,
      reads: this.#stats.reads,
      readStatesServed: this.#stats.readStatesServed,
      messagesSent: net.sent,
      crashes: this.#faultCounts.crashes,
      transfers: this.#stats.transfers,
      leaderTerms: this.#checker.leaders.size,
      maxTerm: Math.max(...terms),
      finalIndex: this.#nodes[0].applied,
      acknowledged: this.#stats.acknowledged,
      failedOnLeaderLoss: this.#stats.failedOnLeaderLoss,
      faults: {
        lost: net.lost,
        duplicated: net.duplicated,
        cut: net.cut,
        ...this.#faultCounts,
      },
      snapshots: 0,
      membershipChanges: 0,
    };
  }

  /** One line per node: role, term, log, commit and applied index. */
  describe(): string {
    return this.#nodes.map((node) => {
      const core = node.core;
      if (core === null) return `${node.id}: down`;
      return `${node.id}: ${core.role} term ${core.term} leader ${core.leader} ` +
        `last ${core.lastIndex}/${core.entryAt(core.lastIndex)?.term ?? 0} ` +
        `commit ${core.commitIndex} applied ${node.applied}`;
    }).join("; ");
  }

  // --- internals -----------------------------------------------------------

  #node(id: NodeId): SimNode {
    const node = this.#byId.get(id);
    if (node === undefined) throw new RangeError(`no node ${id}`);
    return node;
  }

  #log(line: string): void {
    const limit = this.#options.traceLines ?? 0;
    if (limit <= 0) return;
    this.#trace.push(`${this.#now}: ${line}`);
    if (this.#trace.length > limit) this.#trace.shift();
  }

  #fail(detail: string): never {
    const trace = this.#trace.length > 0
      ? `\n--- last ${this.#trace.length} events ---\n${this.#trace.join("\n")}`
      : "";
    throw new SimulationError(
      this.seed,
      this.#nodes.length,
      this.#now,
      detail + trace,
      this.#options.steps,
    );
  }

  #throwLate(): void {
    if (this.#late === null) return;
    const late = this.#late;
    this.#late = null;
    if (late instanceof SimulationError) throw late;
    this.#fail(`exception: ${(late as Error).stack ?? late}`);
  }

  /** Runs `check` in a promise callback: a violation is thrown later. */
  #later(check: () => void): void {
    try {
      check();
    } catch (error) {
      this.#late ??= error;
    }
  }

  /** Builds a node's core and driver from its disk (a start or a restart). */
  #start(node: SimNode): void {
    node.incarnation++;
    const random = mulberry32(
      mixSeed(this.seed, node.number, node.incarnation),
    );
    const disk = node.disk;
    let core: RaftCore;
    try {
      const createCore = this.#options.createCore ??
        ((config: RaftCoreConfig) => new RaftCore(config));
      core = createCore({
        id: node.id,
        voters: this.#voters,
        random,
        hardState: disk.hardState && { ...disk.hardState },
        entries: disk.entries.map((e) => ({ ...e })),
        electionTicks: this.cluster.electionTicks,
        heartbeatTicks: this.cluster.heartbeatTicks,
        maxEntriesPerAppend: this.cluster.maxEntriesPerAppend,
        maxInflightAppends: this.cluster.maxInflightAppends,
        checkQuorum: this.cluster.checkQuorum,
        preVote: this.cluster.preVote,
      });
    } catch (error) {
      this.#fail(`${node.id} cannot restart from its disk: ${error}`);
    }
    const network: RaftNetwork = {
      send: (messages) => {
        for (const message of messages) {
          this.#checker.checkSend(node.id, disk, message);
          if (!this.#network.send(message, this.#now)) {
            this.#fail(
              `message storm: more than 100000 messages in flight`,
            );
          }
        }
      },
    };
    // Driver timeouts are in steps; an election timeout is about
    // electionTicks × stepsPerTick of them.
    const election = this.cluster.electionTicks * this.cluster.stepsPerTick;
    node.clock = new SimClock(this.#now);
    node.applied = 0;
    node.doomed = false;
    const storage: RaftStorage = {
      persist: (write, done) => {
        node.writeStarted = this.#now;
        node.store.persist(write, done);
      },
    };
    node.driver = new RaftDriver<void>({
      core,
      storage,
      network,
      clock: node.clock,
      apply: (entry) => {
        this.#checker.checkApply(node, entry);
        node.applied = entry.index;
        if (!this.#postHealCommitted && this.#postHeal.length > 0) {
          this.#postHealCommitted = this.#postHeal.some((p) =>
            this.#checker.isCommitted(p)
          );
        }
      },
      onReady: (ready) => {
        if (ready.softState?.role === "leader") {
          this.#checker.recordLeader(node.id, ready.softState.term);
        }
      },
      onFatal: (error) => {
        throw error;
      },
      readContextPrefix: `${node.id}.${node.incarnation}`,
      proposeTimeoutMs: 20 * election,
      readTimeoutMs: 10 * election,
      transferTimeoutMs: 2 * election,
    });
    this.#checker.restarted(node.id);
    this.#scheduleTick(node);
    if (node.incarnation > 1) this.#log(`${node.id} restarts`);
  }

  #scheduleTick(node: SimNode): void {
    const { stepsPerTick, tickJitter } = this.cluster;
    node.nextTick = this.#now +
      Math.max(1, stepsPerTick + this.#rng.int(-tickJitter, tickJitter));
  }

  /**
   * A node's Ready phase: the driver runs its loop; then the disk completes
   * writes (each may start the next), unless the slow-disk draw leaves one
   * in flight for a later step (never beyond `maxWriteDelay` steps). A doomed node crashes here instead, with
   * its write in flight lost, torn, durable but unacknowledged, or (after
   * one more completion) after sending.
   */
  #readyPhase(node: SimNode): void {
    node.clock!.runDeferred();
    if (node.doomed) return this.#crashNow(node);
    for (let i = 0; i < 64 && node.store.pending; i++) {
      if (
        this.#now - node.writeStarted < this.cluster.maxWriteDelay &&
        this.#rng.chance(this.cluster.asyncReadyRate)
      ) {
        this.#faultCounts.slowWrites++;
        break;
      }
      node.store.complete();
      node.clock!.runDeferred();
    }
  }

  #crashNow(node: SimNode): void {
    const rng = this.#rng;
    let where = "while idle";
    if (node.store.pending) {
      const draw = rng.next();
      if (draw < 0.25) {
        node.store.complete();
        node.clock!.runDeferred();
        where = "after sending";
      }
      const mode = draw < 0.5 ? "lost" : draw < 0.75 ? "torn" : "durable";
      const torn = rng.int(0, 64);
      const crashed = node.store.crash(mode, torn);
      switch (crashed.kind) {
        case "lost":
          this.#faultCounts.lostWrites++;
          where = `losing a write of ${crashed.entries} entries`;
          break;
        case "torn":
          this.#faultCounts.tornWrites++;
          where = `while persisting (${crashed.kept} of ${crashed.entries} ` +
            `entries written)`;
          break;
        case "durable, unacknowledged":
          this.#faultCounts.unacknowledgedWrites++;
          where = "after persisting, before sending";
          break;
      }
    }
    node.driver = null;
    node.clock = null;
    node.doomed = false;
    node.downUntil = this.#now +
      rng.int(this.faults.minDowntime, this.faults.maxDowntime);
    this.#faultCounts.crashes++;
    this.#log(`${node.id} crashes ${where}, down until ${node.downUntil}`);
  }

  #injectFaults(): void {
    const rng = this.#rng;
    if (rng.chance(this.faults.partitionRate)) {
      this.#faultCounts.partitions++;
      if (rng.chance(0.3)) {
        this.partition([]);
      } else {
        this.partition(this.#randomGroups(rng));
      }
    }
    if (rng.chance(this.faults.crashRate)) {
      const running = this.#nodes.filter((n) => n.driver !== null && !n.doomed);
      if (running.length > 0) rng.pick(running).doomed = true;
    }
    // Own stream, so seeds without these faults draw as before.
    const links = this.#linkRng;
    if (links.chance(this.faults.asymmetricRate)) {
      this.#faultCounts.asymmetric++;
      const a = links.pick(this.#voters);
      const others = this.#voters.filter((id) => id !== a);
      const kind = links.int(0, 3);
      if (others.length === 0 || kind === 0) {
        this.#network.heal();
        this.#log("one-way cuts and flapping lifted");
      } else if (kind === 1) {
        this.cutOneWay(a, links.pick(others));
      } else if (kind === 2) {
        for (const b of others) this.cutOneWay(a, b); // a is mute
      } else {
        for (const b of others) this.cutOneWay(b, a); // a is deaf
      }
    }
    if (links.chance(this.faults.flapRate)) {
      this.#faultCounts.flapping++;
      const groups = this.#randomGroups(links);
      const election = this.cluster.electionTicks * this.cluster.stepsPerTick;
      const period = links.int(1, 2 * election);
      const duration = links.int(50, 500);
      this.#network.flap(groups, period, duration);
      this.#log(
        `flapping ${JSON.stringify(groups)} every ${period} for ${duration}`,
      );
    }
  }

  #randomGroups(rng: Prng): NodeId[][] {
    const count = rng.int(2, Math.min(3, this.#nodes.length));
    const groups: NodeId[][] = Array.from({ length: count }, () => []);
    for (const id of this.#voters) groups[rng.int(0, count - 1)].push(id);
    return groups.filter((g) => g.length > 0);
  }

  /**
   * Now and then asks a leader to hand over (its own random stream, so
   * seeds without transfers draw as before).
   */
  #maybeTransfer(): void {
    const rng = this.#transferRng;
    if (!rng.chance(this.cluster.transferRate)) return;
    const leaders = this.#nodes.filter((n) => n.core?.role === "leader");
    if (leaders.length === 0) return;
    const node = rng.pick(leaders);
    const target = rng.chance(0.5) ? undefined : rng.pick(this.#voters);
    if (this.#voters.length === 1) return;
    node.driver!.transferLeadership({ target }).catch(() => {});
    this.#stats.transfers++;
    this.#log(`transfer ${node.id} -> ${node.core!.transferee ?? target}`);
  }

  #client(): void {
    const rng = this.#rng;
    const running = this.#nodes.filter((n) => n.driver !== null);
    if (running.length === 0) return;
    for (let i = rng.count(this.cluster.proposeRate); i > 0; i--) {
      let node = this.#nodes[this.#believedLeader];
      if (node.driver === null) {
        node = rng.pick(running);
        this.#believedLeader = node.number;
      }
      const core = node.core!;
      if (core.role !== "leader" || core.transferee !== null) {
        // What the NotLeaderError (or LeadershipTransferError) would say.
        const leader = core.role === "leader" ? core.transferee : core.leader;
        this.#believedLeader = leader === null
          ? rng.pick(running).number
          : this.#node(leader).number;
        continue;
      }
      if (core.lastIndex - core.commitIndex >= this.cluster.maxUncommitted) {
        continue; // clients wait for earlier writes (flow control)
      }
      const data = `p${this.seed}.${++this.#sequence}`;
      const proposal = { index: core.lastIndex + 1, term: core.term, data };
      this.#proposals.push(proposal);
      if (this.#healedAt >= 0) this.#postHeal.push(proposal);
      this.#stats.proposals++;
      node.driver!.propose(data).then(() => {
        this.#stats.acknowledged++;
        this.#later(() => this.#checker.checkAcknowledged(node.id, proposal));
      }, (error) => {
        if (
          error instanceof RaftUnavailableError &&
          error.message.startsWith("leadership lost")
        ) {
          this.#stats.failedOnLeaderLoss++;
        }
      });
    }
    for (let i = rng.count(this.cluster.readRate); i > 0; i--) {
      const node = rng.chance(0.5) &&
          this.#nodes[this.#believedLeader].driver !== null
        ? this.#nodes[this.#believedLeader]
        : rng.pick(running);
      const driver = node.driver!;
      const began = { step: this.#now, minIndex: this.#checker.applied.length };
      this.#stats.reads++;
      driver.readIndex().then((index) => {
        this.#stats.readStatesServed++;
        this.#later(() =>
          this.#checker.checkRead(node.id, began, index, driver.appliedIndex)
        );
      }, () => {});
    }
  }

  #liveness(): string | null {
    return this.#checker.liveness(this.#nodes, this.#postHealCommitted);
  }
}

/**
 * Runs the standard simulation for one seed: `steps` steps (default 1000)
 * with the faults of {@link scenarioForSeed}, then heal and settle.
 *
 * @throws {SimulationError} naming the seed on any violation.
 */
export function simulateSeed(
  seed: number,
  nodes: number,
  options: Partial<SimulationOptions> = {},
): Promise<SimulationResult> {
  return new ClusterSimulator({ steps: 1000, ...options, seed, nodes }).run();
}
