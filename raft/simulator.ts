/**
 * A deterministic simulator for a cluster of {@link RaftCore}s, for tests and
 * chaos tooling. Everything is driven by one seed: a PRNG written here
 * (mulberry32) picks message delays, losses, duplicates, partitions, crashes
 * and client requests, and gives every core its own random stream, so a seed
 * replays exactly.
 *
 * Each node has a simulated disk holding what its driver persisted (hard
 * state and log). Handling a Ready is, in order: persist, send messages,
 * apply committed entries, serve read states, `advance()`; a crash may strike
 * between any two of these and loses all volatile state. A restarted node is
 * rebuilt from its disk alone; messages that reach it while it is down are
 * dropped.
 *
 * Raft's safety properties are checked after every step, and a run ends
 * with a liveness check once every fault is healed. Any violation throws a
 * {@link SimulationError} naming the seed and step.
 *
 * @example Replaying one seed
 * ```ts
 * import { simulateSeed } from "./simulator.ts";
 * const result = simulateSeed(42, 3);
 * console.log(result.finalIndex > 0); // true
 * ```
 *
 * @module
 */

import {
  NotLeaderError,
  RaftCore,
  type RaftCoreConfig,
  type ReadState,
  type Ready,
} from "./core.ts";
import type { Entry, HardState, Message, NodeId } from "./types.ts";

// --- randomness ------------------------------------------------------------

