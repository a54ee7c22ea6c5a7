/**
 * Membership as the registry sees it: the members' client URLs the log
 * records, the learners the leader promotes once caught up (the --join
 * policy), a removed member's notice, and peers admitted before this
 * node's log names them.
 *
 * @module
 */

import type { Configuration } from "../../raft/configuration.ts";
import type { RaftNode } from "../../raft/node.ts";
import { LearnerPromotion } from "../../raft/learner_promotion.ts";
import type { PeerDirectory } from "../../raft/peer_directory.ts";
import type { PeerTransport } from "../../raft/peer_transport.ts";
import type { ApplyResult } from "../state.ts";
import type { LogLine } from "./log.ts";

/** The peer notification a leader sends a member it removed. */
export const MEMBER_REMOVED_METHOD = "registry.memberRemoved";

/** One node's view of the cluster's membership. */
export class Membership {
  readonly #id: string;
  readonly #directory: PeerDirectory;
  readonly #log: LogLine;
  /**
   * Set when the leader told this node it was removed (a removed follower
   * gets no more appends, so its own log may never say so).
   */
  #removedNotice: { leader: string; term: number } | null = null;
  readonly #promotion: LearnerPromotion;

  constructor(
    id: string,
    directory: PeerDirectory,
    log: LogLine,
  ) {
    this.#id = id;
    this.#directory = directory;
    this.#log = log;
    this.#promotion = new LearnerPromotion((learner, match) =>
      log(
        `${id}: promoted learner ${learner} to voter (caught up at index ${match})`,
      )
    );
  }

  /** Learners the leader promotes once caught up (added by --join). */
  get promoteWhenCaughtUp(): Set<string> {
    return this.#promotion.pending;
  }

  /** Whether the leader told this node it is no member any more. */
  get removed(): boolean {
    return this.#removedNotice !== null;
  }

  /** A new configuration (from the log, or restored): learns client URLs. */
  onConfiguration(configuration: Configuration): void {
    const directory = this.#directory;
    for (
      const [member, url] of Object.entries(configuration.clientUrls ?? {})
    ) {
      if (directory.clientUrl(member) === null) {
        directory.setClientUrl(member, url);
      }
    }
    for (const member of this.promoteWhenCaughtUp) {
      if (!configuration.learners.includes(member)) {
        this.promoteWhenCaughtUp.delete(member);
      }
    }
    if (
      configuration.voters.includes(this.#id) ||
      configuration.learners.includes(this.#id)
    ) {
      this.#removedNotice = null;
    }
    this.#log(
      `${this.#id}: configuration now voters [${
        configuration.voters.join(", ")
      }]${
        configuration.learners.length > 0
          ? `, learners [${configuration.learners.join(", ")}]`
          : ""
      }`,
    );
  }

  /**
   * The leader's `registry.memberRemoved` notice (sent once the removal is
   * committed): taken when it comes from this node's leader, of its term
   * or later.
   */
  onRemovedNotice(params: unknown, from: string, raft: RaftNode<ApplyResult>) {
    // Whatever a member sends: a notice without a term is ignored.
    const term = (params as { term?: unknown } | null | undefined)?.term;
    const status = raft.status;
    if (
      typeof term === "number" && from === status.leader &&
      term >= status.term
    ) {
      this.#removedNotice = { leader: from, term };
      this.#log(
        `${this.#id}: removed from the cluster by leader ${from} in term ${term}; this node takes no part any more: stop it`,
        "warn",
      );
    }
  }

  /**
   * A member added by a change this node has not seen yet (it is behind,
   * and that member may lead now): answer it, or this node could never
   * catch up.
   */
  admitPeer(transport: PeerTransport, peer: string, peerUrl: string): boolean {
    const admitted = transport.admitPeer(peer, peerUrl);
    if (admitted) {
      this.#log(
        `${this.#id}: admitted peer ${peer} (${peerUrl}), not in this node's configuration yet`,
      );
    }
    return admitted;
  }

  /**
   * The --join promotion policy (dissertation §4.2.1), on every leader
   * tick: see {@link LearnerPromotion}.
   */
  promoteCaughtUp(raft: RaftNode<ApplyResult>): void {
    this.#promotion.tick(raft);
  }
}
