/**
 * Joining a running cluster (`--join`, Raft dissertation §4.2.1): the
 * cluster a node joins ({@link joinedCluster}), and the loop a joined
 * learner runs until promoted ({@link askPromotionWhileLearner}).
 *
 * @module
 */

import {
  type Dialer,
  formatTcpUrl,
  parseAdvertise,
} from "../../rpc/transport/transport.ts";
import { readDataDirMeta } from "../../raft/data_dir.ts";
import {
  PERMISSION_DENIED,
  RpcError,
  UNAUTHENTICATED,
} from "../../rpc/errors.ts";
import {
  type MemberInfo,
  type MemberListResult,
  REGISTRY_METHODS,
} from "../../protocol/registry.ts";
import { ClusterKey } from "../../raft/peer_auth.ts";
import { probePeer } from "../../raft/peer_probe.ts";
import type { RegistryArgs } from "./args.ts";
import type { RegistryNode } from "./options.ts";
import { internals } from "./internals.ts";
import { JoinClient } from "./join_client.ts";
import { abortableSleep } from "../../internal/timing.ts";
import type { LogLine } from "./log.ts";

/**
 * How `--join` dials: the members' client ports (`tls://` ones trusting
 * `--tls-ca`) and their peer ports (with this member's certificate, under
 * `--peer-tls-*`). Empty: the runtime's TCP dialer.
 */
export interface JoinNetwork {
  /** Dials client URLs. */
  client?: Dialer;
  /** Dials peer URLs (the preflight probe). */
  peer?: Dialer;
  /**
   * The admin token to join and leave with, or undefined for none.
   * Default {@link joinToken} (`RAFTER_TOKEN`); tests pass their own, as
   * the environment is shared by every test file of a run.
   */
  token?: () => string | undefined;
}

/** This node's client and peer URLs, as the other members reach them. */
function ownUrls(args: RegistryArgs): { clientUrl: string; peerUrl: string } {
  const advertised = args.advertise === undefined
    ? undefined
    : parseAdvertise(args.advertise);
  const host = advertised?.hostname ?? args.listen.hostname;
  return {
    clientUrl: formatTcpUrl({
      hostname: host,
      port: advertised?.port ?? args.listen.port,
      tls: args.tls !== undefined,
    }),
    peerUrl: formatTcpUrl({ hostname: host, port: args.peerListen.port }),
  };
}

/** The bearer token `--join` presents to the cluster: `RAFTER_TOKEN`, if set. */
export const TOKEN_ENV = "RAFTER_TOKEN";

/**
 * `--join` was refused before this node was added (or it removed itself
 * again): the message says why and what to do.
 */
