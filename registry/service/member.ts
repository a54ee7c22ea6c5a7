/**
 * The membership API (Raft dissertation §4.1): `registry.memberList`,
 * `memberAdd` (a learner by default, §4.2.1), `memberPromote` and
 * `memberRemove` (the leader itself hands leadership over first, §3.10),
 * one change at a time.
 *
 * @module
 */

import { RpcError } from "../../rpc/errors.ts";
import { method } from "../../rpc/server/method.ts";
import { NotLeaderError } from "../../raft/core.ts";
import {
  type ConfChange,
  ConfChangeError,
  type Configuration,
  isMember,
} from "../../raft/configuration.ts";
import {
  type MemberInfo,
  type MemberListResult,
  MEMBERSHIP_CHANGE_FAILED,
  type MembershipChangeFailedData,
  REGISTRY_METHODS,
} from "../../protocol/registry.ts";
import {
  type ReadParams,
  REGISTRY_PARAMS,
} from "../../protocol/registry_params.ts";
import { type MethodTable, type ServiceCore, unavailable } from "./_core.ts";
import type { Caller } from "./_caller.ts";

/**
 * Most entries a learner's match index may lag the commit index for
 * `registry.memberPromote` to promote it (dissertation §4.2.1).
 */
const PROMOTE_MAX_LAG = 1_000;

const { memberList, memberAdd, memberPromote, memberRemove } = REGISTRY_METHODS;

/**
 * The membership methods of one connection (`caller`): with auth
 * enforced, memberList needs a valid token, the changes an admin token.
 */
export function memberMethods(
  core: ServiceCore,
  caller: Caller,
): MethodTable<
  | typeof memberList
  | typeof memberAdd
  | typeof memberPromote
  | typeof memberRemove
