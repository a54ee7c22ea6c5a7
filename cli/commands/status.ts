/**
 * `rafter status`: asks each registry node given, and every member they
 * report, for its Raft state (role, term, leader, commit and applied
 * indexes, revision) and what it sees wrong with its peers; exit 1 when
 * the cluster is degraded, 3 when no node answered, 5 or 6 when the nodes
 * refused the token.
 *
 * @module
 */

import type { RegistryStatus } from "../../protocol/registry.ts";
import type { Command, Context } from "../context.ts";
import {
  EXIT,
  isTlsTrustProblem,
  mayBeTlsPort,
  report,
  START_HINT,
  TLS_SCHEME_HINT,
  TLS_TRUST_HINT,
} from "../errors.ts";
import {
  PERMISSION_DENIED,
  RpcError,
  UNAUTHENTICATED,
} from "../../rpc/errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter status`. */
export const statusCommand: Command = {
  name: "status",
  args: "",
  summary: "every member's role, term, leader, indexes",
  about: `Asks each registry node given, and every member they report, for its
Raft state; members that do not answer are listed with the reason.
Exit 0 when every member answered and all agree on a leader, 1 when the
cluster is degraded (a member did not answer, or there is no leader),
3 when no node answered, 5 (6) when every node that answered refused the
token (its permissions).`,
  positionals: [0, 0],
  run: (c) => status(c),
};

/** One row of `status`: a member (or a URL given) and its answer. */
export interface NodeAnswer {
  /** The member's id; null for a URL given that no member claims. */
  id: string | null;
  /** Its client URL, when known. */
  url: string | null;
  /** Its answer, or null when it gave none. */
  status: RegistryStatus | null;
  /** Why it gave none. */
  error: string | null;
}

