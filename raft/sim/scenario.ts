/**
 * What a simulation run is: fault intensities, cluster tuning and workload
 * (drawn per seed by {@link scenarioForSeed}), the run's options, its
 * result counters, and the error a violation raises (with the command that
 * replays it).
 *
 * @module
 */

import type { RaftCore, RaftCoreConfig } from "../core.ts";
import { mixSeed, Prng } from "./prng.ts";

/**
 * The one-line command that replays a seed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { replayCommand } from "./scenario.ts";
 * assert.equal(
 *   replayCommand(17, 5, 3000),
 *   "deno task sim --nodes 5 --from 17 --seeds 1 --steps 3000 --trace 300",
 * );
 * ```
 */
export function replayCommand(
  seed: number,
  nodes: number,
  steps = 1000,
): string {
  return `deno task sim --nodes ${nodes} --from ${seed} --seeds 1 --steps ${steps} --trace 300`;
}

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
  /**
   * Per-step probability that one direction of links is cut (a node that
   * can no longer send to one peer, or to any; or hear any), or that the
   * one-way cuts are lifted. Default 0.
   */
  asymmetricRate: number;
  /**
   * Per-step probability that a flapping partition starts: random groups
   * cut apart and joined again every few steps, for up to 500 steps.
   * Default 0.
   */
  flapRate: number;
  /**
   * Per-step probability that one running node's disk fills up: its writes
   * fail (ENOSPC) for 20 to 300 steps, its driver stops (onFatal), and the
   * node is restarted from its durable disk after a downtime. Default 0.
   */
  diskFullRate: number;
  /**
   * Per-step probability that the operator (see `operator.ts`) proposes a
   * membership change through the leader. Default 0.
   */
  membershipRate: number;
  /**
   * Spare node ids (after the bootstrap voters) that the operator may add;
   * each is started empty with `join: true` when first added. Default 0.
   */
  spareNodes: number;
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
   * Probability, each time the simulator could complete a node's disk
   * write, that it leaves the write in flight until a later step (a slow
   * disk: meanwhile messages, ticks and proposals keep reaching the core,
   * as with a driver that awaits its fsync). 0: every write completes in
   * the step it was started.
   */
  asyncReadyRate: number;
  /**
   * Most steps a disk write stays in flight: a slow disk is slow, not stuck
   * (a stall beyond an election timeout would rightly depose a leader).
   */
  maxWriteDelay: number;
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
  /**
   * Snapshot policy of every driver (Raft paper §7): take a snapshot every
   * this many applied entries; 0: never (the log is not compacted).
   */
  snapshotEntries: number;
  /** Entries kept before a snapshot's index when the log is compacted. */
  snapshotTrailing: number;
  /** Passed to every core: InstallSnapshot chunk size (UTF-16 code units). */
  snapshotChunkChars: number;
}

/** Settings of one simulation run. */
export interface SimulationOptions {
  /** Seeds every random choice. */
  seed: number;
  /** Cluster size (node ids are `n1`, `n2`, …). */
  nodes: number;
  /** Steps run with faults active, before healing. */
  steps: number;
  /**
   * Most steps to reach liveness after healing. Default 6000, plus, in runs
   * with membership changes, time for the node furthest behind to catch up
   * (`maxEntriesPerAppend` entries per round trip of `2 × maxDelay + 2`
   * steps: without snapshots a late joiner replays the whole log).
   */
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
  /**
   * Rewrites a snapshot's data before a node restores it (default: as is):
   * lets tests check that a broken restore is caught.
   */
  corruptRestore?: (data: string) => string;
  /**
   * Clock rates by node id (default 1 for every node): a node at rate r
   * ticks every `stepsPerTick / r` steps and its driver's timers of `ms`
   * fire after `ms / r` steps, as a node whose oscillator runs r times
   * as fast as true time (issue 17: clock skew). Every rate must be
   * positive and finite.
   */
  clockRates?: Readonly<Record<string, number>>;
}

/** Faults injected during a run, by kind. */
export interface FaultCounts {
  /** Messages lost at random. */
  lost: number;
  /** Messages delivered twice. */
  duplicated: number;
  /** Messages dropped by a cut link (any kind of partition). */
  cut: number;
  /** Partition layouts drawn (including reconnections). */
  partitions: number;
  /** One-way link cuts (or their lifting) drawn. */
  asymmetric: number;
  /** Flapping partitions started. */
  flapping: number;
  /** Node crashes. */
  crashes: number;
  /** Crashes that lost the write in flight. */
  lostWrites: number;
  /** Crashes that tore the write in flight (a prefix of its entries kept). */
  tornWrites: number;
  /** Crashes after a write was durable but before the driver knew. */
  unacknowledgedWrites: number;
  /** Times a disk write was left in flight for a later step (slow disk). */
  slowWrites: number;
  /** Disks that filled up (writes failing with ENOSPC for a while). */
  diskFull: number;
  /** Drivers stopped by a failed write (each restarted later). */
  diskFullStops: number;
}

