/**
 * The command line of a registry node (`registry/main.ts`): its usage
 * text and {@link parseRegistryArgs}.
 *
 * @module
 */

import type { FederationStatus } from "../../protocol/registry.ts";
import { parseArgs } from "node:util";
import { dirname } from "node:path";
import {
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  parseListenAddress,
  parseTcpUrl,
  type TcpAddress,
} from "../../rpc/transport/transport.ts";
import { PEER_PORT_OFFSET } from "../../protocol/registry.ts";
import type { RegistryNodeOptions } from "./options.ts";
import {
  configFileOf,
  envName,
  type EnvReader,
  layerOptions,
  type OptionKind,
} from "../../internal/option_sources.ts";
import { type LogFormat, type LogLine, parseLogFormat } from "./log.ts";

/** The usage text of `registry/main.ts` (and `rafter registry`). */
export const USAGE = `usage: deno run -A registry/main.ts [options]

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
  --join URLS        join the running cluster some member of which serves
                     clients at URL (tcp://host:port; several members' URLs
                     comma-separated, asked in turn): this node is added as
                     a learner with its --peer-listen and client URLs, and
                     promoted to voter once caught up. Not with --peers. A
                     joined node restarts without it (its folder and log
                     know the cluster); a folder of another cluster is
                     refused
  --engine raft|etcd the store: raft (default; this node is a member of a
                     Raft cluster) or etcd (a front that serves the same
                     registry API over the etcd cluster of --etcd-endpoints;
                     the Raft options are then unused)
  --etcd-endpoints URLS
                     etcd client URLs, comma-separated (http://host:2379)
  --domain NAME      the federation this registry cluster belongs to (with
                     --cluster-name and --siblings): told to clients in
                     registry.status, so they reach services in the other
                     clusters (name@cluster, fail-over); the same on every
                     member of this cluster
  --cluster-name NAME
                     this cluster's name within the domain
  --siblings LIST    the other clusters of the domain and their registry
                     client URLs: b=tcp://h:7001|tcp://h2:7001;c=tcp://...
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
  --metrics-listen HOST:PORT
                     serve Prometheus metrics on http://HOST:PORT/metrics
                     (plain HTTP, no token; default off), and the live
                     dashboard at http://HOST:PORT/
  --dashboard-listen HOST:PORT
                     serve the dashboard on a port of its own (default off)
  --history-events N changes kept for watches to resume from (default 10000;
                     the same on every node); older ones answer COMPACTED
  --snapshot-entries N
                     snapshot the registry and compact the log every N
                     applied entries (default 10000; at the default, a
                     state over 1 MiB waits for half its size in new data)
  --snapshot-trailing N
                     log entries kept before a snapshot for slow followers
                     (default 5000, at most --snapshot-entries)
  --wal-segment-bytes N
                     size of a write-ahead log segment (default 67108864);
                     segments a snapshot covers are deleted
  --auth             enforce auth on the client port: every connection
                     authenticates with a token (RAFTER_TOKEN) and each call
                     needs the token's permission (read:<prefix>,
                     bind:<prefix>, admin). A node that bootstraps the
                     cluster also turns auth on in the registry (rafter auth
                     enable/disable switch it later)
  --admin-token-file PATH
                     the bootstrap admin token: created (mode 0600) by a
                     node that bootstraps a new cluster, recorded by the
                     cluster's first leader; use it as RAFTER_TOKEN to make
                     other tokens (rafter token create). Default: admin_token
                     beside --cluster-secret-file, so the nodes that share
                     the secret (copy the folder to every host) share it
  --max-watches-per-connection N
                     most watches one client connection holds (default 1000;
                     a client keeps one per cluster map on one connection)
  --max-bindings-per-lease N
                     most bindings one lease carries (default 1000)
  --max-tokens N     most tokens the registry holds (default 5000)
  --tls-cert FILE, --tls-key FILE
                     serve the client port over TLS with this certificate
                     and key (PEM; rafter cert server or member makes
                     them): clients then use tls://host:port. Reloaded on
                     SIGHUP and when the files change
  --tls-client-ca FILE
                     also ask clients for a certificate signed by this CA
                     (mutual TLS on the client port; tokens still apply)
  --peer-tls-cert FILE, --peer-tls-key FILE, --peer-tls-ca FILE
                     mutual TLS between members: this member's certificate
                     (it must name the member: rafter cert member ID) and
                     the CA every member's certificate is signed by. A peer
                     connection may then speak only for the member its
                     certificate names. All three, on every member
  --tls-ca FILE      the CA to trust when this node dials tls:// client
                     ports and servers (--join, health checks); default
                     --peer-tls-ca
  --insecure         start even though a port listens on an address other
                     hosts reach without TLS, or the client port without
                     --auth (a warning is logged at every start). Without
                     it such a node refuses to start; 127.0.0.1 needs
                     neither
  --log-format text|json
                     how log lines look (default text): text is
                     "TIMESTAMP LEVEL ID MESSAGE", json one object per line
                     with ts, level, node and msg. Levels: info, warn, error
  --watch-stdin      exit when standard input closes (for supervisors and
                     tests, so a node never outlives its parent)
  --config FILE      read options from this JSON file, keys named as the
                     options without "--": {"id": "n1", "listen": "..."}
                     (default $RAFTER_CONFIG)
  --help             show this text
  --version, -V      print Rafter's and the runtime's versions

Every option can be set by its variable, RAFTER_ and its name in capitals
with _ for - (--tick-ms: RAFTER_TICK_MS; on/off: 1/0, true/false, yes/no).
Precedence: command-line flag > environment variable > config file > default.

(The same options work as: deno task rafter registry [options].)`;

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
  /**
   * The client URLs of members to join the cluster through (`--join`),
   * comma-separated and normalized, if given.
   */
  join: string | undefined;
  /** Where the cluster secret is (created if missing). */
  clusterSecretFile: string;
  /** The cluster token (part of the cluster id), or "" for none. */
  clusterToken: string;
  /** The federation (`--domain`, `--cluster-name`, `--siblings`), or undefined. */
  federation: FederationStatus | undefined;
  /**
   * The store: `raft` (this node is a Raft member), or an existing etcd
   * cluster at `etcdEndpoints` (`--engine etcd`: a front over etcd).
   */
  engine: "raft" | "etcd";
  /** etcd's client URLs, with `--engine etcd`. */
  etcdEndpoints: string[];
  /** This node's data folder. */
  dataDir: string;
  /** Milliseconds per Raft tick. */
  tickMs: number;
  /** Election timeout in ticks. */
  electionTicks: number;
  /** Events kept for watches. */
  historyEvents: number;
  /** Where to serve `GET /metrics` (`--metrics-listen`), or undefined for off. */
  metricsListen: TcpAddress | undefined;
  /** Where to serve the dashboard alone (`--dashboard-listen`), or undefined. */
  dashboardListen: TcpAddress | undefined;
  /** Applied entries between two snapshots. */
  snapshotEntries: number;
  /** Entries kept before a snapshot, or undefined for the default. */
  snapshotTrailing: number | undefined;
  /** WAL segment size, bytes, or undefined for the default. */
  walSegmentBytes: number | undefined;
  /** Exit when standard input closes. */
  watchStdin: boolean;
  /** Enforce auth on this node (and turn it on at bootstrap). */
  auth: boolean;
  /** Where the bootstrap admin token is. */
  adminTokenFile: string;
  /** Most watches per client connection. */
  maxWatchesPerConnection: number;
  /** Most bindings per lease. */
  maxBindingsPerLease: number;
  /** Most tokens. */
  maxTokens: number;
  /** TLS on the client port, if given. */
  tls:
    | { certFile: string; keyFile: string; caFile?: string }
    | undefined;
  /** Mutual TLS between members, if given. */
  peerTls: { certFile: string; keyFile: string; caFile: string } | undefined;
  /** The CA trusted for tls:// client ports, if given. */
  tlsCaFile: string | undefined;
  /** Start without TLS or auth on exposed ports (`--insecure`). */
  insecure: boolean;
  /** How log lines look (`--log-format`). */
  logFormat: LogFormat;
}