> {
  const { context } = core;

  /**
   * Adds a member (dissertation §4.1), a learner by default (§4.2.1).
   * Adding a learner that is already one, with the same URLs, is answered
   * as done (so a `--join` that retries is harmless).
   */
  async function addMember(
    p: ReadParams<typeof memberAdd>,
  ): Promise<MemberListResult> {
    const { id, peerUrl, clientUrl, learner } = p;
    const promote = p.promoteWhenCaughtUp;
    core.requireLeader();
    const config = context.raft.configuration;
    const already = learner
      ? config.learners.includes(id)
      : config.voters.includes(id);
    if (
      already && config.peerUrls?.[id] === peerUrl &&
      (clientUrl === undefined || config.clientUrls?.[id] === clientUrl)
    ) {
      if (learner && promote) context.promoteWhenCaughtUp(id);
      return listMembers();
    }
    const change: ConfChange = {
      type: learner ? "addLearner" : "addVoter",
      node: id,
      peerUrl,
      ...(clientUrl === undefined ? {} : { clientUrl }),
    };
    await changeMembers(change);
    if (learner && promote) context.promoteWhenCaughtUp(id);
    return listMembers();
  }

  /**
   * Promotes a learner, or removes a member. Removing the leader itself
   * first hands leadership over (dissertation §3.10) and answers NOT_LEADER
   * naming the new leader, which the client asks again; only when no voter
   * takes over does the leader remove itself (§4.2.2).
   */
  async function memberChange(
    id: string,
    type: "promote" | "remove",
  ): Promise<MemberListResult> {
    core.requireLeader();
    const config = context.raft.configuration;
    if (!isMember(config, id)) {
      throw membershipFailed(
        `Membership change failed: ${id} is not a member of this registry (members: ${
          [...config.voters, ...config.learners].join(", ")
        }); rafter member list shows them`,
        { reason: "unknownMember", member: id },
      );
    }
    const self = context.raft.status.id;
    if (type === "promote" && config.learners.includes(id)) {
      // Dissertation §4.2.1: a learner that has not caught up would add a
      // voter the quorum must wait for (or, if it is not running, one that
      // may cost the cluster its quorum).
      const match = context.raft.progress().get(id)?.match ?? 0;
      const commit = context.raft.status.commitIndex;
      if (match === 0 || commit - match > PROMOTE_MAX_LAG) {
        throw membershipFailed(
          `Membership change failed: learner ${id} has not caught up (match index ${match}, commit index ${commit}); start it (or wait until rafter member list shows its lag at most ${PROMOTE_MAX_LAG}) and promote it then`,
          { reason: "notApplicable", member: id },
        );
      }
    }
    if (type === "remove" && id === self && config.voters.length > 1) {
      // Removing the leader: hand leadership to another voter first
      // (dissertation §3.10), so that the cluster does not wait an election
      // timeout once the removal commits (§4.2.2); the new leader then
      // removes this node (the client follows NOT_LEADER). If no one takes
      // over in time, this leader removes itself and steps down.
      let leader: string | null = null;
      try {
        leader = await context.raft.transferLeadership({
          timeoutMs: 2 * context.electionTimeoutMs,
        });
      } catch {
        leader = null;
      }
      if (leader !== null && leader !== self) {
        throw core.rpcError(new NotLeaderError(leader), "write");
      }
      core.requireLeader();
    }
    await changeMembers({ type, node: id });
    if (type === "remove" && id !== self) context.memberRemoved(id);
    if (type === "remove" && id === self) {
      // This node removed itself and steps down (§4.2.2): it can no longer
      // say how far the others are.
      return memberListOf(context.raft.configuration);
    }
    return listMembers();
  }

  /** Proposes `change` and waits for it to commit, mapping its errors. */
  async function changeMembers(change: ConfChange): Promise<Configuration> {
    const raft = context.raft;
    try {
      // A new leader takes no change before an entry of its term commits
      // (within a round trip): wait for that here, up to an election
      // timeout, rather than answer "retry".
      const deadline = performance.now() + context.electionTimeoutMs;
      for (let attempt = 0;; attempt++) {
        try {
          return await raft.proposeConfChange(change, {
            timeoutMs: context.writeTimeoutMs ?? 3000,
          });
        } catch (error) {
          if (
            !(error instanceof ConfChangeError) ||
            !/has not yet committed/.test(error.message) ||
            performance.now() >= deadline || attempt >= 100
          ) {
            throw error;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    } catch (error) {
      if (error instanceof ConfChangeError) {
        // One change at a time (§4.1), and none before the leader's first
        // entry commits: both pass within a round trip or two.
        if (/not committed yet|has not yet committed/.test(error.message)) {
          throw unavailable(
            `Unavailable: ${error.message}`,
            context.electionTimeoutMs,
            false,
          );
        }
        throw membershipFailed(
          `Membership change failed: ${error.message}`,
          { reason: "notApplicable", member: change.node },
        );
      }
      throw core.rpcError(error, "write");
    }
  }

  /** Every member as the leader sees it: role, kind, match index, lag. */
  function listMembers(): MemberListResult {
    core.requireLeader("read");
    return memberListOf(context.raft.configuration);
  }

  /** The members of `config`, with the leader's replication progress. */
  function memberListOf(config: Configuration): MemberListResult {
    const raft = context.raft.status;
    const progress = context.raft.progress();
    const status = context.status();
    const members = status.members.filter((m) => isMember(config, m.id)).map((
      m,
    ): MemberInfo => {
      const known = progress.get(m.id);
      const matchIndex = m.self
        ? raft.lastIndex
        : known === undefined || known.match === 0
        ? null
        : known.match;
      return {
        id: m.id,
        peerUrl: m.peerUrl,
        clientUrl: m.clientUrl,
        role: m.self && raft.role === "leader" ? "leader" : "follower",
        kind: config.learners.includes(m.id) ? "learner" : "voter",
        matchIndex,
        lag: matchIndex === null
          ? null
          : Math.max(0, raft.lastIndex - matchIndex),
        reachable: m.reachable,
        lastHeardMsAgo: m.lastHeardMsAgo,
      };
    }).sort((a, b) => a.id.localeCompare(b.id));
    return {
      clusterId: context.clusterId,
      leader: raft.leader ?? raft.id,
      term: raft.term,
      lastIndex: raft.lastIndex,
      commitIndex: raft.commitIndex,
      members,
    };
  }

  return {
    [memberList]: method(REGISTRY_PARAMS[memberList], () => {
      caller.authenticated(memberList);
      return listMembers();
    }),
    [memberAdd]: method(REGISTRY_PARAMS[memberAdd], (p) => {
      caller.need(memberAdd, "admin");
      return addMember(p);
    }),
    [memberPromote]: method(REGISTRY_PARAMS[memberPromote], ({ id }) => {
      caller.need(memberPromote, "admin");
      return memberChange(id, "promote");
    }),
    [memberRemove]: method(REGISTRY_PARAMS[memberRemove], ({ id }) => {
      caller.need(memberRemove, "admin");
      return memberChange(id, "remove");
    }),
  };
}

function membershipFailed(
  message: string,
  data: MembershipChangeFailedData,
): RpcError {
  return new RpcError(MEMBERSHIP_CHANGE_FAILED, message, data);
}
