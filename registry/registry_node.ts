/**
 * One running registry node: a Raft node whose state machine is the
 * registry, on two TCP ports. The client port serves the registry API and
 * `rpc.ping`; the peer port serves only peers that prove the cluster
 * secret (the handshake of `raft/peer_auth.ts`): `raft.step` and the
 * registry's own peer methods.
 *
 * @module
 */

import { type RpcServer, serve } from "../rpc/serve.ts";
import {
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  parseTcpUrl,
  type TcpAddress,
} from "../rpc/transport.ts";
import { RaftNode } from "../raft/node.ts";
import type { SoftState } from "../raft/core.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { PeerDirectory } from "../raft/peer_directory.ts";
import { type PeerServer, servePeers } from "../raft/peer_server.ts";
import { PeerTransport } from "../raft/peer_transport.ts";
import { PEER_PORT_OFFSET } from "./protocol.ts";
import {
  type ApplyResult,
  type MemberView,
  registryMethods,
} from "./service.ts";
import { RegistryState } from "./state.ts";

/** Settings of {@link startRegistryNode}. */
export interface RegistryNodeOptions {
  /** This node's id, a key of `peers`. */
  id: string;
  /** Address of the client port; port 0 picks a free port. */
  listen: TcpAddress;
  /**
   * Address of the peer port. @default this node's `peers` entry; for a
   * single node without `peers`, the client port + 100
   * ({@link PEER_PORT_OFFSET}) on the same host, or a free port when the
   * client port is 0
   */
  peerListen?: TcpAddress;
  /**
   * The client URL to tell clients and peers (NOT_LEADER hints, status):
   * `host` or `host:port`. Required when `listen` is a wildcard address
   * (`0.0.0.0`, `::`). @default the address listened on
   */
  advertise?: string;
  /**
   * Every voter's id → its PEER URL (`tcp://host:port` of its peer port),
   * this node included. Omit for a single-node registry.
   */
  peers?: Record<string, string>;
  /**
   * The cluster secret every peer connection proves (at least 32
   * characters; see `loadClusterSecret`). Required with more than one
   * member. @default a random one, for a single node
   */
  clusterSecret?: string;
  /** Folder for this node's log; created if missing. */
  dataDir: string;
  /** Milliseconds per Raft tick. @default 100 */
  tickMs?: number;
  /** Election timeout in ticks (randomized up to twice this). @default 10 */
  electionTicks?: number;
  /** Largest request frame accepted, bytes. @default 8 MiB */
  maxFrameBytes?: number;
  /**
   * Receives one line per notable event: role changes (a candidate's line
   * names the peers it cannot reach, and why), refused peer connections.
   */
  log?(line: string): void;
  /** Called if storage fails and the node had to stop. */
  onFatal?(error: unknown): void;
}

