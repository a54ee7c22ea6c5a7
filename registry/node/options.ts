/**
 * What an embedder gives {@link RegistryNodeOptions} and gets back
 * ({@link RegistryNode}), and the settings a node derives from the
 * options before it touches a port or a file ({@link settingsOf}).
 *
 * @module
 */

import type { FederationStatus } from "../../protocol/registry.ts";
import {
  type Dialer,
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  parseTcpUrl,
  type TcpAddress,
} from "../../rpc/transport/transport.ts";
import {
  PEER_PORT_OFFSET,
  type RegistryStatus,
} from "../../protocol/registry.ts";
import type { WatchHubOptions } from "../watch_hub.ts";
import type {
  TlsClientOptions,
  TlsServerOptions,
} from "../../rpc/transport/tls.ts";
import { type Exposure, exposureOf, exposureProblems } from "./exposure.ts";
import type { LogLevel, LogLine } from "./log.ts";

/** Settings of `startRegistryNode`. */
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
   * This registry cluster's place in a federation: the domain, this
   * cluster's name, and its siblings' client URLs, told to clients in
   * `registry.status` (each cluster stays its own consensus group; clients
   * reach the siblings themselves). @default not federated
   */
  federation?: FederationStatus;
  /**
   * Every voter's id → its PEER URL (`tcp://host:port` of its peer port),
   * this node included. Omit for a single-node registry.
   */
  peers?: Record<string, string>;
  /**
   * Join a running cluster instead of bootstrapping one (dissertation
   * §4.2.1): the cluster's id (recorded in the new data folder; a folder of
   * another cluster is refused). `peers` then lists the members known
   * (from `registry.memberAdd`'s answer, this node included); the node
   * starts with an empty configuration and learns it from the leader.
   * A restart of a joined node passes its folder's cluster id again.
   */
  join?: { clusterId: string };
  /**
   * The cluster secret every peer connection proves (at least 32
   * characters; see `loadClusterSecret`). Required with more than one
   * member. @default a random one, for a single node
   */
  clusterSecret?: string;
  /**
   * Folder for this node's log; created if missing, after both ports were
   * found free (a node that cannot start leaves no folder behind). It
   * belongs to one member of one cluster (see `raft/data_dir.ts`).
   */
  dataDir: string;
  /**
   * Cluster token: part of the cluster id the members compute at bootstrap
   * (`bootstrapClusterId`), so two clusters of the same members and peer
   * URLs are told apart. Every member must use the same. @default ""
   */
  clusterToken?: string;
  /** Milliseconds per Raft tick. @default 100 */
  tickMs?: number;
  /** Election timeout in ticks (randomized up to twice this). @default 10 */
  electionTicks?: number;
  /**
   * PreVote (Raft dissertation §9.6): a member cut off and rejoined does not
   * force an election. Every member should use the same value. @default true
   */
  preVote?: boolean;
  /** Largest request frame accepted, bytes. @default 8 MiB */
  maxFrameBytes?: number;
  /**
   * Most events kept for watches to resume from (older revisions get
   * COMPACTED). Every member must use the same value. @default 10_000
   */
  historyEvents?: number;
  /**
   * Serve Prometheus metrics (text format 0.0.4) on
   * `http://HOST:PORT/metrics`, plain HTTP without a token; port 0 picks a
   * free port. A non-loopback address logs a warning. @default off
   */
  metricsListen?: TcpAddress;
  /**
   * Serve the live dashboard (also at `/` of `metricsListen`) on a port of
   * its own; it wants a token with read permission when auth is enforced.
   * @default off
   */
  dashboardListen?: TcpAddress;
  /** Limits of the watches this node serves. */
  watch?: Omit<WatchHubOptions, "now">;
  /**
   * Take a snapshot of the registry (its state and the leases' remaining
   * times) and compact the log every this many applied entries (Raft
   * paper §7). @default 10_000
   */
  snapshotEntries?: number;
  /**
   * Once the last snapshot exceeded 1 MiB, also wait until the entry data
   * applied since is this fraction of its size (`SnapshotPolicy
   * .growthFraction`), so a large state is not re-serialised every
   * `snapshotEntries` small writes. @default 0.5 when `snapshotEntries` is
   * 10_000 (its default), else 0: a snapshot every `snapshotEntries`, as set
   */
  snapshotGrowthFraction?: number;
  /**
   * Log entries kept before a snapshot's index for followers slightly
   * behind. @default the smaller of 5_000 and `snapshotEntries`
   */
  snapshotTrailingEntries?: number;
  /**
   * Size after which the write-ahead log starts a new segment, bytes; a
   * segment a snapshot covers is deleted. @default 64 MiB
   */
  walSegmentBytes?: number;
  /** Most health-check probes under way at once on the leader. @default 64 */
  maxConcurrentProbes?: number;
  /**
   * Enforce auth on this node's client port whatever the replicated switch
   * says (`--auth`), and turn the switch on when this node bootstraps the
   * cluster's access control (its first leader). With auth enforced, a
   * connection authenticates (`registry.authenticate`) with a token before
   * any other call, and each call needs the token's permission
   * (`protocol/auth.ts`). @default false
   */
  auth?: boolean;
  /**
   * Where the bootstrap admin token is (created, mode 0600, when missing,
   * by a node that bootstraps a new cluster; a joining node makes none).
   * The cluster's first leader records it as the `bootstrap` admin token.
   * @default `${dataDir}/admin_token`
   */
  adminTokenFile?: string;
  /**
   * Most watches one client connection may hold open (LIMIT_EXCEEDED
   * beyond; a client keeps one watch per cluster map on one connection).
   * @default 1_000
   */
  maxWatchesPerConnection?: number;
  /**
   * Most bindings one lease may carry (LIMIT_EXCEEDED beyond), checked by
   * the state as the leader proposes it. @default 1_000
   */
  maxBindingsPerLease?: number;
  /** Most tokens the registry holds (LIMIT_EXCEEDED beyond). @default 5_000 */
  maxTokens?: number;
  /**
   * With auth enforced, a client connection that has not authenticated
   * (`registry.authenticate`) this many ms after it opened is closed, so
   * anonymous connections cannot sit on the connection caps; 0 never.
   * @default 10_000
   */
  authTimeoutMs?: number;
  /**
   * TLS on the client port (`--tls-cert`, `--tls-key`; `--tls-client-ca`
   * to ask clients for certificates): the node's client URL is then
   * `tls://host:port`. Certificates reload on SIGHUP and on file change.
   */
  tls?: TlsServerOptions;
  /**
   * Mutual TLS on the peer port and on every peer connection this node
   * dials (`--peer-tls-cert`, `--peer-tls-key`, `--peer-tls-ca`): each
   * member presents a certificate from `caFile` naming it with the SAN
   * `URI:rafter://member/<id>` (`rafter cert member ID`), and a peer
   * connection may speak only for the member its certificate names. Peer
   * URLs are dialed with TLS whatever their scheme. The cluster secret is
   * still proved too.
   */
  peerTls?: { certFile: string; keyFile: string; caFile: string };
  /**
   * The CA this node trusts when it dials `tls://` client ports and
   * endpoints (`--join`, health checks of TLS servers) (`--tls-ca`).
   * @default `peerTls.caFile`, else the system's roots
   */
  tlsCaFile?: string;
  /**
   * Start although a port other hosts can reach has no TLS, or the client
   * port no auth (`--insecure`); the node then logs a warning at every
   * start. Without it such a node refuses to start (see `exposure.ts`).
   * @default false
   */
  insecure?: boolean;
  /**
   * Receives one line per notable event: role changes (a candidate's line
   * names the peers it cannot reach, and why), refused peer connections.
   * `level` says how much it matters: `warn` for a refused peer
   * connection, an exposed port, a candidate that cannot reach its peers;
   * `error` for what needs an operator; `info` otherwise. `registry/main.ts`
   * prefixes each line with a timestamp, the level and the node id
   * (`--log-format`).
   */
  log?(line: string, level?: LogLevel): void;
  /** Called if storage fails and the node had to stop. */
  onFatal?(error: unknown): void;
}

