/**
 * The simulator's operator: changes the cluster's membership while faults
 * go on (Raft dissertation §4.1 single-server changes, §4.2.1 learners that
 * catch up before they vote, §4.2.2 removal of the leader). Now and then it
 * asks the current leader to
 *
 * - add a node as a learner: a spare id (started then, with `join: true`
 *   and an empty disk) or a node removed earlier (it keeps its disk);
 * - promote the learner once the leader's progress shows it caught up
 *   (or, now and then, give up and remove a learner that does not);
 * - remove a voter, sometimes the leader itself.
 *
 * A removed node is not stopped: it runs on (crashes, restarts) with its
 * stale configuration, as a forgotten process would, and must not disrupt
 * the members.
 *
 * Bounds: at least 1 voter (the core refuses to remove the last one), at
 * most {@link maxMembers} voters and learners, one change at a time. A
 * refused proposal (`ConfChangeError`, `NotLeaderError`) or one that times
 * out is simply retried later with a fresh choice.
 *
 * @module
 */

import { type ConfChange, ConfChangeError } from "../configuration.ts";
import { NotLeaderError, type RaftCore } from "../core.ts";
import type { RaftDriver } from "../driver.ts";
import type { NodeId } from "../types.ts";
import type { Prng } from "./prng.ts";

/** Most voters plus learners the operator builds a configuration of. */
export const maxMembers = 7;

/** What the operator did, by kind. */
export interface MembershipCounts {
  /** Changes proposed to a leader (accepted or not). */
  proposed: number;
  /**
   * Changes the proposing leader's driver reported committed (what was
   * committed in all is in the membership checker's history).
   */
  acknowledged: number;
  /** Proposals refused at once (ConfChangeError, NotLeaderError). */
  refused: number;
  /** Spare nodes started empty, with `join: true`. */
  joins: number;
}

/** What the operator sees of the simulator. */
export interface OperatorHost {
  /** The current step. */
  now(): number;
  /** Every node id the run may use (bootstrap voters and spares). */
  readonly ids: readonly NodeId[];
  /** The running leader of the highest term not handing over, if any. */
  leader(): { id: NodeId; core: RaftCore; driver: RaftDriver<void> } | null;
  /** Whether the node was ever started. */
  started(id: NodeId): boolean;
  /** Starts a spare node with an empty disk and `join: true`. */
  startJoiner(id: NodeId): void;
  /** Records a trace line. */
  log(line: string): void;
}

/** The operator of one run. */
export class MembershipOperator {
  /** Counters, by kind. */
  readonly counts: MembershipCounts = {
    proposed: 0,
    acknowledged: 0,
    refused: 0,
    joins: 0,
  };
  readonly #host: OperatorHost;
  readonly #rng: Prng;
  readonly #rate: number;
  readonly #patience: number;
  /** Step until which a proposal is awaited (a crashed leader never answers). */
  #busyUntil = -1;
  #sequence = 0;

  /**
   * Makes the operator.
   *
   * @param host the simulator.
   * @param rng the operator's own random stream.
   * @param rate per-step probability of acting (while faults are active).
   * @param patience most steps to wait for a proposal's outcome.
   */
  constructor(host: OperatorHost, rng: Prng, rate: number, patience: number) {
    this.#host = host;
    this.#rng = rng;
    this.#rate = rate;
    this.#patience = patience;
  }

  /** One step: maybe proposes a change through the current leader. */
  step(): void {
    const host = this.#host;
    if (host.now() < this.#busyUntil || !this.#rng.chance(this.#rate)) return;
    const leader = host.leader();
    if (leader === null) return;
    const change = this.#choose(leader.id, leader.core);
    if (change === null) return;
    if (change.type === "addLearner" && !host.started(change.node)) {
      host.startJoiner(change.node);
      this.counts.joins++;
    }
    this.counts.proposed++;
    const sequence = ++this.#sequence;
    this.#busyUntil = host.now() + this.#patience;
    host.log(`operator asks ${leader.id}: ${change.type} ${change.node}`);
    const done = () => {
      if (this.#sequence === sequence) this.#busyUntil = -1;
    };
    leader.driver.proposeConfChange(change).then(() => {
      done();
      this.counts.acknowledged++;
      host.log(`operator's ${change.type} ${change.node} committed`);
    }, (error) => {
      done();
      if (error instanceof ConfChangeError || error instanceof NotLeaderError) {
        this.counts.refused++;
      }
      host.log(`operator's ${change.type} ${change.node} failed: ${error}`);
    });
  }

  /** The next change for `leader`'s configuration, or null to wait. */
  #choose(leader: NodeId, core: RaftCore): ConfChange | null {
    const rng = this.#rng;
    const { voters, learners } = core.configuration;
    if (learners.length > 0) {
      const learner = rng.pick(learners);
      const progress = core.progressOf(learner);
      if (progress !== undefined && progress.match >= core.commitIndex) {
        return { type: "promote", node: learner };
      }
      return rng.chance(0.1) ? { type: "remove", node: learner } : null;
    }
    const outside = this.#host.ids.filter((id) => !voters.includes(id));
    const canAdd = outside.length > 0 && voters.length < maxMembers;
    const canRemove = voters.length > 1;
    if (canAdd && (!canRemove || rng.chance(0.5))) {
      return { type: "addLearner", node: rng.pick(outside) };
    }
    if (!canRemove) return null;
    const node = rng.chance(0.3)
      ? leader
      : rng.pick(voters.filter((id) => id !== leader));
    return { type: "remove", node };
  }
}
