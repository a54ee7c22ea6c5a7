/**
 * `rafter member list|add|promote|remove`: the registry's members as the
 * leader sees them (role, kind, URLs, match index, lag), and the
 * membership changes, one server at a time: add a learner (or a voter),
 * promote a learner, remove a member (the leader too).
 *
 * @module
 */

import {
  type MemberInfo,
  type MemberListResult,
  type ParamsOf,
  REGISTRY_METHODS,
} from "../../protocol/registry.ts";
import { checkUrl } from "../args.ts";
import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter member list`. */
export const memberListCommand: Command = {
  name: "member list",
  args: "",
  summary: "every member: role, URLs, match index, lag",
  about: `Lists every member as the leader sees it: id, role (leader, follower,
learner, or unreachable: the leader cannot reach it now, as for a node
stopped or added but never started), kind (voter, or learner: receives
the log without voting), peer and client
URLs, the highest log index it holds in agreement with the leader (its
match index; "-" until it acknowledges an append in this term) and how
many entries it is behind. Asks the leader (a follower redirects), so it
needs a leader: rafter status works without one.`,
  positionals: [0, 0],
  run: (c) => memberList(c),
};

/** The spec of `rafter member add`. */
export const memberAddCommand: Command = {
  name: "member add",
  args: "ID PEER_URL",
  summary: "add a member (a learner unless --voter)",
  about: `Adds member ID, whose peer port is at PEER_URL (tcp://host:port), one
server at a time (Raft dissertation §4.1). It joins as a learner, which
receives the log but does not vote, so the cluster's quorum is not held
up while it catches up (§4.2.1). --voter adds a voter at once. Then
start the node with --join: the command prints the exact line (rafter
registry --id ID --join URL --listen ... --peer-listen ...
--cluster-secret-file ... --data ...; it finds itself added, catches up,
and asks the leader to promote it to voter once caught up, so no rafter
member promote is needed), or let --join add it in the first place.
rafter member promote ID promotes a learner by hand (one started
otherwise, or to promote it sooner). Adding a
learner that is one already, with the same URLs, changes nothing and
exits 0 (so a retry is safe). Prints the new member list. Exit 1 when the
change is refused (a voter already, a change still in progress...).`,
  options: {
    "client-url": { type: "string" },
    voter: { type: "boolean" },
  },
  optionHelp: [
    "  --client-url URL  the member's client URL, told to clients and peers",
    "  --voter           add it as a voter at once (default: a learner)",
  ].join("\n"),
  positionals: [2, 2],
  run: async (c, [id, peerUrl], v) => {
    const clientUrl = v["client-url"] === undefined
      ? undefined
      : checkUrl(v["client-url"] as string, "--client-url");
    const code = await memberChange(c, REGISTRY_METHODS.memberAdd, {
      id,
      peerUrl: checkUrl(peerUrl, "PEER_URL"),
      ...(clientUrl === undefined ? {} : { clientUrl }),
      learner: v.voter !== true,
    });
    if (code === EXIT.ok && !c.globals.json) {
      c.out(
        startHint(id, peerUrl, clientUrl, c.globals.registry, v.voter !== true),
      );
    }
    return code;
  },
};

/**
 * How to start a member just added: the node's own command, with --join
 * naming the registry this CLI talked to (it finds itself added and
 * catches up; it does not compute a cluster of its own from --peers).
 */
export function startHint(
  id: string,
  peerUrl: string,
  clientUrl: string | undefined,
  registry: readonly string[],
  learner: boolean,
): string {
  const hostPort = (url: string) => url.replace(/^[a-z]+:\/\//, "");
  const secure = [peerUrl, ...registry].some((url) => url.startsWith("tls://"));
  return [
    `next: start ${id} on its host with`,
    `  rafter registry --id ${id} --join ${registry.join(",")} --listen ${
      clientUrl === undefined ? "HOST:PORT" : hostPort(clientUrl)
    } --peer-listen ${hostPort(peerUrl)} --cluster-secret-file FILE --data DIR${
      secure ? " (and the TLS flags the other members use)" : ""
    }`,
    `  (FILE: a copy of the members' cluster secret file; DIR: an empty folder${
      clientUrl === undefined ? "; HOST:PORT: its client port" : ""
    })`,
    ...(learner
      ? [
        `  it is promoted to voter automatically once caught up (it asks the leader itself); rafter member promote ${id} does it by hand`,
      ]
      : []),
  ].join("\n");
}

/** The spec of `rafter member promote`. */
export const memberPromoteCommand: Command = {
  name: "member promote",
  args: "ID",
  summary: "make a learner a voter",
  about: `Makes learner ID a voter (Raft dissertation §4.2.1): from then on it