/** A started registry node, as an embedder sees it. */
export interface RegistryNode {
  /** This node's id. */
  readonly id: string;
  /** The id of its cluster, as its data folder records it (16 hex digits). */
  readonly clusterId: string;
  /** Its client URL (actual port, or the advertised address). */
  readonly url: string;
  /** Its peer URL: its `peers` entry, or the peer port listened on. */
  readonly peerUrl: string;
  /** What `registry.status` answers: role, term, indexes, members… */
  status(): RegistryStatus;
  /**
   * Stops serving and stops the Raft node (the log stays on disk). With
   * `handOver`, a leader first hands leadership to the most up-to-date
   * follower (Raft dissertation §3.10) and waits up to two election
   * timeouts for it to take over, so the cluster has a new leader without
   * waiting out an election timeout; writes arriving meanwhile are refused
   * as "not the leader" (retryable). With `graceMs`, it then drains the
   * client port: requests under way are answered and clients are told to
   * go elsewhere, for up to that many ms.
   */
  stop(options?: { graceMs?: number; handOver?: boolean }): Promise<void>;
}

/** The options with every default filled in and every check passed. */
export interface NodeSettings {
  readonly options: RegistryNodeOptions;
  readonly id: string;
  readonly listen: TcpAddress;
  readonly peerListen: TcpAddress;
  /** `advertise`, parsed. */
  readonly advertised: { hostname: string; port?: number } | undefined;
  /** The bootstrap (or joining) members: id → peer URL. */
  readonly peers: Record<string, string>;
  /** More than one member, or joining: needs a secret and a fixed peer port. */
  readonly multiNode: boolean;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly electionTimeoutMs: number;
  /** Smallest lease TTL accepted, ms (1.5 × the election timeout). */
  readonly minTtlMs: number;
  /**
   * How long a removed member's link stays open, for the leader's "you
   * were removed" notice (registry.memberRemove sends it once committed).
   */
  readonly lingerMs: number;
  readonly maxFrameBytes: number;
  readonly log: LogLine;
  /** What the node exposes to other hosts, and how (see `exposure.ts`). */
  readonly exposure: Exposure;
}

