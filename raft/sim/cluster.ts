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
 * node is rebuilt from its disk alone (its configuration too: the latest
 * config entry of its persisted log); messages that reach it while it is
 * down are dropped. A full disk fails writes with ENOSPC: the driver stops
 * (onFatal) and the node restarts from its disk later. In a seeded half of
 * the runs an operator (`operator.ts`) changes the membership meanwhile:
 * spare nodes join empty as learners and are promoted, voters (the leader
 * too) are removed and added again; `membership_checker.ts` checks that no
 * two configurations that follow each other have disjoint majorities.
 * In a seeded 40% of the runs the drivers snapshot a small key-value state
 * machine (`state_machine.ts`) every few entries and compact their logs, so
 * lagging nodes catch up through chunked InstallSnapshot (Raft paper §7);
 * a restart loads the newest durable snapshot and the log after it.
 *
 * Raft's safety properties (see `checkers.ts`) are checked after every
 * step, and a run ends with a liveness check once every fault is healed.
 * Any violation throws a {@link SimulationError} naming the seed and step
 * and the command that replays it.
 *
 * @example Replaying one seed
 * ```ts
 * import assert from "node:assert/strict";
 * import { simulateSeed } from "./cluster.ts";
 * const result = await simulateSeed(42, 3);
 * assert.ok(result.finalIndex > 0);
 * ```
 *
 * @module
 */

import { RaftCore, type RaftCoreConfig } from "../core.ts";
import {
  RaftDriver,
  type RaftDriverOptions,
  type RaftNetwork,
  type RaftStorage,
  RaftUnavailableError,
} from "../driver.ts";
import type { Entry, NodeId, Snapshot } from "../types.ts";
import { type NodeView, type Proposal, SafetyChecker } from "./checkers.ts";
import { SimClock } from "./clock.ts";
import {
  diskEntryAt,
  DiskFullError,
  diskLastIndex,
  SimDisk,
  type SimulatedDisk,
} from "./disk.ts";
import { SimStateMachine } from "./state_machine.ts";
import { makeConfiguration } from "../configuration.ts";
import { MembershipChecker } from "./membership_checker.ts";
import { MembershipOperator } from "./operator.ts";
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
  type SnapshotCounts,
} from "./scenario.ts";

