/**
 * Runs one registry node.
 *
 * ```sh
 * # a 3-node cluster, one command per node; --peers lists PEER ports, and
 * # every node reads the same secret file
 * deno run -A registry/main.ts --id n1 --listen 127.0.0.1:7001 \
 *   --peers n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103 \
 *   --cluster-secret-file ./cluster_secret --data ./data/n1
 * # a single-node registry on 127.0.0.1:7001 (peer port 7101) with data in ./data/n1
 * deno run -A registry/main.ts
 * # a fourth node joins the running cluster through any member's client URL
 * deno run -A registry/main.ts --id n4 --join tcp://127.0.0.1:7001 \
 *   --listen 127.0.0.1:7004 --peer-listen 127.0.0.1:7104 \
 *   --cluster-secret-file ./cluster_secret --data ./data/n4
 * ```
 *
 * A node started with `--join` asks the cluster to add it as a learner
 * (`registry.memberAdd` with its own peer and client URLs, Raft
 * dissertation §4.2.1), records the cluster's id in its new data folder,
 * catches up from the leader, and is promoted to voter by the leader once
 * its match index reaches the leader's commit index (checked on every
 * leader tick). Restart a joined node without `--join` (or with it): its
 * folder knows the cluster, and its log the members.
 *
 * Stops cleanly on SIGINT or SIGTERM (a leader first hands leadership to
 * a follower, so a rolling restart waits out no election timeout); its log
 * stays in the data folder and a restart with the same `--id` and `--data`
 * resumes from it.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  parseListenAddress,
  parseTcpUrl,
  type TcpAddress,
} from "../rpc/transport/transport.ts";
import { loadClusterSecret } from "../raft/cluster_secret.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import { RpcError } from "../rpc/errors.ts";
import { RegistryClient } from "../stub/registry_client/registry_client.ts";
import { ConnectionPool } from "../stub/connection_pool.ts";
import { DataDirInUseError, lockDataDir } from "../raft/dir_lock.ts";
import { PEER_PORT_OFFSET, REGISTRY_METHODS } from "../protocol/registry.ts";
import { serve } from "../adapter/deno/serve.ts";
import type { RegistryNode, RegistryNodeOptions } from "./node/options.ts";
import { RegistryNodeAssembly } from "./node/assembly.ts";
import { internals } from "./node/internals.ts";

export type { RegistryNode, RegistryNodeOptions } from "./node/options.ts";
import { pathExists, portsFree } from "./_start_checks.ts";

const USAGE = `usage: deno run -A registry/main.ts [options]

A node serves clients on its client port (the registry API) and the other
members on its peer port (Raft traffic, accepted only from connections that
prove the cluster secret).

  --id ID            this node's id (default n1; required with --peers)
  --listen HOST:PORT client port (default: 127.0.0.1:7001 for a single node;
                     with --peers, the peer port - ${PEER_PORT_OFFSET} on the same host)
  --peer-listen HOST:PORT
                     peer port (default: this node's --peers entry, or the
                     client port + ${PEER_PORT_OFFSET} without --peers)
  --peers LIST       every voter's PEER address as id=host:port,
                     comma-separated, this node included; omit for a
                     single-node registry
  --cluster-secret-file PATH
                     file holding the cluster secret (32+ characters) every
                     node of the cluster shares; created with a new random
                     secret if missing (then copy it to the other nodes).
                     Required with --peers; default DIR/cluster_secret for
                     a single node
  --join URL         join the running cluster some member of which serves
                     clients at URL (tcp://host:port): this node is added as
                     a learner with its --peer-listen and client URLs, and
                     promoted to voter once caught up. Not with --peers. A
                     joined node restarts without it (its folder and log
                     know the cluster); a folder of another cluster is
                     refused
  --cluster-token TOKEN
                     part of the cluster id the members compute when they
                     first start (like etcd's --initial-cluster-token): the
                     same on every member; tells apart clusters of the same
                     --peers. A data folder of another cluster is refused
  --advertise HOST[:PORT]
                     the client URL to tell clients and peers (required when
                     --listen is a wildcard address such as 0.0.0.0)
  --data DIR         folder for this node's log (default ./data/ID); it
                     belongs to this --id of this cluster, and is made only
                     once both ports are free
  --tick-ms N        milliseconds per Raft tick (default 100)
  --election-ticks N election timeout in ticks (default 10, at least 2)
  --history-events N changes kept for watches to resume from (default 10000;
                     the same on every node); older ones answer COMPACTED
  --snapshot-entries N
                     snapshot the registry and compact the log every N
                     applied entries (default 10000)
  --snapshot-trailing N
                     log entries kept before a snapshot for slow followers
                     (default 5000, at most --snapshot-entries)
  --wal-segment-bytes N
                     size of a write-ahead log segment (default 67108864);
                     segments a snapshot covers are deleted
  --watch-stdin      exit when standard input closes (for supervisors and
                     tests, so a node never outlives its parent)
  --help             show this text

(The same options work as: deno task rafter registry [options].)`;

/**
 * Starts a registry node on Deno, in this order: checks the options,
 * checks that both ports are free, opens `dataDir` (creating it if
 * missing) and reloads its log, then serves `registry.*` and `rpc.ping`
 * on the client port, the peer protocol on the peer port, and connects to
 * its peers.
 *
 * @throws {import("../raft/data_dir.ts").DataDirMismatchError} when the data
 * folder belongs to another member or cluster.
 * @throws {Error} when the data folder is unusable, a multi-node node has
 * no `clusterSecret` or no fixed peer port, or `listen` is a wildcard
 * address without `advertise`.
 * @throws {Deno.errors.AddrInUse} when a port is taken (the message says
 * which).
 *
 * @example
 * ```ts ignore
 * import { startRegistryNode } from "./main.ts";
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir: await Deno.makeTempDir(),
 * });
 * console.log(node.url, node.peerUrl);
 * await node.stop();
 * ```
 */
