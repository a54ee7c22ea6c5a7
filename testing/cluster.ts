/**
 * Cluster fixtures for tests, the demo and the benchmarks: a single-node
 * registry in this process ({@link startTestRegistry}), endpoints for it
 * ({@link endpoint}), and {@link LocalCluster}, a local Rafter cluster of
 * real processes on 127.0.0.1: registry nodes and hello servers started
 * with `deno run`, killed by PID, restarted from their data folders.
 *
 * Every registry node has a client port and a peer port; the nodes share
 * one cluster secret file in the cluster's data folder (the first node to
 * start creates it). Every child runs with `--watch-stdin` and a piped
 * stdin held by this process, so a child exits when this process ends,
 * however it ends.
 *
 * With `secure: true` the cluster runs as a deployment across hosts would
 * (docs/deploy.md): a throw-away CA in its data folder
 * (`pki/`), every node's client port on TLS and its peer port on mutual
 * TLS with member certificates, `--auth` on every node (one bootstrap
 * admin token file shared by the nodes, so the first leader records that
 * one), and hello servers serving TLS and bound with a `bind:hello`
 * token. Registry URLs are then `tls://`; {@link LocalCluster.caFile},
 * {@link LocalCluster.adminToken}, {@link LocalCluster.createToken} and
 * {@link LocalCluster.dialNode} give tests and the demo what they need.
 *
 * With `engine: "etcd"` (or `RAFTER_TEST_ENGINE=etcd` in the environment)
 * the registry runs on the etcd engine instead, so that a test written
 * against this class runs on both engines: registry node `n1` is then a
 * pair, an etcd member (child `n1-etcd`, data in {@link LocalCluster.dataDirOf})
 * and a front (`registry/main.ts --engine etcd` over every member, child
 * `n1`, on the node's client URL). Killing, pausing or resuming `n1` acts
 * on both; its leader is the node whose member leads etcd. etcd members
 * cannot watch stdin, so each has a guard (`sh`, holding a pipe from this
 * process) that SIGKILLs it if this process ends without stopping it.
 *
 * @module
 */

import { freePorts } from "./ports.ts";
import { type Endpoint, makeEndpoint } from "../protocol/registry.ts";
import type { RegistryStatus } from "../protocol/registry.ts";
import { type RegistryNode, startRegistryNode } from "./registry.ts";
import { dial } from "../rpc/transport/dial.ts";
import { dial as dialTls } from "../adapter/deno/mod.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import type { RafterClient } from "../stub/client.ts";
import type { Permission, TokenCreateResult } from "../protocol/auth.ts";
import { type CertifiedKey, createCa, createCert } from "../cli/pki.ts";
import { waitFor } from "./time.ts";
import { type TestEngine, testEngine } from "./engine.ts";
import {
  agreedEtcdLeader,
  etcdFrontArgs,
  etcdMemberArgs,
  type EtcdMemberPlace,
  type EtcdMemberStatus,
  etcdMemberStatus,
  findEtcd,
} from "./etcd.ts";

const ROOT = new URL("../", import.meta.url);

/** A cluster secret for tests (32 characters or more). */
export const TEST_SECRET = "test-cluster-secret-0123456789abcdef";

/**
 * A single-node registry in this process, on a free 127.0.0.1 port, in a
 * fresh temporary folder named with `prefix`, with fast ticks (10 ms,
 * elections after 5): the caller stops it and removes `dir`.
 */
export async function startTestRegistry(
  prefix: string,
): Promise<{ registry: RegistryNode; dir: string }> {
  const dir = await Deno.makeTempDir({ prefix });
  const registry = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: dir,
    tickMs: 10,
    electionTicks: 5,
  });
  return { registry, dir };
}

/**
 * Runs `test` with a new {@link LocalCluster} (nothing started yet) and
 * stops the cluster afterwards, whether `test` returns or throws.
 */
export async function withLocalCluster<T>(
  options: LocalClusterOptions,
  test: (cluster: LocalCluster) => Promise<T>,
): Promise<T> {
  const cluster = new LocalCluster(options);
  try {
    return await test(cluster);
  } finally {
    await cluster.stop();
  }
}

/**
 * Polls a serializable lookup of `name` through `client` until it finds
 * `count` endpoints.
 *
 * @throws {Error} naming `what` after `timeoutMs`.
 */
export async function waitForEndpoints(
  client: Pick<RafterClient, "lookup">,
  name: string,
  count: number,
  what: string,
  timeoutMs: number,
): Promise<void> {
  await waitFor(
    async () => {
      const found = await client.lookup(name, {
        consistency: "serializable",
      }).catch(() => null);
      return found?.endpoints.length === count;
    },
    what,
    timeoutMs,
  );
}

/** A serving, global endpoint `id` at 127.0.0.1:`port`, with `overrides`. */
export function endpoint(
  id: string,
  port: number,
  overrides: Partial<Endpoint> = {},
): Endpoint {
  return makeEndpoint({
    id,
    url: `tcp://127.0.0.1:${port}`,
    createRevision: 1,
    modRevision: 1,
    ...overrides,
  });
}

/** A child process started by the cluster. */
export interface Child {
  /** Name given at start (e.g. `n1`, `hello-2`). */
  readonly name: string;
  /** Operating-system process id. */
  readonly pid: number;
  /** Every line the child printed so far (stdout and stderr). */
  readonly output: string[];
  /** Resolves with the exit code when the child ends. */
  readonly exited: Promise<number>;
  /** Whether the child is still running. */
  readonly running: boolean;
}