/**
 * Checks the options and fills in their defaults.
 *
 * @throws {Error} when a multi-node node has no `clusterSecret` or no
 * fixed peer port, or `listen` is a wildcard address without `advertise`.
 */
export function settingsOf(options: RegistryNodeOptions): NodeSettings {
  const { id, listen } = options;
  const tickMs = options.tickMs ?? 100;
  const electionTicks = options.electionTicks ?? 10;
  const advertised = options.advertise === undefined
    ? undefined
    : parseAdvertise(options.advertise);
  if (advertised === undefined && isWildcardHost(listen.hostname)) {
    throw new Error(
      `the client port listens on the wildcard address ${listen.hostname}, which clients cannot dial; pass advertise (--advertise) with this host's reachable address`,
    );
  }
  const peerListen = options.peerListen ?? defaultPeerListen(options);
  const exposure = exposureOf({ listen, peerListen }, options);
  const problems = exposureProblems(exposure);
  if (problems.length > 0) {
    throw new InsecureStartError(problems);
  }
  const peers = options.peers ??
    { [id]: formatTcpUrl(advertisedPeer(peerListen, advertised)) };
  const multiNode = Object.keys(peers).length > 1 ||
    options.join !== undefined;
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
  const electionTimeoutMs = tickMs * electionTicks;
  return {
    options,
    id,
    listen,
    peerListen,
    advertised,
    peers,
    multiNode,
    tickMs,
    electionTicks,
    electionTimeoutMs,
    minTtlMs: Math.ceil(1.5 * electionTimeoutMs),
    lingerMs: 2 * electionTimeoutMs,
    maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
    exposure,
    log: options.log ?? (() => {}),
  };
}

/**
 * Thrown when a node would listen where other hosts reach it without TLS
 * or auth, and `insecure` (`--insecure`) was not given.
 */
export class InsecureStartError extends Error {
  /** One line per problem, each naming the flag that fixes it. */
  readonly problems: readonly string[];

  /** @param problems what is missing (see `exposureProblems`). */
  constructor(problems: readonly string[]) {
    super(
      `refusing to start: ${
        problems.join("; ")
      }. To run without them anyway (a trusted network only), pass --insecure`,
    );
    this.name = "InsecureStartError";
    this.problems = problems;
  }
}

/** TLS options of the dialer a node opens peer connections with. */
function peerDialerTls(
  peerTls: NonNullable<RegistryNodeOptions["peerTls"]>,
): TlsClientOptions {
  return {
    caFile: peerTls.caFile,
    certFile: peerTls.certFile,
    keyFile: peerTls.keyFile,
  };
}

/**
 * `dialer` with TLS for every URL: peer URLs are written `tcp://` in
 * `--peers` and the log, and members dial them with TLS once `peerTls`
 * is on.
 */
function alwaysTls(dialer: Dialer): Dialer {
  return (url, options) => dialer(url.replace(/^tcp:\/\//, "tls://"), options);
}

/**
 * The peer URL a node tells: its `peers` entry, or (a single node, whose
 * peer port may be a free one) the advertised host with the port listened
 * on.
 */
export function ownPeerUrl(
  settings: NodeSettings,
  listening: TcpAddress,
): string {
  return settings.options.peers?.[settings.id] ??
    formatTcpUrl(advertisedPeer(listening, settings.advertised));
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

/** Makes a dialer for `tls://` (and, for peers, every) URL with these files. */
export type TlsDialerFactory = (tls: TlsClientOptions) => Dialer;

/** How a node dials: its peers, and client ports and endpoints. */
export interface NodeDialers {
  /** Peer connections: mutual TLS with the member certificate, if any. */
  peer: Dialer | undefined;
  /** Client ports and servers' endpoints (health checks). */
  client: Dialer | undefined;
}

/**
 * The node's dialers: with `peerTls`, peers are dialed with TLS (the
 * scheme of a peer URL notwithstanding) presenting the member's
 * certificate; `tls://` client ports and endpoints trust `tlsCaFile`
 * (default the peer CA). The same for the node and for its `--join`.
 *
 * @throws {TypeError} when TLS is configured but no dialer factory was
 * given (an embedder's runtime without one).
 */
export function nodeDialers(
  options: Pick<RegistryNodeOptions, "peerTls" | "tlsCaFile">,
  factory: TlsDialerFactory | undefined,
): NodeDialers {
  const caFile = options.tlsCaFile ?? options.peerTls?.caFile;
  if (options.peerTls === undefined && caFile === undefined) {
    return { peer: undefined, client: undefined };
  }
  if (factory === undefined) {
    throw new TypeError(
      "peerTls and tlsCaFile need a TLS dialer: start the node with startRegistryNode of @rafter/rpc/registry (Deno)",
    );
  }
  const client = caFile === undefined ? undefined : factory({ caFile });
  if (options.peerTls === undefined) return { peer: undefined, client };
  return { peer: alwaysTls(factory(peerDialerTls(options.peerTls))), client };
}