export async function startRegistryNode(
  options: RegistryNodeOptions,
): Promise<RegistryNode> {
  return await RegistryNodeAssembly.start(options, serve);
}

/** Parsed command line of a registry node. */
export interface RegistryArgs {
  /** This node's id. */
  id: string;
  /** The client port's address. */
  listen: TcpAddress;
  /** The peer port's address. */
  peerListen: TcpAddress;
  /** The client URL to advertise (`host` or `host:port`), if given. */
  advertise: string | undefined;
  /** Every voter's id → peer URL, or undefined for a single node. */
  peers: Record<string, string> | undefined;
  /** A member's client URL to join the cluster through (`--join`), if given. */
  join: string | undefined;
  /** Where the cluster secret is (created if missing). */
  clusterSecretFile: string;
  /** The cluster token (part of the cluster id), or "" for none. */
  clusterToken: string;
  /** This node's data folder. */
  dataDir: string;
  /** Milliseconds per Raft tick. */
  tickMs: number;
  /** Election timeout in ticks. */
  electionTicks: number;
  /** Events kept for watches. */
  historyEvents: number;
  /** Applied entries between two snapshots. */
  snapshotEntries: number;
  /** Entries kept before a snapshot, or undefined for the default. */
  snapshotTrailing: number | undefined;
  /** WAL segment size, bytes, or undefined for the default. */
  walSegmentBytes: number | undefined;
  /** Exit when standard input closes. */
  watchStdin: boolean;
}

/**
 * Parses the command line.
 *
 * @throws {Error} with a message that names the bad option and the expected
 * form.
 *
 * @example
 * ```ts
 * import { parseRegistryArgs } from "./main.ts";
 * const args = parseRegistryArgs([
 *   "--id", "n2", "--peers", "n1=127.0.0.1:7101,n2=127.0.0.1:7102",
 *   "--cluster-secret-file", "./cluster_secret",
 * ]);
 * console.log(args.listen.port, args.peerListen.port, args.dataDir); // 7002 7102 ./data/n2
 * ```
 */