votes and counts towards the quorum. Promote a learner once it has
caught up (rafter member list shows its lag): a learner more than 1,000
entries behind (or one never heard from) is refused, since the quorum
would wait for it. Prints the new member list. Exit 1 when ID is not a
learner, has not caught up, or another change is in progress.`,
  positionals: [1, 1],
  run: (c, [id]) => memberChange(c, REGISTRY_METHODS.memberPromote, { id }),
};

/** The spec of `rafter member remove`. */
export const memberRemoveCommand: Command = {
  name: "member remove",
  args: "ID",
  summary: "remove a member (the leader too)",
  about: `Removes member ID (Raft dissertation §4.1). Removing the leader is
safe: it first hands leadership to another voter (§3.10), which then
removes it, so writes pause for a hand-over, not an election; only if no
voter takes over does it remove itself and step down once that commits
(§4.2.2). The removed node stays up but takes no part
(its status says it is no member): stop it. Prints the new member list.
Exit 1 when ID is not a member, or it is the last voter.`,
  positionals: [1, 1],
  run: (c, [id]) => memberChange(c, REGISTRY_METHODS.memberRemove, { id }),
};

/** The verbs of `rafter member`, in the order the help lists them. */
export const MEMBER_COMMANDS: readonly Command[] = [
  memberListCommand,
  memberAddCommand,
  memberPromoteCommand,
  memberRemoveCommand,
];

/** Runs `rafter member list`. */
export async function memberList(context: Context): Promise<number> {
  return printMembers(context, await context.client.registry.memberList());
}

/**
 * Runs one membership change (`rafter member add|promote|remove`) and
 * prints the member list it leaves.
 */
export async function memberChange<
  M extends
    | typeof REGISTRY_METHODS.memberAdd
    | typeof REGISTRY_METHODS.memberPromote
    | typeof REGISTRY_METHODS.memberRemove,
>(context: Context, method: M, params: ParamsOf<M>): Promise<number> {
  const result = await context.client.registry.call(method, params, {
    attemptTimeoutMs: context.globals.timeoutMs,
  });
  return printMembers(context, result);
}

/**
 * A member's ROLE in `rafter member list`, from what the leader knows:
 * `leader`; `unreachable` for a member the leader cannot reach now (a
 * stopped node, one added but never started), as `rafter status` says of
 * a node that does not answer; `learner` for a learner it reaches
 * (receiving the log, not voting); else `follower`.
 */
export function memberRole(
  member: Pick<MemberInfo, "role" | "kind" | "reachable">,
): string {
  if (member.role === "leader") return "leader";
  if (!member.reachable) return "unreachable";
  return member.kind === "learner" ? "learner" : "follower";
}

function printMembers(context: Context, result: MemberListResult): number {
  const { globals, out } = context;
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
    return EXIT.ok;
  }
  out(formatTable(
    ["ID", "ROLE", "KIND", "PEER_URL", "CLIENT_URL", "MATCH", "LAG"],
    result.members.map((m) => [
      m.id,
      memberRole(m),
      m.kind,
      m.peerUrl,
      m.clientUrl ?? "-",
      m.matchIndex === null ? "-" : String(m.matchIndex),
      m.lag === null ? "-" : String(m.lag),
    ]),
  ));
  out(
    `leader ${result.leader}, term ${result.term}, last index ${result.lastIndex}, commit index ${result.commitIndex}`,
  );
  return EXIT.ok;
}