class SimNode implements NodeView {
  driver: RaftDriver<void> | null = null;
  clock: SimClock | null = null;
  incarnation = 0;
  /** Step at which a crashed node comes back. */
  downUntil = 0;
  nextTick = 0;
  applied = 0;
  /** Step at which a full disk has room again. */
  diskFullUntil = 0;
  /** Step at which the disk write in flight was started. */
  writeStarted = 0;
  /** Crash at this step's Ready phase. */
  doomed = false;
  /** Ever started (spare nodes wait until the operator adds them). */
  started = false;
  /** Started with `join: true` and no bootstrap configuration (a spare). */
  joiner = false;
  /**
   * Config entries of Readies not yet applied, by index: by the time the
   * driver applies them the core may have replaced its log with a snapshot
   * received meanwhile (a slow disk write), so they are read from here.
   */
  committedConfig = new Map<number, Entry>();
  /** The node's state machine (volatile: rebuilt at every start). */
  machine = new SimStateMachine();
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
 * import assert from "node:assert/strict";
 * import { ClusterSimulator } from "./cluster.ts";
 * const sim = new ClusterSimulator({ seed: 1, nodes: 3, steps: 500 });
 * const result = await sim.run();
 * assert.equal(result.finalIndex, sim.appliedLog.length);
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
  readonly #diskRng: Prng;
  readonly #nodes: SimNode[];
  readonly #voters: NodeId[];
  readonly #byId = new Map<NodeId, SimNode>();
  readonly #network: SimNetwork;
  readonly #checker: SafetyChecker;
  readonly #membership: MembershipChecker;
  readonly #operator: MembershipOperator;

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
    diskFull: 0,
    diskFullStops: 0,
  };
  readonly #proposals: Proposal[] = [];
  readonly #trace: string[] = [];
  readonly #snapshots = {
    taken: 0,
    installed: 0,
    loaded: 0,
    chunks: 0,
    chunksLost: 0,
  };

  /**
   * Builds the cluster and starts every node at step 0.
   *
   * @param options see {@link SimulationOptions}.
   * @throws {RangeError} when `nodes` is not a positive integer, or a
   * clock rate is not positive and finite.
   * @throws {SimulationError} when a core cannot be built from the cluster
   * settings (e.g. heartbeatTicks >= electionTicks).
   */
  constructor(options: SimulationOptions) {
    if (!Number.isInteger(options.nodes) || options.nodes < 1) {
      throw new RangeError("nodes must be a positive integer");
    }
    for (const [id, rate] of Object.entries(options.clockRates ?? {})) {
      if (!(rate > 0 && Number.isFinite(rate))) {
        throw new RangeError(
          `the clock rate of ${id} must be positive and finite, got ${rate}`,
        );
      }
    }
    this.#options = options;
    this.seed = options.seed;
    const scenario = scenarioForSeed(options.seed);
    this.faults = { ...scenario.faults, ...options.faults };
    this.cluster = { ...scenario.cluster, ...options.cluster };
    this.#rng = new Prng(mixSeed(options.seed, 0x51a1));
    this.#transferRng = new Prng(mixSeed(options.seed, 0x7a45));
    this.#linkRng = new Prng(mixSeed(options.seed, 0x11a4));
    this.#diskRng = new Prng(mixSeed(options.seed, 0xd15c));
    this.#voters = Array.from({ length: options.nodes }, (_, i) => `n${i + 1}`);
    const ids = Array.from(
      { length: options.nodes + this.faults.spareNodes },
      (_, i) => `n${i + 1}`,
    );
    const fail = (detail: string) => this.#fail(detail);
    this.#checker = new SafetyChecker(fail, (line) => this.#log(line));
    this.#membership = new MembershipChecker(
      makeConfiguration(this.#voters),
      fail,
    );
    this.#operator = this.#makeOperator(ids);
    this.#network = new SimNetwork(this.#rng, ids, {
      minDelay: this.cluster.minDelay,
      maxDelay: this.cluster.maxDelay,
      lossRate: this.faults.lossRate,
      duplicateRate: this.faults.duplicateRate,
    });
    this.#nodes = ids.map((id, number) => new SimNode(id, number, fail));
    for (const node of this.#nodes) this.#byId.set(node.id, node);
    for (const id of this.#voters) this.#start(this.#node(id));
  }

  /** Current step number (0 before the first step). */
  get now(): number {
    return this.#now;
  }
  /** Ids of the nodes started so far (bootstrap voters, then joiners). */
  get nodeIds(): readonly NodeId[] {
    return this.#startedIds();
  }
  /** Every entry applied anywhere so far, in index order. */
  get appliedLog(): readonly Entry[] {
    return this.#checker.applied;
  }
  /** The leader seen in each term. */
  get leaders(): ReadonlyMap<number, NodeId> {
    return this.#checker.leaders;
  }
  /** Snapshots so far: taken, installed, loaded, chunks sent and lost. */
  get snapshots(): SnapshotCounts {
    return { ...this.#snapshots };
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

  /**
   * Fills a started node's disk for `steps` steps (or until {@link heal}):
   * its writes fail with ENOSPC, its driver stops, and it restarts from its
   * durable disk after a downtime.
   */
  fillDisk(id: NodeId, steps: number): void {
    const node = this.#node(id);
    node.store.setFull(true);
    node.diskFullUntil = this.#now + steps;
    this.#faultCounts.diskFull++;
    this.#log(`${id} disk full until ${node.diskFullUntil}`);
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
      node.store.setFull(false);
      if (node.started && node.driver === null) this.#start(node);
    }
    this.#log("heal");
  }

  /** Runs one step; throws {@link SimulationError} on any violation. */
  step(): void {
    const now = ++this.#now;
    this.#throwLate();
    try {
      if (this.#faultsActive) {
        this.#injectFaults();
        this.#injectDiskFull();
      }
      for (const node of this.#nodes) {
        if (node.started && node.driver === null && node.downUntil <= now) {
          this.#start(node);
        }
      }
      this.#network.deliver(now, (message) => {
        // A message to an id that is no node of the run is lost.
        this.#byId.get(message.to)?.driver?.step([message]);
      });
      for (const node of this.#nodes) {
        node.clock?.advance(now);
        if (node.driver !== null && now >= node.nextTick) {
          node.driver.tick();
          this.#scheduleTick(node);
        }
      }
      if (this.#healedAt < 0 || !this.#postHealCommitted) this.#client();
      if (this.#faultsActive) {
        this.#maybeTransfer();
        this.#operator.step();
      }
      for (const node of this.#rng.shuffle(this.#startedNodes())) {
        if (node.driver !== null) this.#readyPhase(node);
        if (node.driver !== null) {
          this.#syncApplied(node, node.driver.appliedIndex);
        }
      }
      this.#checker.checkLeaders(this.#nodes);
      this.#membership.checkCommitted(this.#checker.applied, this.leaders);
      this.#membership.checkLeaders(this.#nodes);
      if (now % (this.#options.logMatchingEvery ?? 50) === 0) {
        this.#checker.checkLogs(this.#nodes);
        this.#checkNoForgeryAlarms();
      }
    } catch (error) {
      if (error instanceof SimulationError) throw error;
      this.#fail(`exception: ${(error as Error).stack ?? error}`);
    }
  }

  /**
   * The core's forgery checks never fire in an honest cluster, however
   * its network loses, duplicates and reorders messages and its nodes
   * crash: a counter that moved here would drop real messages (issue #16).
   * (`timeoutNowNotFromLeader` is left out: a follower that restarted does
   * not know its leader yet, and drops the leader's late hand-over.)
   */
  #checkNoForgeryAlarms(): void {
    for (const node of this.#startedNodes()) {
      const anomalies = node.core?.stats.anomalies;
      if (anomalies === undefined) continue;
      const raised = Object.entries({
        appendNotFromLeader: anomalies.appendNotFromLeader,
        readIndexNotFromLeader: anomalies.readIndexNotFromLeader,
        successFromLaterTerm: anomalies.successFromLaterTerm,
        voteFromNonVoter: anomalies.voteFromNonVoter,
        fromSelf: anomalies.fromSelf,
        snapshotAckBeyondEnd: anomalies.snapshotAckBeyondEnd,
        ackBeyondLastIndex: anomalies.ackBeyondLastIndex,
      }).filter(([, count]) => count > 0);
      if (raised.length > 0) {
        this.#fail(
          `${node.id} counted honest messages as forged: ${
            raised.map(([name, count]) => `${name}=${count}`).join(" ")
          }`,
        );
      }
    }
  }

  /**
   * After {@link heal}: steps until the cluster is live or `maxSteps` pass.
   * Live means exactly one leader, a voter of its configuration, in the
   * highest term of its members; every member (voter or learner) applied
   * the leader's whole log; a proposal made after healing was committed.
   * Nodes outside the leader's configuration (removed, or never added) are
   * not waited for.
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
    const settleSteps = await this.settle(
      this.#options.settleSteps ?? 6000 + this.#catchUpAllowance(),
    );
    this.#checkNoForgeryAlarms();
    const terms = this.#startedNodes().map((n) => n.core!.term);
    const net = this.#network.stats;
    return {
      seed: this.seed,
      nodes: this.#voters.length,
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
      finalIndex: this.#checker.applied.length,
      acknowledged: this.#stats.acknowledged,
      failedOnLeaderLoss: this.#stats.failedOnLeaderLoss,
      faults: {
        lost: net.lost,
        duplicated: net.duplicated,
        cut: net.cut,
        ...this.#faultCounts,
      },
      snapshots: { ...this.#snapshots },
      membershipChanges: this.#membership.changes.committed,
      membership: this.#membershipSummary(),
    };
  }

  /**
   * One line per started node: role, term, log, commit and applied index,
   * configuration.
   */
  describe(): string {
    return this.#startedNodes().map((node) => {
      const core = node.core;
      if (core === null) return `${node.id}: down`;
      const { voters, learners } = core.configuration;
      return `${node.id}: ${core.role} term ${core.term} leader ${core.leader} ` +
        `last ${core.lastIndex}/${core.entryAt(core.lastIndex)?.term ?? 0} ` +
        `commit ${core.commitIndex} applied ${node.applied} ` +
        `voters [${voters}] learners [${learners}]`;
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
      this.#voters.length,
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
    node.started = true;
    node.incarnation++;
    const random = mulberry32(
      mixSeed(this.seed, node.number, node.incarnation),
    );
    const disk = node.disk;
    const snapshot = this.#snapshotAtStart(node);
    let core: RaftCore;
    try {
      const createCore = this.#options.createCore ??
        ((config: RaftCoreConfig) => new RaftCore(config));
      core = createCore({
        id: node.id,
        voters: node.joiner ? [] : this.#voters,
        join: node.joiner,
        random,
        hardState: disk.hardState && { ...disk.hardState },
        entries: disk.entries.filter((e) => e.index > (snapshot?.index ?? 0))
          .map((e) => ({ ...e })),
        ...(snapshot !== undefined && {
          snapshot: { ...snapshot },
          configuration: structuredClone(snapshot.configuration),
        }),
        snapshotChunkChars: this.cluster.snapshotChunkChars,
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
          const dropped = this.#dropped();
          if (!this.#network.send(message, this.#now)) {
            this.#fail(
              `message storm: more than 100000 messages in flight`,
            );
          }
          if (message.type === "installSnapshot") {
            this.#countChunk(dropped);
          }
        }
      },
    };
    // Driver timeouts are in steps; an election timeout is about
    // electionTicks × stepsPerTick of them.
    const election = this.cluster.electionTicks * this.cluster.stepsPerTick;
    node.clock = new SimClock(this.#now, this.#clockRate(node));
    node.applied = 0;
    node.machine = new SimStateMachine();
    node.committedConfig.clear();
    if (snapshot !== undefined) {
      this.#checker.checkSnapshot(node.id, "loads", snapshot);
      this.#snapshots.loaded++;
      this.#restore(node, snapshot);
    }
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
        this.#syncApplied(node, entry.index - 1);
        this.#checker.checkApply(node, entry);
        node.applied = entry.index;
        node.machine.apply(entry);
        this.#checker.checkState(
          node.id,
          entry.index,
          node.machine.fingerprint(),
        );
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
        this.#noteCommittedConfig(node, ready.committedEntries);
      },
      onFatal: (error) => {
        if (!(error instanceof DiskFullError)) throw error;
        this.#stopOnDiskFull(node, error);
      },
      ...this.#snapshotOptions(node),
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
    const steps = stepsPerTick + this.#rng.int(-tickJitter, tickJitter);
    node.nextTick = this.#now +
      Math.max(1, Math.round(steps / this.#clockRate(node)));
  }

  /** How fast `node`'s clock runs ({@link SimulationOptions.clockRates}). */
  #clockRate(node: SimNode): number {
    return this.#options.clockRates?.[node.id] ?? 1;
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
      this.#completeWrite(node);
      if (node.driver === null) return; // the disk was full: it stopped
      node.clock!.runDeferred();
    }
  }

  #crashNow(node: SimNode): void {
    const rng = this.#rng;
    let where = "while idle";
    if (node.store.pending) {
      const draw = rng.next();
      if (draw < 0.25) {
        this.#completeWrite(node);
        if (node.driver === null) return; // the disk was full: it stopped
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
    // Its sockets close with it: most peers see their connection to it end
    // (RaftCore.leaderConnectionLost), some only later through timeouts.
    for (const other of this.#nodes) {
      if (other !== node && other.driver !== null && rng.chance(0.8)) {
        other.driver.peerConnectionLost(node.id);
      }
    }
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
      const started = this.#startedIds();
      const a = links.pick(started);
      const others = started.filter((id) => id !== a);
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
    const started = this.#startedIds();
    const count = rng.int(2, Math.min(3, started.length));
    const groups: NodeId[][] = Array.from({ length: count }, () => []);
    for (const id of started) groups[rng.int(0, count - 1)].push(id);
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
    const voters = node.core!.voters;
    const target = rng.chance(0.5) ? undefined : rng.pick(voters);
    if (voters.length === 1) return;
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
      if (this.#learnerLagging(core)) continue;
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
    return this.#checker.liveness(
      this.#startedNodes(),
      this.#postHealCommitted,
    );
  }

  #startedNodes(): SimNode[] {
    return this.#nodes.filter((node) => node.started);
  }

  #startedIds(): NodeId[] {
    return this.#nodes.filter((node) => node.started).map((node) => node.id);
  }

  // --- disk full (issue 8 item 9) -------------------------------------------

  /** Completes a node's write in flight, which fails while its disk is full. */
  #completeWrite(node: SimNode): void {
    const kept = node.store.full ? this.#diskRng.int(0, 8) : 0;
    node.store.complete(kept);
  }

  /**
   * Now and then fills a running node's disk for 20 to 300 steps, and frees
   * the disks whose time is up (own stream, so seeds without disk-full
   * faults draw as before).
   */
  #injectDiskFull(): void {
    for (const node of this.#nodes) {
      if (node.store.full && node.diskFullUntil <= this.#now) {
        node.store.setFull(false);
        this.#log(`${node.id} disk has room again`);
      }
    }
    const rng = this.#diskRng;
    if (!rng.chance(this.faults.diskFullRate)) return;
    const running = this.#nodes.filter((n) =>
      n.driver !== null && !n.store.full
    );
    if (running.length === 0) return;
    this.fillDisk(rng.pick(running).id, rng.int(20, 300));
  }

  /**
   * A write failed with ENOSPC: the driver stopped (onFatal). The node is
   * down like a crashed one, and restarts from its durable disk later.
   */
  #stopOnDiskFull(node: SimNode, error: DiskFullError): void {
    node.driver = null;
    node.clock = null;
    node.doomed = false;
    node.downUntil = this.#now +
      this.#diskRng.int(this.faults.minDowntime, this.faults.maxDowntime);
    this.#faultCounts.diskFullStops++;
    this.#log(
      `${node.id} stops: ${error.message}; down until ${node.downUntil}`,
    );
  }

  // --- snapshots (issue 8 item 9) ------------------------------------------

  /**
   * The snapshot a (re)starting node loads from its disk, as RaftNode does:
   * the newest durable snapshot, with the log after it. A snapshot saved
   * before its log marker (a crash mid-install) marks the log now, dropping
   * it when it disagrees at the snapshot's index or ends before it.
   */
  #snapshotAtStart(node: SimNode): Snapshot | undefined {
    const disk = node.disk;
    const snapshot = disk.snapshot;
    if (disk.logStart.index > (snapshot?.index ?? 0)) {
      this.#fail(
        `${node.id} disk: the log starts after ${disk.logStart.index}, ` +
          `beyond the newest snapshot (${snapshot?.index ?? "none"})`,
      );
    }
    if (snapshot === undefined) return undefined;
    const at = diskEntryAt(disk, snapshot.index);
    const conflict = at !== undefined && at.term !== snapshot.term;
    const logEnd = disk.logStart.index + disk.entries.length;
    if (conflict || logEnd < snapshot.index) {
      node.store.markLogAtStart(
        { index: snapshot.index, term: snapshot.term },
        true,
      );
    }
    return structuredClone(snapshot);
  }

  /** Remembers the config entries of a Ready (see `committedConfig`). */
  #noteCommittedConfig(node: SimNode, entries: readonly Entry[]): void {
    for (const entry of entries) {
      if (entry.type === "config") node.committedConfig.set(entry.index, entry);
    }
  }

  /** Messages lost or cut so far. */
  #dropped(): number {
    return this.#network.stats.lost + this.#network.stats.cut;
  }

  /** An InstallSnapshot chunk was sent; `dropped` was {@link #dropped} before. */
  #countChunk(dropped: number): void {
    this.#snapshots.chunks++;
    if (this.#dropped() > dropped) this.#snapshots.chunksLost++;
  }

  /** Restores a node's state machine from a snapshot, and checks it. */
  #restore(node: SimNode, snapshot: Snapshot): void {
    const corrupt = this.#options.corruptRestore;
    node.machine.restore(
      corrupt === undefined ? snapshot.data : corrupt(snapshot.data),
    );
    node.applied = snapshot.index;
    this.#checker.checkState(
      node.id,
      snapshot.index,
      node.machine.fingerprint(),
    );
  }

  /** The driver's snapshot policy and restore (Raft paper §7). */
  #snapshotOptions(
    node: SimNode,
  ): Pick<RaftDriverOptions<void>, "restore" | "snapshot"> {
    const { snapshotEntries, snapshotTrailing } = this.cluster;
    return {
      restore: (snapshot) => {
        this.#checker.checkSnapshot(node.id, "installs", snapshot);
        if (snapshot.index <= node.applied) {
          // The state machine would go back in time (Raft paper §7: a
          // snapshot at or below the commit index is ignored).
          this.#fail(
            `${node.id} installs a snapshot at ${snapshot.index} having ` +
              `applied ${node.applied}`,
          );
        }
        this.#snapshots.installed++;
        this.#log(`${node.id} installs a snapshot at ${snapshot.index}`);
        this.#restore(node, snapshot);
      },
      ...(snapshotEntries > 0 && {
        snapshot: {
          take: () => {
            const data = node.machine.take();
            // Config entries up to the driver's applied index reach the
            // applied record first (they leave the state as it was).
            this.#syncApplied(node, node.driver!.appliedIndex);
            this.#checker.checkState(
              node.id,
              node.applied,
              SimStateMachine.fingerprintOf(data),
            );
            this.#snapshots.taken++;
            return data;
          },
          everyEntries: snapshotEntries,
          trailingEntries: snapshotTrailing,
        },
      }),
    };
  }

  // --- membership (issue 8 item 9) ------------------------------------------

  #makeOperator(ids: readonly NodeId[]): MembershipOperator {
    const election = this.cluster.electionTicks * this.cluster.stepsPerTick;
    return new MembershipOperator(
      {
        now: () => this.#now,
        ids,
        leader: () => {
          let best: SimNode | null = null;
          for (const node of this.#nodes) {
            const core = node.core;
            if (
              core === null || core.role !== "leader" ||
              core.transferee !== null
            ) continue;
            if (best === null || core.term > best.core!.term) best = node;
          }
          return best &&
            { id: best.id, core: best.core!, driver: best.driver! };
        },
        started: (id) => this.#node(id).started,
        startJoiner: (id) => {
          const node = this.#node(id);
          node.joiner = true;
          this.#start(node);
          this.#log(`${id} starts empty, to join`);
        },
        log: (line) => this.#log(line),
      },
      new Prng(mixSeed(this.seed, 0x3e3b)),
      this.faults.membershipRate,
      20 * election,
    );
  }

  /**
   * The driver applies config entries without calling `apply`: checks them
   * (State Machine Safety) from the core's log, up to `upTo`.
   */
  #syncApplied(node: SimNode, upTo: number): void {
    while (node.applied < upTo) {
      const entry = node.committedConfig.get(node.applied + 1) ??
        node.core!.entryAt(node.applied + 1);
      node.committedConfig.delete(node.applied + 1);
      if (entry === undefined || entry.type !== "config") {
        this.#fail(
          `${node.id} skipped applying entry ${node.applied + 1}, which is ` +
            `not a config entry`,
        );
      }
      this.#checker.checkApply(node, entry);
      node.applied = entry.index;
    }
  }

  /**
   * Whether a learner of `leader` is more than 4 × maxUncommitted entries
   * behind: clients then wait. Without snapshots a learner catches up
   * entry by entry, and a leader whose voters alone commit would otherwise
   * leave it behind without bound (a voter that lags is bounded by the
   * quorum's pace instead).
   */
  #learnerLagging(leader: RaftCore): boolean {
    const learners = leader.configuration.learners;
    if (learners.length === 0) return false;
    const floor = leader.commitIndex - 4 * this.cluster.maxUncommitted;
    return learners.some((id) => (leader.progressOf(id)?.match ?? 0) < floor);
  }

  /**
   * Extra settling steps in runs with membership changes: a node added
   * late, or added again after a long absence, catches up entry by entry
   * (no snapshots yet), up to maxEntriesPerAppend entries per round trip,
   * from as far behind as the applied record is long.
   */
  #catchUpAllowance(): number {
    if (this.faults.membershipRate === 0) return 0;
    let behind = 0;
    for (const node of this.#startedNodes()) {
      const last = node.core?.lastIndex ?? diskLastIndex(node.disk);
      behind = Math.max(behind, this.#checker.applied.length - last);
    }
    const roundTrip = 2 * this.cluster.maxDelay + 2;
    return Math.ceil(behind / this.cluster.maxEntriesPerAppend) * roundTrip;
  }

  #membershipSummary(): SimulationResult["membership"] {
    const counts = this.#operator.counts;
    const changes = this.#membership.changes;
    return {
      proposed: counts.proposed,
      refused: counts.refused,
      committed: changes.committed,
      joins: counts.joins,
      added: changes.added,
      readded: changes.readded,
      promotions: changes.promotions,
      removals: changes.removals,
      leaderRemovals: changes.leaderRemovals,
    };
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
