/**
 * Raft's safety properties (Raft paper §5.2–§5.4, Figure 3), checked by the
 * simulator while a run goes on, and the liveness check after healing:
 *
 * - Election Safety: at most one leader per term;
 * - Log Matching: two logs that hold an entry with the same index and term
 *   agree on every entry up to it;
 * - Leader Completeness: a leader of term T holds every entry committed in
 *   a term below T;
 * - State Machine Safety: no two nodes apply different entries at one
 *   index, and no payload is applied twice;
 * - durability: no message promises a term, vote or entry the sender's
 *   disk does not hold, and no entry is applied before it is durable;
 * - linearizable reads: a read index is at least what was applied anywhere
 *   when the read began (Raft dissertation §6.4);
 * - no acknowledged write is lost;
 * - snapshots (Raft paper §7): a snapshot at index i, taken, installed or
 *   loaded at a restart, holds the state of the applied record at i, and
 *   every node's state machine, after each apply or restore, equals the
 *   applied record's state at that index. On compacted logs, Log Matching
 *   and Leader Completeness compare only the entries each log still holds.
 *
 * @module
 */

import { isVoter, membersOf } from "../configuration.ts";
import type { RaftCore } from "../core.ts";
import type { Entry, Message, NodeId, Snapshot } from "../types.ts";
import { diskEntryAt, diskLastIndex, type SimulatedDisk } from "./disk.ts";
import { SimStateMachine } from "./state_machine.ts";

/** What the checker sees of one node. */
export interface NodeView {
  /** The node's id. */
  readonly id: NodeId;
  /** Its running core, or null while it is down. */
  readonly core: RaftCore | null;
  /** Its disk. */
  readonly disk: SimulatedDisk;
  /** Highest index its current incarnation applied. */
  readonly applied: number;
  /** How many times it was started. */
  readonly incarnation: number;
}

/** A client write and where the leader put it. */
export interface Proposal {
  /** Log index the leader gave it. */
  index: number;
  /** Term it was proposed in. */
  term: number;
  /** Its payload (unique per run). */
  data: string;
}

/** Formats an entry for error messages. */
export function entryString(entry: Entry): string {
  return `(index ${entry.index}, term ${entry.term}, ${
    JSON.stringify(entry.data)
  })`;
}

/**
 * The record of a run that the properties are checked against, and the
 * checks. Each check calls `fail` with what went wrong.
 */
export class SafetyChecker {
  /** Every entry applied anywhere, by index - 1 (contiguous from 1). */
  readonly applied: Entry[] = [];
  /** The leader seen in each term. */
  readonly leaders = new Map<number, NodeId>();
  /**
   * Per applied index, an upper bound on the term in which it was committed:
   * the lowest term any node was in when it applied that index or a later
   * one (a leader commits in its own term; a follower learns of a commit in
   * its current term, and may only have moved on since). Non-decreasing.
   */
  readonly #commitTermBound: number[] = [];
  readonly #appliedData = new Map<string, number>();
  /** The applied record's state machine, and its fingerprint per index - 1. */
  readonly #reference = new SimStateMachine();
  readonly #fingerprints: number[] = [];
  /** Per node: term it was last checked as leader in, and how far. */
  readonly #verified = new Map<NodeId, { term: number; upTo: number }>();
  readonly #fail: (detail: string) => never;
  readonly #log: (line: string) => void;

  /**
   * Makes an empty record.
   *
   * @param fail throws the violation.
   * @param log records a trace line.
   */
  constructor(fail: (detail: string) => never, log: (line: string) => void) {
    this.#fail = fail;
    this.#log = log;
  }

  /** Election Safety: `id` leads `term`; no one else may. */
  recordLeader(id: NodeId, term: number): void {
    const known = this.leaders.get(term);
    if (known === undefined) {
      this.leaders.set(term, id);
      this.#log(`${id} leads term ${term}`);
    } else if (known !== id) {
      this.#fail(`election safety: ${known} and ${id} both lead term ${term}`);
    }
  }

