/**
 * Membership safety, checked by the simulator while a run goes on (Raft
 * dissertation §4.1, §4.2.2): no two configurations that follow each other
 * may have disjoint majorities, or two leaders could be elected in one term
 * and two different entries committed at one index.
 *
 * - committed history: every configuration committed (in the applied
 *   record) and the one committed before it (or the bootstrap one) have
 *   intersecting majorities;
 * - a leader's configuration (the latest config entry of its log, §4.1)
 *   and the config entry before it in that log (or the bootstrap
 *   configuration) have intersecting majorities: every config entry was
 *   made by a leader from the configuration before it, one server at a time;
 * - a leader is a voter of its own configuration, except while the entry
 *   that removed it is not committed yet (§4.2.2: it then steps down).
 *
 * Two configurations in use at once on different nodes may legitimately be
 * more than one change apart (a node that missed several changes), so they
 * are not compared: a lagging node cannot win an election, since its log is
 * behind every majority of the newer configurations (Leader Completeness,
 * checked in `checkers.ts`).
 *
 * @module
 */

import type { RaftCore } from "../core.ts";
import {
  type Configuration,
  decodeConfiguration,
  isLearner,
  isMember,
  isVoter,
  membersOf,
  quorumSize,
} from "../configuration.ts";
import type { Entry, NodeId } from "../types.ts";

/**
 * Whether every majority of `a`'s voters intersects every majority of
 * `b`'s voters (Raft dissertation §4.1). Computed directly: the two
 * majorities that overlap least take the voters of their own side only
 * first, and must then share what is left.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { majoritiesIntersect } from "./membership_checker.ts";
 * const c = (...voters: string[]) => ({ voters, learners: [] });
 * assert.equal(majoritiesIntersect(c("a", "b", "c"), c("a", "b", "c", "d")), true);
 * assert.equal(majoritiesIntersect(c("a", "b", "c"), c("a", "b", "c", "d", "e")), false);
 * ```
 */
export function majoritiesIntersect(
  a: Configuration,
  b: Configuration,
): boolean {
  if (a.voters.length === 0 || b.voters.length === 0) return true;
  const common = a.voters.filter((id) => b.voters.includes(id)).length;
  const onlyA = a.voters.length - common;
  const onlyB = b.voters.length - common;
  const needA = Math.max(0, quorumSize(a) - onlyA);
  const needB = Math.max(0, quorumSize(b) - onlyB);
  return needA + needB > common;
}

/** Formats a configuration for error messages. */
export function configurationString(config: Configuration): string {
  return `{voters [${config.voters.join(",")}] learners [${
    config.learners.join(",")
  }]}`;
}

/** What the membership checks see of one node. */
export interface MemberView {
  /** The node's id. */
  readonly id: NodeId;
  /** Its running core, or null while it is down. */
  readonly core: RaftCore | null;
}

/** Committed membership changes, by kind (from the committed history). */
export interface CommittedChanges {
  /** Config entries committed. */
  committed: number;
  /** Nodes added (as learners, or straight as voters). */
  added: number;
  /** Of those, nodes that had been removed before. */
  readded: number;
  /** Learners promoted to voters. */
  promotions: number;
  /** Members removed. */
  removals: number;
  /** Of those, removals of the leader of the entry's term (§4.2.2). */
  leaderRemovals: number;
}

/** Per leader term: what was last checked. */
interface LeaderCheck {
  term: number;
  configuration: Configuration;
  /** Index of the latest config entry in its log (0: none). */
  lastConfigIndex: number;
}

/**
 * The membership checks of one run (see the module doc). Each check calls
 * `fail` with what went wrong.
 */
export class MembershipChecker {
  /** Committed configurations, in log order, with their index (0: bootstrap). */
  readonly committed: { index: number; configuration: Configuration }[];
  /** Committed changes, by kind. */
  readonly changes: CommittedChanges = {
    committed: 0,
    added: 0,
    readded: 0,
    promotions: 0,
    removals: 0,
    leaderRemovals: 0,
  };
  readonly #removed = new Set<NodeId>();
  #appliedCursor = 0;
  readonly #checked = new Map<NodeId, LeaderCheck>();
  readonly #fail: (detail: string) => never;

  /**
   * Makes the record.
   *
   * @param bootstrap the configuration every node started from.
   * @param fail throws the violation.
   */
  constructor(bootstrap: Configuration, fail: (detail: string) => never) {
    this.committed = [{ index: 0, configuration: bootstrap }];
    this.#fail = fail;
  }