export class JoinRefusedError extends Error {
  /** @param message why, and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "JoinRefusedError";
  }
}

/** The cluster a node joins, as {@link joinedCluster} found it. */
export interface JoinedCluster {
  /** The cluster's id. */
  clusterId: string;
  /** Every member's peer URL, this node's included. */
  peers: Record<string, string>;
  /**
   * Whether this start added the node (`registry.memberAdd` of a new
   * member), so that a start that then fails removes it again
   * ({@link leaveCluster}); false for a restart of a member.
   */
  added: boolean;
  /** Client URLs to reach the cluster through, for {@link leaveCluster}. */
  clientUrls: string[];
}

/** The token in `RAFTER_TOKEN`, or undefined when unset or empty. */
export function joinToken(): string | undefined {
  try {
    const token = Deno.env.get(TOKEN_ENV)?.trim();
    return token === undefined || token === "" ? undefined : token;
  } catch {
    return undefined; // no --allow-env: no token
  }
}

/**
 * The cluster this node joins, or undefined for a bootstrap node. With
 * `--join`: asks the cluster (through the given member, following its
 * leader hints, presenting `RAFTER_TOKEN` when set) for its id and
 * members, refuses a data folder of another cluster or member, probes the
 * members' peer ports with the real handshake ({@link preflight}: the
 * cluster secret and id must match, and the leader's peer port must
 * answer), and only then has this node added as a learner that the leader
 * promotes once caught up (unless it is a member already: a restart).
 * Without `--join` and `--peers`: a data folder that records a joined
 * cluster (no bootstrap members) restarts as that joined member.
 *
 * @param clusterSecret this node's cluster secret, for the probes.
 * @throws {JoinRefusedError} when the cluster refuses the token, the
 * member or the secret, a peer port cannot be reached, or the folder
 * belongs to another cluster or member: nothing was added.
 * @throws {Error} when the cluster cannot be asked.
 */
export async function joinedCluster(
  args: RegistryArgs,
  log: LogLine,
  clusterSecret: string,
  network: JoinNetwork = {},
): Promise<JoinedCluster | undefined> {
  const meta = await readDataDirMeta(args.dataDir).catch(() => null);
  const { clientUrl, peerUrl } = ownUrls(args);
  if (args.join === undefined) {
    if (
      args.peers !== undefined || meta === null || meta.format < 2 ||
      meta.bootstrapMembers !== undefined
    ) {
      return undefined;
    }
    // A joined member restarting: its log has the members.
    return {
      clusterId: meta.clusterId,
      peers: { [args.id]: peerUrl },
      added: false,
      clientUrls: [],
    };
  }
  const token = (network.token ?? joinToken)();
  const client = new JoinClient(joinUrlsOf(args), {
    dialer: network.client,
    deadlineMs: 15_000,
    failFastRounds: 3,
    token,
  });
  try {
    const list = await client.call(REGISTRY_METHODS.memberList, {});
    if (meta !== null && meta.clusterId !== list.clusterId) {
      throw new JoinRefusedError(
        `the data folder ${args.dataDir} belongs to cluster ${
          meta.clusterId || "(unrecorded)"
        }, but ${args.join} serves cluster ${list.clusterId}: give this node a new --data folder, or join the cluster the folder belongs to`,
      );
    }
    if (meta !== null && meta.memberId !== args.id) {
      throw new JoinRefusedError(
        `the data folder ${args.dataDir} belongs to member ${meta.memberId}, not ${args.id}: give this node a new --data folder, or start it with --id ${meta.memberId}`,
      );
    }
    const known = list.members.find((m) => m.id === args.id);
    if (known !== undefined && known.peerUrl !== peerUrl) {
      throw new JoinRefusedError(
        `the cluster already has a member ${args.id} at ${known.peerUrl} (this node's peer URL is ${peerUrl}): pick another --id, or remove it first (rafter member remove ${args.id})`,
      );
    }
    await preflight(
      args,
      list,
      await ClusterKey.fromSecret(clusterSecret),
      log,
      network.peer,
    );
    const added = await client.call(REGISTRY_METHODS.memberAdd, {
      id: args.id,
      peerUrl,
      clientUrl,
      learner: known?.kind !== "voter",
      promoteWhenCaughtUp: true,
    });
    const peers: Record<string, string> = { [args.id]: peerUrl };
    for (const member of added.members) peers[member.id] = member.peerUrl;
    log(
      `registry ${args.id}: ${
        known === undefined
          ? "added as a learner to"
          : `already added as a ${known.kind} (rafter member add) to`
      } cluster ${added.clusterId} (leader ${added.leader}; members ${
        Object.keys(peers).sort().join(", ")
      })${known?.kind === "voter" ? "" : "; promoted to voter once caught up"}`,
    );
    return {
      clusterId: added.clusterId,
      peers,
      added: known === undefined,
      clientUrls: clusterClientUrls(args, added.members),
    };
  } catch (error) {
    throw joinError(args, error, token !== undefined);
  } finally {
    client.close();
  }
}

/** The members' client URLs `--join` names (none without it). */
function joinUrlsOf(args: RegistryArgs): string[] {
  return args.join?.split(",") ?? [];
}

/** Client URLs of the other members, and the `--join` URLs, deduplicated. */
function clusterClientUrls(
  args: RegistryArgs,
  members: readonly MemberInfo[],
): string[] {
  const urls = members.filter((m) => m.id !== args.id)
    .map((m) => m.clientUrl)
    .filter((url): url is string => url !== null);
  return [...new Set([...joinUrlsOf(args), ...urls])];
}

/** The error `--join` ends with: a refused token says what token is needed. */
function joinError(
  args: RegistryArgs,
  error: unknown,
  hasToken: boolean,
): unknown {
  if (!(error instanceof RpcError)) return error;
  const prefix = `--join ${args.join}`;
  if (error.code === UNAUTHENTICATED) {
    return new JoinRefusedError(
      `${prefix}: ${error.message}: ${
        hasToken
          ? `the cluster did not accept the token in ${TOKEN_ENV} (unknown or revoked)`
          : `the cluster has access control on`
      }; an admin token is needed in ${TOKEN_ENV} (rafter token create NAME --permission admin)`,
    );
  }
  if (error.code === PERMISSION_DENIED) {
    return new JoinRefusedError(
      `${prefix}: ${error.message}: the token in ${TOKEN_ENV} lacks the admin permission; an admin token is needed in ${TOKEN_ENV} to add a member`,
    );
  }
  return new Error(`${prefix}: ${error.message}`);
}

/** Time each probe of a member's peer port may take, ms. */
const PROBE_TIMEOUT_MS = 3_000;

/**
 * Before this node is added: proves the cluster secret to every other
 * member's peer port at once with the real handshake (`probePeer`, the
 * joiner's id as `from`), and checks each member's proof back.
 *
 * @throws {JoinRefusedError} when a member proves another secret or
 * belongs to another cluster id, or the leader's peer port (without a
 * known leader: every peer port) cannot be reached or does not answer: a
 * joiner that cannot reach it could never replicate. A follower's port
 * that does not answer is only logged.
 */
async function preflight(
  args: RegistryArgs,
  list: MemberListResult,
  key: ClusterKey,
  log: LogLine,
  dialer: Dialer | undefined,
): Promise<void> {
  const others = list.members.filter((m) => m.id !== args.id);
  const results = await Promise.all(others.map(async (member) => ({
    member,
    result: await probePeer(member.peerUrl, {
      key,
      clusterId: list.clusterId,
      from: args.id,
      to: member.id,
      dialer,
      timeoutMs: PROBE_TIMEOUT_MS,
    }),
  })));
  const where = (m: MemberInfo) => `member ${m.id} at ${m.peerUrl}`;
  for (const { member, result } of results) {
    if (result.outcome === "wrongSecret") {
      throw new JoinRefusedError(
        `${
          where(member)
        } refused the cluster secret in ${args.clusterSecretFile} (its proof did not verify): copy the cluster's secret file to this node`,
      );
    }
    if (result.outcome === "otherCluster") {
      throw new JoinRefusedError(
        `${
          where(member)
        } belongs to another cluster than ${args.join} serves (${list.clusterId}): ${result.detail}`,
      );
    }
  }
  const failed = results.filter(({ result }) => result.outcome !== "ok");
  const lines = (items: typeof results) =>
    items.map(({ member, result }) =>
      `${where(member)}: ${result.outcome} (${result.detail})`
    ).join("; ");
  const leaderFailed = failed.some(({ member }) => member.id === list.leader);
  if (others.length > 0 && (leaderFailed || failed.length === others.length)) {
    throw new JoinRefusedError(
      `cannot reach the peer port of ${
        leaderFailed ? `the leader ${list.leader}` : "any member"
      }: ${
        lines(failed)
      }; this node could never replicate: let this host reach the members' peer ports (a firewall?), and check the peer URLs the members advertise`,
    );
  }
  if (failed.length > 0) {
    log(
      `registry ${args.id}: joins although some peer ports do not answer: ${
        lines(failed)
      }`,
      "warn",
    );
  }
}

/**
 * A joined node that is still a learner asks the leader again, once per
 * election timeout, to promote it once caught up (an idempotent
 * `registry.memberAdd`): the leader keeps that wish in memory only, so a
 * leader change between the join and the catch-up would otherwise leave
 * the node a learner. Stops once it is a voter, is no member, or `stopped`
 * resolves; at most 10,000 rounds.
 */
export async function askPromotionWhileLearner(
  args: RegistryArgs,
  node: RegistryNode,
  stopped: Promise<void>,
  network: JoinNetwork = {},
): Promise<void> {
  const { clientUrl, peerUrl } = ownUrls(args);
  const intervalMs = args.tickMs * args.electionTicks;
  // Aborted once stopped: ends the wait between rounds and clears its timer.
  const stop = new AbortController();
  stopped.then(() => stop.abort());
  const { raft, transport } = internals(node);
  for (let round = 0; round < 10_000 && !stop.signal.aborted; round++) {
    await abortableSleep(intervalMs, stop.signal);
    if (stop.signal.aborted) return;
    const status = raft.status;
    if (!status.learner) {
      if (status.member) return; // a voter now
      continue; // not added yet (or removed): nothing to ask
    }
    const directory = transport.directory;
    const urls = directory.ids
      .filter((id) => id !== args.id)
      .map((id) => directory.clientUrl(id))
      .filter((url): url is string => url !== null);
    for (const url of joinUrlsOf(args)) {
      if (!urls.includes(url)) urls.push(url);
    }
    if (urls.length === 0) continue;
    const client = new JoinClient(urls, {
      dialer: network.client,
      deadlineMs: intervalMs,
      token: (network.token ?? joinToken)(),
    });
    try {
      await client.call(REGISTRY_METHODS.memberAdd, {
        id: args.id,
        peerUrl,
        clientUrl,
        learner: true,
        promoteWhenCaughtUp: true,
      });
    } catch {
      // Asked again next round.
    } finally {
      client.close();
    }
  }
}

/**
 * Removes this node from the cluster again (`registry.memberRemove` of its
 * own id, through the members' client URLs): for a start that added it
 * ({@link JoinedCluster.added}) and then failed. Logs the outcome; never
 * throws.
 *
 * @returns whether the cluster confirmed the removal.
 */
export async function leaveCluster(
  args: RegistryArgs,
  joined: JoinedCluster,
  log: LogLine,
  network: JoinNetwork = {},
): Promise<boolean> {
  const client = new JoinClient(joined.clientUrls, {
    dialer: network.client,
    deadlineMs: 10_000,
    token: (network.token ?? joinToken)(),
  });
  try {
    await client.call(REGISTRY_METHODS.memberRemove, { id: args.id });
    log(
      `registry ${args.id}: removed itself from cluster ${joined.clusterId} again (this start had added it)`,
    );
    return true;
  } catch (error) {
    log(
      `registry ${args.id}: could not remove itself from cluster ${joined.clusterId} (${
        (error as Error).message
      }): remove the learner with rafter member remove ${args.id}`,
      "error",
    );
    return false;
  } finally {
    client.close();
  }
}

/** Election timeouts a joined node waits for the leader's first message. */
const CONTACT_TIMEOUTS = 30;
/** Least time it waits, ms. */
const MIN_CONTACT_MS = 5_000;

/**
 * Waits until a joined node hears from the cluster's leader (it learns the
 * leader, or that it is a member). Meanwhile it logs, every 5 election
 * timeouts (at least 5 s), a line with the members it cannot reach and why, and what to
 * check. A node this start added gives up after 30 election timeouts (at
 * least 5 s): the members cannot reach it (its peer port behind a
 * firewall, a wrong advertised address) or it cannot reach them, and it
 * would otherwise wait forever as a learner.
 *
 * @returns why, when it gave up (the caller removes it and exits
 * non-zero); null once it heard from the leader, or `stopped` resolved.
 */
export async function awaitLeaderContact(
  args: RegistryArgs,
  node: RegistryNode,
  joined: JoinedCluster,
  stopped: Promise<void>,
  log: LogLine,
): Promise<string | null> {
  const { raft, transport } = internals(node);
  const { peerUrl } = ownUrls(args);
  const electionMs = args.tickMs * args.electionTicks;
  const giveUpMs = Math.max(MIN_CONTACT_MS, CONTACT_TIMEOUTS * electionMs);
  const stop = new AbortController();
  stopped.then(() => stop.abort());
  // Monotonic: a wall-clock jump must not make it give up (and leave the
  // cluster) at once, nor wait for the hour it stepped back.
  const started = performance.now();
  let logged = started;
  while (!stop.signal.aborted) {
    await abortableSleep(Math.max(args.tickMs, 20), stop.signal);
    if (stop.signal.aborted) return null;
    const status = raft.status;
    if (status.leader !== null || status.member) return null;
    const now = performance.now();
    const waited = now - started;
    const unreachable = transport.directory.unreachable()
      .map((m) => `${m.id} at ${m.peerUrl}: ${m.reason}`).join("; ");
    const why = `no message from the cluster's leader after ${
      Math.round(waited / 1000)
    } s${
      unreachable === "" ? "" : ` (cannot reach ${unreachable})`
    }: check that the members reach this node's peer URL ${peerUrl} (a firewall, --advertise, --peer-listen) and hold the same cluster secret`;
    if (joined.added && waited >= giveUpMs) return why;
    if (now - logged >= Math.max(5 * electionMs, MIN_CONTACT_MS)) {
      log(`registry ${args.id}: ${why}`, "warn");
      logged = now;
    }
  }
  return null;
}
