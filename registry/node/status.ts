/**
 * What a node says about itself: its status (`registry.status`), why it
 * cannot reach a quorum, and one log line per role change.
 *
 * @module
 */

import type { PeerDirectory } from "../../raft/peer_directory.ts";
import type { RaftStatus } from "../../raft/node.ts";
import type { RaftCoreStats, SoftState } from "../../raft/core.ts";
import type { PeerServerStats } from "../../raft/peer_server.ts";
import type { PeerTransportStats } from "../../raft/peer_transport.ts";
import type {
  MemberStatus,
  PeerSecurityStatus,
  PeerServerCounters,
  PeerTransportCounters,
  RaftDropCounters,
  RegistryStatus,
} from "../../protocol/registry.ts";
import type { RegistryState } from "../state.ts";
import type { WatchHub } from "../watch_hub.ts";
import type { NodeSettings } from "./options.ts";
import type { LogLine } from "./log.ts";

/** What {@link statusOf} reads. */
interface StatusSources {
  readonly settings: NodeSettings;
  readonly directory: PeerDirectory;
  /** This node's peer URL (known once the peer port listens). */
  readonly peerUrl: string;
  readonly raft: RaftStatus;
  /** Whether the leader told this node it was removed. */
  readonly removed: boolean;
  readonly state: RegistryState;
  readonly watches: WatchHub;
  /** The peer port's counters, or null before it listens. */
  readonly peerServer: PeerServerStats | null;
  /** The peer dialer's counters, or null before it is made. */
  readonly peerTransport: PeerTransportStats | null;
  /** The Raft core's drop counters. */
  readonly raftStats: RaftCoreStats;
}

/** The node's status, as `registry.status` answers it. */
export function statusOf(sources: StatusSources): RegistryStatus {
  const { settings, directory, peerUrl, raft, state } = sources;
  return {
    id: settings.id,
    url: directory.clientUrl(settings.id) ?? "",
    peerUrl,
    term: raft.term,
    role: raft.role,
    kind: !raft.member || sources.removed
      ? null
      : raft.learner
      ? "learner"
      : "voter",
    leader: raft.leader,
    leaderUrl: raft.leader === null ? null : directory.clientUrl(raft.leader),
    commitIndex: raft.commitIndex,
    appliedIndex: raft.appliedIndex,
    snapshotIndex: raft.snapshotIndex,
    revision: state.revision,
    compactRevision: state.compactRevision,
    leases: state.leaseCount,
    watchers: sources.watches.count,
    electionTimeoutMs: settings.electionTimeoutMs,
    minTtlMs: settings.minTtlMs,
    members: membersOf(directory, peerUrl),
    security: securityOf(sources),
    federation: settings.options.federation ?? null,
  };
}

/**
 * The wire counters are spelt out in `protocol/registry.ts` (which imports
 * no Raft code); these make the build fail when the two drift apart.
 */
type Same<A, B> = [A] extends [B] ? [B] extends [A] ? true : false : false;
const SAME_SERVER: Same<PeerServerStats, PeerServerCounters> = true;
const SAME_TRANSPORT: Same<PeerTransportStats, PeerTransportCounters> = true;
const SAME_RAFT: Same<RaftCoreStats, RaftDropCounters> = true;
void [SAME_SERVER, SAME_TRANSPORT, SAME_RAFT];

/** The drop and refusal counters of `registry.status` (copies). */
function securityOf(sources: StatusSources): PeerSecurityStatus {
  const server = sources.peerServer;
  const raft = sources.raftStats;
  return {
    peerServer: {
      delivered: server?.delivered ?? 0,
      forgedFrom: server?.forgedFrom ?? 0,
      wrongTo: server?.wrongTo ?? 0,
      notMember: server?.notMember ?? 0,
      invalid: server?.invalid ?? 0,
      refusedConnections: server?.refusedConnections ?? 0,
      identityRefused: server?.identityRefused ?? 0,
    },
    peerTransport: {
      identityRefused: sources.peerTransport?.identityRefused ?? 0,
      redials: sources.peerTransport?.redials ?? 0,
    },
    raft: {
      droppedNotMember: raft.droppedNotMember,
      droppedMisaddressed: raft.droppedMisaddressed,
      droppedStale: raft.droppedStale,
      anomalies: { ...raft.anomalies },
    },
  };
}

/** Every member as this node sees it (its own peer URL: `peerUrl`). */
function membersOf(directory: PeerDirectory, peerUrl: string): MemberStatus[] {
  const now = Date.now();
  return directory.status().map((member) => ({
    id: member.id,
    peerUrl: member.self ? peerUrl : member.peerUrl,
    clientUrl: member.clientUrl,
    self: member.self,
    reachable: member.reachable,
    lastHeardMsAgo: member.self
      ? 0
      : member.lastHeardAt === null
      ? null
      : Math.max(0, now - member.lastHeardAt),
    lastError: member.lastError,
  }));
}

/**
 * Why this node cannot be part of a quorum, from its view of the members:
 * "this node reaches 1 of 3 members (n2 at tcp://…: connection refused,
 * …); a 3-member registry needs 2 …", or null when it reaches a majority.
 */
export function quorumProblem(
  members: ReturnType<PeerDirectory["status"]>,
): string | null {
  // A member not tried yet (just after start) may well be reachable.
  const down = members.filter((m) =>
    !m.self && !m.reachable && m.lastError !== null
  );
  const reachable = members.length - down.length;
  const needed = Math.floor(members.length / 2) + 1;
  if (reachable >= needed) return null;
  const reasons = down.map((m) => `${m.id} at ${m.peerUrl}: ${m.lastError}`)
    .join("; ");
  return `this node reaches ${reachable} of ${members.length} members (${reasons}); a ${members.length}-member registry needs ${needed} to elect a leader: start the others, or check the network between them`;
}

/** Least time between two candidate lines that say the same, ms. */
const CANDIDATE_LOG_INTERVAL_MS = 5_000;

/**
 * Logs one line per role change, e.g. "n1: follower in term 3, leader n2".
 * A candidate's (or PreVote pre-candidate's) line names the peers it cannot
 * reach and why; while neither that list nor the reasons change, it logs at
 * most once per 5 s.
 */
export function roleLogger(
  id: string,
  directory: PeerDirectory,
  log: LogLine,
): (soft: SoftState) => void {
  let last = { key: "", at: -Infinity };
  return (soft) => {
    if (soft.role !== "candidate" && !soft.preCandidate) {
      last = { key: "", at: -Infinity };
      log(
        soft.role === "leader"
          ? `${id}: leader of term ${soft.term}`
          : `${id}: follower in term ${soft.term}, leader ${
            soft.leader ?? "unknown (election under way)"
          }`,
      );
      return;
    }
    const unreachable = directory.unreachable();
    const key = unreachable
      .map((peer) => `${peer.id} (${peer.peerUrl}: ${peer.reason})`)
      .join(", ");
    const now = Date.now();
    if (key === last.key && now - last.at < CANDIDATE_LOG_INTERVAL_MS) return;
    last = { key, at: now };
    const who = soft.preCandidate ? "pre-candidate" : "candidate";
    const asking = soft.preCandidate
      ? `pre-votes for term ${soft.term + 1}`
      : "votes";
    log(
      unreachable.length === 0
        ? `${id}: ${who} in term ${soft.term}, asking for ${asking}`
        : `${id}: ${who} in term ${soft.term}; cannot reach ${key}`,
      unreachable.length === 0 ? "info" : "warn",
    );
  };
}