  /** A restarted node's leader checks start over. */
  restarted(id: NodeId): void {
    this.#verified.delete(id);
  }

  /** A message must not promise anything the disk does not hold yet. */
  checkSend(id: NodeId, disk: SimulatedDisk, message: Message): void {
    const hard = disk.hardState ?? { term: 0, vote: null, commit: 0 };
    const bad = (what: string) =>
      this.#fail(
        `${id} sends ${JSON.stringify(message)} before ${what} is durable ` +
          `(disk: ${JSON.stringify(hard)}, log to ${diskLastIndex(disk)})`,
      );
    // A pre-vote and a granted pre-vote reply name the term the asker would
    // stand in (its term + 1); neither promises that term is durable.
    const prospective = message.type === "preVote" ||
      (message.type === "preVoteResponse" && message.granted);
    if (!prospective && message.term > hard.term) bad(`term ${message.term}`);
    if (
      (message.type === "vote" && message.term === hard.term &&
        hard.vote !== id) ||
      (message.type === "voteResponse" && message.granted &&
        message.term === hard.term && hard.vote !== message.to)
    ) {
      bad("the vote");
    }
    if (
      message.type === "appendResponse" && message.success &&
      message.term === hard.term && message.index > diskLastIndex(disk)
    ) {
      bad(`entry ${message.index}`);
    }
  }

  /**
   * State Machine Safety and durability of one applied entry; `node` is
   * the applying node before the entry (its `applied` is the previous one).
   */
  checkApply(node: NodeView, entry: Entry): void {
    if (entry.index !== node.applied + 1) {
      this.#fail(
        `${node.id} (incarnation ${node.incarnation}) applies index ` +
          `${entry.index} after ${node.applied}`,
      );
    }
    const onDisk = diskEntryAt(node.disk, entry.index);
    if (
      onDisk === undefined || onDisk.term !== entry.term ||
      onDisk.data !== entry.data
    ) {
      this.#fail(`${node.id} applies entry ${entry.index} that is not durable`);
    }
    const known = this.applied[entry.index - 1];
    if (known === undefined) {
      if (entry.index !== this.applied.length + 1) {
        this.#fail(
          `${node.id} applies ${entry.index} beyond the applied record`,
        );
      }
      // Config entries may repeat a configuration (a node removed, then
      // added again); only client payloads are unique.
      if (entry.data !== "" && entry.type !== "config") {
        const earlier = this.#appliedData.get(entry.data);
        if (earlier !== undefined) {
          this.#fail(
            `payload ${entry.data} applied at ${earlier} and ${entry.index}`,
          );
        }
        this.#appliedData.set(entry.data, entry.index);
      }
      this.applied.push({ ...entry });
      if (entry.type !== "config") this.#reference.apply(entry);
      this.#fingerprints.push(this.#reference.fingerprint());
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
  }

  /** Whether `proposal` is in the applied record. */
  isCommitted(proposal: Proposal): boolean {
    const entry = this.applied[proposal.index - 1];
    return entry !== undefined && entry.term === proposal.term &&
      entry.data === proposal.data;
  }

  /** A write the driver acknowledged must be in the applied record. */
  checkAcknowledged(id: NodeId, proposal: Proposal): void {
    if (!this.isCommitted(proposal)) {
      this.#fail(
        `${id} acknowledged ${entryString(proposal)} but the applied ` +
          `record holds ${
            this.applied[proposal.index - 1]
              ? entryString(this.applied[proposal.index - 1])
              : "nothing"
          } there`,
      );
    }
  }

  /**
   * A linearizable read: its index covers everything applied anywhere when
   * it began, and the reading node has applied it.
   */
  checkRead(
    id: NodeId,
    began: { step: number; minIndex: number },
    index: number,
    appliedHere: number,
  ): void {
    if (index < began.minIndex) {
      this.#fail(
        `ReadIndex not linearizable: a read on ${id} requested at step ` +
          `${began.step}, when index ${began.minIndex} was applied, got ` +
          `read index ${index}`,
      );
    }
    if (appliedHere < index) {
      this.#fail(
        `${id} served read index ${index} having applied ${appliedHere}`,
      );
    }
  }

  /**
   * Election Safety, then Leader Completeness: a leader of term T holds
   * every applied entry that was committed in a term below T (Raft paper
   * §5.4). Such entries form a prefix of the applied record, which only
   * grows; a leader never drops entries of its own term, so each leader's
   * log is checked incrementally.
   *
   * A deposed leader that has not noticed yet, or a node elected by delayed
   * votes in an old term, may legitimately lack entries committed in later
   * terms, so "everything applied so far" would be too strong.
   */
  checkLeaders(nodes: readonly NodeView[]): void {
    for (const node of nodes) {
      const core = node.core;
      if (core === null || core.role !== "leader") continue;
      this.recordLeader(node.id, core.term);
      let verified = this.#verified.get(node.id);
      if (verified === undefined || verified.term !== core.term) {
        verified = { term: core.term, upTo: 0 };
        this.#verified.set(node.id, verified);
      }
      const required = this.#committedBefore(core.term);
      const point = core.snapshotPoint;
      if (
        point.index > verified.upTo && point.index <= required &&
        this.applied[point.index - 1].term !== point.term
      ) {
        this.#fail(
          `leader completeness: ${node.id}, leader of term ${core.term}, ` +
            `compacted its log to (index ${point.index}, term ${point.term}) ` +
            `where ${entryString(this.applied[point.index - 1])} was applied`,
        );
      }
      // Entries up to the snapshot point are compacted: the snapshot
      // checks (checkSnapshot) cover them.
      const from = Math.max(verified.upTo, point.index) + 1;
      for (let index = from; index <= required; index++) {
        const entry = core.entryAt(index);
        const known = this.applied[index - 1];
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
      verified.upTo = Math.max(required, from - 1);
    }
  }

  /**
   * Log Matching over every pair of logs (running nodes' memory, crashed
   * nodes' disks), plus: every committed prefix agrees with what was applied
   * and leaders hold all of it.
   */
  checkLogs(nodes: readonly NodeView[]): void {
    // Each log from its first held index (after its compaction point):
    // only entries both sides still hold are compared.
    const logs = nodes.map((node) => {
      const core = node.core;
      if (core === null) {
        return {
          node,
          first: node.disk.logStart.index + 1,
          log: node.disk.entries,
          commit: 0,
        };
      }
      const first = core.snapshotPoint.index + 1;
      const log: Entry[] = [];
      for (let i = first; i <= core.lastIndex; i++) log.push(core.entryAt(i)!);
      return { node, first, log, commit: core.commitIndex };
    });
    for (const { node, first, log, commit } of logs) {
      for (let i = 0; i < log.length; i++) {
        if (
          log[i].index !== first + i || (i > 0 && log[i].term < log[i - 1].term)
        ) {
          this.#fail(`${node.id} log is malformed at index ${first + i}`);
        }
      }
      for (
        let i = first;
        i <= Math.min(commit, this.applied.length, first + log.length - 1);
        i++
      ) {
        const known = this.applied[i - 1];
        const held = log[i - first];
        if (held.term !== known.term || held.data !== known.data) {
          this.#fail(
            `${node.id} committed ${entryString(held)} but ` +
              `${entryString(known)} was applied`,
          );
        }
      }
    }
    for (let a = 0; a < logs.length; a++) {
      for (let b = a + 1; b < logs.length; b++) {
        const x = logs[a], y = logs[b];
        const low = Math.max(x.first, y.first);
        const at = (l: typeof x, i: number) => l.log[i - l.first];
        let top = Math.min(x.first + x.log.length, y.first + y.log.length) - 1;
        while (top >= low && at(x, top).term !== at(y, top).term) top--;
        for (let i = low; i <= top; i++) {
          const ex = at(x, i), ey = at(y, i);
          if (ex.term !== ey.term || ex.data !== ey.data) {
            this.#fail(
              `log matching: ${x.node.id} and ${y.node.id} agree ` +
                `at index ${top} (term ${at(x, top).term}) but differ at ` +
                `${i}: ${entryString(ex)} vs ${entryString(ey)}`,
            );
          }
        }
      }
    }
    this.#verified.clear();
    this.checkLeaders(nodes);
  }

  // --- snapshots (issue 8 item 9) ------------------------------------------

  /**
   * State Machine Safety across snapshots (Raft paper §7): a snapshot at
   * index i (taken, received, or loaded at a restart) holds the state of
   * the applied record at i, and its term is the term applied at i.
   */
  checkSnapshot(id: NodeId, what: string, snapshot: Snapshot): void {
    const { index, term } = snapshot;
    const known = this.applied[index - 1];
    if (known === undefined || known.term !== term) {
      this.#fail(
        `${id} ${what} a snapshot at (index ${index}, term ${term}) where ` +
          `${known ? entryString(known) : "nothing"} was applied`,
      );
    }
    if (
      SimStateMachine.fingerprintOf(snapshot.data) !==
        this.#fingerprints[index - 1]
    ) {
      this.#fail(
        `state machine safety: ${id} ${what} a snapshot at ${index} whose ` +
          `state differs from the applied record's at ${index}: ${snapshot.data}`,
      );
    }
  }

  /**
   * A node's state machine after it applied (or restored) up to `index`
   * equals the state of the applied record at `index`.
   */
  checkState(id: NodeId, index: number, fingerprint: number): void {
    const expected = index === 0
      ? new SimStateMachine().fingerprint()
      : this.#fingerprints[index - 1];
    if (fingerprint !== expected) {
      this.#fail(
        `state machine safety: ${id}'s state at ${index} differs from the ` +
          `state of the applied record at ${index}`,
      );
    }
  }

  /**
   * Liveness after healing: null when exactly one node leads, it is a voter
   * of its configuration and in the highest term of its members, it has
   * committed its whole log, every member (voter or learner) applied it,
   * and a proposal made after healing was committed; else why not. Nodes
   * outside the leader's configuration (removed, or never added) are not
   * waited for.
   */
  liveness(
    nodes: readonly NodeView[],
    postHealCommitted: boolean,
  ): string | null {
    if (!postHealCommitted) {
      return "no proposal made after healing was committed";
    }
    const leaders = nodes.filter((n) => n.core?.role === "leader");
    if (leaders.length !== 1) return `${leaders.length} leaders`;
    const leader = leaders[0].core!;
    const members = membersOf(leader.configuration);
    if (!isVoter(leader.configuration, leader.id)) {
      return `leader ${leader.id} is not a voter of its configuration`;
    }
    const memberNodes = nodes.filter((n) => members.includes(n.id));
    const down = memberNodes.filter((n) => n.core === null);
    if (down.length > 0) {
      return `member ${down.map((n) => n.id).join(", ")} is down`;
    }
    if (memberNodes.length !== members.length) {
      return `a member of [${members}] was never started`;
    }
    const maxTerm = Math.max(...memberNodes.map((n) => n.core!.term));
    if (leader.term !== maxTerm) {
      return `leader ${leader.id} is in term ${leader.term} < ${maxTerm}`;
    }
    if (leader.commitIndex !== leader.lastIndex) {
      return `leader ${leader.id} has uncommitted entries`;
    }
    const lagging = memberNodes.filter((n) => n.applied !== leader.commitIndex);
    if (lagging.length > 0) {
      return `${lagging.map((n) => n.id).join(", ")} applied less than ` +
        `${leader.commitIndex}`;
    }
    return null;
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
}
