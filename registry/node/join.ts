/**
 * Joining a running cluster (`--join`, Raft dissertation §4.2.1): the
 * cluster a node joins ({@link joinedCluster}), and the loop a joined
 * learner runs until promoted ({@link askPromotionWhileLearner}).
 *
 * @module
 */

import { formatTcpUrl, parseAdvertise } from "../../rpc/transport/transport.ts";
import { readDataDirMeta } from "../../raft/data_dir.ts";
import { RpcError } from "../../rpc/errors.ts";
import { REGISTRY_METHODS } from "../../protocol/registry.ts";
import type { RegistryArgs } from "./args.ts";
import type { RegistryNode } from "./options.ts";
import { internals } from "./internals.ts";
import { JoinClient } from "./join_client.ts";
import { abortableSleep } from "../../internal/timing.ts";

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
    }),
    peerUrl: formatTcpUrl({ hostname: host, port: args.peerListen.port }),
  };
}

/**
 * The cluster this node joins, or undefined for a bootstrap node. With
 * `--join`: asks the cluster (through the given member, following its
 * leader hints) for its id and members, refuses a data folder of another
 * cluster, and has this node added as a learner that the leader promotes
 * once caught up (unless it is a member already: a restart). Without
 * `--join` and `--peers`: a data folder that records a joined cluster
 * (no bootstrap members) restarts as that joined member.
 *
 * @throws {Error} when the cluster cannot be asked, refuses the member, or
 * the folder belongs to another cluster or member.
 */
export async function joinedCluster(
  args: RegistryArgs,
  log: (line: string) => void,
): Promise<{ clusterId: string; peers: Record<string, string> } | undefined> {
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
    return { clusterId: meta.clusterId, peers: { [args.id]: peerUrl } };
  }
  const client = new JoinClient([args.join], {
    deadlineMs: 15_000,
    failFastRounds: 3,
  });
  try {
    const list = await client.call(REGISTRY_METHODS.memberList, {});
    if (meta !== null && meta.clusterId !== list.clusterId) {
      throw new Error(
        `the data folder ${args.dataDir} belongs to cluster ${
          meta.clusterId || "(unrecorded)"
        }, but ${args.join} serves cluster ${list.clusterId}: give this node a new --data folder, or join the cluster the folder belongs to`,
      );
    }
    const known = list.members.find((m) => m.id === args.id);
    if (known !== undefined && known.peerUrl !== peerUrl) {
      throw new Error(
        `the cluster already has a member ${args.id} at ${known.peerUrl} (this node's peer URL is ${peerUrl}): pick another --id, or remove it first (rafter member remove ${args.id})`,
      );
    }
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
        known === undefined ? "added as a learner to" : "rejoins"
      } cluster ${added.clusterId} (leader ${added.leader}; members ${
        Object.keys(peers).sort().join(", ")
      }); promoted to voter once caught up`,
    );
    return { clusterId: added.clusterId, peers };
  } catch (error) {
    if (error instanceof RpcError) {
      throw new Error(`--join ${args.join}: ${error.message}`);
    }
    throw error;
  } finally {
    client.close();
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
    if (args.join !== undefined && !urls.includes(args.join)) {
      urls.push(args.join);
    }
    if (urls.length === 0) continue;
    const client = new JoinClient(urls, { deadlineMs: intervalMs });
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
