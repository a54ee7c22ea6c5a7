/**
 * How a registry node is put together, read top to bottom (like
 * hashicorp/raft's `NewRaft`): {@link RegistryNodeAssembly.start} checks
 * the options, builds the parts that need no I/O (the constructor), then
 * opens the log, connects the peers, listens on both ports and starts the
 * duty timer, each step undoing what came before if it fails. The parts'
 * behaviour lives beside this file: the registry replica (`replica.ts`),
 * leadership duties (`leadership.ts`), membership (`membership.ts`) and
 * status (`status.ts`). It imports no runtime adapter: the caller hands
 * it the runtime's `serve` (`registry/main.ts` passes Deno's).
 *
 * @module
 */

import type { RpcServer } from "../../rpc/server/server.ts";
import { peerUrlsOf, RaftNode, type RaftTransport } from "../../raft/node.ts";
import { readDataDirMeta } from "../../raft/data_dir.ts";
import { DataDirInUseError } from "../../raft/dir_lock.ts";
import { ClusterKey } from "../../raft/peer_auth.ts";
import { PeerDirectory } from "../../raft/peer_directory.ts";
import {
  type PeerServer,
  type ServeFunction,
  servePeersOn,
} from "../../raft/peer_server.ts";
import { PeerTransport } from "../../raft/peer_transport.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import { type RegistryContext, registryMethods } from "../service.ts";
import { type ApplyResult, encodeCommand } from "../state.ts";
import { LEASE_SYNC_METHOD } from "../lease_keeper.ts";
import { HealthChecker } from "../_health_checker.ts";
import { listening, pathExists, portsFree } from "../_start_checks.ts";
import { insecureWarning } from "./exposure.ts";
import {
  type NodeDialers,
  nodeDialers,
  type NodeSettings,
  ownPeerUrl,
  type RegistryNodeOptions,
  settingsOf,
  type TlsDialerFactory,
} from "./options.ts";
import {
  type RegistryNodeSnapshot,
  Replica,
  snapshotDataProblem,
} from "./replica.ts";
import { MEMBER_REMOVED_METHOD, Membership } from "./membership.ts";
import { type BootstrapToken, Leadership } from "./leadership.ts";
import { type AdminToken, loadAdminToken } from "./admin_token.ts";
import { quorumProblem, roleLogger, statusOf } from "./status.ts";
import type { RegistryNodeInternals } from "./parts.ts";
import {
  gaugesOf,
  type MetricsServer,
  metricsWarning,
  NodeMetrics,
  serveMetrics,
} from "./metrics.ts";
import {
  Dashboard,
  type DashboardServer,
  dashboardWarning,
  serveDashboard,
} from "./dashboard.ts";

/** A running registry node and its parts. */
export class RegistryNodeAssembly implements RegistryNodeInternals {
  readonly #settings: NodeSettings;
  readonly #key: ClusterKey;
  readonly #dialers: NodeDialers;
  readonly #directory: PeerDirectory;
  readonly #checker: HealthChecker;
  readonly #replica: Replica;
  readonly #membership: Membership;
  readonly #leadership: Leadership;
  /** The Raft node's connection-lost listeners, for the transport. */
  readonly #lostListeners: ((peer: string) => void)[] = [];
  // Filled in by start(), step by step.
  #existed = false;
  #raft: RaftNode<ApplyResult> | undefined;
  #clusterId = "";
  #transport: PeerTransport | undefined;
  #server: RpcServer | undefined;
  #peerServer: PeerServer | undefined;
  /** A single node's peer port may be a free one, known once it listens. */
  #peerUrl: string;
  #dutyTimer: ReturnType<typeof setInterval> | undefined;
  /** The bootstrap admin token this node would record (not when joining). */
  #adminToken: AdminToken | null = null;
  readonly #metrics: NodeMetrics;
  #metricsServer: MetricsServer | undefined;
  readonly #dashboard: Dashboard;
  #dashboardServer: DashboardServer | undefined;
  /** The leader the last soft state named, for the leader-change counter. */
  #lastLeader: string | null = null;

