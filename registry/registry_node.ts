/**
 * One running registry node: a Raft node whose state machine is the
 * registry, on two TCP ports. The client port serves the registry API and
 * `rpc.ping`; the peer port serves only peers that prove the cluster
 * secret (the handshake of `raft/peer_auth.ts`): `raft.step` and the
 * registry's own peer methods.
 *
 * @module
 */

import { type RpcServer, serve } from "../adapter/deno/serve.ts";
import {
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  parseTcpUrl,
  type TcpAddress,
} from "../rpc/transport/transport.ts";
import { peerUrlsOf, RaftNode, type RaftTransport } from "../raft/node.ts";
import type { Configuration } from "../raft/configuration.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import { DataDirInUseError } from "../raft/dir_lock.ts";
import type { SoftState } from "../raft/core.ts";
import type { Snapshot } from "../raft/types.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { PeerDirectory } from "../raft/peer_directory.ts";
import { type PeerServer, servePeers } from "../raft/deno.ts";
import { PeerTransport } from "../raft/peer_transport.ts";
import {
  type MemberStatus,
  PEER_PORT_OFFSET,
  type RegistryStatus,
} from "../protocol/registry.ts";
import { registryMethods } from "./service.ts";
import {
  type ApplyResult,
  encodeCommand,
  type RegistrySnapshot,
  RegistryState,
} from "./state.ts";
import {
  LEASE_SYNC_METHOD,
  LeaseKeeper,
  type LeaseSync,
  leaseSyncProblem,
} from "./lease_keeper.ts";
import { WatchHub, type WatchHubOptions } from "./watch_hub.ts";
import { LocalArea } from "./local_area.ts";
import { HealthChecker } from "./_health_checker.ts";
import { listening, pathExists, portsFree } from "./_start_checks.ts";

/**
 * A registry snapshot as a node takes it: the Raft index it reflects, the
 * state (a deterministic function of the log up to `index`), and each
 * lease's remaining time, ms, when it was taken (volatile: not part of the
 * deterministic state).
 */
export interface RegistryNodeSnapshot {
  /** The last Raft log index applied to `state`. */
  index: number;
  /** The replicated state. */
  state: RegistrySnapshot;
  /** `[leaseId, remainingMs]` for every lease. */
  leaseRemainingMs: [string, number][];
}

/**
 * Rebuilds a node's registry from a {@link RegistryNodeSnapshot}: the state,
 * and lease timing that gives each lease the time it had left (but at
 * least `minRemainingMs`, so its server has time to find the new node).
 *
 * @throws {TypeError} when `snapshot.state` is not a registry snapshot.
 *
 * @example
 * ```ts
 * import { RegistryState } from "./state.ts";
 * import { restoreRegistrySnapshot } from "./registry_node.ts";
 * const { state, leases } = restoreRegistrySnapshot(
 *   { index: 1, state: new RegistryState().snapshot(), leaseRemainingMs: [] },
 *   { tickMs: 100, minRemainingMs: 1500 },
 * );
 * console.log(state.revision, leases.size); // 0 0
 * ```
 */
export function restoreRegistrySnapshot(
  snapshot: RegistryNodeSnapshot,
  options: { tickMs: number; minRemainingMs: number; historyEvents?: number },
): { state: RegistryState; leases: LeaseKeeper } {
  const state = RegistryState.restore(snapshot.state, {
    historyEvents: options.historyEvents,
  });
  const leases = new LeaseKeeper({ tickMs: options.tickMs });
  for (const { id, ttlMs } of state.leases()) leases.granted(id, ttlMs);
  leases.restoreTimes(snapshot.leaseRemainingMs, options.minRemainingMs);
  return { state, leases };
}

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
  /** Limits of the watches this node serves. */
  watch?: Omit<WatchHubOptions, "now">;
  /**
   * Take a snapshot of the registry (its state and the leases' remaining
   * times, {@link RegistryNode.snapshot}) and compact the log every this
   * many applied entries (Raft paper §7). @default 10_000
   */
  snapshotEntries?: number;
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
  /** The id of its cluster, as its data folder records it (16 hex digits). */
  readonly clusterId: string;
  /** Its client URL (actual port, or the advertised address). */
  readonly url: string;
  /** Its peer URL: its `peers` entry, or the peer port listened on. */
  readonly peerUrl: string;
  /** The Raft driver. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated registry state on this node. */
  readonly state: RegistryState;
  /** Lease timing and reported loads on this node. */
  readonly leases: LeaseKeeper;
  /** The watches this node serves. */
  readonly watches: WatchHub;
  /** This node's local-area bindings. */
  readonly local: LocalArea;
  /** Smallest lease TTL this node accepts, ms (1.5 × the election timeout). */
  readonly minTtlMs: number;
  /**
   * The registry at this node's applied index, for log compaction: the
   * deterministic state, and the leases' remaining times as this node times
   * them (hints for the node that restores it; see
   * {@link restoreRegistrySnapshot}).
   */
  snapshot(): RegistryNodeSnapshot;
  /** The client port's RPC server. */
  readonly server: RpcServer;
  /** The peer port. */
  readonly peerServer: PeerServer;
  /** The authenticated connections to the peers (`notify` for peer messages). */
  readonly transport: PeerTransport;
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