/** Runs `rafter status`. */
export async function status(context: Context): Promise<number> {
  const { globals, out, err } = context;
  const answers = await askEveryMember(context);
  const nodes = statusRows(answers);
  const answered = nodes.filter((n) => n.status !== null);
  // A node that answers but is no member of its own configuration
  // (removed, or not added yet) is no member of the cluster: counted
  // apart, and its view of the leader is no vote.
  const { members } = membersAndOutsiders(nodes);
  const answeredMembers = members.filter((n) => n.status !== null);
  const leaders = new Set(
    (answeredMembers.length > 0 ? answeredMembers : answered).map((n) =>
      n.status!.leader
    ),
  );
  const leader = leaders.size === 1 ? [...leaders][0] : null;
  // Nodes that answered with a refusal (no token, a bad one, too few
  // permissions) are reachable: the table says "refused", not unreachable.
  const refusedUrls = new Set(
    [...answers].filter(([, answer]) => isRefusal(answer)).map(([url]) => url),
  );
  const refusal = [...answers.values()].find(isRefusal);
  if (globals.json) {
    out(JSON.stringify({ leader, nodes }, null, 2));
  } else if (answered.length > 0 || refusal === undefined) {
    out(statusTable(nodes, refusedUrls));
  }
  if (answered.length === 0) {
    const errors = nodes.map((n) => n.error ?? "");
    // Every node refused: say why once (exit 5 or 6, not "unavailable"),
    // rather than a table of the same refusal on each row.
    if (refusal !== undefined) return report(refusal, context);
    if (!globals.json) {
      err(
        `rafter: no registry node answered (${
          globals.registry.join(", ")
        }, from ${globals.registrySource}).\n${
          errors.some(isTlsTrustProblem)
            ? TLS_TRUST_HINT
            : errors.some((e) => mayBeTlsPort(e, globals.registry))
            ? TLS_SCHEME_HINT
            : START_HINT
        }`,
      );
    }
    return EXIT.unavailable;
  }
  // Fronts over etcd (--engine etcd) have no Raft of their own: each
  // says whether etcd answers it.
  const engineOf = (status: unknown) =>
    (status as {
      engine?: {
        kind?: string;
        endpoints?: string[];
        reachable?: boolean;
        problem?: string | null;
      };
    }).engine;
  const fronts = answered.filter((n) => engineOf(n.status)?.kind === "etcd");
  if (fronts.length > 0 && fronts.length === answered.length) {
    const down = fronts.filter((n) => engineOf(n.status)?.reachable === false);
    if (!globals.json) {
      out(
        `${fronts.length} front${fronts.length === 1 ? "" : "s"} over etcd at ${
          (engineOf(fronts[0].status)?.endpoints ?? []).join(", ")
        } (--engine etcd: term and commit are etcd's, see etcdctl endpoint status); ${
          down.length === 0
            ? "etcd answers every front"
            : `etcd does not answer ${
              down.map((n) =>
                `${n.status!.id}${
                  engineOf(n.status)?.problem
                    ? ` (${engineOf(n.status)!.problem})`
                    : ""
                }`
              ).join(", ")
            }: check that a quorum of etcd's members runs`
        }; ${
          answeredSummary(nodes).replace(/members answered/, "fronts answered")
        }`,
      );
    }
    return down.length === 0 && answered.length === nodes.length
      ? EXIT.ok
      : EXIT.failed;
  }
  const degraded = answeredMembers.length < members.length || leader === null;
  if (!globals.json) {
    const summary = leader === null
      ? `no leader agreed on (${
        [...leaders].map((l) => l ?? "none").join(", ")
      }): ${whyNoLeader(answered.map((n) => n.status!))}`
      : `leader ${leader}, term ${
        answered.find((n) => n.status!.id === leader)?.status?.term ??
          answered[0].status!.term
      }`;
    out(`${summary}; ${answeredSummary(nodes)}`);
  }
  return degraded ? EXIT.failed : EXIT.ok;
}

/**
 * The rows of members (those that answered as members, and those that did
 * not answer), and those of nodes that answered as no member of their
 * own configuration.
 */
function membersAndOutsiders(
  nodes: readonly NodeAnswer[],
): { members: NodeAnswer[]; outsiders: NodeAnswer[] } {
  const outside = (n: NodeAnswer) =>
    n.status !== null && n.status.kind === null;
  return {
    members: nodes.filter((n) => !outside(n)),
    outsiders: nodes.filter(outside),
  };
}

/**
 * How many members answered, of how many; then the nodes that answered
 * but are no member (a removed node still running, one started with
 * `--join` before it was added): "4 of 4 members answered; n5 answered
 * but is not a member".
 */
export function answeredSummary(nodes: readonly NodeAnswer[]): string {
  const { members, outsiders } = membersAndOutsiders(nodes);
  const answered = members.filter((n) => n.status !== null).length;
  const ids = outsiders.map((n) => n.status!.id);
  return `${answered} of ${members.length} members answered${
    ids.length === 0
      ? ""
      : `; ${ids.join(", ")} answered but ${
        ids.length === 1 ? "is not a member" : "are not members"
      }`
  }`;
}

/**
 * Asks every URL given, then every member the answers name, until no new
 * client URL turns up (a few rounds at most): each URL's status or error.
 */
async function askEveryMember(
  context: Context,
): Promise<Map<string, RegistryStatus | Error>> {
  const { client, globals } = context;
  const answers = new Map<string, RegistryStatus | Error>();
  let pending = [...globals.registry];
  for (let round = 0; round < 4 && pending.length > 0; round++) {
    await Promise.all(pending.map(async (url) => {
      try {
        answers.set(
          url,
          await client.registry.status(url, { timeoutMs: globals.timeoutMs }),
        );
      } catch (error) {
        answers.set(url, error as Error);
      }
    }));
    pending = [];
    for (const answer of answers.values()) {
      if (answer instanceof Error) continue;
      for (const member of answer.members) {
        const url = member.clientUrl;
        if (url !== null && !answers.has(url) && !pending.includes(url)) {
          pending.push(url);
        }
      }
    }
  }
  return answers;
}

/** An answer that refused the caller: UNAUTHENTICATED or PERMISSION_DENIED. */
function isRefusal(answer: unknown): answer is RpcError {
  return answer instanceof RpcError &&
    (answer.code === UNAUTHENTICATED || answer.code === PERMISSION_DENIED);
}

function statusTable(
  nodes: readonly NodeAnswer[],
  refusedUrls: ReadonlySet<string> = new Set(),
): string {
  return formatTable(
    [
      "ID",
      "URL",
      "ROLE",
      "TERM",
      "LEADER",
      "COMMIT",
      "APPLIED",
      "REVISION",
      "ERRORS",
    ],
    nodes.map((n) => {
      const s = n.status;
      if (s === null) {
        return [
          n.id ?? "?",
          n.url ?? "-",
          n.url !== null && refusedUrls.has(n.url) ? "refused" : "unreachable",
          "-",
          "-",
          "-",
          "-",
          "-",
          n.error ?? "",
        ];
      }
      const engine = (s as { engine?: { kind?: string; problem?: string } })
        .engine;
      if (engine?.kind === "etcd") {
        // A front over etcd: no Raft role, term or log of its own.
        return [
          s.id,
          s.url,
          "front",
          "-",
          "-",
          "-",
          "-",
          String(s.revision),
          engine.problem ? `etcd: ${engine.problem}` : "-",
        ];
      }
      const problems = [...memberProblems(s), ...securityProblems(s)];
      return [
        s.id,
        s.url,
        roleOf(s),
        String(s.term),
        s.leader ?? "(none)",
        String(s.commitIndex),
        String(s.appliedIndex),
        String(s.revision),
        problems.join("; ") || "-",
      ];
    }),
  );
}

/**
 * A node's role for the table: a node that is no member of its own
 * configuration (removed, or started with `--join` before it was added)
 * takes no part whatever its Raft role says.
 */
function roleOf(s: RegistryStatus): string {
  return s.kind === null ? "not a member" : s.role;
}

/**
 * Why the nodes that answered agree on no leader, as far as their
 * statuses tell: nodes that are no members (removed, or not added yet),
 * nodes that cannot authenticate to their peers (another cluster secret
 * or cluster id, wrong certificates), nodes that reach no quorum; else
 * an election under way.
 */
export function whyNoLeader(statuses: readonly RegistryStatus[]): string {
  const reasons: string[] = [];
  const outside = statuses.filter((s) => s.kind === null).map((s) => s.id);
  if (outside.length > 0) {
    reasons.push(
      `${outside.join(", ")} ${
        outside.length === 1 ? "is" : "are"
      } no member of ${
        outside.length === 1 ? "its" : "their"
      } configuration (removed, or started with --join before \`rafter member add\`): stop ${
        outside.length === 1 ? "it" : "them"
      }, or add ${outside.length === 1 ? "it" : "them"} again`,
    );
  }
  const refused = statuses.filter((s) =>
    s.members.some((m) =>
      !m.self && !m.reachable && m.lastError !== null &&
      /peer\.hello|peer\.auth|cluster id|secret|certificate/i.test(m.lastError)
    )
  ).map((s) => s.id);
  if (refused.length > 0) {
    reasons.push(
      `${refused.join(", ")} cannot authenticate to ${
        refused.length === 1 ? "its" : "their"
      } peers (see ERRORS): the members must share one cluster secret file and cluster, and trust each other's certificates`,
    );
  }
  const alone = statuses.filter((s) =>
    s.kind !== null && !refused.includes(s.id) &&
    s.members.filter((m) => m.self || m.reachable).length * 2 <=
      s.members.length
  ).map((s) => s.id);
  if (alone.length > 0) {
    reasons.push(
      `${alone.join(", ")} reach${
        alone.length === 1 ? "es" : ""
      } no majority of ${
        alone.length === 1 ? "its" : "their"
      } members (see ERRORS): start the others, or check the network between them`,
    );
  }
  return reasons.length > 0
    ? reasons.join("; ")
    : "an election may be under way (retry in a moment)";
}

/**
 * What a node's view of its peers says is wrong: peers it cannot reach,
 * and, between a leader and its followers (who hear from each other at
 * every heartbeat), a peer silent for over two election timeouts (a
 * process that is stopped but keeps its connections open).
 */
function memberProblems(s: RegistryStatus): string[] {
  const problems: string[] = [];
  for (const m of s.members) {
    if (m.self) continue;
    if (!m.reachable) {
      problems.push(
        `cannot reach ${m.id}${
          m.lastError === null ? "" : ` (${m.lastError})`
        }`,
      );
    } else if (s.role === "leader" || m.id === s.leader) {
      if (m.lastHeardMsAgo === null) {
        problems.push(`never heard from ${m.id}`);
      } else if (m.lastHeardMsAgo > 2 * s.electionTimeoutMs) {
        problems.push(
          `no word from ${m.id} for ${(m.lastHeardMsAgo / 1000).toFixed(1)} s`,
        );
      }
    }
  }
  return problems;
}

/**
 * What a node's drop and refusal counters (`security` of its status) say
 * a peer did that a correct member never does: messages forged for
 * another member, malformed batches, connections refused for their
 * certificate, and Raft messages impossible in a correct cluster (by
 * name). Counters that move in a healthy cluster too (stale messages,
 * connections refused for other reasons) are left to `--json`. A node
 * of an older version, without the counters, shows nothing.
 */
function securityProblems(s: RegistryStatus): string[] {
  const security = s.security as RegistryStatus["security"] | null | undefined;
  // An older node has none; an etcd front (--engine etcd) has no peers.
  if (security === undefined || security === null) return [];
  const { peerServer, peerTransport, raft } = security;
  const problems: string[] = [];
  const count = (n: number, what: string) => {
    if (n > 0) problems.push(`${what}: ${n}`);
  };
  count(peerServer.forgedFrom, "peer messages forged for another member");
  count(peerServer.invalid, "malformed raft.step calls");
  count(
    peerServer.identityRefused + peerTransport.identityRefused,
    "peer connections refused for their certificate",
  );
  const impossible = Object.entries(raft.anomalies)
    .filter(([, n]) => n > 0)
    .map(([name, n]) => `${name} ${n}`);
  if (impossible.length > 0) {
    problems.push(
      `raft messages dropped as impossible: ${impossible.join(", ")}`,
    );
  }
  return problems;
}

/**
 * One row per member any answer names (those that did not answer with
 * the reason), then the URLs given that failed and belong to no member.
 */
function statusRows(
  answers: Map<string, RegistryStatus | Error>,
): NodeAnswer[] {
  const rows = new Map<string, NodeAnswer>();
  const urlOf = new Map<string, string | null>(); // member id → client URL
  for (const answer of answers.values()) {
    if (answer instanceof Error) continue;
    rows.set(answer.id, {
      id: answer.id,
      url: answer.url,
      status: answer,
      error: null,
    });
    for (const member of answer.members) {
      if (!urlOf.has(member.id) || urlOf.get(member.id) === null) {
        urlOf.set(member.id, member.clientUrl);
      }
    }
  }
  const claimed = new Set(
    [...rows.values()].map((row) => row.url).filter((u) => u !== null),
  );
  for (const [id, url] of urlOf) {
    if (rows.has(id)) continue;
    const answer = url === null ? undefined : answers.get(url);
    rows.set(id, {
      id,
      url,
      status: null,
      error: answer instanceof Error
        ? answer.message
        : "no member knows its client URL yet (it has not connected since they started)",
    });
    if (url !== null) claimed.add(url);
  }
  // URLs given that answered with an error and belong to no known member.
  for (const [url, answer] of answers) {
    if (!(answer instanceof Error) || claimed.has(url)) continue;
    rows.set(`?${url}`, { id: null, url, status: null, error: answer.message });
  }
  return [...rows.values()].sort((a, b) =>
    (a.id ?? `~${a.url}`).localeCompare(b.id ?? `~${b.url}`)
  );
}