/** Membership changes of a run (Raft dissertation §4.1, §4.2). */
export interface MembershipSummary {
  /** Changes the operator proposed to a leader. */
  proposed: number;
  /** Of those, refused at once (ConfChangeError, NotLeaderError). */
  refused: number;
  /** Config entries committed (from the committed history). */
  committed: number;
  /** Spare nodes started empty with `join: true`. */
  joins: number;
  /** Nodes added to the configuration. */
  added: number;
  /** Of those, nodes removed earlier and added again. */
  readded: number;
  /** Learners promoted to voters. */
  promotions: number;
  /** Members removed. */
  removals: number;
  /** Of those, removals of the leader of the entry's term (§4.2.2). */
  leaderRemovals: number;
}

/** Snapshots of one run, by how they came about (Raft paper §7). */
export interface SnapshotCounts {
  /** Taken by a driver's snapshot policy. */
  taken: number;
  /** Installed from a leader's InstallSnapshot. */
  installed: number;
  /** Loaded from the disk at a restart. */
  loaded: number;
  /** InstallSnapshot chunks sent (dissertation §5.3). */
  chunks: number;
  /** Of those, lost or cut off when sent. */
  chunksLost: number;
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
  /** Proposals whose promise resolved (each checked to be applied). */
  acknowledged: number;
  /**
   * Proposals rejected at once because their leader lost leadership (they
   * may have committed anyway).
   */
  failedOnLeaderLoss: number;
  /** Faults by kind. */
  faults: FaultCounts;
  /**
   * Snapshots taken by drivers, installed from a leader (InstallSnapshot),
   * and loaded at a restart.
   */
  snapshots: SnapshotCounts;
  /** Membership changes committed (config entries). */
  membershipChanges: number;
  /** Membership changes, by kind. */
  membership: MembershipSummary;
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
   * @param steps the run's fault-phase steps, for the replay command.
   */
  constructor(
    seed: number,
    nodes: number,
    step: number,
    detail: string,
    steps?: number,
  ) {
    super(
      `seed ${seed} (${nodes} nodes) step ${step}: ${detail}\n` +
        `replay: ${replayCommand(seed, nodes, steps)}`,
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
    maxWriteDelay: delayCap,
    checkQuorum: rng.next() < 0.8,
    // Drawn apart from the rest, so adding it left every other draw as it
    // was.
    preVote: new Prng(mixSeed(seed, 0x97e5071e)).next() < 0.75,
    // Drawn apart too, for the same reason.
    transferRate: new Prng(mixSeed(seed, 0x7a45f3e1)).pick([0, 0.003, 0.02]),
    snapshotEntries: 0,
    snapshotTrailing: 0,
    snapshotChunkChars: 262_144,
  };
  const none: FaultConfig = {
    lossRate: 0,
    duplicateRate: 0,
    partitionRate: 0,
    crashRate: 0,
    minDowntime: 5,
    maxDowntime: 200,
    asymmetricRate: 0,
    flapRate: 0,
    diskFullRate: 0,
    membershipRate: 0,
    spareNodes: 0,
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
        asymmetricRate: 0,
        flapRate: 0,
        diskFullRate: 0,
        membershipRate: 0,
        spareNodes: 0,
      };
  }
  if (profile === 1 || profile === 3) {
    // Drawn apart from the rest, so adding them left every other draw as
    // it was.
    const links = new Prng(mixSeed(seed, 0xa5e70f1a));
    faults.asymmetricRate = links.pick([0, 0.002, 0.01]);
    faults.flapRate = links.pick([0, 0.001, 0.005]);
  }
  // Drawn apart from the rest (own streams), so adding them left every
  // other draw as it was: half the seeds change membership, with 0 to 2
  // spare nodes; disks fill up in half the seeds with crashes.
  const members = new Prng(mixSeed(seed, 0x3e3b3e75));
  if (members.chance(0.5)) {
    faults.membershipRate = members.pick([0.003, 0.01, 0.03]);
    faults.spareNodes = members.int(0, 2);
    if (!cluster.checkQuorum && !cluster.preVote) {
      // A removed server that keeps standing disrupts a cluster that runs
      // neither CheckQuorum's leases nor PreVote (dissertation §4.2.3):
      // its vote requests raise the members' terms again and again. The
      // registry always runs both; membership runs keep at least PreVote.
      cluster.preVote = true;
    }
  }
  // Own stream too: 40% of the seeds snapshot aggressively, with small
  // InstallSnapshot chunks, so lagging nodes catch up through snapshots.
  const snaps = new Prng(mixSeed(seed, 0x5a9b5407));
  if (snaps.chance(0.4)) {
    cluster.snapshotEntries = snaps.int(5, 50);
    cluster.snapshotTrailing = snaps.int(0, 20);
    cluster.snapshotChunkChars = snaps.pick([16, 40, 100, 1000]);
  }
  if (profile === 2 || profile === 3) {
    faults.diskFullRate = new Prng(mixSeed(seed, 0xd15cf011)).pick([
      0,
      0.0005,
      0.002,
    ]);
  }
  return { faults, cluster };
}