/**
 * Starts a registry node, in this order: checks the options, checks that
 * both ports are free, opens `dataDir` (creating it if missing) and reloads
 * its log, then serves
 * `registry.*` and `rpc.ping` on the client port, the peer protocol on the
 * peer port, and connects to its peers.
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
  const key = options.clusterSecret === undefined
    ? await ClusterKey.random()
    : await ClusterKey.fromSecret(options.clusterSecret);

  const electionTimeoutMs = tickMs * electionTicks;
  const minTtlMs = Math.ceil(1.5 * electionTimeoutMs);
  const state = new RegistryState({ historyEvents: options.historyEvents });
  const leases = new LeaseKeeper({ tickMs });
  const local = new LocalArea();
  const watches = new WatchHub(state, options.watch);
  const directory = new PeerDirectory(id, peers);
  // Nothing is written before both ports are known to be free.
  portsFree([["client", listen], ["peer", peerListen]]);
  const existed = await pathExists(options.dataDir);
  // The peer connections need the cluster id, known once the data folder
  // is open: until then the Raft node's messages are dropped (Raft resends).
  const late: { transport?: PeerTransport } = {};
  // The Raft node's listener, handed to the transport once it exists.
  const lostListeners: ((peer: string) => void)[] = [];
  // A removed member's link stays open a little for the leader's "you
  // were removed" notice (registry.memberRemove sends it once committed).
  const lingerMs = 2 * electionTicks * tickMs;
  const raftTransport: RaftTransport = {
    send: (messages) => late.transport?.send(messages),
    close: () => late.transport?.close(),
    updateMembers: (members) =>
      late.transport?.updateMembers(members, { lingerMs }),
    onConnectionLost: (listener) => void lostListeners.push(listener),
  };
  /** After a failed start: removes the data folder if this start made it. */
  const forget = async () => {
    if (!existed) {
      await Deno.remove(options.dataDir, { recursive: true }).catch(() => {});
    }
  };
  const logRole = roleLogger(id, directory, log);
  // Watch events go out after the writer's answer (a timer runs after the
  // microtasks that send it), once per batch of applied entries.
  let fanOutTimer: ReturnType<typeof setTimeout> | undefined;
  const fanOut = () => {
    fanOutTimer ??= setTimeout(() => {
      fanOutTimer = undefined;
      watches.changed();
    }, 0);
  };
  // Leadership as the registry sees it: the index of this term's first
  // entry, applied before this node answers keep-alives (so it knows every
  // lease expiry an earlier leader committed).
  let leading = false;
  let readyIndex = Infinity;
  // Set once RaftNode.start resolves; the callbacks below need it.
  const started: { raft?: RaftNode<ApplyResult> } = {};
  const checker = new HealthChecker({
    propose: (command) =>
      started.raft!.propose(encodeCommand(command), { timeoutMs: 3000 }),
    maxConcurrentProbes: options.maxConcurrentProbes,
    log,
  });
  let lastSoft: SoftState | null = null;
  // Requests waiting for the next change of term, role or leader.
  const softWaiters = new Set<() => void>();
  const nextSoftState = (timeoutMs: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        softWaiters.delete(done);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      softWaiters.add(done);
    });
  const onSoftState = (soft: SoftState): void => {
    if (started.raft === undefined) {
      // Reported before start() returned: handle it once it has.
      queueMicrotask(() => onSoftState(soft));
      return;
    }
    lastSoft = soft;
    for (const wake of [...softWaiters]) wake();
    logRole(soft);
    if (soft.role === "leader" && !leading) {
      leading = true;
      readyIndex = started.raft.status.lastIndex;
      const gap = leases.becomeLeader();
      if (leases.size > 0) {
        log(
          `${id}: timing ${leases.size} lease(s) from the last renewals the old leader reported; ${
            Math.round(gap)
          } ms without a leader are not counted against them`,
        );
      }
      checker.update(state.checkedBindings());
      checker.start();
    } else if (soft.role !== "leader" && leading) {
      leading = false;
      readyIndex = Infinity;
      leases.stopLeading();
      checker.stop();
    }
  };
  // Learners the leader promotes once caught up (added by --join).
  const promoteWhenCaughtUp = new Set<string>();
  // Set when the leader told this node it was removed (a removed follower
  // gets no more appends, so its own log may never say so).
  let removedNotice: { leader: string; term: number } | null = null;
  const onConfiguration = (configuration: Configuration) => {
    for (
      const [member, url] of Object.entries(configuration.clientUrls ?? {})
    ) {
      if (directory.clientUrl(member) === null) {
        directory.setClientUrl(member, url);
      }
    }
    for (const member of promoteWhenCaughtUp) {
      if (!configuration.learners.includes(member)) {
        promoteWhenCaughtUp.delete(member);
      }
    }
    if (
      configuration.voters.includes(id) || configuration.learners.includes(id)
    ) {
      removedNotice = null;
    }
    log(
      `${id}: configuration now voters [${configuration.voters.join(", ")}]${
        configuration.learners.length > 0
          ? `, learners [${configuration.learners.join(", ")}]`
          : ""
      }`,
    );
  };
  // The last registry entry applied (a snapshot's, after a restore).
  let lastApplied = 0;
  const snapshotOf = (index: number): RegistryNodeSnapshot => ({
    index,
    state: state.snapshot(),
    leaseRemainingMs: leases.remainingTimes(),
  });
  /**
   * Replaces the registry, in place, with a Raft snapshot's (at start, or
   * installed from the leader): state, lease timing (each lease keeps the
   * time it had left, at least minTtlMs), local bindings of leases gone.
   */
  const restore = (snapshot: Snapshot): void => {
    const taken = JSON.parse(snapshot.data) as RegistryNodeSnapshot;
    state.load(taken.state);
    const kept = new Set(state.leases().map((lease) => lease.id));
    for (const [lease] of leases.remainingTimes()) {
      leases.removed(lease);
      if (!kept.has(lease)) local.leaseEnded(lease);
    }
    for (const lease of state.leases()) leases.granted(lease.id, lease.ttlMs);
    leases.restoreTimes(taken.leaseRemainingMs, minTtlMs);
    lastApplied = snapshot.index;
    checker.update(state.checkedBindings());
    fanOut();
    log(
      `${id}: ${
        started.raft === undefined
          ? "loaded the snapshot"
          : "installed a snapshot from the leader"
      } at index ${snapshot.index} (revision ${state.revision}, ${state.leaseCount} lease(s))`,
    );
  };
  const snapshotEntries = options.snapshotEntries ?? 10_000;
  try {
    started.raft = await RaftNode.start<ApplyResult>({
      id,
      peers,
      transport: raftTransport,
      dataDir: options.dataDir,
      clusterToken: options.clusterToken,
      tickMs,
      electionTicks,
      preVote: options.preVote,
      join: options.join !== undefined,
      clusterId: options.join?.clusterId,
      onConfiguration: (configuration) => onConfiguration(configuration),
      restore,
      walOptions: options.walSegmentBytes === undefined
        ? undefined
        : { segmentBytes: options.walSegmentBytes },
      snapshot: {
        take: () =>
          state.snapshotJson((taken) => ({
            index: lastApplied,
            state: taken,
            leaseRemainingMs: leases.remainingTimes(),
          })),
        everyEntries: snapshotEntries,
        trailingEntries: options.snapshotTrailingEntries ??
          Math.min(5_000, snapshotEntries),
      },
      apply: (entry) => {
        lastApplied = entry.index;
        const outcome = state.apply(entry.data);
        const change = outcome.change;
        if (change !== null) {
          for (const lease of change.granted) {
            leases.granted(lease.id, lease.ttlMs);
          }
          for (const lease of change.removed) {
            leases.removed(lease);
            local.leaseEnded(lease);
          }
          if (change.events.length > 0) {
            fanOut();
            if (change.events.some((e) => e.endpoint.check !== null)) {
              checker.update(state.checkedBindings());
            }
          }
        }
        return outcome.result;
      },
      onSoftState,
      onFatal: options.onFatal,
    });
  } catch (error) {
    // (A folder another process created meanwhile and holds is its own.)
    if (!(error instanceof DataDirInUseError)) await forget();
    throw error;
  }
  const node = started.raft;
  let transport: PeerTransport;
  let clusterId: string;
  try {
    clusterId = (await readDataDirMeta(options.dataDir))!.clusterId;
    transport = new PeerTransport({
      id,
      peers,
      key,
      clusterId,
      directory,
      clientUrl: () => directory.clientUrl(id),
    });
    late.transport = transport;
    transport.onConnectionLost((peer) => {
      if (lastSoft?.role === "follower" && lastSoft.leader === peer) {
        log(
          `${id}: the connection to leader ${peer} ended (its process exited?); standing for election within ${
            Math.ceil(electionTicks / 2) * tickMs
          } ms unless another node still hears it`,
        );
      }
      for (const listener of lostListeners) listener(peer);
    });
    // The members recovered from the log (restart), not only the bootstrap list.
    const current = node.configuration;
    transport.updateMembers(
      current.voters.length === 0 ? peers : peerUrlsOf(current, peers),
      { lingerMs },
    );
    onConfiguration(current);
  } catch (error) {
    await node.stop();
    await forget();
    throw error;
  }
  const leaderReady = () => leading && node.status.appliedIndex >= readyIndex;
  // A single node's peer port may be a free one, known once it listens.
  let peerUrl = peers[id];
  const members = (): MemberStatus[] => {
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
  };
  const status = (): RegistryStatus => {
    const raftStatus = node.status;
    return {
      id,
      url: directory.clientUrl(id) ?? "",
      peerUrl,
      term: raftStatus.term,
      role: raftStatus.role,
      kind: !raftStatus.member || removedNotice !== null
        ? null
        : raftStatus.learner
        ? "learner"
        : "voter",
      leader: raftStatus.leader,
      leaderUrl: raftStatus.leader === null
        ? null
        : directory.clientUrl(raftStatus.leader),
      commitIndex: raftStatus.commitIndex,
      appliedIndex: raftStatus.appliedIndex,
      snapshotIndex: raftStatus.snapshotIndex,
      revision: state.revision,
      compactRevision: state.compactRevision,
      leases: state.leaseCount,
      watchers: watches.count,
      electionTimeoutMs,
      minTtlMs,
      members: members(),
    };
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
          raft: node,
          state,
          leases,
          watches,
          local,
          leaderReady,
          clientUrlOf: (member) => directory.clientUrl(member),
          status,
          clusterId,
          promoteWhenCaughtUp: (member) => promoteWhenCaughtUp.add(member),
          memberRemoved: (member) => {
            transport.notify(member, MEMBER_REMOVED_METHOD, {
              term: node.status.term,
            });
          },
          nextSoftState,
          quorumProblem: () => quorumProblem(directory.status()),
          minTtlMs,
          electionTimeoutMs,
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
        clusterId,
        directory,
        clientUrl: () => directory.clientUrl(id),
        onStep: (messages) => node.step(messages),
        // A member added by a change this node has not seen yet (it is
        // behind, and that member may lead now): answer it, or this node
        // could never catch up.
        onNewPeer: (peer, peerUrl) => {
          const admitted = transport.admitPeer(peer, peerUrl);
          if (admitted) {
            log(
              `${id}: admitted peer ${peer} (${peerUrl}), not in this node's configuration yet`,
            );
          }
          return admitted;
        },
        handlers: {
          [MEMBER_REMOVED_METHOD]: (params, from) => {
            const term = (params as { term?: unknown }).term;
            const raftStatus = node.status;
            if (
              typeof term === "number" && from === raftStatus.leader &&
              term >= raftStatus.term
            ) {
              removedNotice = { leader: from, term };
              log(
                `${id}: removed from the cluster by leader ${from} in term ${term}; this node takes no part any more: stop it`,
              );
            }
          },
          [LEASE_SYNC_METHOD]: (params, from) => {
            const problem = leaseSyncProblem(params);
            const raftStatus = node.status;
            const sync = params as LeaseSync;
            if (
              problem === null && raftStatus.role !== "leader" &&
              sync.term === raftStatus.term && from === raftStatus.leader
            ) {
              leases.absorb(sync);
            }
          },
        },
        log,
      }));
  } catch (error) {
    watches.close();
    await server?.close();
    await node.stop();
    // A port taken meanwhile: leave no folder this start made.
    await forget();
    throw error;
  }
  peerUrl = options.peers?.[id] ??
    formatTcpUrl(advertisedPeer(peerServer, advertised));
  transport.start();
  const clientServer = server;
  const peerPort = peerServer;
  const duties = new LeaderDuties({
    id,
    raft: node,
    leases,
    checker,
    peers: () => directory.ids.filter((peer) => peer !== id),
    promoteWhenCaughtUp,
    send: (peer, sync) =>
      transport.notify(
        peer,
        LEASE_SYNC_METHOD,
        sync as unknown as Record<string, unknown>,
      ),
    leading: () => leading,
    leaderReady,
    log,
  });
  const dutyTimer = setInterval(() => {
    duties.tick();
    // A pre-candidate's term stays put, so no new soft state says that its
    // unreachable peers changed: look again (the logger rate-limits).
    if (lastSoft?.preCandidate) logRole(lastSoft);
  }, tickMs);
  return {
    id,
    clusterId,
    url: clientServer.url,
    peerUrl,
    raft: node,
    state,
    leases,
    watches,
    local,
    minTtlMs,
    snapshot: () => snapshotOf(node.status.appliedIndex),
    server: clientServer,
    peerServer: peerPort,
    transport,
    async stop(stopOptions = {}) {
      clearInterval(dutyTimer);
      clearTimeout(fanOutTimer);
      if (
        stopOptions.handOver && multiNode && node.status.role === "leader"
      ) {
        const started = performance.now();
        try {
          const next = await node.transferLeadership({
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
          );
        }
      }
      checker.stop();
      watches.close();
      if (stopOptions.graceMs !== undefined) {
        await clientServer.drain(stopOptions.graceMs);
      }
      await clientServer.close();
      await peerPort.close();
      await node.stop();
    },
  };
}