/**
 * The mulberry32 generator: uniform numbers in [0, 1) from a 32-bit seed.
 *
 * @example
 * ```ts
 * import { mulberry32 } from "./simulator.ts";
 * const a = mulberry32(7), b = mulberry32(7);
 * console.log(a() === b()); // true
 * ```
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Hashes numbers into one 32-bit seed (murmur3's finalizer per part), to
 * derive independent streams such as "node 2, incarnation 3 of seed 42".
 */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    h = Math.imul(h ^ (part >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** A seeded random source with the helpers the simulator needs. */
export class Prng {
  readonly #next: () => number;

  /**
   * Makes a source (mulberry32) whose sequence depends only on `seed`.
   *
   * @param seed any 32-bit integer.
   */
  constructor(seed: number) {
    this.#next = mulberry32(seed);
  }

  /** A uniform number in [0, 1). */
  next(): number {
    return this.#next();
  }

  /** A uniform integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return p > 0 && this.#next() < p;
  }

  /** A uniform element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#next() * items.length)];
  }

  /** Shuffles `items` in place (Fisher–Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.#next() * (i + 1));
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }

  /** How many events of expected count `rate` happen now (floor + Bernoulli). */
  count(rate: number): number {
    const whole = Math.floor(rate);
    return whole + (this.chance(rate - whole) ? 1 : 0);
  }
}

// --- configuration ---------------------------------------------------------

/** What goes wrong, and how often, while faults are active. */
export interface FaultConfig {
  /** Probability that a message is lost. */
  lossRate: number;
  /** Probability that a message is delivered a second time (own delay). */
  duplicateRate: number;
  /** Per-step probability that the partition layout is redrawn. */
  partitionRate: number;
  /** Per-step probability that one running node is doomed to crash. */
  crashRate: number;
  /** Fewest steps a crashed node stays down. */
  minDowntime: number;
  /** Most steps a crashed node stays down. */
  maxDowntime: number;
}

/** Cluster tuning and client workload (these stay in force after healing). */
export interface ClusterConfig {
  /** Passed to every core. */
  electionTicks: number;
  /** Passed to every core. */
  heartbeatTicks: number;
  /** Passed to every core. */
  maxEntriesPerAppend: number;
  /** Passed to every core. */
  maxInflightAppends: number;
  /** Steps between two ticks of one node, before jitter. */
  stepsPerTick: number;
  /** Each tick interval is `stepsPerTick` plus a uniform integer in ±this. */
  tickJitter: number;
  /** Fewest steps a message takes to arrive (>= 1). */
  minDelay: number;
  /** Most steps a message takes to arrive; delays differ, so they reorder. */
  maxDelay: number;
  /** Expected client proposals per step. */
  proposeRate: number;
  /** Expected client ReadIndex requests per step. */
  readRate: number;
  /**
   * Clients hold back new proposals while the leader has this many
   * uncommitted entries (flow control, so slow configurations do not build
   * an endless backlog).
   */
  maxUncommitted: number;
  /**
   * Probability that the driver pauses between two stages of a Ready until
   * a later step (0: every Ready is handled within one step).
   */
  asyncReadyRate: number;
  /** Passed to every core. */
  checkQuorum: boolean;
  /** Passed to every core. */
  preVote: boolean;
  /**
   * Per-step probability, while faults are active, that a leader is asked
   * to hand leadership over (dissertation §3.10), to a random voter or to
   * the most up-to-date one.
   */
  transferRate: number;
}

/** Settings of one simulation run. */
export interface SimulationOptions {
  /** Seeds every random choice. */
  seed: number;
  /** Cluster size (node ids are `n1`, `n2`, …). */
  nodes: number;
  /** Steps run with faults active, before healing. */
  steps: number;
  /** Most steps to reach liveness after healing. Default 6000. */
  settleSteps?: number;
  /** Fault intensities; unspecified fields come from {@link scenarioForSeed}. */
  faults?: Partial<FaultConfig>;
  /** Cluster tuning; unspecified fields come from {@link scenarioForSeed}. */
  cluster?: Partial<ClusterConfig>;
  /** Steps between two full log-matching checks. Default 50. */
  logMatchingEvery?: number;
  /** Keep the last this many trace lines and attach them to a failure. Default 0. */
  traceLines?: number;
  /**
   * Builds each core (default `new RaftCore(config)`): lets chaos tooling
   * wrap or instrument cores, and tests check that a broken core is caught.
   */
  createCore?: (config: RaftCoreConfig) => RaftCore;
}

/** Counters describing a finished run. */
export interface SimulationResult {
  /** The run's seed. */
  seed: number;
  /** Cluster size. */
  nodes: number;
  /** Total steps, fault phase and settling. */
  steps: number;
  /** Steps the cluster needed after healing to become live. */
  settleSteps: number;
  /** Proposals accepted by a leader. */
  proposals: number;
  /** Of those, how many were committed. */
  committedProposals: number;
  /** ReadIndex requests issued. */
  reads: number;
  /** Read states delivered (each checked for linearizability). */
  readStatesServed: number;
  /** Messages handed to the network. */
  messagesSent: number;
  /** Node crashes. */
  crashes: number;
  /** Leadership transfers started. */
  transfers: number;
  /** Terms that had a leader. */
  leaderTerms: number;
  /** Highest term reached. */
  maxTerm: number;
  /** Index every node had applied at the end. */
  finalIndex: number;
}

/** A safety or liveness violation, or a crash inside a core. */
export class SimulationError extends Error {
  /** Seed of the failing run. */
  readonly seed: number;
  /** Step at which the violation was detected. */
  readonly step: number;

  /**
   * Makes the error; its message ends with the command that replays the run.
   *
   * @param seed the run's seed.
   * @param nodes the cluster size.
   * @param step the step of the failure.
   * @param detail what went wrong.
   */
  constructor(seed: number, nodes: number, step: number, detail: string) {
    super(
      `seed ${seed} (${nodes} nodes) step ${step}: ${detail}\n` +
        `replay: RAFT_SEED=${seed} RAFT_NODES=${nodes} deno test -A raft/simulation_test.ts`,
    );
    this.name = "SimulationError";
    this.seed = seed;
    this.step = step;
  }
}

/**
 * The fault intensities and cluster tuning a seed stands for. Seeds cycle
 * through four profiles (calm, lossy network with partitions, crashes,
 * everything at once), with intensities drawn within each profile.
 */
export function scenarioForSeed(
  seed: number,
): { faults: FaultConfig; cluster: ClusterConfig } {
  const rng = new Prng(mixSeed(seed, 0x5ce7a210));
  const profile = ((seed % 4) + 4) % 4;
  const electionTicks = rng.pick([5, 8, 10, 10]);
  const heartbeatTicks = rng.pick([1, 1, 2]);
  const stepsPerTick = rng.int(2, 5);
  // Keep a round trip well inside an election timeout, or nothing is live.
  const delayCap = Math.max(
    1,
    Math.floor((electionTicks * stepsPerTick) / 4),
  );
  const maxDelay = Math.min(delayCap, rng.int(1, 12));
  const cluster: ClusterConfig = {
    electionTicks,
    heartbeatTicks,
    maxEntriesPerAppend: rng.pick([1, 3, 64]),
    maxInflightAppends: rng.pick([1, 2, 8, 64]),
    stepsPerTick,
    tickJitter: rng.int(0, 1),
    minDelay: 1,
    maxDelay,
    proposeRate: rng.pick([0.05, 0.2, 0.5, 1.5]),
    readRate: rng.pick([0, 0.05, 0.2]),
    maxUncommitted: 32,
    asyncReadyRate: rng.pick([0, 0, 0.3, 0.7]),
    checkQuorum: rng.next() < 0.8,
    // Drawn apart from the rest, so adding it left every other draw as it
    // was.
    preVote: new Prng(mixSeed(seed, 0x97e5071e)).next() < 0.75,
    // Drawn apart too, for the same reason.
    transferRate: new Prng(mixSeed(seed, 0x7a45f3e1)).pick([0, 0.003, 0.02]),
  };
  const none: FaultConfig = {
    lossRate: 0,
    duplicateRate: 0,
    partitionRate: 0,
    crashRate: 0,
    minDowntime: 5,
    maxDowntime: 200,
  };
  let faults: FaultConfig;
  switch (profile) {
    case 0: // calm: a little loss and duplication
      faults = {
        ...none,
        lossRate: rng.next() * 0.02,
        duplicateRate: rng.next() * 0.02,
      };
      break;
    case 1: // bad network
      faults = {
        ...none,
        lossRate: 0.05 + rng.next() * 0.25,
        duplicateRate: rng.next() * 0.1,
        partitionRate: 0.002 + rng.next() * 0.02,
      };
      break;
    case 2: // crashes
      faults = {
        ...none,
        lossRate: rng.next() * 0.05,
        duplicateRate: rng.next() * 0.05,
        crashRate: 0.002 + rng.next() * 0.02,
        minDowntime: rng.int(1, 20),
        maxDowntime: rng.int(20, 300),
      };
      break;
    default: // everything
      faults = {
        lossRate: rng.next() * 0.3,
        duplicateRate: rng.next() * 0.15,
        partitionRate: rng.next() * 0.02,
        crashRate: rng.next() * 0.02,
        minDowntime: rng.int(1, 20),
        maxDowntime: rng.int(20, 300),
      };
  }
  return { faults, cluster };
}

// --- the simulator ---------------------------------------------------------

/** What a node's driver has made durable. */
export interface SimulatedDisk {
  /** Last persisted hard state, if any was ever written. */
  hardState: HardState | undefined;
  /** The persisted log, contiguous from index 1. */
  entries: Entry[];
}

interface SimNode {
  readonly id: NodeId;
  readonly number: number;
  core: RaftCore | null;
  incarnation: number;
  readonly disk: SimulatedDisk;
  /** Step at which a crashed node comes back. */
  downUntil: number;
  nextTick: number;
  /** Last index applied by this incarnation. */
  applied: number;
  /** Crash at a random point of the next Ready (or at once if idle). */
  doomed: boolean;
  /** The Ready being handled, with the next stage to perform. */
  pending: { ready: Ready; stage: number; crashAt: number } | null;
  /** Term in which this incarnation was last checked as leader, or -1. */
  leaderTerm: number;
  /** How far its log was checked against the applied record in that term. */
  verifiedUpTo: number;
}

interface PendingRead {
  node: NodeId;
  /** Highest index applied anywhere when the read was requested. */
  minIndex: number;
  step: number;
}

interface Proposal {
  index: number;
  term: number;
  data: string;
}

/** More messages in flight than this means the cores amplify traffic. */
const maxInFlight = 100_000;

const crashPoints = [
  "before persisting",
  "after persisting, before sending",
  "after sending, before applying",
  "after applying, before serving reads",
  "before advance",
];

/**
 * A simulated cluster. Use {@link ClusterSimulator.run} for the standard
 * fault-phase → heal → settle sequence, or drive it by hand with
 * {@link ClusterSimulator.step}, {@link ClusterSimulator.partition},
 * {@link ClusterSimulator.crash} and {@link ClusterSimulator.heal}.
 *
 * @example
 * ```ts
 * import { ClusterSimulator } from "./simulator.ts";
 * const sim = new ClusterSimulator({ seed: 1, nodes: 3, steps: 500 });
 * const result = sim.run();
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
  readonly #nodes: SimNode[];
  readonly #voters: NodeId[];
  readonly #byId = new Map<NodeId, SimNode>();

  #now = 0;
  #faultsActive = true;
  /** Group number per node, or null when fully connected. */
  #groups: Map<NodeId, number> | null = null;
  readonly #network = new Map<number, Message[]>();
  #inFlight = 0;

  /** Every entry applied anywhere, by index - 1 (contiguous from 1). */
  readonly #applied: Entry[] = [];
  /**
   * Per applied index, an upper bound on the term in which it was committed:
   * the lowest term any node was in when it applied that index or a later
   * one (a leader commits in its own term; a follower learns of a commit in
   * its current term, and may only have moved on since). Non-decreasing.
   */
  readonly #commitTermBound: number[] = [];
  readonly #appliedData = new Map<string, number>();
  readonly #leaders = new Map<number, NodeId>();
  readonly #reads = new Map<string, PendingRead>();
  readonly #postHeal: Proposal[] = [];
  #believedLeader = 0;
  #sequence = 0;
  #healedAt = -1;
  #postHealCommitted = false;

  readonly #stats = {
    proposals: 0,
    reads: 0,
    readStatesServed: 0,
    messagesSent: 0,
    crashes: 0,
    transfers: 0,
  };
  readonly #proposals: Proposal[] = [];
  readonly #trace: string[] = [];

  /**
   * Builds the cluster and starts every node's core at step 0.
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
    this.#voters = Array.from({ length: options.nodes }, (_, i) => `n${i + 1}`);
    this.#nodes = this.#voters.map((id, number) => ({
      id,
      number,
      core: null,
      incarnation: 0,
      disk: { hardState: undefined, entries: [] },
      downUntil: 0,
      nextTick: 0,
      applied: 0,
      doomed: false,
      pending: null,
      leaderTerm: -1,
      verifiedUpTo: 0,
    }));
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
    return this.#applied;
  }
  /** The leader seen in each term. */
  get leaders(): ReadonlyMap<number, NodeId> {
    return this.#leaders;
  }
  /** A running node's core, or null while it is down. */
  core(id: NodeId): RaftCore | null {
    return this.#node(id).core;
  }
  /** A node's simulated disk (live; do not modify). */
  disk(id: NodeId): SimulatedDisk {
    return this.#node(id).disk;
  }

  /**
   * Splits the network into groups that only talk among themselves; nodes
   * not named form one more group. `partition([])` reconnects everyone.
   */
  partition(groups: readonly (readonly NodeId[])[]): void {
    if (groups.length === 0) {
      this.#groups = null;
      return;
    }
    const layout = new Map<NodeId, number>();
    groups.forEach((group, i) => group.forEach((id) => layout.set(id, i)));
    for (const id of this.#voters) {
      if (!layout.has(id)) layout.set(id, groups.length);
    }
    this.#groups = layout;
    this.#log(`partition ${JSON.stringify(groups)}`);
  }

  /**
   * Dooms a running node: it crashes at a random point of its next Ready
   * handling (at once if it has none), and restarts after a downtime drawn
   * from [`minDowntime`, `maxDowntime`] steps (or at {@link heal}).
   */
  crash(id: NodeId): void {
    const node = this.#node(id);
    if (node.core !== null) node.doomed = true;
  }

  /**
   * Stops all faults: reconnects the network, ends loss and duplication,
   * cancels pending crashes and restarts every crashed node now.
   */
  heal(): void {
    this.#faultsActive = false;
    this.#groups = null;
    this.#healedAt = this.#now;
    for (const node of this.#nodes) {
      node.doomed = false;
      if (node.core === null) this.#start(node);
    }
    this.#log("heal");
  }

  /** Runs one step; throws {@link SimulationError} on any violation. */
  step(): void {
    const now = ++this.#now;
    try {
      if (this.#faultsActive) this.#injectFaults();
      for (const node of this.#nodes) {
        if (node.core === null && node.downUntil <= now) this.#start(node);
      }
      this.#deliver(now);
      for (const node of this.#nodes) {
        if (node.core !== null && now >= node.nextTick) {
          node.core.tick();
          this.#scheduleTick(node);
        }
      }
      if (this.#healedAt < 0 || !this.#postHealCommitted) this.#client();
      if (this.#faultsActive) this.#maybeTransfer();
      for (const node of this.#rng.shuffle([...this.#nodes])) {
        if (node.core !== null) this.#handleReady(node);
      }
      this.#checkLeaders();
      if (now % (this.#options.logMatchingEvery ?? 50) === 0) {
        this.#checkLogs();
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
   *
   * @returns the number of steps it took.
   * @throws {SimulationError} when not live within `maxSteps`.
   */
  settle(maxSteps: number): number {
    for (let i = 1; i <= maxSteps; i++) {
      this.step();
      if (this.#liveness() === null) {
        this.#checkLogs();
        return i;
      }
    }
    return this.#fail(
      `not live ${maxSteps} steps after healing: ${this.#liveness()}; ` +
        this.describe(),
    );
  }

  /** The standard run: `steps` steps with faults, heal, settle; checks all. */
  run(): SimulationResult {
    for (let i = 0; i < this.#options.steps; i++) this.step();
    this.heal();
    const settleSteps = this.settle(this.#options.settleSteps ?? 6000);
    const terms = [...this.#nodes].map((n) => n.core!.term);
    return {
      seed: this.seed,
      nodes: this.#nodes.length,
      steps: this.#now,
      settleSteps,
      proposals: this.#stats.proposals,
      committedProposals:
        this.#proposals.filter((p) => this.#isCommitted(p)).length,
      reads: this.#stats.reads,
      readStatesServed: this.#stats.readStatesServed,
      messagesSent: this.#stats.messagesSent,
      crashes: this.#stats.crashes,
      transfers: this.#stats.transfers,
      leaderTerms: this.#leaders.size,
      maxTerm: Math.max(...terms),
      finalIndex: this.#nodes[0].applied,
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
    );
  }

  /** Builds a node's core from its disk (a fresh start or a restart). */
  #start(node: SimNode): void {
    node.incarnation++;
    const random = mulberry32(
      mixSeed(this.seed, node.number, node.incarnation),
    );
    try {
      const createCore = this.#options.createCore ??
        ((config: RaftCoreConfig) => new RaftCore(config));
      node.core = createCore({
        id: node.id,
        voters: this.#voters,
        random,
        hardState: node.disk.hardState && { ...node.disk.hardState },
        entries: node.disk.entries.map((e) => ({ ...e })),
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
    node.applied = 0;
    node.doomed = false;
    node.pending = null;
    node.leaderTerm = -1;
    node.verifiedUpTo = 0;
    this.#scheduleTick(node);
    if (node.incarnation > 1) this.#log(`${node.id} restarts`);
  }

  #scheduleTick(node: SimNode): void {
    const { stepsPerTick, tickJitter } = this.cluster;
    node.nextTick = this.#now +
      Math.max(1, stepsPerTick + this.#rng.int(-tickJitter, tickJitter));
  }

  #crashNow(node: SimNode, where: string): void {
    node.core = null;
    node.pending = null;
    node.doomed = false;
    node.downUntil = this.#now +
      this.#rng.int(this.faults.minDowntime, this.faults.maxDowntime);
    this.#stats.crashes++;
    this.#log(`${node.id} crashes ${where}, down until ${node.downUntil}`);
  }

  #injectFaults(): void {
    const rng = this.#rng;
    if (rng.chance(this.faults.partitionRate)) {
      if (rng.chance(0.3)) {
        this.partition([]);
      } else {
        const count = rng.int(2, Math.min(3, this.#nodes.length));
        const groups: NodeId[][] = Array.from({ length: count }, () => []);
        for (const id of this.#voters) groups[rng.int(0, count - 1)].push(id);
        this.partition(groups.filter((g) => g.length > 0));
      }
    }
    if (rng.chance(this.faults.crashRate)) {
      const running = this.#nodes.filter((n) => n.core !== null && !n.doomed);
      if (running.length > 0) rng.pick(running).doomed = true;
    }
  }

  #connected(from: NodeId, to: NodeId): boolean {
    return this.#groups === null ||
      this.#groups.get(from) === this.#groups.get(to);
  }

  #send(message: Message): void {
    this.#stats.messagesSent++;
    const rng = this.#rng;
    if (!this.#connected(message.from, message.to)) return;
    if (this.#faultsActive && rng.chance(this.faults.lossRate)) return;
    const copies = this.#faultsActive && rng.chance(this.faults.duplicateRate)
      ? 2
      : 1;
    for (let i = 0; i < copies; i++) {
      const at = this.#now +
        rng.int(this.cluster.minDelay, this.cluster.maxDelay);
      let bucket = this.#network.get(at);
      if (bucket === undefined) this.#network.set(at, bucket = []);
      bucket.push(message);
      if (++this.#inFlight > maxInFlight) {
        this.#fail(
          `message storm: more than ${maxInFlight} messages in flight`,
        );
      }
    }
  }

  #deliver(now: number): void {
    const bucket = this.#network.get(now);
    if (bucket === undefined) return;
    this.#network.delete(now);
    this.#inFlight -= bucket.length;
    for (const message of bucket) {
      const node = this.#node(message.to);
      if (node.core === null || !this.#connected(message.from, message.to)) {
        continue;
      }
      // A real network hands over a fresh copy.
      const copy: Message = message.type === "append"
        ? { ...message, entries: message.entries.map((e) => ({ ...e })) }
        : { ...message };
      node.core.step(copy);
    }
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
    const core = rng.pick(leaders).core!;
    const target = rng.chance(0.5) ? undefined : rng.pick(this.#voters);
    if (this.#voters.length === 1) return;
    const to = core.transferLeadership(target);
    this.#stats.transfers++;
    this.#log(`transfer ${core.id} -> ${to}`);
  }

  #client(): void {
    const rng = this.#rng;
    const running = this.#nodes.filter((n) => n.core !== null);
    if (running.length === 0) return;
    for (let i = rng.count(this.cluster.proposeRate); i > 0; i--) {
      let node = this.#nodes[this.#believedLeader];
      if (node.core === null) {
        node = rng.pick(running);
        this.#believedLeader = node.number;
      }
      const core = node.core!;
      if (
        core.role === "leader" &&
        core.lastIndex - core.commitIndex >= this.cluster.maxUncommitted
      ) {
        continue; // clients wait for earlier writes (flow control)
      }
      const data = `p${this.seed}.${++this.#sequence}`;
      try {
        const { index, term } = core.propose(data);
        const proposal = { index, term, data };
        this.#proposals.push(proposal);
        if (this.#healedAt >= 0) this.#postHeal.push(proposal);
        this.#stats.proposals++;
      } catch (error) {
        if (!(error instanceof NotLeaderError)) throw error;
        this.#believedLeader = error.leader === null
          ? rng.pick(running).number
          : this.#node(error.leader).number;
      }
    }
    for (let i = rng.count(this.cluster.readRate); i > 0; i--) {
      const node = rng.chance(0.5) && this.#nodes[this.#believedLeader].core
        ? this.#nodes[this.#believedLeader]
        : rng.pick(running);
      const context = `r${node.id}.${node.incarnation}.${++this.#sequence}`;
      this.#reads.set(context, {
        node: node.id,
        minIndex: this.#applied.length,
        step: this.#now,
      });
      this.#stats.reads++;
      node.core!.readIndex(context);
    }
  }

  /**
   * Works on the node's Ready: takes one if none is in hand, then performs
   * its stages in order (persist, send, apply, serve reads, advance). With
   * `asyncReadyRate` the driver may stop between two stages until a later
   * step, while messages, ticks and proposals keep reaching the core, as
   * with a driver that awaits its fsync. A doomed node crashes at a random
   * stage.
   */
  #handleReady(node: SimNode): void {
    const core = node.core!;
    if (node.pending === null) {
      if (!core.hasReady()) {
        if (node.doomed) this.#crashNow(node, "while idle");
        return;
      }
      node.pending = { ready: core.ready(), stage: 0, crashAt: -1 };
      const softState = node.pending.ready.softState;
      if (softState?.role === "leader") {
        this.#recordLeader(node.id, softState.term);
      }
    }
    const pending = node.pending;
    if (node.doomed && pending.crashAt < 0) {
      pending.crashAt = this.#rng.int(pending.stage, crashPoints.length - 1);
    }
    const ready = pending.ready;
    while (true) {
      if (pending.stage === pending.crashAt) {
        if (pending.stage === 0 && this.#rng.chance(0.5)) {
          return this.#tornPersist(node, ready);
        }
        return this.#crashNow(node, crashPoints[pending.stage]);
      }
      switch (pending.stage++) {
        case 0:
          this.#persist(node, ready);
          break;
        case 1:
          if (ready.snapshot !== null) {
            this.#fail(
              `${node.id} got a snapshot; the simulator never compacts`,
            );
          }
          // leaderMessages could go before persisting (dissertation
          // §10.2.1); for now they go with the rest.
          for (const message of [...ready.leaderMessages, ...ready.messages]) {
            this.#checkDurableBeforeSend(node, message);
            this.#send(message);
          }
          break;
        case 2:
          for (const entry of ready.committedEntries) this.#apply(node, entry);
          break;
        case 3:
          for (const state of ready.readStates) this.#serveRead(node, state);
          break;
        default:
          node.pending = null;
          core.advance(ready);
          return;
      }
      if (this.#rng.chance(this.cluster.asyncReadyRate)) return;
    }
  }

  #serveRead(node: SimNode, state: ReadState): void {
    const read = this.#reads.get(state.context);
    if (read === undefined) {
      this.#fail(`${node.id} got a read state for unknown ${state.context}`);
    }
    if (read.node !== node.id) {
      this.#fail(
        `${node.id} got the read state of ${read.node} (${state.context})`,
      );
    }
    if (state.index < read.minIndex) {
      this.#fail(
        `ReadIndex not linearizable: read ${state.context} requested at ` +
          `step ${read.step}, when index ${read.minIndex} was applied, ` +
          `got read index ${state.index}`,
      );
    }
    this.#stats.readStatesServed++;
  }

  #persist(node: SimNode, ready: Ready): void {
    const disk = node.disk;
    const oldCommit = disk.hardState?.commit ?? 0;
    if (ready.hardState !== null) disk.hardState = { ...ready.hardState };
    if (ready.entries.length > 0) {
      const first = ready.entries[0].index;
      if (first > disk.entries.length + 1) {
        this.#fail(
          `${node.id} Ready entries start at ${first}, after a gap ` +
            `(disk holds ${disk.entries.length})`,
        );
      }
      for (const entry of ready.entries) {
        const old = disk.entries[entry.index - 1];
        if (
          entry.index <= oldCommit &&
          (old.term !== entry.term || old.data !== entry.data)
        ) {
          this.#fail(
            `${node.id} Ready overwrites persisted committed entry ` +
              `${entry.index} (persisted commit ${oldCommit})`,
          );
        }
      }
      disk.entries.length = first - 1;
      for (const entry of ready.entries) disk.entries.push({ ...entry });
    }
    const commit = disk.hardState?.commit ?? 0;
    if (commit > disk.entries.length) {
      this.#fail(
        `${node.id} persisted commit ${commit} beyond its persisted log ` +
          `(${disk.entries.length})`,
      );
    }
  }

  /**
   * A crash in the middle of persisting. Like the write-ahead log, the
   * driver writes the entries, then the hard state, as one sequence of
   * records, and a torn write keeps a prefix of them: here, some of the
   * entries (after cutting the log where they start) and never the hard
   * state.
   */
  #tornPersist(node: SimNode, ready: Ready): void {
    const kept = this.#rng.int(0, ready.entries.length);
    if (kept > 0) {
      this.#persist(node, {
        ...ready,
        hardState: null,
        entries: ready.entries.slice(0, kept),
      });
    }
    this.#crashNow(
      node,
      `while persisting (${kept} of ${ready.entries.length} entries written)`,
    );
  }

  /** A message must not promise anything the disk does not hold yet. */
  #checkDurableBeforeSend(node: SimNode, message: Message): void {
    const hard = node.disk.hardState ?? { term: 0, vote: null, commit: 0 };
    const bad = (what: string) =>
      this.#fail(
        `${node.id} sends ${
          JSON.stringify(message)
        } before ${what} is durable ` +
          `(disk: ${
            JSON.stringify(hard)
          }, ${node.disk.entries.length} entries)`,
      );
    // A pre-vote and a granted pre-vote reply name the term the asker would
    // stand in (its term + 1); neither promises that term is durable.
    const prospective = message.type === "preVote" ||
      (message.type === "preVoteResponse" && message.granted);
    if (!prospective && message.term > hard.term) bad(`term ${message.term}`);
    if (
      (message.type === "vote" && message.term === hard.term &&
        hard.vote !== node.id) ||
      (message.type === "voteResponse" && message.granted &&
        message.term === hard.term && hard.vote !== message.to)
    ) {
      bad("the vote");
    }
    if (
      message.type === "appendResponse" && message.success &&
      message.term === hard.term && message.index > node.disk.entries.length
    ) {
      bad(`entry ${message.index}`);
    }
  }

  #apply(node: SimNode, entry: Entry): void {
    if (entry.index !== node.applied + 1) {
      this.#fail(
        `${node.id} (incarnation ${node.incarnation}) applies index ` +
          `${entry.index} after ${node.applied}`,
      );
    }
    const onDisk = node.disk.entries[entry.index - 1];
    if (
      onDisk === undefined || onDisk.term !== entry.term ||
      onDisk.data !== entry.data
    ) {
      this.#fail(`${node.id} applies entry ${entry.index} that is not durable`);
    }
    const known = this.#applied[entry.index - 1];
    if (known === undefined) {
      if (entry.index !== this.#applied.length + 1) {
        this.#fail(
          `${node.id} applies ${entry.index} beyond the applied record`,
        );
      }
      if (entry.data !== "") {
        const earlier = this.#appliedData.get(entry.data);
        if (earlier !== undefined) {
          this.#fail(
            `payload ${entry.data} applied at ${earlier} and ${entry.index}`,
          );
        }
        this.#appliedData.set(entry.data, entry.index);
      }
      this.#applied.push({ ...entry });
      this.#log(`${node.id} first to apply ${entryString(entry)}`);
    } else if (known.term !== entry.term || known.data !== entry.data) {
      this.#fail(
        `state machine safety: ${node.id} applies ${entryString(entry)} ` +
          `where ${entryString(known)} was applied before`,
      );
    }
    const bound = node.core!.term;
    for (
      let i = entry.index - 1;
      i >= 0 && !(this.#commitTermBound[i] <= bound);
      i--
    ) {
      this.#commitTermBound[i] = bound;
    }
    node.applied = entry.index;
    if (!this.#postHealCommitted && this.#postHeal.length > 0) {
      this.#postHealCommitted = this.#postHeal.some((p) =>
        this.#isCommitted(p)
      );
    }
  }

  #isCommitted(proposal: Proposal): boolean {
    const entry = this.#applied[proposal.index - 1];
    return entry !== undefined && entry.term === proposal.term &&
      entry.data === proposal.data;
  }

  #recordLeader(id: NodeId, term: number): void {
    const known = this.#leaders.get(term);
    if (known === undefined) {
      this.#leaders.set(term, id);
      this.#log(`${id} leads term ${term}`);
    } else if (known !== id) {
      this.#fail(`election safety: ${known} and ${id} both lead term ${term}`);
    }
  }

  /**
   * Election safety, then leader completeness and durability: a leader of
   * term T holds every applied entry that was committed in a term below T
   * (Raft paper §5.4, Leader Completeness). Such entries form a prefix of the
   * applied record, which only grows; a leader never drops entries of its
   * own term, so each leader's log is checked incrementally.
   *
   * A deposed leader that has not noticed yet, or a node elected by delayed
   * votes in an old term, may legitimately lack entries committed in later
   * terms, so "everything applied so far" would be too strong.
   */
  #checkLeaders(): void {
    for (const node of this.#nodes) {
      const core = node.core;
      if (core === null || core.role !== "leader") continue;
      this.#recordLeader(node.id, core.term);
      let from = node.verifiedUpTo + 1;
      if (node.leaderTerm !== core.term) {
        node.leaderTerm = core.term;
        from = 1;
      }
      const required = this.#committedBefore(core.term);
      for (let index = from; index <= required; index++) {
        const entry = core.entryAt(index);
        const known = this.#applied[index - 1];
        if (
          entry === undefined || entry.term !== known.term ||
          entry.data !== known.data
        ) {
          this.#fail(
            `leader completeness: ${node.id}, leader of term ${core.term}, ` +
              `has ${entry ? entryString(entry) : "nothing"} at ${index} ` +
              `where ${entryString(known)} was applied, committed in term ` +
              `<= ${this.#commitTermBound[index - 1]}`,
          );
        }
      }
      node.verifiedUpTo = Math.max(required, from - 1);
    }
  }

  /** How many applied entries are known to be committed in a term < `term`. */
  #committedBefore(term: number): number {
    const bounds = this.#commitTermBound;
    let low = 0, high = bounds.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (bounds[middle] < term) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /**
   * Log matching over every pair of logs (running nodes' memory, crashed
   * nodes' disks), plus: every committed prefix agrees with what was applied
   * and leaders hold all of it.
   */
  #checkLogs(): void {
    const logs = this.#nodes.map((node) => {
      const core = node.core;
      if (core === null) return { node, log: node.disk.entries, commit: 0 };
      const log: Entry[] = [];
      for (let i = 1; i <= core.lastIndex; i++) log.push(core.entryAt(i)!);
      return { node, log, commit: core.commitIndex };
    });
    for (const { node, log, commit } of logs) {
      for (let i = 1; i < log.length; i++) {
        if (log[i].index !== i + 1 || log[i].term < log[i - 1].term) {
          this.#fail(`${node.id} log is malformed at index ${i + 1}`);
        }
      }
      for (let i = 1; i <= Math.min(commit, this.#applied.length); i++) {
        const known = this.#applied[i - 1];
        if (log[i - 1].term !== known.term || log[i - 1].data !== known.data) {
          this.#fail(
            `${node.id} committed ${entryString(log[i - 1])} but ` +
              `${entryString(known)} was applied`,
          );
        }
      }
    }
    for (let a = 0; a < logs.length; a++) {
      for (let b = a + 1; b < logs.length; b++) {
        const x = logs[a].log, y = logs[b].log;
        let top = Math.min(x.length, y.length);
        while (top > 0 && x[top - 1].term !== y[top - 1].term) top--;
        for (let i = 0; i < top; i++) {
          if (x[i].term !== y[i].term || x[i].data !== y[i].data) {
            this.#fail(
              `log matching: ${logs[a].node.id} and ${logs[b].node.id} agree ` +
                `at index ${top} (term ${x[top - 1].term}) but differ at ` +
                `${i + 1}: ${entryString(x[i])} vs ${entryString(y[i])}`,
            );
          }
        }
      }
    }
    for (const node of this.#nodes) node.verifiedUpTo = 0;
    this.#checkLeaders();
  }

  /** null when live, else why not. */
  #liveness(): string | null {
    if (!this.#postHealCommitted) {
      return "no proposal made after healing was committed";
    }
    const cores = this.#nodes.map((n) => n.core);
    if (cores.some((c) => c === null)) return "a node is down";
    const maxTerm = Math.max(...cores.map((c) => c!.term));
    const leaders = cores.filter((c) => c!.role === "leader");
    if (leaders.length !== 1) return `${leaders.length} leaders`;
    const leader = leaders[0]!;
    if (leader.term !== maxTerm) {
      return `leader ${leader.id} is in term ${leader.term} < ${maxTerm}`;
    }
    if (leader.commitIndex !== leader.lastIndex) {
      return `leader ${leader.id} has uncommitted entries`;
    }
    const lagging = this.#nodes.filter((n) => n.applied !== leader.commitIndex);
    if (lagging.length > 0) {
      return `${lagging.map((n) => n.id).join(", ")} applied less than ` +
        `${leader.commitIndex}`;
    }
    return null;
  }
}

function entryString(entry: Entry): string {
  return `(index ${entry.index}, term ${entry.term}, ${
    JSON.stringify(entry.data)
  })`;
}

/**
 * Runs the standard simulation for one seed: `steps` steps with the faults
 * of {@link scenarioForSeed}, then heal and settle.
 *
 * @throws {SimulationError} naming the seed on any violation.
 */
export function simulateSeed(
  seed: number,
  nodes: number,
  options: Partial<SimulationOptions> = {},
): SimulationResult {
  return new ClusterSimulator({ steps: 1000, ...options, seed, nodes }).run();
}