interface ChildState extends Omit<Child, "exited" | "running"> {
  exited: Promise<number>;
  process: Deno.ChildProcess;
  /** For a child that cannot watch stdin: what kills it when this process ends. */
  guard: Deno.ChildProcess | null;
  running: boolean;
  waiters: Array<{ pattern: RegExp; resolve(line: string): void }>;
}

/** Settings of a {@link LocalCluster}. */
export interface LocalClusterOptions {
  /**
   * The registry's engine: `raft` (registry nodes form a Raft cluster) or
   * `etcd` (each node an etcd member and a front over all members; see
   * the module's notes; not with `secure`, joiners or rejoined nodes).
   * Default: this test run's, `RAFTER_TEST_ENGINE` (`testEngine()` of
   * `engine.ts`: `raft` when unset).
   */
  engine?: TestEngine;
  /** Folder for the nodes' data; default a fresh temporary folder, removed by `stop()`. */
  dataDir?: string;
  /**
   * Raft tick of the registry nodes, ms (on etcd: the members'
   * `--heartbeat-interval`). Default 50.
   */
  tickMs?: number;
  /**
   * Election timeout of the registry nodes in ticks (on etcd: the members'
   * `--election-timeout` is `tickMs` times this; etcd wants 5 or more).
   * Default 10.
   */
  electionTicks?: number;
  /**
   * Extra options for every registry node (e.g. `["--history-events",
   * "50"]`; on etcd, for every front).
   */
  nodeArgs?: string[];
  /** Receives each line a child prints, prefixed with its name. */
  onOutput?(name: string, line: string): void;
  /**
   * TLS on every link and tokens on: a throw-away CA in the data folder,
   * client TLS and peer mutual TLS (member certificates) and `--auth` on
   * every node, hello servers on TLS with a `bind:hello` token. Default
   * false (plain TCP, no auth).
   */
  secure?: boolean;
  /**
   * The command that child `name` runs under, put before the deno
   * binary: e.g. `["ip", "netns", "exec", "ns1"]` to start it in a network
   * namespace (the wrapper must exec, so the child's PID stays deno's and
   * signals reach it). Default none.
   */
  wrapperOf?(name: string): string[];
  /**
   * The address registry node `id` listens on (client and peer port) and
   * is reached at. Default `127.0.0.1`. Any other address needs TLS or
   * `--insecure` (in `nodeArgs`); secure clusters' certificates name
   * 127.0.0.1 only.
   */
  hostOf?(id: string): string;
  /**
   * Extra environment variables of the child named `name` (a registry node
   * id or a server's name), or undefined for none: e.g. `LD_PRELOAD` and
   * `FAKETIME` to run one node under libfaketime. Default none.
   */
  childEnv?(name: string): Record<string, string> | undefined;
}

/** How {@link LocalCluster.startNode} starts a node (see there). */
export interface StartNodeOptions {
  secretFile?: string;
  args?: string[];
  join?: string;
  ready?: RegExp;
}

/** What every certificate of a secure cluster is valid for: this host, one day. */
const LOCAL_CERT = {
  dnsNames: ["localhost"],
  ips: ["127.0.0.1"],
  days: 1,
} as const;

/** The permissions of the token {@link LocalCluster.startHello} binds with. */
export const HELLO_SERVER_PERMISSIONS: readonly Permission[] = ["bind:hello"];

/**
 * Starts and stops the processes of a local cluster.
 *
 * @example
 * ```ts ignore
 * // not run: starts three registry processes and a server (the unit task
 * // starts none); tests/registry_cluster_test.ts runs clusters this way.
 * import { LocalCluster } from "./cluster.ts";
 * const cluster = new LocalCluster();
 * await cluster.startRegistry(3);
 * await cluster.startHello("hello-1");
 * console.log(await cluster.waitForLeader());
 * await cluster.stop();
 * ```
 */
export class LocalCluster {
  readonly #options: LocalClusterOptions;
  readonly #children = new Map<string, ChildState>();
  /** The data folder, made on first use when the cluster owns it. */
  #dataDir: Promise<string> | null;
  readonly #ownsDataDir: boolean;
  /** Registry node id → client URL (on etcd: its front's). */
  readonly registry = new Map<string, string>();
  /** Registry node id → peer URL (where the other nodes reach it; empty on etcd). */
  readonly peers = new Map<string, string>();
  /** The registry's engine ({@link LocalClusterOptions.engine}). */
  readonly engine: TestEngine;
  /**
   * On etcd: registry node id → its etcd member (its `--name`, the node
   * id, and its client and peer URLs). Empty on Raft.
   */
  readonly etcdMembers = new Map<string, Omit<EtcdMemberPlace, "dataDir">>();
  /** The etcd binary, found (or installed) on first use. */
  #etcdBinary: Promise<string> | null = null;
  /** Nodes planned with {@link planJoiner}. */
  readonly #joiners = new Set<string>();
  /** Bootstrap nodes that came back as new members ({@link markRejoined}). */
  readonly #rejoined = new Set<string>();
  /** Whether the cluster runs with TLS and tokens ({@link LocalClusterOptions.secure}). */
  readonly secure: boolean;
  /** The throw-away CA (secure clusters), made on first use. */
  #ca: Promise<CertifiedKey> | null = null;
  /** Certificates issued so far: name → its files. */
  readonly #certs = new Map<
    string,
    Promise<{ certFile: string; keyFile: string }>
  >();
  /** The bootstrap admin token, once read and accepted by a node. */
  #adminToken: string | null = null;
  /** The token hello servers bind with, once made. */
  #helloToken: Promise<string> | null = null;