/** The peer notification a leader sends a member it removed. */
const MEMBER_REMOVED_METHOD = "registry.memberRemoved";

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

/**
 * Why this node cannot be part of a quorum, from its view of the members:
 * "this node reaches 1 of 3 members (n2 at tcp://…: connection refused,
 * …); a 3-member registry needs 2 …", or null when it reaches a majority.
 */
function quorumProblem(
  members: ReturnType<PeerDirectory["status"]>,
): string | null {
  // A member not tried yet (just after start) may well be reachable.
  const down = members.filter((m) =>
    !m.self && !m.reachable && m.lastError !== null
  );
  const reachable = members.length - down.length;
  const needed = Math.floor(members.length / 2) + 1;
  if (reachable >= needed) return null;
  const reasons = down.map((m) => `${m.id} at ${m.peerUrl}: ${m.lastError}`)
    .join("; ");
  return `this node reaches ${reachable} of ${members.length} members (${reasons}); a ${members.length}-member registry needs ${needed} to elect a leader: start the others, or check the network between them`;
}

/** Least time between two candidate lines that say the same, ms. */
const CANDIDATE_LOG_INTERVAL_MS = 5_000;

/**
 * Logs one line per role change, e.g. "n1: follower in term 3, leader n2".
 * A candidate's (or PreVote pre-candidate's) line names the peers it cannot
 * reach and why; while neither that list nor the reasons change, it logs at
 * most once per 5 s.
 */
