/**
 * The promotion policy of learners added to join a running cluster (Raft
 * dissertation §4.2.1: a new server catches up as a learner before it
 * counts towards quorums), shared by the registry's `--join` and
 * replicated services' `join`.
 *
 * @module
 */

import type { RaftNode } from "./node.ts";
import type { NodeId } from "./types.ts";

/** What {@link LearnerPromotion.tick} reads and changes of a Raft node. */
export type PromotingNode = Pick<
  RaftNode<unknown>,
  "status" | "progress" | "proposeConfChange"
>;

/**
 * Learners to promote to voters once caught up: on each leader tick, the
 * first one whose match index has reached the leader's commit index is
 * promoted, one change at a time; a refused or failed promotion is tried
 * again on a later tick, and a member that is no learner any more is
 * dropped.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { LearnerPromotion } from "./learner_promotion.ts";
 * const promoted: string[] = [];
 * const promotion = new LearnerPromotion((id) => promoted.push(id));
 * promotion.pending.add("n4");
 * const node = {
 *   status: { role: "leader", commitIndex: 9 },
 *   progress: () => new Map([["n4", { learner: true, match: 9 }]]),
 *   proposeConfChange: () => Promise.resolve({ voters: [], learners: [] }),
 * } as unknown as Parameters<LearnerPromotion["tick"]>[0];
 * promotion.tick(node);
 * await new Promise((r) => setTimeout(r, 0));
 * assert.deepEqual(promoted, ["n4"]);
 * assert.equal(promotion.pending.size, 0);
 * ```
 */
export class LearnerPromotion {
  /** The learners waiting to be promoted once caught up. */
  readonly pending = new Set<NodeId>();
  readonly #onPromoted: (learner: NodeId, match: number) => void;
  #promoting = false;

  /** @param onPromoted told of each promotion (for a log line). */
  constructor(onPromoted: (learner: NodeId, match: number) => void) {
    this.#onPromoted = onPromoted;
  }

  /** Promotes the first caught-up learner, if this node leads and no promotion is under way. */
  tick(raft: PromotingNode): void {
    if (
      this.#promoting || this.pending.size === 0 ||
      raft.status.role !== "leader"
    ) return;
    const { commitIndex } = raft.status;
    const progress = raft.progress();
    for (const learner of this.pending) {
      const known = progress.get(learner);
      if (known === undefined) continue;
      if (!known.learner) {
        this.pending.delete(learner);
        continue;
      }
      if (known.match < commitIndex) continue;
      this.#promoting = true;
      raft.proposeConfChange({ type: "promote", node: learner }, {
        timeoutMs: 3_000,
      }).then(
        () => {
          this.pending.delete(learner);
          this.#onPromoted(learner, known.match);
        },
        () => {/* tried again on a later tick */},
      ).finally(() => this.#promoting = false);
      return;
    }
  }
}
