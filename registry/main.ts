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
 * A node started with `--join` first checks, before it changes anything,
 * that it may join: it asks the cluster for its id and members (presenting
 * the bearer token in `RAFTER_TOKEN`, when set, on every connection), and
 * proves the cluster secret to the members' peer ports with the peer
 * handshake, flagged as a probe (`raft/peer_probe.ts`). A member of
 * another secret or cluster id, a leader's peer port it cannot reach, a
 * refused token, or a data folder of another cluster or member ends the
 * start with exit 1 and `registry ID: cannot join: ...`, and nothing is
 * added. Then it asks the cluster to add it as a learner
 * (`registry.memberAdd` with its own peer and client URLs, Raft
 * dissertation §4.2.1), records the cluster's id in its new data folder,
 * catches up from the leader, and is promoted to voter by the leader once
 * its match index reaches the leader's commit index (checked on every
 * leader tick). A start that added the node and then cannot start, or
 * hears nothing from the leader within 30 election timeouts (at least
 * 5 s), removes it again (`registry.memberRemove`) and exits 1. Restart a
 * joined node without `--join` (or with it): its folder knows the cluster,
 * and its log the members.
 *
 * **Access control.** A node that bootstraps a new cluster (not `--join`)
 * writes a bootstrap admin token to `--admin-token-file` (default
 * `DATA/admin_token`, mode 0600, beside the default cluster secret) and
 * the cluster's first leader records it in the registry as the
 * `bootstrap` token (once per cluster; the other members' files are not
 * used). With `--auth` the node enforces auth on its client port and the
 * first leader turns it on for the cluster; without it, auth stays off
 * until an admin turns it on (`RAFTER_TOKEN=$(cat data/n1/admin_token)
 * rafter auth enable`). With auth on, a client authenticates
 * (`registry.authenticate`, or `RAFTER_TOKEN` for the stubs and the CLI)
 * and each call needs its token's permission: `read:<prefix>`,
 * `bind:<prefix>` or `admin` (see `protocol/auth.ts`); the admin token
 * makes the others (`rafter token create billing bind:billing`). The node
 * logs at start whether auth is on and where the admin token is.
 *
 * ```sh
 * deno run -A registry/main.ts --auth
 * # ... info  n1 n1: auth is on (--auth); the bootstrap admin token is in ./data/n1/admin_token (new)
 * ```
 *
 * **Logs.** Each line starts with a UTC timestamp (ISO 8601), its level
 * (`info`, `warn`, `error`; `error` lines go to stderr) and the node id,
 * then the message; `--log-format json` prints one JSON object per line
 * instead (`ts`, `level`, `node`, `msg`, and `pid`, `version`, `url`, ...
 * on the listening line). See docs/operations.md, "Logs".
 *
 * Stops cleanly on SIGINT or SIGTERM (a leader first hands leadership to
 * a follower, so a rolling restart waits out no election timeout); its log
 * stays in the data folder and a restart with the same `--id` and `--data`
 * resumes from it. SIGHUP re-reads the TLS files; a node without any
 * logs that it has nothing to reload and goes on serving.
 *
 * @module
 */

// A registry node answers clients that speak CBOR too.
import "../rpc/codec/cbor.ts";
import { formatTcpUrl } from "../rpc/transport/transport.ts";
import { CommittedEntryConflictError } from "../raft/core.ts";
import { serve } from "../adapter/deno/serve.ts";
import { denoDialer } from "../adapter/deno/tcp.ts";
import { loadClusterSecret } from "../raft/cluster_secret.ts";
import { DataDirInUseError, lockDataDir } from "../raft/dir_lock.ts";
import type { RegistryNode, RegistryNodeOptions } from "./node/options.ts";
import { RegistryNodeAssembly } from "./node/assembly.ts";
import {
  HelpRequested,
  nodeOptionsOf,
  parseRegistryArgs,
  type RegistryArgs,
  USAGE,
} from "./node/args.ts";
import {
  askPromotionWhileLearner,
  awaitLeaderContact,
  type JoinedCluster,
  joinedCluster,
  type JoinNetwork,
  JoinRefusedError,
  leaveCluster,
} from "./node/join.ts";
import {
  pathExists,
  peerCertificateMismatch,
  portsFree,
} from "./_start_checks.ts";
import {
  exposureOf,
  exposureProblems,
  frontExposureProblems,
  isLoopbackHost,
} from "./node/exposure.ts";
import { InsecureStartError, nodeDialers } from "./node/options.ts";
import { VERSION, versionLine } from "../internal/version.ts";
import { nodeLogger } from "./node/log.ts";