function roleLogger(
  id: string,
  directory: PeerDirectory,
  log: (line: string) => void,
): (soft: SoftState) => void {
  let last = { key: "", at: -Infinity };
  return (soft) => {
    if (soft.role !== "candidate" && !soft.preCandidate) {
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
    const who = soft.preCandidate ? "pre-candidate" : "candidate";
    const asking = soft.preCandidate
      ? `pre-votes for term ${soft.term + 1}`
      : "votes";
    log(
      unreachable.length === 0
        ? `${id}: ${who} in term ${soft.term}, asking for ${asking}`
        : `${id}: ${who} in term ${soft.term}; cannot reach ${key}`,
    );
  };
}

/** What the leader's periodic duties need. */
interface LeaderDutiesOptions {
  id: string;
  raft: RaftNode<ApplyResult>;
  leases: LeaseKeeper;
  checker: HealthChecker;
  /** The other members. */
  peers(): string[];
  /** Learners to promote once their match index reaches the commit index. */
  promoteWhenCaughtUp: Set<string>;
  send(peer: string, sync: LeaseSync): boolean;
  leading(): boolean;
  leaderReady(): boolean;
  log(line: string): void;
}

/** Most leases in one sync message. */
const MAX_SYNC_LEASES = 2_000;

/**
 * What the leader does every tick: credit a stall, send followers the lease
 * renewals (every tick, even when empty, so they know when they last heard
 * a leader; with a rolling slice of all leases), run the due health checks,
 * and expire the leases whose TTL passed: after confirming it still leads
 * (a ReadIndex round), it proposes their expiry as one log entry.
 */
class LeaderDuties {
  readonly #options: LeaderDutiesOptions;
  #expiring = false;
  readonly #promotion = { promoting: false };

  constructor(options: LeaderDutiesOptions) {
    this.#options = options;
  }

  #promoteCaughtUp(): void {
    promoteCaughtUp(
      this.#options.raft,
      this.#options.promoteWhenCaughtUp,
      this.#options.log,
      this.#promotion,
    );
  }

  tick(): void {
    const { raft, leases, checker } = this.#options;
    if (!this.#options.leading()) return;
    leases.tickLeader();
    const term = raft.status.term;
    const sync = leases.sync(term);
    for (const part of split(sync)) {
      for (const peer of this.#options.peers()) {
        this.#options.send(peer, part);
      }
    }
    checker.tick();
    this.#promoteCaughtUp();
    if (this.#expiring || !this.#options.leaderReady()) return;
    const due = leases.due();
    if (due.length === 0) return;
    this.#expiring = true;
    leases.markExpiring(due);
    raft.readBarrier({ timeoutMs: 2_000 })
      .then(() => {
        // Still the leader of the same term: no other leader can have
        // taken keep-alives for these leases in the meantime.
        if (!this.#options.leading() || raft.status.term !== term) {
          throw new Error("leadership changed");
        }
        this.#options.log(
          `${this.#options.id}: lease(s) ${
            due.join(", ")
          } expired; removing their bindings`,
        );
        return raft.propose(encodeCommand({ op: "leaseExpire", ids: due }), {
          timeoutMs: 3_000,
        });
      })
      .catch(() => {
        // Not committed: the next tick times them again.
      })
      .finally(() => {
        leases.unmarkExpiring(due);
        this.#expiring = false;
      });
  }
}

/**
 * The --join promotion policy (dissertation §4.2.1: a new server catches
 * up as a learner before it counts towards quorums): a learner added with
 * `promoteWhenCaughtUp` is promoted to voter once its match index reaches
 * the leader's commit index, checked on every leader tick, one change at a
 * time (a refused or failed promotion is tried again on a later tick).
 */
function promoteCaughtUp(
  raft: RaftNode<ApplyResult>,
  learners: Set<string>,
  log: (line: string) => void,
  busy: { promoting: boolean },
): void {
  if (busy.promoting || learners.size === 0) return;
  const { commitIndex, id } = raft.status;
  const progress = raft.progress();
  for (const learner of learners) {
    const known = progress.get(learner);
    if (known === undefined || !known.learner) continue;
    if (known.match < commitIndex) continue;
    busy.promoting = true;
    raft.proposeConfChange({ type: "promote", node: learner }, {
      timeoutMs: 3_000,
    }).then(
      () => {
        learners.delete(learner);
        log(
          `${id}: promoted learner ${learner} to voter (caught up at index ${known.match})`,
        );
      },
      () => {/* retried on a later tick */},
    ).finally(() => busy.promoting = false);
    return;
  }
}

/** A sync in parts of at most {@link MAX_SYNC_LEASES} leases. */
function split(sync: LeaseSync): LeaseSync[] {
  if (sync.renewed.length <= MAX_SYNC_LEASES) return [sync];
  const parts: LeaseSync[] = [];
  for (let i = 0; i < sync.renewed.length; i += MAX_SYNC_LEASES) {
    parts.push({
      term: sync.term,
      renewed: sync.renewed.slice(i, i + MAX_SYNC_LEASES),
    });
  }
  return parts;
}