  /**
   * Starts a node, in this order: checks the options, checks that both
   * ports are free, opens `dataDir` (creating it if missing) and reloads
   * its log, connects to its peers, then serves `registry.*` and
   * `rpc.ping` on the client port (with `serve`) and the peer protocol on
   * the peer port.
   */
  static async start(
    options: RegistryNodeOptions,
    serve: ServeFunction,
    tlsDialer?: TlsDialerFactory,
  ): Promise<RegistryNodeAssembly> {
    const settings = settingsOf(options);
    const key = options.clusterSecret === undefined
      ? await ClusterKey.random()
      : await ClusterKey.fromSecret(options.clusterSecret);
    const node = new RegistryNodeAssembly(
      settings,
      key,
      nodeDialers(options, tlsDialer),
    );
    const warning = insecureWarning(settings.exposure);
    if (warning !== null) settings.log(`${settings.id}: ${warning}`, "warn");
    await node.#openLog();
    await node.#loadAdminToken();
    await node.#connectPeers();
    await node.#listen(serve);
    await node.#serveMetrics();
    await node.#serveDashboard();
    node.#startDuties();
    return node;
  }

  private constructor(
    settings: NodeSettings,
    key: ClusterKey,
    dialers: NodeDialers,
  ) {
    this.#dialers = dialers;
    const { id, peers, log } = settings;
    this.#settings = settings;
    this.#metrics = new NodeMetrics(id);
    this.#key = key;
    this.#directory = new PeerDirectory(id, peers);
    this.#checker = new HealthChecker({
      dialer: dialers.client,
      propose: (command) =>
        this.raft.propose(encodeCommand(command), { timeoutMs: 3000 }),
      maxConcurrentProbes: settings.options.maxConcurrentProbes,
      log,
    });
    this.#replica = new Replica(settings, this.#checker);
    this.#membership = new Membership(id, this.#directory, log);
    this.#leadership = new Leadership({
      id,
      raft: () => this.#raft,
      replica: this.#replica,
      checker: this.#checker,
      membership: this.#membership,
      peers: () => this.#directory.ids.filter((peer) => peer !== id),
      send: (peer, sync) =>
        this.transport.notify(
          peer,
          LEASE_SYNC_METHOD,
          sync as unknown as Record<string, unknown>,
        ),
      logRole: roleLogger(id, this.#directory, log),
      log,
      bootstrapToken: () => this.#bootstrapToken(),
    });
    this.#peerUrl = peers[id];
    this.#dashboard = new Dashboard({
      status: () => this.status(),
      progress: () => this.raft.progress(),
      lastIndex: () => this.raft.status.lastIndex,
      state: this.#replica.state,
      leases: this.#replica.leases,
      authEnforced: () =>
        settings.options.auth === true || this.#replica.state.authEnabled,
    });
  }

  /**
   * Checks that both ports are free (nothing is written before), then
   * opens the data folder and replays the log into the replica.
   */
  async #openLog(): Promise<void> {
    const { options, listen, peerListen } = this.#settings;
    portsFree([["client", listen], ["peer", peerListen]]);
    this.#existed = await pathExists(options.dataDir);
    const snapshotEntries = options.snapshotEntries ?? 10_000;
    try {
      this.#raft = await RaftNode.start<ApplyResult>({
        id: this.id,
        peers: this.#settings.peers,
        transport: this.#raftTransport(),
        dataDir: options.dataDir,
        clusterToken: options.clusterToken,
        tickMs: this.#settings.tickMs,
        electionTicks: this.#settings.electionTicks,
        preVote: options.preVote,
        join: options.join !== undefined,
        clusterId: options.join?.clusterId,
        onConfiguration: (configuration) =>
          this.#membership.onConfiguration(configuration),
        restore: (snapshot) =>
          this.#replica.restore(snapshot, this.#raft !== undefined),
        checkSnapshot: snapshotDataProblem,
        walOptions: {
          segmentBytes: options.walSegmentBytes,
          onSync: (ms) =>
            this.#metrics.observe(
              "rafter_wal_fsync_seconds",
              "Time of each fdatasync of the write-ahead log, seconds.",
              {},
              ms / 1000,
            ),
        },
        snapshot: {
          take: () => this.#replica.snapshotJson(),
          everyEntries: snapshotEntries,
          growthFraction: options.snapshotGrowthFraction ??
            (snapshotEntries === 10_000 ? 0.5 : 0),
          trailingEntries: options.snapshotTrailingEntries ??
            Math.min(5_000, snapshotEntries),
        },
        apply: (entry) => {
          const result = this.#replica.apply(entry);
          this.#dashboard.changed();
          return result;
        },
        onSnapshot: (snapshot) => this.#metrics.snapshotSaved(snapshot),
        onProposal: (outcome, ms) => {
          this.#metrics.count(
            "rafter_raft_proposals_total",
            "Entries this node proposed, by outcome (applied or failed).",
            { outcome },
          );
          if (outcome === "applied") {
            this.#metrics.observe(
              "rafter_raft_proposal_seconds",
              "Time from proposing an entry to applying it on this node, seconds (the node applies an entry in the step it learns it is committed, so this is also the commit latency).",
              {},
              ms / 1000,
            );
          }
        },
        onSoftState: (soft) => {
          if (soft.leader !== null && soft.leader !== this.#lastLeader) {
            this.#metrics.count(
              "rafter_raft_leader_changes_total",
              "Times this node learnt of a new leader.",
            );
          }
          if (soft.leader !== null) this.#lastLeader = soft.leader;
          this.#leadership.onSoftState(soft);
          this.#dashboard.changed();
        },
        onFatal: options.onFatal,
      });
    } catch (error) {
      // (A folder another process created meanwhile and holds is its own.)
      if (!(error instanceof DataDirInUseError)) await this.#forget();
      throw error;
    }
    const { walDir, lastIndex, snapshotIndex, repairedBytes } =
      this.#raft.recovery;
    this.#settings.log(
      `${this.id}: write-ahead log ${walDir} recovered up to index ${lastIndex}${
        snapshotIndex > 0 ? ` (snapshot at ${snapshotIndex})` : ""
      }${
        repairedBytes === 0
          ? ""
          : `; cut a torn tail of ${repairedBytes} bytes (a write a crash or power loss interrupted; ` +
            `none of it was acknowledged), the rest comes from the leader`
      }`,
      repairedBytes === 0 ? "info" : "warn",
    );
  }

  /**
   * Loads (or makes) the bootstrap admin token of a node that bootstraps
   * the cluster, while the cluster's access control is not bootstrapped
   * yet; logs whether auth is on and where the admin token is.
   */
  async #loadAdminToken(): Promise<void> {
    const { options, id, log } = this.#settings;
    const path = adminTokenFileOf(options);
    const state = this.#replica.state;
    if (options.join === undefined && !state.bootstrapped) {
      try {
        this.#adminToken = await loadAdminToken(path);
      } catch (error) {
        await this.raft.stop();
        await this.#forget();
        throw error;
      }
    }
    const enforced = options.auth === true
      ? "on (--auth)"
      : state.authEnabled
      ? "on (enabled in the registry)"
      : "off (anyone may call; rafter auth enable, or --auth, turns it on)";
    // A cluster bootstrapped before: name the file only if it is here (a
    // node with another secret folder, or of a restored cluster, has none).
    const here = state.bootstrapped && this.#adminToken === null &&
      await Deno.stat(path).then((info) => info.isFile, () => false);
    const where = this.#adminToken !== null
      ? `the bootstrap admin token is in ${path}${
        this.#adminToken.created ? " (new)" : ""
      }`
      : here
      ? `the cluster's bootstrap admin token was made before; it is in ${path}`
      : state.bootstrapped
      ? `the cluster's bootstrap admin token was made before, by the node that bootstrapped it (its --admin-token-file; there is none at ${path} here); a cluster restored from a snapshot keeps the tokens it had`
      : "this node joins: it makes no admin token";
    log(`${id}: auth is ${enforced}; ${where}`);
  }

  /** The token the first leader records, or null. */
  #bootstrapToken(): BootstrapToken | null {
    const token = this.#adminToken;
    if (token === null) return null;
    return {
      tokenId: token.tokenId,
      hash: token.hash,
      path: token.path,
      enable: this.#settings.options.auth === true,
    };
  }

  /**
   * The Raft node's transport. The peer connections need the cluster id,
   * known once the data folder is open: until then the Raft node's
   * messages are dropped (Raft resends).
   */
  #raftTransport(): RaftTransport {
    const { lingerMs } = this.#settings;
    return {
      send: (messages) => this.#transport?.send(messages),
      close: () => this.#transport?.close(),
      updateMembers: (members) =>
        this.#transport?.updateMembers(members, { lingerMs }),
      onConnectionLost: (listener) => void this.#lostListeners.push(listener),
    };
  }

  /** Reads the cluster id and dials the members the log knows. */
  async #connectPeers(): Promise<void> {
    const { id, peers, options, lingerMs, tickMs, electionTicks, log } =
      this.#settings;
    const raft = this.raft;
    try {
      this.#clusterId = (await readDataDirMeta(options.dataDir))!.clusterId;
      const transport = new PeerTransport({
        dialer: this.#dialers.peer,
        requirePeerCertificates: options.peerTls !== undefined,
        id,
        peers,
        key: this.#key,
        clusterId: this.#clusterId,
        directory: this.#directory,
        clientUrl: () => this.#directory.clientUrl(id),
        onPingAnswered: (peer, ms) => this.#metrics.pingAnswered(peer, ms),
      });
      this.#transport = transport;
      transport.onConnectionLost((peer) => {
        const soft = this.#leadership.lastSoft;
        if (soft?.role === "follower" && soft.leader === peer) {
          log(
            `${id}: the connection to leader ${peer} ended (its process exited?); standing for election within ${
              Math.ceil(electionTicks / 2) * tickMs
            } ms unless another node still hears it`,
          );
        }
        for (const listener of this.#lostListeners) listener(peer);
      });
      // The members recovered from the log (restart), not only the
      // bootstrap list.
      const current = raft.configuration;
      transport.updateMembers(
        current.voters.length === 0 ? peers : peerUrlsOf(current, peers),
        { lingerMs },
      );
      this.#membership.onConfiguration(current);
    } catch (error) {
      await raft.stop();
      await this.#forget();
      throw error;
    }
  }

  /** Serves the client port, then the peer port. */
  async #listen(serve: ServeFunction): Promise<void> {
    const { id, listen, peerListen, options, maxFrameBytes, log } =
      this.#settings;
    const directory = this.#directory;
    try {
      const server = listening("client", listen, () =>
        serve({
          hostname: listen.hostname,
          port: listen.port,
          advertise: options.advertise,
          maxFrameBytes,
          tls: options.tls === undefined ? undefined : {
            ...options.tls,
            onReload: (why) =>
              log(`${id}: reloaded the client port's TLS certificate (${why})`),
            onError: (error) =>
              log(`${id}: client port: ${error.message}`, "warn"),
          },
          methods: this.#instrumented(registryMethods(this.#serviceContext())),
          onCall: this.#metrics.onCall,
        }));
      this.#server = server;
      directory.setClientUrl(id, server.url);
      this.#peerServer = listening(
        "peer",
        peerListen,
        () =>
          servePeersOn(serve, {
            serveOptions: options.peerTls === undefined ? undefined : {
              tls: {
                ...options.peerTls,
                clientCert: "require",
                onReload: (why) =>
                  log(
                    `${id}: reloaded the peer port's TLS certificate (${why})`,
                  ),
                onError: (error) =>
                  log(`${id}: peer port: ${error.message}`, "warn"),
              },
            },
            requirePeerCertificates: options.peerTls !== undefined,
            hostname: peerListen.hostname,
            port: peerListen.port,
            maxFrameBytes,
            id,
            key: this.#key,
            clusterId: this.#clusterId,
            directory,
            clientUrl: () => directory.clientUrl(id),
            onStep: (messages) => this.raft.step(messages),
            onNewPeer: (peer, peerUrl) =>
              this.#membership.admitPeer(this.transport, peer, peerUrl),
            handlers: {
              [MEMBER_REMOVED_METHOD]: (params, from) =>
                this.#membership.onRemovedNotice(params, from, this.raft),
              [LEASE_SYNC_METHOD]: (params, from) =>
                this.#leadership.onLeaseSync(params, from),
            },
            // Refused connections and dropped messages.
            log: (line, level) => log(line, level ?? "warn"),
          }),
      );
    } catch (error) {
      this.watches.close();
      await this.#server?.close();
      await this.raft.stop();
      // A port taken meanwhile: leave no folder this start made.
      await this.#forget();
      throw error;
    }
    this.#peerUrl = ownPeerUrl(this.#settings, this.#peerServer);
  }

  /** Counts each session's calls in the node's metrics. */
  #instrumented(
    methods: ReturnType<typeof registryMethods>,
  ): ReturnType<typeof registryMethods> {
    return (session) => this.#metrics.instrument(session, methods(session));
  }

  /**
   * Serves `GET /metrics` when `metricsListen` is set; logs where (and a
   * warning for a non-loopback address). A failure stops what started.
   */
  async #serveMetrics(): Promise<void> {
    const { id, options, log } = this.#settings;
    const address = options.metricsListen;
    if (address === undefined) return;
    const warning = metricsWarning(address);
    if (warning !== null) log(`${id}: ${warning}`, "warn");
    try {
      this.#metricsServer = serveMetrics(
        address,
        () => this.metricsText(),
        (request) => this.#dashboard.handle(request),
      );
    } catch (error) {
      await this.#undoListening();
      throw new Error(
        `cannot serve metrics on ${address.hostname}:${address.port} (--metrics-listen): ${
          (error as Error).message
        }; pick a free port, or leave the option out`,
      );
    }
    this.#metrics.startLagProbe();
    log(`${id}: metrics on ${this.#metricsServer.url}`);
    log(`${id}: dashboard on ${new URL("/", this.#metricsServer.url)}`);
  }

  /**
   * Serves the dashboard alone when `dashboardListen` is set (it is also
   * at `/` of the metrics port); a failure stops what started.
   */
  async #serveDashboard(): Promise<void> {
    const { id, options, log } = this.#settings;
    const address = options.dashboardListen;
    if (address === undefined) return;
    const warning = dashboardWarning(address);
    if (warning !== null) log(`${id}: ${warning}`, "warn");
    try {
      this.#dashboardServer = serveDashboard(address, this.#dashboard);
    } catch (error) {
      await this.#undoListening();
      throw new Error(
        `cannot serve the dashboard on ${address.hostname}:${address.port} (--dashboard-listen): ${
          (error as Error).message
        }; pick a free port, or leave the option out`,
      );
    }
    log(`${id}: dashboard on ${this.#dashboardServer.url}`);
  }

  /**
   * Undoes a start that failed after the client and peer ports listen:
   * stops them, the metrics, Raft, and leaves no folder this start made.
   */
  async #undoListening(): Promise<void> {
    this.watches.close();
    await this.server.close();
    await this.peerServer.close();
    this.#metrics.stop();
    await this.#metricsServer?.close();
    await this.raft.stop();
    await this.#forget();
  }

  /** The node's metrics in the Prometheus text format (what a scrape gets). */
  metricsText(): string {
    return this.#metrics.render(() =>
      gaugesOf({
        status: this.status(),
        names: this.state.nameCount,
        bindings: this.state.bindingCount,
        openConnections: this.#metrics.openConnections,
        leasesExpired: this.state.leasesExpired,
        events: this.#replica.eventsApplied,
        eventLoopLagSeconds: this.#metrics.takeMaxLagSeconds(),
        snapshotBytes: this.#metrics.snapshotBytes,
      })
    );
  }

  /** What the registry service (`registry.*`, `lease.*`) works with. */
  #serviceContext(): RegistryContext {
    const { minTtlMs, electionTimeoutMs, options } = this.#settings;
    return {
      raft: this.raft,
      state: this.state,
      leases: this.leases,
      watches: this.watches,
      local: this.local,
      leaderReady: () => this.#leadership.ready(),
      clientUrlOf: (member) => this.#directory.clientUrl(member),
      status: () => this.status(),
      clusterId: this.#clusterId,
      promoteWhenCaughtUp: (member) =>
        this.#membership.promoteWhenCaughtUp.add(member),
      memberRemoved: (member) => {
        this.transport.notify(member, MEMBER_REMOVED_METHOD, {
          term: this.raft.status.term,
        });
      },
      nextSoftState: (timeoutMs) => this.#leadership.nextSoftState(timeoutMs),
      quorumProblem: () => quorumProblem(this.#directory.status()),
      takeSnapshot: () => this.#replica.snapshotTaken(),
      minTtlMs,
      electionTimeoutMs,
      auth: options.auth === true,
      adminTokenFile: adminTokenFileOf(options),
      maxBindingsPerLease: options.maxBindingsPerLease,
      maxTokens: options.maxTokens,
      authTimeoutMs: options.authTimeoutMs,
    };
  }

  /** Dials the peers and starts the tick of the leader's duties. */
  #startDuties(): void {
    this.transport.start();
    this.#dutyTimer = setInterval(
      () => this.#leadership.tick(),
      this.#settings.tickMs,
    );
  }

  /** After a failed start: removes the data folder if this start made it. */
  async #forget(): Promise<void> {
    if (!this.#existed) {
      await Deno.remove(this.#settings.options.dataDir, { recursive: true })
        .catch(() => {});
    }
  }

  get id(): string {
    return this.#settings.id;
  }

  get clusterId(): string {
    return this.#clusterId;
  }

  get url(): string {
    return this.server.url;
  }

  get peerUrl(): string {
    return this.#peerUrl;
  }

  get minTtlMs(): number {
    return this.#settings.minTtlMs;
  }

  get raft(): RaftNode<ApplyResult> {
    return this.#raft!;
  }

  get state(): Replica["state"] {
    return this.#replica.state;
  }

  get leases(): Replica["leases"] {
    return this.#replica.leases;
  }

  get watches(): Replica["watches"] {
    return this.#replica.watches;
  }

  get local(): Replica["local"] {
    return this.#replica.local;
  }

  get server(): RpcServer {
    return this.#server!;
  }

  get peerServer(): PeerServer {
    return this.#peerServer!;
  }

  get transport(): PeerTransport {
    return this.#transport!;
  }

  status(): RegistryStatus {
    return statusOf({
      settings: this.#settings,
      directory: this.#directory,
      peerUrl: this.#peerUrl,
      raft: this.raft.status,
      removed: this.#membership.removed,
      state: this.state,
      watches: this.watches,
      peerServer: this.#peerServer?.acceptor.stats ?? null,
      peerTransport: this.#transport?.stats ?? null,
      raftStats: this.raft.stats,
    });
  }

  snapshot(): RegistryNodeSnapshot {
    return this.#replica.snapshotAt(this.raft.status.appliedIndex);
  }

  async stop(
    options: { graceMs?: number; handOver?: boolean } = {},
  ): Promise<void> {
    clearInterval(this.#dutyTimer);
    this.#replica.stopFanOut();
    const raft = this.raft;
    if (
      options.handOver && this.#settings.multiNode &&
      raft.status.role === "leader"
    ) {
      await this.#handOver();
    }
    this.#checker.stop();
    this.watches.close();
    if (options.graceMs !== undefined) {
      await this.server.drain(options.graceMs);
    }
    await this.server.close();
    await this.peerServer.close();
    this.#metrics.stop();
    // Open event streams would hold the HTTP servers' shutdown.
    this.#dashboard.close();
    await this.#metricsServer?.close();
    await this.#dashboardServer?.close();
    await raft.stop();
  }

  /**
   * Hands leadership to the most up-to-date follower (Raft dissertation
   * §3.10), waiting up to two election timeouts; logs how it went.
   */
  async #handOver(): Promise<void> {
    const { id, electionTimeoutMs, log } = this.#settings;
    const started = performance.now();
    try {
      const next = await this.raft.transferLeadership({
        timeoutMs: 2 * electionTimeoutMs,
      });
      log(
        `${id}: handed leadership to ${next} in ${
          Math.round(performance.now() - started)
        } ms before stopping`,
      );
    } catch (error) {
      log(
        `${id}: leadership hand-over failed (${
          (error as Error).message
        }); stopping anyway, the others elect a leader after an election timeout`,
        "warn",
      );
    }
  }
}

/** Where a node's bootstrap admin token file is. */
function adminTokenFileOf(options: RegistryNodeOptions): string {
  return options.adminTokenFile ?? `${options.dataDir}/admin_token`;
}