  /** @param options data folder, timing and output hook. */
  constructor(options: LocalClusterOptions = {}) {
    this.#options = options;
    this.#dataDir = options.dataDir === undefined
      ? null
      : Promise.resolve(options.dataDir);
    this.#ownsDataDir = options.dataDir === undefined;
    this.secure = options.secure === true;
    this.engine = options.engine ?? testEngine();
    if (this.secure) this.#raftOnly("secure: true");
  }

  /** Registry URLs, in node order. */
  get registryUrls(): string[] {
    return [...this.registry.values()];
  }

  /** The child named `name`. @throws {Error} if there is none. */
  child(name: string): Child {
    const child = this.#children.get(name);
    if (child === undefined) throw new Error(`no child named ${name}`);
    return child;
  }

  /** The folder node `id` keeps its log in (on etcd: its member's data). */
  async dataDirOf(id: string): Promise<string> {
    return `${await this.#root()}/${id}`;
  }

  /** The cluster secret file the nodes share (created by the first to start). */
  async secretFile(): Promise<string> {
    return `${await this.#root()}/cluster_secret`;
  }

  /**
   * Picks free ports for `count` registry nodes n1..nN (a client port and a
   * peer port each; on etcd, the front's client port and the member's
   * client and peer ports) without starting them; {@link startNode}
   * starts one.
   */
  planRegistry(count: number): void {
    if (this.engine === "etcd") {
      const ports = freePorts(3 * count);
      for (let i = 0; i < count; i++) {
        const id = `n${i + 1}`;
        this.registry.set(id, this.#url(ports[3 * i], id));
        const member = (port: number) =>
          this.#url(port, id).replace(/^[a-z]+:/, "http:");
        this.etcdMembers.set(id, {
          name: id,
          clientUrl: member(ports[3 * i + 1]),
          peerUrl: member(ports[3 * i + 2]),
        });
      }
      return;
    }
    const ports = freePorts(2 * count);
    for (let i = 0; i < count; i++) {
      const id = `n${i + 1}`;
      this.registry.set(id, this.#url(ports[2 * i], id));
      this.peers.set(id, this.#url(ports[2 * i + 1], id));
    }
  }

  /**
   * Picks free ports for node `id`, which is no bootstrap member: it is left
   * out of the others' `--peers`, and {@link startNode} starts it with
   * `--join` (when given) and its own ports.
   */
  planJoiner(id: string): void {
    this.#raftOnly("planJoiner");
    const [client, peer] = freePorts(2);
    this.registry.set(id, this.#url(client, id));
    this.peers.set(id, this.#url(peer, id));
    this.#joiners.add(id);
  }

  /**
   * Bootstrap node `id` was removed from the cluster and comes back as a
   * new member on its URLs (a fresh data folder): from now on
   * {@link startNode} starts it as a joiner (`--join` when given, else its
   * `--peer-listen` only, as a joined node restarts), while the other
   * bootstrap nodes still list it in their `--peers` (their data folders
   * were bootstrapped with it).
   */
  markRejoined(id: string): void {
    this.#raftOnly("markRejoined");
    if (!this.registry.has(id)) throw new Error(`no registry node ${id}`);
    this.#rejoined.add(id);
  }

  /**
   * Starts `count` registry nodes n1..nN on free ports (a client port and a
   * peer port each) and waits until each listens.
   *
   * @throws {Error} on etcd, when there is no etcd binary and none could
   * be installed (saying how to install it).
   */
  async startRegistry(count: number): Promise<void> {
    this.planRegistry(count);
    await Promise.all(
      [...this.registry.keys()].map((id) => this.startNode(id)),
    );
  }

  /**
   * {@link startRegistry}, then {@link waitForLeader}: @returns the leader.
   */
  async startRegistryWithLeader(
    count: number,
    timeoutMs?: number,
  ): Promise<string> {
    await this.startRegistry(count);
    return await this.waitForLeader(timeoutMs);
  }

  /**
   * Plans `count` bootstrap nodes n1..nN and the nodes `joiners` (see
   * {@link planJoiner}), and starts the bootstrap nodes; the joiners are
   * left for the test to start with `--join`.
   */
  async startWithJoiners(count: number, ...joiners: string[]): Promise<void> {
    this.#raftOnly("startWithJoiners");
    this.planRegistry(count);
    for (const joiner of joiners) this.planJoiner(joiner);
    await Promise.all(
      Array.from({ length: count }, (_, i) => this.startNode(`n${i + 1}`)),
    );
  }

  /**
   * Starts (or restarts) registry node `id` from its data folder.
   *
   * @param options.secretFile another cluster secret file than the
   * cluster's (to start a node that cannot prove the cluster's secret).
   * @param options.args the node's other options (default the cluster's
   * `nodeArgs`).
   * @param options.join for a node planned with {@link planJoiner}: the
   * member client URL to `--join` through (omit it to restart a node that
   * joined earlier).
   * @param options.ready the output line to wait for (default
   * `listening on`).
   *
   * On etcd, starts node `id`'s member first unless it runs (from its data
   * folder when it has one) and waits until it listens, then its front
   * (with `options.args`). A front starts only once etcd answers it (it
   * gives up after 5 s), which needs a quorum of members: start the nodes
   * of a fresh or wholly stopped registry together, as
   * {@link startRegistry} does. `secretFile` and `join` are not supported
   * there.
   */
  async startNode(
    id: string,
    options: StartNodeOptions = {},
  ): Promise<Child> {
    if (this.engine === "etcd") return await this.#startEtcdNode(id, options);
    const membership = this.#joiners.has(id) || this.#rejoined.has(id)
      ? [
        ...(options.join === undefined ? [] : ["--join", options.join]),
        "--peer-listen",
        hostPort(this.peers.get(id)!),
      ]
      : [
        "--peers",
        [...this.peers]
          .filter(([peer]) => !this.#joiners.has(peer))
          .map(([peer, url]) => `${peer}=${hostPort(url)}`)
          .join(","),
      ];
    const child = this.#spawn(id, "registry/main.ts", [
      "--id",
      id,
      "--listen",
      hostPort(this.registry.get(id)!),
      ...membership,
      "--cluster-secret-file",
      options.secretFile ?? await this.secretFile(),
      "--data",
      await this.dataDirOf(id),
      "--tick-ms",
      String(this.#options.tickMs ?? 50),
      "--election-ticks",
      String(this.#options.electionTicks ?? 10),
      ...(this.secure ? await this.#secureNodeArgs(id) : []),
      ...(options.args ?? this.#options.nodeArgs ?? []),
    ], await this.#joinEnv(options.join));
    await this.waitForLine(id, options.ready ?? /listening on/, 20_000);
    return child;
  }

  /** {@link startNode} on etcd: the node's member (unless it runs), then its front. */
  async #startEtcdNode(
    id: string,
    options: StartNodeOptions,
  ): Promise<Child> {
    if (options.join !== undefined) this.#raftOnly("startNode with join");
    if (options.secretFile !== undefined) {
      this.#raftOnly("startNode with secretFile");
    }
    const url = this.registry.get(id);
    if (url === undefined) throw new Error(`no registry node ${id}`);
    if (this.#children.get(id)?.running) {
      throw new Error(`${id} is already running`);
    }
    await this.#startMember(id);
    const endpoints = [...this.etcdMembers.values()].map((m) => m.clientUrl);
    const child = this.#start(id, [
      Deno.execPath(),
      ...etcdFrontArgs(endpoints, hostPort(url)),
      "--id",
      id,
      ...(options.args ?? this.#options.nodeArgs ?? []),
      "--watch-stdin",
    ]);
    try {
      await this.waitForLine(id, options.ready ?? /listening on/, 20_000);
    } catch (error) {
      throw new Error(
        `${
          (error as Error).message
        }\n(on etcd a front starts once etcd answers it, which needs a quorum of members: start a stopped registry's nodes together, as startRegistry does)`,
      );
    }
    return child;
  }

  /**
   * Starts node `id`'s etcd member (child `${id}-etcd`) unless it runs:
   * `--initial-cluster-state new` on a fresh data folder, else from its
   * data; resolves once its client port takes connections (it answers
   * requests only once it has a quorum, as a Raft node elects only then).
   *
   * @throws {Error} with its output when it exits or does not listen
   * within 20 s.
   */
  async #startMember(id: string): Promise<void> {
    const name = `${id}-etcd`;
    if (this.#children.get(name)?.running) return;
    const member = this.etcdMembers.get(id)!;
    const binary = await this.#etcd();
    const dataDir = await this.dataDirOf(id);
    const fresh = await Deno.stat(dataDir).then(() => false, () => true);
    const tickMs = this.#options.tickMs ?? 50;
    const child = this.#start(
      name,
      [
        binary,
        ...etcdMemberArgs({ ...member, dataDir }, [
          ...this.etcdMembers.values(),
        ], {
          state: fresh ? "new" : "existing",
          token: `rafter-${(await this.#root()).split("/").pop()}`,
          timing: {
            heartbeatMs: tickMs,
            electionMs: tickMs * (this.#options.electionTicks ?? 10),
          },
        }),
      ],
      undefined,
      true,
    );
    const timeoutMs = 20_000;
    const deadline = Date.now() + timeoutMs;
    const { hostname, port } = new URL(member.clientUrl);
    let why = `did not listen on ${member.clientUrl} within ${timeoutMs} ms`;
    while (Date.now() < deadline) {
      if (!child.running) {
        why = `exited with code ${await child.exited}`;
        break;
      }
      const listening = await Deno.connect({ hostname, port: Number(port) })
        .then((connection) => {
          connection.close();
          return true;
        }, () => false);
      if (listening) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`${name}: ${why}; its output:\n${child.output.join("\n")}`);
  }

  /** The etcd binary's path, found (or installed) once. */
  #etcd(): Promise<string> {
    const log = (line: string) =>
      this.#options.onOutput === undefined
        ? console.error(line)
        : this.#options.onOutput("etcd", line);
    this.#etcdBinary ??= findEtcd(log).then((found) => {
      if ("skipped" in found) {
        throw new Error(
          `LocalCluster: the etcd engine needs etcd, and it is unavailable: ${found.skipped}`,
        );
      }
      return found.path;
    });
    return this.#etcdBinary;
  }

  /** What the etcd members say of themselves: the running ones that answer. */
  async #memberStatuses(
    timeoutMs = 500,
  ): Promise<Array<{ id: string; status: EtcdMemberStatus }>> {
    const answers = await Promise.all(
      [...this.etcdMembers].map(async ([id, member]) => {
        if (!this.#children.get(`${id}-etcd`)?.running) return null;
        const status = await etcdMemberStatus(member.clientUrl, timeoutMs);
        return status === null ? null : { id, status };
      }),
    );
    return answers.filter((answer) => answer !== null);
  }

  /**
   * On etcd: the node whose member leads, as every running member that
   * answers says (the leader among them), or null.
   */
  async #etcdLeader(): Promise<string | null> {
    const answers = await this.#memberStatuses();
    const index = agreedEtcdLeader(answers.map((answer) => answer.status));
    return index === -1 ? null : answers[index].id;
  }

  /** Throws, saying that the etcd engine does not support `what`, on etcd. */
  #raftOnly(what: string): void {
    if (this.engine !== "etcd") return;
    const from = this.#options.engine === undefined
      ? ", from RAFTER_TEST_ENGINE"
      : "";
    throw new Error(
      `LocalCluster: ${what} is not supported by the etcd engine (this cluster's engine is etcd${from}); it needs the Raft engine`,
    );
  }

  /** The children that are `name`: a registry node's front and member on etcd, else the child `name`. */
  #partsOf(name: string): string[] {
    return this.engine === "etcd" && this.etcdMembers.has(name)
      ? [name, `${name}-etcd`]
      : [name];
  }

  /**
   * Starts a hello server `id` bound as `hello` (with `args` added to its
   * command line, e.g. `["--ttl-ms", "2000"]`); resolves once it is bound.
   */
  async startHello(id: string, args: string[] = []): Promise<Child> {
    const secure = this.secure
      ? {
        args: await this.#tlsArgs("server", false, "--tls-cert", "--tls-key"),
        env: {
          RAFTER_CA: await this.caFile(),
          RAFTER_TOKEN: await this.helloToken(),
        },
      }
      : { args: [], env: undefined };
    const child = this.#spawn(id, "examples/hello/server.ts", [
      "--registry",
      this.registryUrls.join(","),
      "--id",
      id,
      ...secure.args,
      ...args,
    ], secure.env);
    await this.waitForLine(id, /serving on .* bound as/, 30_000);
    return child;
  }

  /**
   * Starts `tests/_exec_server.ts` as `id`, registered through this
   * cluster's registry with `--ttl-ms ttlMs` and `args` added (e.g.
   * `["--log", path]`); resolves once it is ready. (Plain clusters only:
   * it is given no CA or token.) Started again under the same id (after
   * a kill), it listens on its first port: the same URL takes its binding
   * over while the killed one's lease runs out, as a restarted server
   * does (another URL would be refused with ID_IN_USE until then).
   */
  async startExecServer(
    id: string,
    ttlMs: number,
    args: string[] = [],
  ): Promise<Child> {
    const child = await this.spawn(id, "tests/_exec_server.ts", [
      "--registry",
      this.registryUrls.join(","),
      "--id",
      id,
      "--port",
      this.#execPorts.get(id) ?? "0",
      ...args,
      "--ttl-ms",
      String(ttlMs),
    ], /ready on/);
    const line = await this.waitForLine(id, /ready on tcp:\/\/\S+:\d+ /, 1_000);
    this.#execPorts.set(id, line.match(/ready on tcp:\/\/\S+:(\d+) /)![1]);
    return child;
  }

  /** The port each exec server listened on first, by id. */
  readonly #execPorts = new Map<string, string>();

  /**
   * Starts any script of the repository as child `name` (with
   * `--watch-stdin` added, so it ends with this process), and waits for a
   * line matching `ready` if given.
   */
  async spawn(
    name: string,
    script: string,
    args: string[],
    ready?: RegExp,
    timeoutMs = 30_000,
  ): Promise<Child> {
    const child = this.#spawn(name, script, args);
    if (ready !== undefined) await this.waitForLine(name, ready, timeoutMs);
    return child;
  }

  /**
   * Stops child `name` with SIGSTOP (it stays alive, frozen); {@link resume}
   * undoes it. On etcd, a registry node id freezes its front and member.
   */
  pause(name: string): void {
    for (const part of this.#partsOf(name)) {
      this.#children.get(part)?.process.kill("SIGSTOP");
    }
  }

  /** Lets a child stopped with {@link pause} run again (SIGCONT); on etcd, a node's front and member. */
  resume(name: string): void {
    for (const part of this.#partsOf(name)) {
      this.#children.get(part)?.process.kill("SIGCONT");
    }
  }

  /**
   * Resolves with the first line of child `name` matching `pattern`,
   * including lines already printed.
   *
   * @throws {Error} after `timeoutMs`, or if the child exits first; the
   * message holds the child's output.
   */
  waitForLine(
    name: string,
    pattern: RegExp,
    timeoutMs: number,
  ): Promise<string> {
    const child = this.#children.get(name)!;
    const seen = child.output.find((line) => pattern.test(line));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        fail(`no line matching ${pattern} within ${timeoutMs} ms`);
      }, timeoutMs);
      const waiter = {
        pattern,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      const fail = (why: string) => {
        clearTimeout(timer);
        child.waiters = child.waiters.filter((w) => w !== waiter);
        reject(
          new Error(`${name}: ${why}; its output:\n${child.output.join("\n")}`),
        );
      };
      child.waiters.push(waiter);
      child.exited.then((code) => {
        if (child.waiters.includes(waiter)) fail(`exited with code ${code}`);
      });
    });
  }

  /**
   * Sends `signal` to child `name` and waits until it has exited. On etcd,
   * a registry node id signals its front and its member (child
   * `${id}-etcd` alone: the member only).
   */
  async kill(name: string, signal: Deno.Signal = "SIGKILL"): Promise<void> {
    await Promise.all(
      this.#partsOf(name).map(async (part) => {
        const child = this.#children.get(part);
        if (child === undefined || !child.running) return;
        try {
          child.process.kill(signal);
        } catch {
          // It exited in the meantime.
        }
        await child.exited;
      }),
    );
  }

  /** `registry.status` of node `id`, or null when it does not answer within `timeoutMs`. */
  async status(id: string, timeoutMs = 500): Promise<RegistryStatus | null> {
    const url = this.registry.get(id);
    if (url === undefined || !this.#children.get(id)?.running) return null;
    try {
      const connection = await this.#open(url, timeoutMs);
      try {
        if (this.secure) {
          const token = this.#adminToken ?? await this.#readAdminToken();
          if (token === null) return null;
          await connection.call("registry.authenticate", { token }, {
            timeoutMs,
          });
        }
        return await connection.call<RegistryStatus>("registry.status", [], {
          timeoutMs,
        });
      } finally {
        connection.close();
      }
    } catch {
      return null;
    }
  }

  /**
   * The id of the leader all running nodes that know one agree on, or
   * null. On etcd: the node whose member leads etcd, as every running
   * member that answers says.
   */
  async leader(): Promise<string | null> {
    if (this.engine === "etcd") return await this.#etcdLeader();
    const statuses = await Promise.all(
      [...this.registry.keys()].map((id) => this.status(id)),
    );
    const leaders = statuses.filter((s) => s?.role === "leader");
    if (leaders.length !== 1) return null;
    return leaders[0]!.id;
  }

  /**
   * Polls until a single leader is known to every running node (each
   * follower has heard from it, so it redirects writes there; on etcd,
   * {@link leader}: every member that answers names the leader's);
   * @throws {Error} after `timeoutMs`.
   */
  async waitForLeader(timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.engine === "etcd") {
        const leader = await this.#etcdLeader();
        if (leader !== null) return leader;
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const statuses = (await Promise.all(
        [...this.registry.keys()].map((id) => this.status(id)),
      )).filter((s) => s !== null);
      const leaders = statuses.filter((s) => s.role === "leader");
      if (
        leaders.length === 1 &&
        statuses.every((s) => s.leader === leaders[0].id)
      ) {
        return leaders[0].id;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no registry leader within ${timeoutMs} ms`);
  }

  /**
   * Polls until node `id` follows a leader and has applied everything that
   * leader had committed when asked (asked first: under continuous writes
   * the leader's commit index moves on while the follower is asked, so
   * comparing with a later reading would wait for a quiet moment that may
   * never come).
   *
   * On etcd, whose reads are linearizable anyway: once node `id`'s member
   * answers its status and knows a leader (`sameTerm` is not looked at).
   *
   * @param options.sameTerm also require `id` to be in the leader's term.
   * @param options.statusTimeoutMs how long each status call may take.
   * @throws {Error} after `timeoutMs` (default 10 s).
   */
  async waitCaughtUp(
    id: string,
    options: {
      timeoutMs?: number;
      statusTimeoutMs?: number;
      intervalMs?: number;
      sameTerm?: boolean;
    } = {},
  ): Promise<void> {
    const {
      timeoutMs = 10_000,
      statusTimeoutMs = 500,
      intervalMs = 50,
      sameTerm = false,
    } = options;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.engine === "etcd") {
        const own = (await this.#memberStatuses(statusTimeoutMs)).find((
          answer,
        ) => answer.id === id);
        if (own !== undefined && own.status.leader !== "0") return;
        await new Promise((r) => setTimeout(r, intervalMs));
        continue;
      }
      const leaderId = (await this.status(id, statusTimeoutMs))?.leader ?? null;
      const leader = leaderId === null
        ? null
        : await this.status(leaderId, statusTimeoutMs);
      const own = await this.status(id, statusTimeoutMs);
      if (
        own !== null && leader !== null && leader.role === "leader" &&
        own.appliedIndex >= leader.commitIndex &&
        (!sameTerm || own.term === leader.term)
      ) {
        return;
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    throw new Error(`${id} did not catch up within ${timeoutMs} ms`);
  }

  /**
   * Stops every child (SIGTERM, then SIGKILL after `graceMs`) and removes
   * the data folder if the cluster made it.
   */
  async stop(graceMs = 2000): Promise<void> {
    const running = [...this.#children.values()].filter((c) => c.running);
    await Promise.all(running.map(async (child) => {
      try {
        // A paused child must run again to act on SIGTERM.
        child.process.kill("SIGCONT");
        child.process.kill("SIGTERM");
      } catch {
        return;
      }
      const timer = setTimeout(() => {
        try {
          child.process.kill("SIGKILL");
        } catch { /* already gone */ }
      }, graceMs);
      await child.exited;
      clearTimeout(timer);
    }));
    // Let every child's output readers finish.
    await Promise.all([...this.#children.values()].map((c) => c.exited));
    if (this.#ownsDataDir && this.#dataDir !== null) {
      const dir = await this.#dataDir;
      this.#dataDir = null;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  }

  /**
   * The throw-away CA certificate's path (secure clusters): what clients,
   * servers and nodes trust. Made in `pki/` of the data folder on first
   * use, with every certificate the cluster issues.
   *
   * @throws {Error} when the cluster is not secure.
   */
  async caFile(): Promise<string> {
    this.#requireSecure("caFile");
    await this.#caKey();
    return `${await this.#root()}/pki/ca.pem`;
  }

  /** The bootstrap admin token file every node of a secure cluster shares. */
  async adminTokenFile(): Promise<string> {
    return `${await this.#root()}/admin_token`;
  }

  /**
   * The bootstrap admin token of a secure cluster, once a node accepts it
   * (`registry.authenticate` succeeds: the first leader has recorded it).
   * Every bootstrapping node is given the same `--admin-token-file`, so
   * the nodes agree on one token (the file is made once, by a hard link)
   * and the one the first leader records is the one in the file.
   *
   * @throws {Error} when the cluster is not secure, or no node accepts the
   * token within `timeoutMs`.
   */
  async adminToken(timeoutMs = 20_000): Promise<string> {
    this.#requireSecure("adminToken");
    if (this.#adminToken !== null) return this.#adminToken;
    let accepted: string | null = null;
    await waitFor(
      async () => {
        const token = await this.#readAdminToken();
        if (token === null) return false;
        for (const id of this.registry.keys()) {
          if (!this.#children.get(id)?.running) continue;
          const connection = await this.dialNode(id, { token, timeoutMs: 1000 })
            .catch(() => null);
          connection?.close();
          if (connection !== null) {
            accepted = token;
            return true;
          }
        }
        return false;
      },
      "a registry node to accept the bootstrap admin token",
      timeoutMs,
    );
    this.#adminToken = accepted;
    return accepted!;
  }

  /**
   * Makes a token with `permissions` through the leader, authenticated
   * with the {@link adminToken} (retried on another leader until
   * `timeoutMs`): @returns the token and its id.
   *
   * @throws {Error} when the cluster is not secure, or after `timeoutMs`
   * with the last error.
   */
  async createToken(
    name: string,
    permissions: readonly Permission[],
    timeoutMs = 20_000,
  ): Promise<TokenCreateResult> {
    const admin = await this.adminToken(timeoutMs);
    const deadline = Date.now() + timeoutMs;
    let last: unknown = null;
    while (Date.now() < deadline) {
      try {
        const leader = await this.waitForLeader(deadline - Date.now());
        const connection = await this.dialNode(leader, { token: admin });
        try {
          return await connection.call<TokenCreateResult>(
            "registry.tokenCreate",
            { name, permissions },
            { timeoutMs: 2000 },
          );
        } finally {
          connection.close();
        }
      } catch (error) {
        last = error;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    throw new Error(
      `no token ${name} made within ${timeoutMs} ms: ${
        (last as Error)?.message ?? last
      }`,
    );
  }

  /** The token ({@link HELLO_SERVER_PERMISSIONS}) hello servers bind with in a secure cluster. */
  helloToken(): Promise<string> {
    this.#requireSecure("helloToken");
    this.#helloToken ??= this.createToken(
      "hello-servers",
      HELLO_SERVER_PERMISSIONS,
    ).then((made) => made.token);
    this.#helloToken.catch(() => this.#helloToken = null);
    return this.#helloToken;
  }

  /**
   * A JSON-RPC connection to node `id`'s client port (TLS, trusting the
   * cluster's CA, when secure), authenticated with `options.token` when
   * given.
   *
   * @throws {Error} when the node is unknown, or the connection or the
   * authentication fails (the connection is closed again).
   */
  async dialNode(
    id: string,
    options: { token?: string; timeoutMs?: number } = {},
  ): Promise<RpcConnection> {
    const url = this.registry.get(id);
    if (url === undefined) throw new Error(`no registry node ${id}`);
    const timeoutMs = options.timeoutMs ?? 2000;
    const connection = await this.#open(url, timeoutMs);
    if (options.token !== undefined) {
      try {
        await connection.call("registry.authenticate", {
          token: options.token,
        }, { timeoutMs });
      } catch (error) {
        connection.close();
        throw error;
      }
    }
    return connection;
  }

  /** Opens `url`: over TLS trusting the cluster's CA when secure. */
  async #open(url: string, timeoutMs: number): Promise<RpcConnection> {
    if (!this.secure) return await dial(url, { connectTimeoutMs: timeoutMs });
    return await dialTls(url, {
      connectTimeoutMs: timeoutMs,
      tls: { caFile: await this.caFile() },
    });
  }

  #url(port: number, id: string): string {
    const host = this.#options.hostOf?.(id) ?? "127.0.0.1";
    return `${this.secure ? "tls" : "tcp"}://${host}:${port}`;
  }

  #requireSecure(what: string): void {
    if (!this.secure) {
      throw new Error(
        `LocalCluster.${what}: this cluster is not secure; construct it with { secure: true }`,
      );
    }
  }

  async #readAdminToken(): Promise<string | null> {
    try {
      return (await Deno.readTextFile(await this.adminTokenFile())).trim() ||
        null;
    } catch {
      return null;
    }
  }

  /**
   * The environment of a node that joins a secure cluster: `--join`
   * presents `RAFTER_TOKEN`, the admin token (memberAdd needs admin).
   */
  async #joinEnv(
    join: string | undefined,
  ): Promise<Record<string, string> | undefined> {
    if (!this.secure || join === undefined) return undefined;
    return { RAFTER_TOKEN: await this.adminToken() };
  }

  /** The TLS, peer mutual TLS and auth options of node `id`. */
  async #secureNodeArgs(id: string): Promise<string[]> {
    return [
      ...await this.#tlsArgs(id, true, "--tls-cert", "--tls-key"),
      ...await this.#tlsArgs(id, true, "--peer-tls-cert", "--peer-tls-key"),
      "--peer-tls-ca",
      await this.caFile(),
      "--auth",
      "--admin-token-file",
      await this.adminTokenFile(),
    ];
  }

  /** `certFlag FILE keyFlag FILE` for the certificate named `name`. */
  async #tlsArgs(
    name: string,
    member: boolean,
    certFlag: string,
    keyFlag: string,
  ): Promise<string[]> {
    const { certFile, keyFile } = await this.#cert(name, member);
    return [certFlag, certFile, keyFlag, keyFile];
  }

  #caKey(): Promise<CertifiedKey> {
    this.#ca ??= (async () => {
      const dir = `${await this.#root()}/pki`;
      await Deno.mkdir(dir, { recursive: true });
      const ca = await createCa("Rafter LocalCluster throw-away CA", 1);
      await writePrivate(`${dir}/ca.pem`, ca.cert);
      return ca;
    })();
    return this.#ca;
  }

  /**
   * The certificate `name` (valid for localhost and 127.0.0.1, one day;
   * a member certificate names member `name`), issued once.
   */
  #cert(
    name: string,
    member: boolean,
  ): Promise<{ certFile: string; keyFile: string }> {
    let files = this.#certs.get(name);
    if (files === undefined) {
      files = (async () => {
        const ca = await this.#caKey();
        const pem = await createCert(ca, {
          ...LOCAL_CERT,
          commonName: name,
          member: member ? name : undefined,
        });
        const dir = `${await this.#root()}/pki`;
        const certFile = `${dir}/${name}.pem`;
        const keyFile = `${dir}/${name}.key`;
        await writePrivate(certFile, pem.cert);
        await writePrivate(keyFile, pem.key);
        return { certFile, keyFile };
      })();
      this.#certs.set(name, files);
    }
    return files;
  }

  /** One promise, so nodes started together share one folder. */
  #root(): Promise<string> {
    this.#dataDir ??= Deno.makeTempDir({ prefix: "rafter-cluster-" });
    return this.#dataDir;
  }

  /** Runs repository script `script` with `deno run` as child `name`. */
  #spawn(
    name: string,
    script: string,
    args: string[],
    env?: Record<string, string>,
  ): ChildState {
    return this.#start(name, [
      Deno.execPath(),
      "run",
      "-A",
      new URL(script, ROOT).pathname,
      ...args,
      "--watch-stdin",
    ], env);
  }

  /**
   * Runs `argv` (under child `name`'s wrapper) in the repository folder as
   * child `name`. A program that cannot end with its stdin (`guarded`)
   * gets a {@link guard}.
   */
  #start(
    name: string,
    argv: string[],
    env?: Record<string, string>,
    guarded = false,
  ): ChildState {
    const existing = this.#children.get(name);
    if (existing?.running) throw new Error(`${name} is already running`);
    const extra = this.#options.childEnv?.(name);
    if (extra !== undefined) env = { ...env, ...extra };
    const [program, ...args] = [
      ...(this.#options.wrapperOf?.(name) ?? []),
      ...argv,
    ];
    const process = new Deno.Command(program, {
      args,
      cwd: new URL(".", ROOT).pathname,
      ...(env === undefined ? {} : { env }),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const output: string[] = [];
    const state: ChildState = {
      name,
      pid: process.pid,
      output,
      process,
      guard: guarded ? guard(process.pid) : null,
      running: true,
      waiters: [],
      exited: Promise.resolve(0),
    };
    const readers = [process.stdout, process.stderr].map((stream) =>
      this.#readLines(stream, state)
    );
    state.exited = Promise.all([process.status, ...readers]).then(
      async ([status]) => {
        state.running = false;
        await process.stdin.close().catch(() => {});
        if (state.guard !== null) {
          // Killed before its stdin closes: it must not signal the PID,
          // which another process may get now.
          try {
            state.guard.kill("SIGKILL");
          } catch { /* already gone */ }
          await state.guard.status;
          await state.guard.stdin.close().catch(() => {});
        }
        return status.code;
      },
    );
    this.#children.set(name, state);
    return state;
  }

  async #readLines(
    stream: ReadableStream<Uint8Array>,
    child: ChildState,
  ): Promise<void> {
    let rest = "";
    const onLine = (line: string) => {
      child.output.push(line);
      this.#options.onOutput?.(child.name, line);
      for (const waiter of [...child.waiters]) {
        if (waiter.pattern.test(line)) {
          child.waiters = child.waiters.filter((w) => w !== waiter);
          waiter.resolve(line);
        }
      }
    };
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      const lines = (rest + text).split("\n");
      rest = lines.pop()!;
      lines.forEach(onLine);
    }
    if (rest !== "") onLine(rest);
  }
}

/** `host:port` of a `scheme://host:port` URL. */
function hostPort(url: string): string {
  return url.replace(/^[a-z]+:\/\//, "");
}

/**
 * A guard of the child `pid`, for a child that cannot watch its stdin
 * (etcd): `sh`, reading a pipe from this process; when this process ends,
 * however it ends, the pipe closes and the guard SIGKILLs `pid`. Killed
 * itself (SIGKILL, before its pipe is closed) once the child has exited.
 */
function guard(pid: number): Deno.ChildProcess {
  return new Deno.Command("sh", {
    args: [
      "-c",
      'read -r _; kill -KILL "$1" 2>/dev/null',
      "rafter-guard",
      String(pid),
    ],
    stdin: "piped",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** Writes `text` to a new file `path`, mode 0600. */
async function writePrivate(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(path, text, { mode: 0o600 });
}