/** A started registry node. */
export interface RegistryNode {
  /** This node's id. */
  readonly id: string;
  /** Its client URL (actual port, or the advertised address). */
  readonly url: string;
  /** Its peer URL: its `peers` entry, or the peer port listened on. */
  readonly peerUrl: string;
  /** The Raft driver. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated registry state on this node. */
  readonly state: RegistryState;
  /** The client port's RPC server. */
  readonly server: RpcServer;
  /** The peer port. */
  readonly peerServer: PeerServer;
  /** The authenticated connections to the peers (`notify` for peer messages). */
  readonly transport: PeerTransport;
  /**
   * Stops serving and stops the Raft node (the log stays on disk). With
   * `graceMs`, first drains the client port: requests under way are
   * answered and clients are told to go elsewhere, for up to that many ms.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Starts a registry node: reloads its log from `dataDir`, serves
 * `registry.*` and `rpc.ping` on the client port, the peer protocol on the
 * peer port, and connects to its peers.
 *
 * @throws {Error} when the data folder is unusable, a multi-node node has
 * no `clusterSecret` or no fixed peer port, or `listen` is a wildcard
 * address without `advertise`.
 * @throws {Deno.errors.AddrInUse} when a port is taken (the message says
 * which).
 *
 * @example
 * ```ts ignore
 * import { startRegistryNode } from "./registry_node.ts";
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
  const { id, listen } = options;
  const tickMs = options.tickMs ?? 100;
  const electionTicks = options.electionTicks ?? 10;
  const log = options.log ?? (() => {});
  const advertised = options.advertise === undefined
    ? undefined
    : parseAdvertise(options.advertise);
  if (advertised === undefined && isWildcardHost(listen.hostname)) {
    throw new Error(
      `the client port listens on the wildcard address ${listen.hostname}, which clients cannot dial; pass advertise (--advertise) with this host's reachable address`,
    );
  }
  const peerListen = options.peerListen ?? defaultPeerListen(options);
  const peers = options.peers ??
    { [id]: formatTcpUrl(advertisedPeer(peerListen, advertised)) };
  const multiNode = Object.keys(peers).length > 1;
  if (multiNode && peerListen.port === 0) {
    throw new Error(
      "a node of a multi-node registry needs a fixed peer port: its peers must know where to reach it",
    );
  }
  if (multiNode && options.clusterSecret === undefined) {
    throw new Error(
      "a node of a multi-node registry needs the cluster secret (--cluster-secret-file) its peers share",
    );
  }
  const key = options.clusterSecret === undefined
    ? await ClusterKey.random()
    : await ClusterKey.fromSecret(options.clusterSecret);

  const state = new RegistryState();
  const directory = new PeerDirectory(id, peers);
  const transport = new PeerTransport({
    id,
    peers,
    key,
    directory,
    clientUrl: () => directory.clientUrl(id),
  });
  const onRole = roleLogger(id, directory, log);
  const raft = await RaftNode.start<ApplyResult>({
    id,
    peers,
    transport,
    dataDir: options.dataDir,
    tickMs,
    electionTicks,
    apply: (entry) => state.apply(entry.data),
    onSoftState: onRole,
    onFatal: options.onFatal,
  });
  // A single node's peer port may be a free one, known once it listens.
  let peerUrl = peers[id];
  const members: MemberView = {
    get peerUrl() {
      return peerUrl;
    },
    clientUrl: (member) => directory.clientUrl(member),
    members: () => {
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
    },
  };
  let server: RpcServer | undefined;
  let peerServer: PeerServer | undefined;
  try {
    server = listening("client", listen, () =>
      serve({
        hostname: listen.hostname,
        port: listen.port,
        advertise: options.advertise,
        maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
        methods: registryMethods({
          node: raft,
          state,
          url: () => directory.clientUrl(id) ?? "",
          members,
          electionTimeoutMs: tickMs * electionTicks,
        }),
      }));
    directory.setClientUrl(id, server.url);
    peerServer = listening("peer", peerListen, () =>
      servePeers({
        hostname: peerListen.hostname,
        port: peerListen.port,
        maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
        id,
        key,
        directory,
        clientUrl: () => directory.clientUrl(id),
        onStep: (messages) => raft.step(messages),
        log,
      }));
  } catch (error) {
    await server?.close();
    await raft.stop();
    throw error;
  }
  peerUrl = options.peers?.[id] ??
    formatTcpUrl(advertisedPeer(peerServer, advertised));
  transport.start();
  const clientServer = server;
  const peerPort = peerServer;
  return {
    id,
    url: clientServer.url,
    peerUrl,
    raft,
    state,
    server: clientServer,
    peerServer: peerPort,
    transport,
    async stop(stopOptions = {}) {
      if (stopOptions.graceMs !== undefined) {
        await clientServer.drain(stopOptions.graceMs);
      }
      await clientServer.close();
      await peerPort.close();
      await raft.stop();
    },
  };
}

/**
 * The peer port a node listens on by default: its `peers` entry, or for a
 * single node the client port + {@link PEER_PORT_OFFSET} (a free port when
 * the client port is 0).
 */
function defaultPeerListen(options: RegistryNodeOptions): TcpAddress {
  const own = options.peers?.[options.id];
  if (own !== undefined) return parseTcpUrl(own);
  const { hostname, port } = options.listen;
  return { hostname, port: port === 0 ? 0 : port + PEER_PORT_OFFSET };
}

/** The advertised host with the peer port (single node, for status only). */
function advertisedPeer(
  address: TcpAddress,
  advertised: { hostname: string } | undefined,
): TcpAddress {
  return {
    hostname: advertised?.hostname ?? address.hostname,
    port: address.port,
  };
}

/** Runs `start`, naming the port in an "address in use" error. */
function listening<T>(which: string, address: TcpAddress, start: () => T): T {
  try {
    return start();
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) {
      throw new Deno.errors.AddrInUse(
        `the ${which} port ${
          formatTcpUrl(address)
        } is in use (${error.message})`,
      );
    }
    throw error;
  }
}

/** Least time between two candidate lines that say the same, ms. */
const CANDIDATE_LOG_INTERVAL_MS = 5_000;

/**
 * Logs one line per role change, e.g. "n1: follower in term 3, leader n2".
 * A candidate's line names the peers it cannot reach and why; while
 * neither that list nor the reasons change, a candidate whose term keeps
 * climbing logs at most once per 5 s.
 */
function roleLogger(
  id: string,
  directory: PeerDirectory,
  log: (line: string) => void,
): (soft: SoftState) => void {
  let last = { key: "", at: -Infinity };
  return (soft) => {
    if (soft.role !== "candidate") {
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
    log(
      unreachable.length === 0
        ? `${id}: candidate in term ${soft.term}, asking for votes`
        : `${id}: candidate in term ${soft.term}; cannot reach ${key}`,
    );
  };
}