  /** The configuration committed last. */
  get latest(): Configuration {
    return this.committed.at(-1)!.configuration;
  }

  /**
   * Committed history: reads the config entries the applied record gained
   * since the last call; each must share a majority with the one before.
   */
  checkCommitted(
    applied: readonly Entry[],
    leaders: ReadonlyMap<number, NodeId>,
  ): void {
    for (; this.#appliedCursor < applied.length; this.#appliedCursor++) {
      const entry = applied[this.#appliedCursor];
      if (entry.type !== "config") continue;
      const next = decodeConfiguration(entry.data);
      const previous = this.committed.at(-1)!;
      if (!majoritiesIntersect(previous.configuration, next)) {
        this.#fail(
          `no two disjoint majorities: configuration ` +
            `${configurationString(next)} committed at ${entry.index} has ` +
            `a majority disjoint from one of ` +
            `${configurationString(previous.configuration)} committed at ` +
            `${previous.index}`,
        );
      }
      this.committed.push({ index: entry.index, configuration: next });
      this.#count(previous.configuration, next, leaders.get(entry.term));
    }
  }

  #count(from: Configuration, to: Configuration, leader?: NodeId): void {
    const changes = this.changes;
    changes.committed++;
    const was = (id: NodeId) => isMember(from, id);
    for (const id of membersOf(to)) {
      if (was(id)) continue;
      changes.added++;
      if (this.#removed.has(id)) changes.readded++;
    }
    for (const id of to.voters) if (isLearner(from, id)) changes.promotions++;
    for (const id of membersOf(from)) {
      if (isMember(to, id)) continue;
      changes.removals++;
      this.#removed.add(id);
      if (id === leader) changes.leaderRemovals++;
    }
  }

  /**
   * Every leader: its configuration shares a majority with the config
   * entry before it in its log (or the bootstrap configuration), and it is
   * a voter of it unless its removal is not committed yet (§4.2.2).
   * The first is re-checked only when a leader's term or configuration
   * changed.
   */
  checkLeaders(nodes: readonly MemberView[]): void {
    for (const node of nodes) {
      const core = node.core;
      if (core === null || core.role !== "leader") continue;
      const configuration = core.configuration;
      let seen = this.#checked.get(node.id);
      if (
        seen === undefined || seen.term !== core.term ||
        seen.configuration !== configuration
      ) {
        seen = this.#checkStep(node.id, core);
        this.#checked.set(node.id, seen);
      }
      if (
        !isVoter(configuration, node.id) &&
        seen.lastConfigIndex <= core.commitIndex
      ) {
        this.#fail(
          `§4.2.2: ${node.id} leads term ${core.term} but is not a voter of ` +
            `its configuration ${configurationString(configuration)}` +
            (seen.lastConfigIndex === 0
              ? ""
              : `, whose entry ${seen.lastConfigIndex} is committed ` +
                `(commit index ${core.commitIndex}): it should have stepped down`),
        );
      }
    }
  }

  /** A leader's configuration against the one before it in its log. */
  #checkStep(id: NodeId, core: RaftCore): LeaderCheck {
    const configuration = core.configuration;
    const [last, before] = lastTwoConfigEntries(core);
    const snapshot = core.snapshotPoint.index;
    let previous: Configuration, where: string;
    if (before !== undefined) {
      previous = decodeConfiguration(before.data);
      where = `at ${before.index}`;
    } else {
      // The bootstrap configuration, or the one the snapshot covers.
      const covered = this.committed.filter((c) => c.index <= snapshot).at(-1)!;
      previous = covered.configuration;
      where = covered.index === 0 ? "(bootstrap)" : `at ${covered.index}`;
    }
    if (!majoritiesIntersect(previous, configuration)) {
      this.#fail(
        `no two disjoint majorities: ${id}, leader of term ${core.term}, ` +
          `uses ${configurationString(configuration)}, which has a majority ` +
          `disjoint from one of the configuration before it in its log, ` +
          `${configurationString(previous)} ${where}`,
      );
    }
    return {
      term: core.term,
      configuration,
      lastConfigIndex: last?.index ?? 0,
    };
  }
}

/** The last two config entries of a core's log (newest first). */
function lastTwoConfigEntries(
  core: RaftCore,
): [Entry | undefined, Entry | undefined] {
  const found: Entry[] = [];
  const first = core.snapshotPoint.index + 1;
  for (let i = core.lastIndex; i >= first && found.length < 2; i--) {
    const entry = core.entryAt(i);
    if (entry?.type === "config") found.push(entry);
  }
  return [found[0], found[1]];
}