export type { RegistryNode, RegistryNodeOptions } from "./node/options.ts";
export { parseRegistryArgs, type RegistryArgs } from "./node/args.ts";

/** The line after a usage error: where the options are told. */
const USAGE_POINTER = "run with --help for the options";

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
 * ```ts
 * import assert from "node:assert/strict";
 * import { startRegistryNode } from "./main.ts";
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 * });
 * // Port 0: a free client port, and a free peer port beside it.
 * assert.match(node.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
 * assert.match(node.peerUrl, /^tcp:\/\/127\.0\.0\.1:\d+$/);
 * assert.notEqual(node.peerUrl, node.url);
 * assert.match(node.clusterId, /^[0-9a-f]{16}$/);
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export async function startRegistryNode(
  options: RegistryNodeOptions,
): Promise<RegistryNode> {
  return await RegistryNodeAssembly.start(options, serve, denoDialer);
}

/**
 * Runs a registry node with command-line options until SIGINT, SIGTERM
 * or (with `--watch-stdin`) the end of standard input. An option not on
 * the command line is read from its `RAFTER_*` variable (read with `env`),
 * else from the `--config` (or `RAFTER_CONFIG`) file, else its default.
 *
 * @returns the exit code: 0 stopped cleanly (or `--help`, `--version`),
 * 1 could not start or join, or storage failed, 2 bad options.
 */
export async function runRegistry(
  argv: string[],
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): Promise<number> {
  if (argv.includes("--version") || argv.includes("-V")) {
    console.log(versionLine());
    return 0;
  }
  let args: RegistryArgs;
  try {
    args = parseRegistryArgs(argv, env);
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(USAGE);
      return 0;
    }
    // One line of what was wrong, one of where the options are: the
    // whole usage would scroll the error away.
    console.error(
      `registry: ${(error as Error).message}\n${USAGE_POINTER}`,
    );
    return 2;
  }
  // Every line: a timestamp, its level and this node's id (--log-format).
  const logger = nodeLogger(args.id, args.logFormat);
  // SIGHUP never ends the node (systemd's ExecReload sends it): with TLS
  // files the TLS servers re-read them; without, one line says so.
  const noTls = args.tls === undefined && args.peerTls === undefined;
  const stopHangups = onHangup(() => {
    if (noTls) logger.line(`${args.id}: ${NOTHING_TO_RELOAD}`, "info");
  });
  try {
    return args.engine === "etcd"
      ? await runEtcdFront(args, logger)
      : await runNode(args, logger);
  } finally {
    stopHangups();
  }
}

/**
 * `--engine etcd`: a front serving the registry API over an etcd cluster
 * (`registry/etcd/front.ts`, loaded only then), until stopped.
 */
async function runEtcdFront(
  args: RegistryArgs,
  logger: ReturnType<typeof nodeLogger>,
): Promise<number> {
  const log = (line: string, level?: "info" | "warn" | "error") =>
    logger.line(line, level ?? "info");
  // What a front does not do is refused, not ignored: a flag that seemed
  // to protect or observe it must not pass silently.
  const unserved = [
    args.auth
      ? "--auth (tokens are not served over etcd: use --tls-client-ca)"
      : null,
    args.peerTls !== undefined
      ? "--peer-tls-* (a front has no peer port)"
      : null,
    args.join !== undefined
      ? "--join (etcd's members join with etcdctl member add)"
      : null,
  ].filter((flag) => flag !== null);
  if (unserved.length > 0) {
    log(
      `registry ${args.id}: --engine etcd does not serve ${
        unserved.join(", ")
      }: drop them, or run a Raft registry (--engine raft)`,
      "error",
    );
    return 2;
  }
  // Secure by default, as a node: refused before etcd is dialed.
  const problems = frontExposureProblems({
    listen: args.listen,
    tls: args.tls,
    insecure: args.insecure,
  });
  if (problems.length > 0) {
    log(
      `registry ${args.id}: ${new InsecureStartError(problems).message}`,
      "error",
    );
    return 2;
  }
  if (args.insecure && !isLoopbackHost(args.listen.hostname)) {
    log(
      `WARNING: started with --insecure: the client port listens on ${args.listen.hostname} without ${
        args.tls === undefined ? "TLS or " : ""
      }client certificates. Anyone who reaches it can read and change the registry.`,
      "warn",
    );
  }
  // Computed, so that the registry's module graph (and deno.lock) leave
  // out etcd3 and its gRPC stack: only --engine etcd loads them.
  const frontModule = new URL("./etcd/front.ts", import.meta.url).href;
  const { EtcdFront } = await import(frontModule) as {
    EtcdFront: {
      start(
        options: {
          endpoints: readonly string[];
          hostname: string;
          port: number;
          id: string;
          advertise?: string;
          tls?: {
            certFile: string;
            keyFile: string;
            caFile?: string;
            clientCert: "none" | "require";
          };
          federation?: unknown;
          dashboardListen?: { hostname: string; port: number };
          metricsListen?: { hostname: string; port: number };
          log(line: string, level?: "info" | "warn"): void;
        },
        serveFn: typeof serve,
      ): Promise<{ url: string; close(): Promise<void> }>;
    };
  };
  let front;
  try {
    front = await EtcdFront.start({
      endpoints: args.etcdEndpoints,
      hostname: args.listen.hostname,
      port: args.listen.port,
      id: args.id,
      advertise: args.advertise,
      tls: args.tls === undefined ? undefined : {
        ...args.tls,
        clientCert: args.tls.caFile === undefined ? "none" : "require",
      },
      federation: args.federation,
      dashboardListen: args.dashboardListen,
      metricsListen: args.metricsListen,
      log: (line, level) => log(line, level ?? "info"),
    }, serve);
  } catch (error) {
    log(
      `registry ${args.id}: cannot start: ${(error as Error).message}`,
      "error",
    );
    return 1;
  }
  // Its pid, as a node's: the process to signal to stop it.
  log(
    `registry ${args.id} listening on ${front.url}, over etcd at ${
      args.etcdEndpoints.join(", ")
    } (pid ${Deno.pid}, rafter ${VERSION}, deno ${Deno.version.deno})`,
  );
  const stopped = Promise.withResolvers<void>();
  await untilStopped(args.watchStdin, stopped);
  await front.close();
  log(`registry ${args.id} stopped`);
  return 0;
}

/** The line a node without TLS files logs on SIGHUP. */
const NOTHING_TO_RELOAD =
  "SIGHUP: nothing to reload (no TLS files); still serving";

/**
 * Calls `listener` on each SIGHUP (which then no longer ends the process)
 * until the returned function is called; a no-op on Windows, which has
 * no SIGHUP.
 */
function onHangup(listener: () => void): () => void {
  if (Deno.build.os === "windows") return () => {};
  Deno.addSignalListener("SIGHUP", listener);
  return () => Deno.removeSignalListener("SIGHUP", listener);
}

/** {@link runRegistry} once its options are parsed and its logger made. */
async function runNode(
  args: RegistryArgs,
  logger: ReturnType<typeof nodeLogger>,
): Promise<number> {
  const log = logger.line;
  // Secure by default: refused before anything is dialed or written.
  const problems = exposureProblems(exposureOf(args, args));
  if (problems.length > 0) {
    log(
      `registry ${args.id}: ${new InsecureStartError(problems).message}`,
      "error",
    );
    return 2;
  }
  // A peer certificate of another member: the others would refuse every
  // connection, later and less clearly.
  const mismatch = args.peerTls === undefined
    ? undefined
    : peerCertificateMismatch(args.peerTls.certFile, args.id);
  if (mismatch !== undefined) {
    log(`registry ${args.id}: ${mismatch}`, "error");
    return 2;
  }
  const network: JoinNetwork = nodeDialers(args, denoDialer);
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
    log(
      error instanceof JoinRefusedError
        ? `registry ${args.id}: cannot join: ${error.message}`
        : `registry ${args.id}: cannot start (${where}): ${
          (error as Error).message
        }${hint}`,
      "error",
    );
    if (!existed && !(error instanceof DataDirInUseError)) {
      await Deno.remove(args.dataDir, { recursive: true }).catch(() => {});
    }
    if (madeSecret && (existed || args.join !== undefined)) {
      // Nor a cluster secret it generated in a folder that was there, or
      // for --join (never the cluster's: a retry would take it again). A
      // bootstrap node's new secret outside its folder stays: the other
      // nodes started with it may have read it already.
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
  // With --join: checked (token, folder, secret, peer ports) before the
  // node is added; nothing was added when this throws.
  let joined: JoinedCluster | undefined;
  try {
    joined = await joinedCluster(args, log, clusterSecret, network);
  } catch (error) {
    return await cannotStart(error);
  }
  const joining = joined === undefined
    ? undefined
    : { clusterId: joined.clusterId, peers: joined.peers };
  try {
    node = await startRegistryNode(
      nodeOptionsOf(args, { clusterSecret, joining, log }, (error) => {
        fatal = error;
        stopped.resolve();
      }),
    );
  } catch (error) {
    // Added by this start, which fails: no learner is left behind.
    if (joined?.added) await leaveCluster(args, joined, log, network);
    return await cannotStart(error);
  }
  const cluster = Object.keys(
    joining?.peers ?? args.peers ?? { [args.id]: "" },
  ).join(",");
  // Its pid: under npx the node is the last of three processes, and the
  // one to signal (`kill PID`) to stop it.
  logger.log(
    `registry ${args.id} listening on ${node.url}, peers on ${node.peerUrl}${
      args.peerTls === undefined ? "" : " (mutual TLS, member certificates)"
    } (cluster ${node.clusterId} of ${cluster}; data ${args.dataDir}) (pid ${Deno.pid}, rafter ${VERSION}, deno ${Deno.version.deno})`,
    "info",
    {
      url: node.url,
      peerUrl: node.peerUrl,
      clusterId: node.clusterId,
      members: cluster.split(","),
      dataDir: args.dataDir,
      pid: Deno.pid,
      version: VERSION,
      deno: Deno.version.deno,
    },
  );
  const stop = () => stopped.resolve();
  const keepAsking = args.join === undefined && joining === undefined
    ? null
    : askPromotionWhileLearner(args, node, stopped.promise, network);
  // A joined node that never hears from the leader: one this start added
  // removes itself and exits 1 instead of waiting forever as a learner.
  let unreached: string | null = null;
  const contact = joined === undefined
    ? null
    : awaitLeaderContact(args, node, joined, stopped.promise, log).then(
      (why) => {
        unreached = why;
        if (why !== null) stopped.resolve();
      },
    );
  await untilStopped(args.watchStdin, stopped, stop);
  // A graceful stop: a leader hands over first (Raft dissertation §3.10).
  // Not after a storage failure, when the Raft node is already stopped.
  await keepAsking;
  await contact;
  if (unreached !== null) {
    await leaveCluster(args, joined!, log, network);
    await node.stop({ graceMs: 1000, handOver: false });
    log(`registry ${args.id}: cannot join: ${unreached}`, "error");
    if (!existed) {
      await Deno.remove(args.dataDir, { recursive: true }).catch(() => {});
    }
    return 1;
  }
  await node.stop({ graceMs: 1000, handOver: fatal === null });
  if (fatal !== null) {
    const conflict = fatal instanceof CommittedEntryConflictError;
    logger.log(
      conflict
        ? `registry ${args.id}: stopped to keep the log safe (Raft §5.4): ${
          (fatal as Error).message
        }`
        : `registry ${args.id}: storage failed, stopped: ${
          Deno.inspect(fatal)
        }`,
      "error",
      {
        error: fatal instanceof Error ? fatal.message : String(fatal),
        code: (fatal as { code?: unknown } | null)?.code,
      },
    );
    return 1;
  }
  log(`registry ${args.id} stopped`);
  return 0;
}

/**
 * Waits for `stopped`, which SIGINT, SIGTERM and (with `watchStdin`) the
 * end of stdin resolve through `stop` (default: resolving it).
 */
async function untilStopped(
  watchStdin: boolean,
  stopped: PromiseWithResolvers<void>,
  stop: () => void = () => stopped.resolve(),
): Promise<void> {
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  if (watchStdin) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
      stop();
    })();
  }
  await stopped.promise;
  Deno.removeSignalListener("SIGINT", stop);
  Deno.removeSignalListener("SIGTERM", stop);
}

if (import.meta.main) {
  Deno.exit(await runRegistry(Deno.args));
}