export function parseRegistryArgs(argv: string[]): RegistryArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      id: { type: "string" },
      listen: { type: "string" },
      "peer-listen": { type: "string" },
      advertise: { type: "string" },
      "cluster-secret-file": { type: "string" },
      "cluster-token": { type: "string" },
      peers: { type: "string" },
      join: { type: "string" },
      data: { type: "string" },
      "tick-ms": { type: "string" },
      "election-ticks": { type: "string" },
      "history-events": { type: "string" },
      "snapshot-entries": { type: "string" },
      "snapshot-trailing": { type: "string" },
      "wal-segment-bytes": { type: "string" },
      "watch-stdin": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new HelpRequested();
  if (values.id !== undefined && values.id.trim() === "") {
    throw new Error("--id must not be empty");
  }
  let peers: Record<string, string> | undefined;
  if (values.peers !== undefined) {
    if (values.id === undefined) {
      throw new Error(
        "--id is required with --peers: which of the peers is this node?",
      );
    }
    peers = {};
    for (const item of values.peers.split(",").filter((s) => s.trim() !== "")) {
      const [id, address, extra] = item.trim().split("=");
      if (!id || !address || extra !== undefined) {
        throw new Error(
          `--peers item "${item}" is not of the form id=host:port`,
        );
      }
      if (id in peers) {
        throw new Error(`--peers lists the id "${id}" more than once`);
      }
      if (id.includes("|")) {
        throw new Error(`--peers item "${item}": an id must not contain "|"`);
      }
      try {
        peers[id] = formatTcpUrl(parseTcpUrl(address));
      } catch (error) {
        throw new Error(`--peers item "${item}": ${(error as Error).message}`);
      }
      if (isWildcardHost(parseTcpUrl(address).hostname)) {
        throw new Error(
          `--peers item "${item}": a wildcard address cannot be dialed; list the address the other nodes reach it at`,
        );
      }
    }
    if (!(values.id in peers)) {
      throw new Error(`--peers does not list this node's id "${values.id}"`);
    }
    if (Object.keys(peers).length > 1 && !values["cluster-secret-file"]) {
      throw new Error(
        "--cluster-secret-file is required with --peers: every node of a cluster proves the same secret to the others (a missing file is created with a new secret; copy it to every node)",
      );
    }
  }
  let join: string | undefined;
  if (values.join !== undefined) {
    if (values.peers !== undefined) {
      throw new Error(
        "--join and --peers exclude each other: --peers bootstraps a new cluster, --join adds this node to a running one",
      );
    }
    if (values.id === undefined) {
      throw new Error("--id is required with --join: the new member's id");
    }
    if (!values["cluster-secret-file"]) {
      throw new Error(
        "--cluster-secret-file is required with --join: the file with the secret the cluster's members share",
      );
    }
    try {
      join = formatTcpUrl(parseTcpUrl(values.join));
    } catch (error) {
      throw new Error(
        `--join ${values.join}: ${
          (error as Error).message
        }; give a member's client URL, tcp://host:port`,
      );
    }
  }
  const id = values.id ?? "n1";
  const dataDir = values.data ?? `./data/${id}`;
  let listen: TcpAddress;
  let peerListen: TcpAddress;
  if (peers !== undefined) {
    peerListen = values["peer-listen"] !== undefined
      ? listenAddress(values["peer-listen"], "--peer-listen")
      : parseTcpUrl(peers[id]);
    if (values.listen !== undefined) {
      listen = listenAddress(values.listen, "--listen");
    } else if (peerListen.port > PEER_PORT_OFFSET) {
      listen = {
        hostname: peerListen.hostname,
        port: peerListen.port - PEER_PORT_OFFSET,
      };
    } else {
      throw new Error(
        `--listen is needed: the peer port ${peerListen.port} leaves no default client port (peer port - ${PEER_PORT_OFFSET})`,
      );
    }
  } else {
    listen = values.listen !== undefined
      ? listenAddress(values.listen, "--listen")
      : { hostname: "127.0.0.1", port: 7001 };
    if (values["peer-listen"] !== undefined) {
      peerListen = listenAddress(values["peer-listen"], "--peer-listen");
    } else if (listen.port + PEER_PORT_OFFSET <= 65535) {
      peerListen = {
        hostname: listen.hostname,
        port: listen.port === 0 ? 0 : listen.port + PEER_PORT_OFFSET,
      };
    } else {
      throw new Error(
        `--peer-listen is needed: the client port ${listen.port} leaves no default peer port (client port + ${PEER_PORT_OFFSET})`,
      );
    }
  }
  if (values.advertise !== undefined) {
    try {
      parseAdvertise(values.advertise);
    } catch (error) {
      throw new Error(`--advertise: ${(error as Error).message}`);
    }
  } else if (isWildcardHost(listen.hostname)) {
    throw new Error(
      `--listen ${
        formatTcpUrl(listen).slice("tcp://".length)
      } is a wildcard address, which clients cannot dial: pass --advertise HOST[:PORT] with the address clients and peers reach this node at`,
    );
  }
  return {
    id,
    listen,
    peerListen,
    advertise: values.advertise,
    peers,
    join,
    clusterSecretFile: values["cluster-secret-file"] ??
      `${dataDir}/cluster_secret`,
    clusterToken: values["cluster-token"] ?? "",
    dataDir,
    tickMs: positiveInteger(values["tick-ms"], "--tick-ms", 100),
    // At least 2: a leader heartbeats every tick, more often than the
    // election timeout.
    electionTicks: positiveInteger(
      values["election-ticks"],
      "--election-ticks",
      10,
      2,
    ),
    historyEvents: positiveInteger(
      values["history-events"],
      "--history-events",
      10_000,
    ),
    snapshotEntries: positiveInteger(
      values["snapshot-entries"],
      "--snapshot-entries",
      10_000,
    ),
    snapshotTrailing: values["snapshot-trailing"] === undefined
      ? undefined
      : positiveInteger(
        values["snapshot-trailing"],
        "--snapshot-trailing",
        5_000,
        0,
      ),
    walSegmentBytes: values["wal-segment-bytes"] === undefined
      ? undefined
      : positiveInteger(
        values["wal-segment-bytes"],
        "--wal-segment-bytes",
        64 << 20,
        4096,
      ),
    watchStdin: values["watch-stdin"] ?? false,
  };
}