/**
 * The options of a registry node, as `node:util`'s parseArgs reads them
 * (beside `--config` and `--help`). Each is also read from its environment
 * variable (`envName`: `--tick-ms` → `RAFTER_TICK_MS`) and from its key in
 * the `--config` file.
 */
export const REGISTRY_OPTIONS = {
  id: { type: "string" },
  listen: { type: "string" },
  "peer-listen": { type: "string" },
  advertise: { type: "string" },
  "cluster-secret-file": { type: "string" },
  "cluster-token": { type: "string" },
  engine: { type: "string" },
  "etcd-endpoints": { type: "string" },
  domain: { type: "string" },
  "cluster-name": { type: "string" },
  siblings: { type: "string" },
  peers: { type: "string" },
  join: { type: "string" },
  data: { type: "string" },
  "tick-ms": { type: "string" },
  "election-ticks": { type: "string" },
  "history-events": { type: "string" },
  "metrics-listen": { type: "string" },
  "dashboard-listen": { type: "string" },
  "snapshot-entries": { type: "string" },
  "snapshot-trailing": { type: "string" },
  "wal-segment-bytes": { type: "string" },
  "watch-stdin": { type: "boolean" },
  auth: { type: "boolean" },
  "admin-token-file": { type: "string" },
  "max-watches-per-connection": { type: "string" },
  "max-bindings-per-lease": { type: "string" },
  "max-tokens": { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-client-ca": { type: "string" },
  "peer-tls-cert": { type: "string" },
  "peer-tls-key": { type: "string" },
  "peer-tls-ca": { type: "string" },
  "tls-ca": { type: "string" },
  insecure: { type: "boolean" },
  "log-format": { type: "string" },
} as const satisfies Record<string, OptionKind>;

/** The option values, after the command line, the environment and the file. */
type RegistryValues = {
  -readonly [K in keyof typeof REGISTRY_OPTIONS]?:
    (typeof REGISTRY_OPTIONS)[K]["type"] extends "boolean" ? boolean : string;
};

/** Reads no variable: {@link parseRegistryArgs} without an environment. */
const NO_ENV: EnvReader = () => undefined;

/**
 * A `--peers` list (`id=host:port,…`, every voter's peer address) as id →
 * peer URL, normalized as the cluster id hashes it (`bootstrapClusterId`):
 * `rafter snapshot restore` reads its `--peers` with this too, so the
 * restored folder's cluster id is the one the node computes at start.
 *
 * @throws {Error} naming the item that is not `id=host:port`, an id given
 * twice or holding `|`, or a wildcard address.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parsePeerList } from "./args.ts";
 * assert.deepEqual(parsePeerList("n1=127.0.0.1:7101"), {
 *   n1: "tcp://127.0.0.1:7101",
 * });
 * ```
 */
export function parsePeerList(list: string): Record<string, string> {
  const peers: Record<string, string> = {};
  for (const item of list.split(",").filter((s) => s.trim() !== "")) {
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
  return peers;
}

/**
 * Parses the command line. An option it does not give is taken from its
 * environment variable (read with `env`; none by default), else from the
 * JSON config file of `--config` (else of `RAFTER_CONFIG`, read with
 * `readTextFile`), else its default.
 *
 * @throws {Error} with a message that names the bad option and the expected
 * form.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRegistryArgs } from "./args.ts";
 * const args = parseRegistryArgs([
 *   "--id", "n2", "--peers", "n1=127.0.0.1:7101,n2=127.0.0.1:7102",
 *   "--cluster-secret-file", "./cluster_secret",
 * ]);
 * assert.equal(args.listen.port, 7002);
 * assert.equal(args.peerListen.port, 7102);
 * assert.equal(args.dataDir, "./data/n2");
 * assert.throws(
 *   () => parseRegistryArgs(["--id", "n1", "--tick-ms", "fast"]),
 *   /--tick-ms must be a positive integer/,
 * );
 * // A flag beats its variable; RAFTER_TICK_MS fills in the missing --tick-ms.
 * const env = { RAFTER_ID: "n9", RAFTER_TICK_MS: "20", RAFTER_AUTH: "yes" };
 * const fromEnv = parseRegistryArgs(["--id", "n3"], (name) =>
 *   env[name as keyof typeof env]);
 * assert.equal(fromEnv.id, "n3");
 * assert.equal(fromEnv.tickMs, 20);
 * assert.equal(fromEnv.auth, true);
 * ```
 */
export function parseRegistryArgs(
  argv: string[],
  env: EnvReader = NO_ENV,
  readTextFile: (path: string) => string = (path) =>
    Deno.readTextFileSync(path),
): RegistryArgs {
  const { values: given } = parseArgs({
    args: argv,
    options: {
      ...REGISTRY_OPTIONS,
      config: { type: "string" },
      help: { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (given.help) throw new HelpRequested();
  const layered = layerOptions({
    options: REGISTRY_OPTIONS,
    given,
    env,
    envNames: (option) => [envName(option)],
    config: configFileOf(given.config, env, readTextFile),
  });
  const values = layered.values as RegistryValues;
  /** How a message names an option: its flag, variable or config key. */
  const label = (option: string) => layered.sources[option] ?? `--${option}`;
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
    peers = parsePeerList(values.peers);
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
    const urls = values.join.split(",").map((url) => url.trim())
      .filter((url) => url !== "");
    if (urls.length === 0) {
      throw new Error(
        "--join is empty: give the client URL of a member (tcp://host:port), or several, comma-separated",
      );
    }
    try {
      // Several members may be named (as `rafter member add` prints them):
      // the node asks each in turn until one answers.
      join = [...new Set(urls.map((url) => formatTcpUrl(parseTcpUrl(url))))]
        .join(",");
    } catch (error) {
      throw new Error(
        `--join ${values.join}: ${
          (error as Error).message
        }; give a member's client URL, tcp://host:port, or several, comma-separated`,
      );
    }
  }
  const id = values.id ?? "n1";
  const dataDir = values.data ?? `./data/${id}`;
  let listen: TcpAddress;
  let peerListen: TcpAddress;
  if (peers !== undefined) {
    peerListen = values["peer-listen"] !== undefined
      ? listenAddress(values["peer-listen"], label("peer-listen"))
      : parseTcpUrl(peers[id]);
    if (values.listen !== undefined) {
      listen = listenAddress(values.listen, label("listen"));
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
      ? listenAddress(values.listen, label("listen"))
      : { hostname: "127.0.0.1", port: 7001 };
    if (values["peer-listen"] !== undefined) {
      peerListen = listenAddress(values["peer-listen"], label("peer-listen"));
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
    federation: federationOf(values),
    ...engineOf(values),
    dataDir,
    tickMs: positiveInteger(values["tick-ms"], label("tick-ms"), 100),
    // At least 2: a leader heartbeats every tick, more often than the
    // election timeout.
    electionTicks: positiveInteger(
      values["election-ticks"],
      label("election-ticks"),
      10,
      2,
    ),
    metricsListen: values["metrics-listen"] === undefined
      ? undefined
      : listenAddress(values["metrics-listen"], label("metrics-listen")),
    dashboardListen: values["dashboard-listen"] === undefined
      ? undefined
      : listenAddress(values["dashboard-listen"], label("dashboard-listen")),
    historyEvents: positiveInteger(
      values["history-events"],
      label("history-events"),
      10_000,
    ),
    snapshotEntries: positiveInteger(
      values["snapshot-entries"],
      label("snapshot-entries"),
      10_000,
    ),
    snapshotTrailing: values["snapshot-trailing"] === undefined
      ? undefined
      : positiveInteger(
        values["snapshot-trailing"],
        label("snapshot-trailing"),
        5_000,
        0,
      ),
    walSegmentBytes: values["wal-segment-bytes"] === undefined
      ? undefined
      : positiveInteger(
        values["wal-segment-bytes"],
        label("wal-segment-bytes"),
        64 << 20,
        4096,
      ),
    watchStdin: values["watch-stdin"] ?? false,
    auth: values.auth ?? false,
    // Beside the cluster secret: the nodes that share one secret file (one
    // machine, or the folder copied to each host) share one admin token,
    // so whichever leads first records the token every file holds.
    adminTokenFile: values["admin-token-file"] ??
      `${
        dirname(values["cluster-secret-file"] ?? `${dataDir}/cluster_secret`)
      }/admin_token`,
    maxWatchesPerConnection: positiveInteger(
      values["max-watches-per-connection"],
      label("max-watches-per-connection"),
      1_000,
    ),
    maxBindingsPerLease: positiveInteger(
      values["max-bindings-per-lease"],
      label("max-bindings-per-lease"),
      1_000,
    ),
    maxTokens: positiveInteger(
      values["max-tokens"],
      label("max-tokens"),
      5_000,
    ),
    ...tlsArgs(values),
    insecure: values.insecure ?? false,
    logFormat: parseLogFormat(values["log-format"]),
  };
}

/** The TLS flags, each group complete or absent. */
function tlsArgs(
  values: Record<string, string | boolean | undefined>,
): Pick<RegistryArgs, "tls" | "peerTls" | "tlsCaFile"> {
  const text = (name: string) => values[name] as string | undefined;
  const [cert, key, clientCa] = [
    text("tls-cert"),
    text("tls-key"),
    text("tls-client-ca"),
  ];
  if ((cert === undefined) !== (key === undefined)) {
    throw new Error(
      "--tls-cert and --tls-key go together: the client port's certificate and its private key",
    );
  }
  if (clientCa !== undefined && cert === undefined) {
    throw new Error(
      "--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS",
    );
  }
  const peer = ["peer-tls-cert", "peer-tls-key", "peer-tls-ca"].map(text);
  const given = peer.filter((value) => value !== undefined).length;
  if (given !== 0 && given !== 3) {
    throw new Error(
      "--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: this member's certificate, its key, and the CA of every member's certificate",
    );
  }
  return {
    tls: cert === undefined
      ? undefined
      : { certFile: cert, keyFile: key!, caFile: clientCa },
    peerTls: given === 0
      ? undefined
      : { certFile: peer[0]!, keyFile: peer[1]!, caFile: peer[2]! },
    tlsCaFile: text("tls-ca"),
  };
}

/**
 * The node's options from the command line, the secret it loaded and the
 * cluster it joins (the members `registry.memberAdd` named), if any.
 */
export function nodeOptionsOf(
  args: RegistryArgs,
  start: {
    clusterSecret: string;
    joining: { clusterId: string; peers: Record<string, string> } | undefined;
    log: LogLine;
  },
  onFatal: (error: unknown) => void,
): RegistryNodeOptions {
  const { joining } = start;
  return {
    id: args.id,
    listen: args.listen,
    peerListen: args.peerListen,
    advertise: args.advertise,
    peers: joining?.peers ?? args.peers,
    join: joining === undefined ? undefined : { clusterId: joining.clusterId },
    clusterSecret: start.clusterSecret,
    dataDir: args.dataDir,
    clusterToken: args.clusterToken,
    federation: args.federation,
    tickMs: args.tickMs,
    electionTicks: args.electionTicks,
    historyEvents: args.historyEvents,
    metricsListen: args.metricsListen,
    dashboardListen: args.dashboardListen,
    snapshotEntries: args.snapshotEntries,
    snapshotTrailingEntries: args.snapshotTrailing,
    walSegmentBytes: args.walSegmentBytes,
    auth: args.auth,
    adminTokenFile: args.adminTokenFile,
    maxWatchesPerConnection: args.maxWatchesPerConnection,
    maxBindingsPerLease: args.maxBindingsPerLease,
    maxTokens: args.maxTokens,
    tls: args.tls === undefined ? undefined : {
      certFile: args.tls.certFile,
      keyFile: args.tls.keyFile,
      caFile: args.tls.caFile,
      clientCert: args.tls.caFile === undefined ? "none" : "require",
    },
    peerTls: args.peerTls,
    tlsCaFile: args.tlsCaFile,
    insecure: args.insecure,
    log: start.log,
    onFatal,
  };
}

/** Thrown by {@link parseRegistryArgs} for `--help`. */
export class HelpRequested extends Error {}

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

/** `--domain`, `--cluster-name` and `--siblings`, checked; undefined without `--domain`. */
function federationOf(
  values: { domain?: string; "cluster-name"?: string; siblings?: string },
): FederationStatus | undefined {
  const { domain } = values;
  const cluster = values["cluster-name"];
  if (domain === undefined) {
    if (cluster !== undefined || values.siblings !== undefined) {
      throw new Error(
        "--cluster-name and --siblings need --domain: name the federation too",
      );
    }
    return undefined;
  }
  const simple = /^[A-Za-z0-9_.-]{1,64}$/;
  if (!simple.test(domain)) {
    throw new Error(
      `--domain ${JSON.stringify(domain)}: use 1 to 64 letters, digits, _ . -`,
    );
  }
  if (cluster === undefined || !simple.test(cluster)) {
    throw new Error(
      `--cluster-name is needed with --domain (1 to 64 letters, digits, _ . -): this cluster's name in ${domain}`,
    );
  }
  const siblings: Record<string, string[]> = {};
  for (
    const item of (values.siblings ?? "").split(";").filter((i) => i !== "")
  ) {
    const eq = item.indexOf("=");
    const name = item.slice(0, eq);
    const urls = item.slice(eq + 1).split("|").filter((u) => u !== "");
    if (eq <= 0 || !simple.test(name) || urls.length === 0) {
      throw new Error(
        `--siblings: ${
          JSON.stringify(item)
        } is not name=tcp://host:port|tcp://host:port`,
      );
    }
    if (name === cluster) {
      throw new Error(`--siblings lists ${name}, this cluster's own name`);
    }
    for (const url of urls) {
      if (!/^(tcp|tls):\/\/[^/]+:\d+$/.test(url)) {
        throw new Error(
          `--siblings: ${
            JSON.stringify(url)
          } (of ${name}) is not tcp://host:port`,
        );
      }
    }
    siblings[name] = urls;
  }
  return { domain, cluster, siblings };
}

/** `--engine` and `--etcd-endpoints`, checked. */
function engineOf(
  values: { engine?: string; "etcd-endpoints"?: string },
): { engine: "raft" | "etcd"; etcdEndpoints: string[] } {
  const engine = values.engine ?? "raft";
  if (engine !== "raft" && engine !== "etcd") {
    throw new Error(`--engine ${JSON.stringify(engine)}: use raft or etcd`);
  }
  const endpoints = (values["etcd-endpoints"] ?? "").split(",").filter((u) =>
    u !== ""
  );
  if (engine === "etcd" && endpoints.length === 0) {
    throw new Error(
      "--engine etcd needs --etcd-endpoints: the etcd cluster's client URLs (http://host:2379,...)",
    );
  }
  if (engine === "raft" && endpoints.length > 0) {
    throw new Error("--etcd-endpoints needs --engine etcd");
  }
  for (const url of endpoints) {
    if (!/^https?:\/\/[^/]+:\d+$/.test(url)) {
      throw new Error(
        `--etcd-endpoints: ${JSON.stringify(url)} is not http://host:port`,
      );
    }
  }
  return { engine, etcdEndpoints: endpoints };
}