class HelpRequested extends Error {}

function listenAddress(text: string, option: string): TcpAddress {
  try {
    return parseListenAddress(text);
  } catch (error) {
    throw new Error(`${option}: ${(error as Error).message}`);
  }
}

function positiveInteger(
  text: string | undefined,
  option: string,
  fallback: number,
  min = 1,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isSafeInteger(value) || value < min) {
    throw new Error(
      min === 1
        ? `${option} must be a positive integer, got "${text}"`
        : `${option} must be an integer of at least ${min}, got "${text}"`,
    );
  }
  return value;
}

/**
 * Runs a registry node with command-line options until SIGINT, SIGTERM
 * or (with `--watch-stdin`) the end of standard input.
 *
 * @returns the exit code: 0 stopped cleanly (or `--help`), 1 could not
 * start or storage failed, 2 bad options.
 */
export async function runRegistry(argv: string[]): Promise<number> {
  let args: RegistryArgs;
  try {
    args = parseRegistryArgs(argv);
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(USAGE);
      return 0;
    }
    console.error(`registry: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const log = (line: string) => console.log(line);
  let fatal: unknown = null;
  const stopped = Promise.withResolvers<void>();
  let node: RegistryNode;
  const where = `client ${formatTcpUrl(args.listen)}, peer ${
    formatTcpUrl(args.peerListen)
  }, data ${args.dataDir}`;
  let clusterSecret: string;
  // A start that fails leaves no data folder it made behind.
  const existed = await pathExists(args.dataDir);
  const cannotStart = async (error: unknown) => {
    const hint = error instanceof Deno.errors.AddrInUse
      ? "; another process (a registry node already running?) listens there: stop it or pass another --listen / --peer-listen"
      : "";
    console.error(
      `registry ${args.id}: cannot start (${where}): ${
        (error as Error).message
      }${hint}`,
    );
    if (!existed && !(error instanceof DataDirInUseError)) {
      await Deno.remove(args.dataDir, { recursive: true }).catch(() => {});
    } else if (madeSecret) {
      // Nor a cluster secret it generated in a folder that was there.
      await Deno.remove(args.clusterSecretFile).catch(() => {});
    }
    return 1;
  };
  let madeSecret = false;
  try {
    // Ports first: nothing is written while one is taken.
    portsFree([["client", args.listen], ["peer", args.peerListen]]);
    // A folder another node is using is refused before anything (a new
    // cluster secret) is written next to its data.
    (await lockDataDir(args.dataDir)).release();
    const secretExisted = await pathExists(args.clusterSecretFile);
    clusterSecret = await loadClusterSecret(args.clusterSecretFile, { log });
    madeSecret = !secretExisted;
  } catch (error) {
    return await cannotStart(error);
  }
  let joining: { clusterId: string; peers: Record<string, string> } | undefined;
  try {
    joining = await joinedCluster(args, log);
  } catch (error) {
    return await cannotStart(error);
  }
  try {
    node = await startRegistryNode({
      id: args.id,
      listen: args.listen,
      peerListen: args.peerListen,
      advertise: args.advertise,
      peers: joining?.peers ?? args.peers,
      join: joining === undefined
        ? undefined
        : { clusterId: joining.clusterId },
      clusterSecret,
      dataDir: args.dataDir,
      clusterToken: args.clusterToken,
      tickMs: args.tickMs,
      electionTicks: args.electionTicks,
      historyEvents: args.historyEvents,
      snapshotEntries: args.snapshotEntries,
      snapshotTrailingEntries: args.snapshotTrailing,
      walSegmentBytes: args.walSegmentBytes,
      log,
      onFatal: (error) => {
        fatal = error;
        stopped.resolve();
      },
    });
  } catch (error) {
    return await cannotStart(error);
  }
  const cluster = Object.keys(
    joining?.peers ?? args.peers ?? { [args.id]: "" },
  ).join(",");
  log(
    `registry ${args.id} listening on ${node.url}, peers on ${node.peerUrl} (cluster ${node.clusterId} of ${cluster}; data ${args.dataDir})`,
  );
  const stop = () => stopped.resolve();
  const keepAsking = args.join === undefined && joining === undefined
    ? null
    : askPromotionWhileLearner(args, node, stopped.promise);
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  if (args.watchStdin) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
      stop();
    })();
  }
  await stopped.promise;
  Deno.removeSignalListener("SIGINT", stop);
  Deno.removeSignalListener("SIGTERM", stop);
  // A graceful stop: a leader hands over first (Raft dissertation §3.10).
  // Not after a storage failure, when the Raft node is already stopped.
  await keepAsking;
  await node.stop({ graceMs: 1000, handOver: fatal === null });
  if (fatal !== null) {
    console.error(`registry ${args.id}: storage failed, stopped:`, fatal);
    return 1;
  }
  log(`registry ${args.id} stopped`);
  return 0;
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
async function joinedCluster(
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
  const pool = new ConnectionPool();
  const client = new RegistryClient([args.join], pool, {
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
    pool.close();
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
async function askPromotionWhileLearner(
  args: RegistryArgs,
  node: RegistryNode,
  stopped: Promise<void>,
): Promise<void> {
  const { clientUrl, peerUrl } = ownUrls(args);
  const intervalMs = args.tickMs * args.electionTicks;
  let done = false;
  stopped.then(() => done = true);
  const pool = new ConnectionPool();
  try {
    for (let round = 0; round < 10_000 && !done; round++) {
      await Promise.race([
        stopped,
        new Promise((resolve) => setTimeout(resolve, intervalMs)),
      ]);
      if (done) return;
      const status = internals(node).raft.status;
      if (!status.learner) {
        if (status.member) return; // a voter now
        continue; // not added yet (or removed): nothing to ask
      }
      const directory = internals(node).transport.directory;
      const urls = directory.ids
        .filter((id) => id !== args.id)
        .map((id) => directory.clientUrl(id))
        .filter((url): url is string => url !== null);
      if (args.join !== undefined && !urls.includes(args.join)) {
        urls.push(args.join);
      }
      if (urls.length === 0) continue;
      const client = new RegistryClient(urls, pool, { deadlineMs: intervalMs });
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
  } finally {
    pool.close();
  }
}

if (import.meta.main) {
  Deno.exit(await runRegistry(Deno.args));
}
