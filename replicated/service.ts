/**
 * A replicated service on one replica: the service's {@link StateMachine}
 * on a {@link RaftNode}, its peer port (the other replicas, authenticated
 * by the cluster secret), and its client port, where the service's
 * methods are JSON-RPC methods any stub can call:
 *
 * - a **write** is proposed on the leader and answered once it is
 *   committed and applied (on every replica, in log order); a follower
 *   answers `NOT_LEADER` (-32001) with the leader's id and URL in its
 *   data (it proposes nothing, so the write did not run), which the
 *   `leader()` distributor follows. While no leader is known, or the one
 *   it knew is gone, a follower waits for the election (within the call's
 *   deadline) before it answers, so a call rides through a fail-over;
 * - a **read** runs after a ReadIndex barrier (Raft dissertation §6.4) on
 *   whichever replica it reached: linearizable; a **local read** runs at
 *   once on the replica's state;
 * - `replica.status` tells the replica's role, term, leader and indexes.
 *
 * Each replica can bind itself in a Rafter registry under the service's
 * name (with its replica id as the endpoint id), so stubs find every
 * replica and follow the leader.
 *
 * @module
 */

import { RaftNode } from "../raft/node.ts";
import { RaftUnavailableError } from "../raft/driver.ts";
import { NotLeaderError, type SoftState } from "../raft/core.ts";
import { ClusterKey, type HandshakeSubject } from "../raft/peer_auth.ts";
import { LearnerPromotion } from "../raft/learner_promotion.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import { PeerDirectory } from "../raft/peer_directory.ts";
import { PeerTransport } from "../raft/peer_transport.ts";
import { peerUrlsOf } from "../raft/node.ts";
import {
  type PeerServer,
  type ServeFunction,
  servePeersOn,
} from "../raft/peer_server.ts";
import type { Message, NodeId, SnapshotPoint } from "../raft/types.ts";
import type { ConfChange } from "../raft/configuration.ts";
import type { RpcServer } from "../rpc/server/server.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import type {
  TlsClientOptions,
  TlsServerOptions,
} from "../rpc/transport/tls.ts";
import type { Dialer } from "../rpc/transport/transport.ts";
import type { Methods } from "../rpc/server/method.ts";
import { type CallContext, withContext } from "../rpc/server/method.ts";
import {
  INVALID_PARAMS,
  PERMISSION_DENIED,
  type PermissionDeniedData,
  RpcError,
} from "../rpc/errors.ts";
import {
  NOT_LEADER,
  type NotLeaderData,
  UNAVAILABLE,
} from "../protocol/registry.ts";
import {
  requestIdOf,
  type ServiceDefinition,
  snapshotProblem,
  StateMachine,
  type WriteOutcome,
} from "./machine.ts";

// A replica answers with the registry's codes: NOT_LEADER (-32001, data
// NotLeaderData: the leader's replica id and client URL), UNAVAILABLE
// (-32006), and it meets ID_IN_USE (-32015) when it binds itself.
export { NOT_LEADER, type NotLeaderData, UNAVAILABLE };

/**
 * Data of an {@link UNAVAILABLE} error: whether the write may still be
 * applied (it was proposed, and the outcome is unknown: retry it only with
 * the same `requestId`).
 */
export interface UnavailableData {
  /** `true`: it may have been applied; `false`: it was not. */
  mayHaveApplied: boolean;
}

/** What `replica.status` answers. */
export interface ReplicaStatus {
  /** This replica's id. */
  id: string;
  /** Its role in the current term. */
  role: SoftState["role"];
  /** The current term. */
  term: number;
  /** The leader's id, or null during an election. */
  leaderId: string | null;
  /** The leader's client URL, when known. */
  leaderUrl: string | null;
  /** Highest log index known committed. */
  commitIndex: number;
  /** Highest log index applied to the service's state here. */
  appliedIndex: number;
  /** Index of the newest snapshot, 0 for none. */
  snapshotIndex: number;
  /** The cluster's id (16 hex digits): what a joining replica needs. */
  clusterId: string;
  /** Every member's peer URL by id (voters and learners). */
  members: Record<string, string>;
  /** The members that are learners (catching up; promoted when caught up). */
  learners: string[];
  /**
   * Index of the log entry that made the current membership (or of this
   * replica's snapshot, when that entry is compacted; 0 for the bootstrap
   * membership): a `replica.add` or `replica.remove` proves the cluster
   * secret over it and {@link configTerm}, so its proof is good until the
   * next membership change only.
   */
  configIndex: number;
  /** Term of the entry at {@link configIndex}. */
  configTerm: number;
}

/**
 * `data` of the PERMISSION_DENIED a `replica.add` or `replica.remove`
 * gets when the membership changed since its proof was made: the current
 * one, for a proof made again.
 */
export interface MembershipChangedData extends PermissionDeniedData {
  /** `"current-membership"`: the proof must be over the current membership. */
  permission: "current-membership";
  /** The leader's {@link ReplicaStatus.configIndex} now. */
  configIndex: number;
  /** The leader's {@link ReplicaStatus.configTerm} now. */
  configTerm: number;
}

/** Dials a replica's client port (`dial` of the runtime's entry). */
export type DialFunction = (url: string) => Promise<RpcConnection>;

/** Makes a TLS dialer (the runtime entry's, e.g. `denoDialer(tls)`). */
export type TlsDialerFactory = (tls: TlsClientOptions) => Dialer;

/**
 * Where a replica binds itself: a Rafter client's `bindServer` (e.g. a
 * `connect(...)` client), under the service's name.
 */
export interface ReplicaBinding {
  /** A client with `bindServer`, such as `connect({ registry })`'s. */
  client: {
    bindServer(
      name: string,
      server: { url: string },
      options?: {
        id?: string;
        ttlMs?: number;
        zone?: string;
        attrs?: Record<string, string>;
        waitForIdMs?: number;
        onIdInUse?(error: RpcError): void;
      },
    ): Promise<{ close(): Promise<void> }>;
  };
  /** The service's name in the registry. */
  name: string;
  /** Lease TTL, ms. @default the client's default (10 s) */
  ttlMs?: number;
  /** This replica's zone (for `preferLocal` reads). */
  zone?: string;
  /** Extra attributes of the binding. */
  attrs?: Record<string, string>;
}

/** Settings of a replica. */
export interface ReplicaOptions<S> {
  /** This replica's id: a key of `peers`, and its endpoint id in the registry. */
  id: string;
  /**
   * Every replica's id → its peer URL (`tcp://host:port`), this one
   * included: the cluster's voters when the data folder is new (later, the
   * configuration in the log).
   */
  peers: Readonly<Record<string, string>>;
  /** The replica's own folder for its log and snapshots (created if missing). */
  dataDir: string;
  /**
   * The secret every replica shares (at least 32 characters): peers prove
   * it before their messages count. Keep it out of the code (an env var,
   * a file only the service's user can read).
   */
  clusterSecret: string;
  /** The service. */
  service: ServiceDefinition<S>;
  /** Client port's interface. @default "127.0.0.1" */
  hostname?: string;
  /** Client port; 0 picks a free one. @default 0 */
  port?: number;
  /**
   * TLS on the client port (`certFile`, `keyFile`; `caFile` and
   * `clientCert` to ask clients for certificates): its URL is then
   * `tls://…`. @default plain TCP
   */
  tls?: TlsServerOptions;
  /**
   * Mutual TLS between the replicas: this replica's certificate and key,
   * and the CA every replica's certificate chains to. Each replica's
   * certificate must name it (SAN `URI:rafter://member/<id>`, as `rafter
   * cert member` makes), so a certificate of the CA cannot speak for
   * another replica; the cluster secret is still proven on top.
   * @default plain TCP (peers prove the cluster secret only)
   */
  peerTls?: { certFile: string; keyFile: string; caFile: string };
  /** The CA to trust when this replica dials other replicas' `tls://` client ports (join, leave). */
  tlsCaFile?: string;
  /** Bind this replica in a Rafter registry once it serves. */
  bind?: ReplicaBinding;
  /**
   * Joins a running service (Raft dissertation §4.2.1) instead of
   * bootstrapping with `peers`: `via` are client URLs of its replicas (one
   * is enough). The replica starts with an empty log, asks the leader to
   * add it as a learner (proving the cluster secret), catches up from the
   * leader's log or snapshot, and is promoted to voter once caught up.
   * `peers` then only needs this replica's own peer URL. Ignored when the
   * data folder already belongs to the cluster (a restart).
   */
  join?: { via: readonly string[] };
  /** Take a snapshot (and compact the log) every this many entries. @default 10_000 */
  snapshotEntries?: number;
  /**
   * Log entries kept behind a snapshot, so a follower slightly behind
   * catches up from the log rather than a whole snapshot.
   * @default min(5_000, snapshotEntries)
   */
  snapshotTrailingEntries?: number;
  /** How many write request ids are remembered (see `StateMachineOptions`). @default 10_000 */
  maxRequestIds?: number;
  /** Milliseconds per Raft tick. @default 100 */
  tickMs?: number;
  /** Election timeout, ticks. @default 10 */
  electionTicks?: number;
  /** Where log lines go. @default console.error */
  log?(line: string): void;
}

/** The service a new replica joins, as a member told it. */
interface JoinTarget {
  clusterId: string;
  members: Record<string, string>;
  /** The membership it was told, which the `replica.add` proof is over. */
  point: SnapshotPoint;
  via: readonly string[];
}

/** How long a write waits for its entry to commit at most, ms. */
const MAX_PROPOSE_MS = 10_000;

/**
 * One running replica of a replicated service. Start it with
 * `startReplica` (`@rafter/rpc/replicated`).
 */
export class ReplicatedService<S> {
  /** This replica's id. */
  readonly id: string;
  readonly #options: ReplicaOptions<S>;
  readonly #machine: StateMachine<S>;
  readonly #directory: PeerDirectory;
  readonly #log: (line: string) => void;
  #raft: RaftNode<WriteOutcome | null> | undefined;
  #transport: PeerTransport | undefined;
  #peerServer: PeerServer | undefined;
  #server: RpcServer | undefined;
  #binding: { close(): Promise<void> } | undefined;
  /** Woken when the role or leader changes. */
  #softWaiters: (() => void)[] = [];
  #closed = false;
  #lastRole: SoftState["role"] | null = null;
  #lastLeader: string | null = null;
  #dial: DialFunction | undefined;
  #peerDialer: Dialer | undefined;
  #key: ClusterKey | undefined;
  #clusterId = "";
  /** Learners added through replica.add, promoted once caught up (on the leader). */
  readonly #promotion = new LearnerPromotion((learner, match) =>
    this.#log(
      `${this.id}: promoted ${learner} to voter (caught up at index ${match})`,
    )
  );
  #promoter: ReturnType<typeof setInterval> | undefined;

  /**
   * Starts a replica: reloads its log into the service's state, connects to
   * the other replicas, serves the peer port (at its URL in `peers`) and the
   * client port, then binds itself if asked.
   *
   * @throws {TypeError} when the service definition or options are wrong.
   */
  static async start<S>(
    options: ReplicaOptions<S>,
    serve: ServeFunction,
    dial?: DialFunction,
    tlsDialer?: TlsDialerFactory,
  ): Promise<ReplicatedService<S>> {
    const replica = new ReplicatedService(options);
    replica.#dial = dial;
    if (options.peerTls !== undefined) {
      if (tlsDialer === undefined) {
        throw new TypeError(
          "peerTls needs a TLS dialer: start the replica with startReplica of @rafter/rpc/replicated",
        );
      }
      const peer = tlsDialer({ ...options.peerTls });
      // Peer URLs are written tcp:// in peers and the log: dial them with TLS.
      replica.#peerDialer = (url, dialOptions) =>
        peer(url.replace(/^tcp:\/\//, "tls://"), dialOptions);
    }
    try {
      const key = await ClusterKey.fromSecret(options.clusterSecret).catch(
        (error) => {
          throw new TypeError(
            `clusterSecret: ${error.message} (make one with \`openssl rand -hex 32\` and give every replica the same)`,
          );
        },
      );
      const joining = await replica.#joinTarget();
      replica.#key = key;
      await replica.#openLog(joining);
      await replica.#connect(key);
      replica.#listen(serve, key);
      if (joining !== null) await replica.#askToJoin(key, joining);
      await replica.#bind();
    } catch (error) {
      await replica.close();
      throw error;
    }
    return replica;
  }

  private constructor(options: ReplicaOptions<S>) {
    if (!Object.hasOwn(options.peers, options.id)) {
      throw new TypeError(
        `replica id ${JSON.stringify(options.id)} is not one of the peers (${
          Object.keys(options.peers).join(", ")
        }): list every replica, this one included`,
      );
    }
    this.id = options.id;
    this.#options = options;
    this.#log = options.log ?? ((line) => console.error(line));
    this.#machine = new StateMachine(options.service, {
      maxRequestIds: options.maxRequestIds,
      onInternalError: (error, method) =>
        this.#log(`${options.id}: write ${method} threw: ${error}`),
    });
    this.#directory = new PeerDirectory(options.id, options.peers);
  }

  /** The service's state on this replica now (do not change it). */
  get state(): S {
    return this.#machine.state;
  }

  /** The client port's URL (`tcp://host:port`). */
  get url(): string {
    return this.#server!.url;
  }

  /** The peer port's URL. */
  get peerUrl(): string {
    return this.#peerServer!.url;
  }

  /** The Raft node underneath (status, membership changes, leadership transfer). */
  get raft(): RaftNode<WriteOutcome | null> {
    return this.#raft!;
  }

  /** This replica's role, term, leader and indexes. */
  status(): ReplicaStatus {
    const status = this.raft.status;
    const point = this.raft.configurationPoint;
    const leaderId = status.leader;
    return {
      id: this.id,
      role: status.role,
      term: status.term,
      leaderId,
      leaderUrl: leaderId === null ? null : this.#clientUrl(leaderId),
      commitIndex: status.commitIndex,
      appliedIndex: status.appliedIndex,
      snapshotIndex: status.snapshotIndex,
      clusterId: this.#clusterId,
      members: peerUrlsOf(this.raft.configuration, this.#options.peers),
      learners: [...this.raft.configuration.learners],
      configIndex: point.index,
      configTerm: point.term,
    };
  }

  /**
   * Takes this replica out of the service for good (dissertation §4.1;
   * the leader itself may leave, §4.2.2): asks the leader to remove it
   * (`replica.remove`, proving the cluster secret), waits for the change
   * to commit, then {@link close}s. The others go on without it; its data
   * folder belongs to a member that left (start it again only with a new
   * folder and `join`).
   *
   * @throws {RpcError} when no leader removed it within 30 s (it is then
   * still a member; it has not closed).
   */
  async leave(): Promise<void> {
    const key = this.#key!;
    const { id } = this.#options;
    const peerUrl = this.#options.peers[id] ?? "";
    const urls = Object.keys(this.status().members)
      .filter((member) => member !== id)
      .map((member) => this.#clientUrl(member))
      .filter((url): url is string => url !== null);
    await withFreshProof(
      this.raft.configurationPoint,
      async (point) => {
        const params = await removeParams(
          key,
          this.#clusterId,
          id,
          peerUrl,
          point,
        );
        if (this.raft.status.role === "leader" || urls.length === 0) {
          await this.#remove(params);
        } else {
          await this.#askAny(urls, "replica.remove", params);
        }
      },
    );
    this.#log(`${id}: left the service`);
    await this.close();
  }

  /**
   * Unbinds (draining first), stops serving, and stops the Raft node. The
   * data folder stays: start again on it to rejoin. Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#promoter);
    this.#wakeSoftWaiters();
    await this.#binding?.close();
    await this.#server?.close();
    await this.#peerServer?.close();
    if (this.#raft !== undefined) await this.#raft.stop();
    else this.#transport?.close();
  }

  async #openLog(joining: JoinTarget | null): Promise<void> {
    const options = this.#options;
    const machine = this.#machine;
    this.#raft = await RaftNode.start<WriteOutcome | null>({
      id: options.id,
      peers: joining === null
        ? options.peers
        : { ...joining.members, [options.id]: options.peers[options.id] },
      join: joining !== null,
      clusterId: joining?.clusterId,
      dataDir: options.dataDir,
      tickMs: options.tickMs,
      electionTicks: options.electionTicks,
      // Messages go out through the peer transport, made once the log
      // told the cluster id.
      transport: {
        send: (messages: readonly Message[]) => this.#transport?.send(messages),
        close: () => this.#transport?.close(),
        updateMembers: (peers) => this.#transport?.updateMembers(peers),
        onConnectionLost: (listener) => this.#lostListeners.push(listener),
      },
      apply: (entry) => machine.apply(entry.data),
      restore: (snapshot) => {
        machine.restoreJson(snapshot.data);
        this.#log(
          `${options.id}: restored the service's state from the snapshot at index ${snapshot.index}`,
        );
      },
      checkSnapshot: snapshotProblem,
      snapshot: {
        take: () => machine.snapshotJson(),
        everyEntries: options.snapshotEntries ?? 10_000,
        trailingEntries: options.snapshotTrailingEntries ??
          Math.min(5_000, options.snapshotEntries ?? 10_000),
      },
      onSoftState: (soft) => {
        if (soft.role !== this.#lastRole || soft.leader !== this.#lastLeader) {
          this.#lastRole = soft.role;
          this.#lastLeader = soft.leader;
          this.#log(
            soft.role === "leader"
              ? `${options.id}: leader in term ${soft.term}`
              : soft.leader === null
              ? `${options.id}: ${soft.role} in term ${soft.term}, no leader known`
              : `${options.id}: follower of ${soft.leader} in term ${soft.term}`,
          );
        }
        this.#wakeSoftWaiters();
      },
      onFatal: (error) => {
        this.#log(`${options.id}: the replica stopped: ${error}`);
        this.#wakeSoftWaiters();
      },
    });
  }

  readonly #lostListeners: ((id: NodeId) => void)[] = [];

  async #connect(key: ClusterKey): Promise<void> {
    const options = this.#options;
    const raft = this.raft;
    const clusterId = (await readDataDirMeta(options.dataDir))!.clusterId;
    const transport = new PeerTransport({
      dialer: this.#peerDialer,
      requirePeerCertificates: options.peerTls !== undefined,
      id: options.id,
      peers: options.peers,
      key,
      clusterId,
      directory: this.#directory,
      clientUrl: () => this.#directory.clientUrl(options.id),
    });
    this.#transport = transport;
    transport.onConnectionLost((peer) => {
      for (const listener of this.#lostListeners) listener(peer);
      // A follower waiting on this leader looks again.
      this.#wakeSoftWaiters();
    });
    const current = raft.configuration;
    transport.updateMembers(
      current.voters.length === 0
        ? options.peers
        : peerUrlsOf(current, options.peers),
    );
    this.#clusterId = clusterId;
  }

  #listen(serve: ServeFunction, key: ClusterKey): void {
    const options = this.#options;
    const peerUrl = new URL(
      options.peers[options.id].replace(/^tcp:/, "http:"),
    );
    const peerTls = options.peerTls;
    this.#peerServer = servePeersOn(serve, {
      serveOptions: peerTls === undefined ? undefined : {
        tls: { ...peerTls, clientCert: "require" },
      },
      requirePeerCertificates: peerTls !== undefined,
      hostname: peerUrl.hostname.replace(/^\[|\]$/g, ""),
      port: Number(peerUrl.port),
      id: options.id,
      key,
      clusterId: this.#clusterId,
      directory: this.#directory,
      clientUrl: () => this.#directory.clientUrl(options.id),
      onStep: (messages) => this.raft.step(messages),
      // A replica being added (its change not in this log yet), or a
      // leader this joining replica has not heard of: answer it.
      onNewPeer: (peer, peerUrl) => this.#transport!.admitPeer(peer, peerUrl),
      log: (line) => this.#log(`${options.id}: peer port: ${line}`),
    });
    this.#server = serve({
      hostname: options.hostname ?? "127.0.0.1",
      port: options.port ?? 0,
      tls: options.tls,
      methods: this.#methods(),
    });
    this.#directory.setClientUrl(options.id, this.#server.url);
    this.#transport!.start();
    this.#promoter = setInterval(
      () => this.#raft !== undefined && this.#promotion.tick(this.#raft),
      options.tickMs ?? 100,
    );
  }

  async #bind(): Promise<void> {
    const bind = this.#options.bind;
    if (bind === undefined) return;
    // A replica started again after a crash finds its old binding still
    // held by the dead process's lease (at another port) until that lease
    // expires: its id is its own, so it waits for it rather than failing.
    this.#binding = await bind.client.bindServer(bind.name, this.#server!, {
      id: this.id,
      ttlMs: bind.ttlMs,
      zone: bind.zone,
      attrs: bind.attrs,
      waitForIdMs: (bind.ttlMs ?? 10_000) + 5_000,
      onIdInUse: () =>
        this.#log(
          `${this.id}: its binding under ${bind.name} is still held by an earlier process's lease; waiting for that lease to expire`,
        ),
    });
  }

  /** The client port's method table: the service's methods and `replica.status`. */
  #methods(): Methods {
    const methods: Methods = {
      "replica.status": () => this.status(),
      "replica.add": (params: unknown) => this.#add(params),
      "replica.remove": (params: unknown) => this.#remove(params),
    };
    for (const name of this.#machine.writes) {
      methods[name] = withContext((context: CallContext, ...args: unknown[]) =>
        this.#write(context, name, args)
      );
    }
    for (const name of this.#machine.reads) {
      methods[name] = withContext(
        async (context: CallContext, ...args: unknown[]) => {
          await this.#barrier(context);
          return this.#machine.read(name, args);
        },
      );
    }
    for (const name of this.#machine.localReads) {
      methods[name] = (...args: unknown[]) => this.#machine.read(name, args);
    }
    return methods;
  }

  /** A write: proposed here when leading, else NOT_LEADER with where to go. */
  async #write(
    context: CallContext,
    method: string,
    args: unknown[],
  ): Promise<unknown> {
    let requestId: string | undefined;
    try {
      requestId = requestIdOf(args);
    } catch (error) {
      throw new RpcError(INVALID_PARAMS, (error as Error).message);
    }
    // A retry of a write that was applied: its first outcome, at once.
    const earlier = requestId === undefined
      ? undefined
      : this.#machine.outcomeOf(requestId);
    const outcome = earlier ?? await this.#propose(
      context,
      StateMachine.encode(method, args, requestId),
    );
    if (outcome === null) throw new TypeError("a write applied as a no-op");
    if (outcome.ok) return outcome.value;
    const { code, message, data } = outcome.error;
    throw new RpcError(code, message, data);
  }

  async #propose(
    context: CallContext,
    data: string,
  ): Promise<WriteOutcome | null> {
    const until = Math.min(
      context.deadline ?? Infinity,
      Date.now() + MAX_PROPOSE_MS,
    );
    await this.#untilLeaderKnown(until, context.signal);
    const raft = this.raft;
    if (raft.status.role !== "leader") throw this.#notLeader();
    try {
      return await raft.propose(data, {
        timeoutMs: Math.max(1, until - Date.now()),
      });
    } catch (error) {
      if (error instanceof NotLeaderError) throw this.#notLeader();
      if (error instanceof RaftUnavailableError) {
        const mayHaveApplied = error.applied !== false;
        throw new RpcError(
          UNAVAILABLE,
          mayHaveApplied
            ? `the write may or may not be applied: ${error.message}; retry it with the same requestId to be sure it is applied once`
            : `the write was not applied: ${error.message}; retry it`,
          { mayHaveApplied } satisfies UnavailableData,
        );
      }
      throw error;
    }
  }

  /**
   * Waits (within `until`) while this replica is not the leader and knows
   * of no leader it can reach: during an election, and after the leader's
   * connection was lost, a NOT_LEADER hint would send the caller nowhere.
   */
  async #untilLeaderKnown(until: number, signal: AbortSignal): Promise<void> {
    for (let round = 0; round < 1_000; round++) {
      if (this.#closed || signal.aborted) return;
      const { role, leader } = this.raft.status;
      if (role === "leader") return;
      if (leader !== null && this.#reachable(leader)) return;
      const left = until - Date.now();
      if (left <= 0) return;
      await new Promise<void>((wake) => {
        const timer = setTimeout(wake, Math.min(left, 100));
        this.#softWaiters.push(() => {
          clearTimeout(timer);
          wake();
        });
      });
    }
  }

  /** Whether this replica's connection to `peer` is open (or it is this one). */
  #reachable(peer: string): boolean {
    if (peer === this.id) return true;
    return this.#directory.status().some((member) =>
      member.id === peer && member.reachable
    );
  }

  async #barrier(context: CallContext): Promise<void> {
    const until = Math.min(context.deadline ?? Infinity, Date.now() + 5_000);
    try {
      await this.raft.readBarrier({
        timeoutMs: Math.max(1, until - Date.now()),
      });
    } catch (error) {
      if (error instanceof RaftUnavailableError) {
        throw new RpcError(
          UNAVAILABLE,
          `no leader confirmed the read in time (${error.message}): this replica may be cut off from the others; retry on another`,
        );
      }
      throw error;
    }
  }

  /** Where a new replica joins, asked of one of `join.via`; null when not joining. */
  async #joinTarget(): Promise<JoinTarget | null> {
    const { join, dataDir, id } = this.#options;
    if (join === undefined) return null;
    if ((await readDataDirMeta(dataDir)) !== null) return null; // a restart
    const status = await this.#askAny<ReplicaStatus>(
      join.via,
      "replica.status",
      undefined,
    );
    if (Object.hasOwn(status.members, id)) {
      throw new TypeError(
        `replica ${id} is a member of the service already, with an empty data folder here: remove it from the service first, or give this replica its old folder`,
      );
    }
    return {
      clusterId: status.clusterId,
      members: status.members,
      point: { index: status.configIndex, term: status.configTerm },
      via: join.via,
    };
  }

  /** Asks the leader (through `via`, following NOT_LEADER) to add this replica as a learner. */
  async #askToJoin(key: ClusterKey, joining: JoinTarget): Promise<void> {
    const { id } = this.#options;
    const peerUrl = this.#options.peers[id];
    const clientUrl = this.url;
    await withFreshProof(joining.point, async (point) => {
      const proof = await key.prove(
        "dialer",
        membershipProof(
          joining.clusterId,
          "add",
          id,
          point,
          peerUrl,
          clientUrl,
        ),
      );
      await this.#askAny(joining.via, "replica.add", {
        id,
        peerUrl,
        clientUrl,
        configIndex: point.index,
        configTerm: point.term,
        proof,
      });
    });
    this.#log(`${id}: added to the service as a learner; catching up`);
  }

  /** {@link askAny} with this replica's dial function. */
  #askAny<T>(
    urls: readonly string[],
    method: string,
    params: Record<string, unknown> | undefined,
  ): Promise<T> {
    const dial = this.#dial;
    if (dial === undefined) {
      throw new TypeError(
        "joining and leaving need a dial function (startReplica passes one)",
      );
    }
    return askAny<T>(dial, urls, method, params);
  }

  /**
   * `replica.add` on the leader: a learner that proved the cluster secret
   * in the current membership.
   */
  async #add(params: unknown): Promise<{ added: string; learners: string[] }> {
    const { id, peerUrl, clientUrl, proof } = (params ?? {}) as Record<
      string,
      unknown
    >;
    const point = pointOf(params);
    if (
      typeof id !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(id) ||
      typeof peerUrl !== "string" || !peerUrl.startsWith("tcp://") ||
      typeof clientUrl !== "string" || typeof proof !== "string" ||
      point === null
    ) {
      throw new RpcError(
        INVALID_PARAMS,
        "Invalid params: replica.add takes { id, peerUrl, clientUrl, configIndex, configTerm, proof } (startReplica({ join }) sends it; configIndex and configTerm from replica.status)",
      );
    }
    const key = this.#key!;
    const proven = await key.verify(
      "dialer",
      membershipProof(
        this.#clusterId,
        "add",
        id,
        point,
        peerUrl,
        clientUrl,
      ),
      proof,
    );
    if (!proven) {
      throw new RpcError(
        PERMISSION_DENIED,
        `replica.add: the proof for ${id} does not match this service's cluster secret: start the new replica with the same RAFTER_SERVICE_SECRET`,
      );
    }
    const raft = this.raft;
    if (raft.status.role !== "leader") throw this.#notLeader();
    this.#checkCurrent("replica.add", id, point);
    const configuration = raft.configuration;
    if (
      !configuration.voters.includes(id) && !configuration.learners.includes(id)
    ) {
      await this.#changeMembers(
        { type: "addLearner", node: id, peerUrl, clientUrl },
        `replica.add: adding ${id}`,
      );
      this.#log(`${this.id}: added ${id} (${peerUrl}) as a learner`);
    }
    this.#promotion.pending.add(id);
    return { added: id, learners: [...raft.configuration.learners] };
  }

  /**
   * `replica.remove` on the leader: a member taken out, asked by itself
   * (`leave()`) or by an operator ({@link removeReplica}), proving the
   * cluster secret over its id and peer URL in the current membership.
   */
  async #remove(params: unknown): Promise<{ removed: string }> {
    const { id, proof } = (params ?? {}) as Record<string, unknown>;
    const point = pointOf(params);
    if (typeof id !== "string" || typeof proof !== "string" || point === null) {
      throw new RpcError(
        INVALID_PARAMS,
        "Invalid params: replica.remove takes { id, configIndex, configTerm, proof } (ReplicatedService.leave() and removeReplica() send it; configIndex and configTerm from replica.status)",
      );
    }
    const raft = this.raft;
    const configuration = raft.configuration;
    const peerUrl = peerUrlsOf(configuration, this.#options.peers)[id];
    if (peerUrl === undefined) {
      throw new RpcError(
        INVALID_PARAMS,
        `replica.remove: ${id} is not a member of this service`,
      );
    }
    const proven = await this.#key!.verify(
      "dialer",
      membershipProof(
        this.#clusterId,
        "remove",
        id,
        point,
        peerUrl,
      ),
      proof,
    );
    if (!proven) {
      throw new RpcError(
        PERMISSION_DENIED,
        `replica.remove: the proof for ${id} does not match this service's cluster secret: only the replica itself (leave()) or an operator with the secret (removeReplica()) can ask`,
      );
    }
    if (raft.status.role !== "leader") throw this.#notLeader();
    this.#checkCurrent("replica.remove", id, point);
    await this.#changeMembers(
      { type: "remove", node: id },
      `replica.remove: removing ${id}`,
    );
    this.#promotion.pending.delete(id);
    this.#log(`${this.id}: removed ${id} from the service`);
    return { removed: id };
  }

  /**
   * Refuses (PERMISSION_DENIED, with the current membership in its data) a
   * proof made over another membership than this leader's: one made
   * before a change since, such as a request captured and sent again.
   */
  #checkCurrent(method: string, id: string, point: SnapshotPoint): void {
    const now = this.raft.configurationPoint;
    if (now.index === point.index && now.term === point.term) return;
    throw new RpcError(
      PERMISSION_DENIED,
      `${method}: the membership changed since this proof for ${id} was made (it is over configIndex ${point.index}, configTerm ${point.term}; the membership now is configIndex ${now.index}, configTerm ${now.term}): ask again, with a proof over the current membership (replica.status tells it)`,
      {
        method,
        permission: "current-membership",
        configIndex: now.index,
        configTerm: now.term,
      } satisfies MembershipChangedData,
    );
  }

  /**
   * Proposes a membership change on this leader: NOT_LEADER if it lost
   * leadership, UNAVAILABLE (retryable) for any other refusal.
   */
  async #changeMembers(change: ConfChange, what: string): Promise<void> {
    try {
      await this.raft.proposeConfChange(change, { timeoutMs: 5_000 });
    } catch (error) {
      if (error instanceof NotLeaderError) throw this.#notLeader();
      throw new RpcError(
        UNAVAILABLE,
        `${what} failed (${(error as Error).message}): retry`,
      );
    }
  }

  #notLeader(): RpcError {
    const leaderId = this.raft.status.leader;
    const leaderUrl = leaderId === null ? null : this.#clientUrl(leaderId);
    return new RpcError(
      NOT_LEADER,
      leaderId === null
        ? `replica ${this.id} is not the leader and knows of none yet (an election is under way): retry shortly`
        : `replica ${this.id} is not the leader: send writes to ${leaderId}${
          leaderUrl === null ? "" : ` at ${leaderUrl}`
        }`,
      { leaderId, leaderUrl } satisfies NotLeaderData,
    );
  }

  #clientUrl(id: string): string | null {
    return this.#directory.clientUrl(id);
  }

  #wakeSoftWaiters(): void {
    const waiters = this.#softWaiters;
    this.#softWaiters = [];
    for (const wake of waiters) wake();
  }
}

/**
 * Calls `method` on the first replica of `urls` that answers, following
 * NOT_LEADER hints and waiting out elections, within 30 s; a refusal
 * (PERMISSION_DENIED, INVALID_PARAMS) is thrown at once.
 */
async function askAny<T>(
  dial: DialFunction,
  urls: readonly string[],
  method: string,
  params: Record<string, unknown> | undefined,
): Promise<T> {
  const until = Date.now() + 30_000;
  let targets = [...urls];
  let last: unknown = null;
  for (let round = 0; round < 200 && Date.now() < until; round++) {
    const url = targets[round % targets.length];
    let connection: RpcConnection | undefined;
    try {
      connection = await dial(url);
      return await connection.call(method, params, { timeoutMs: 5_000 }) as T;
    } catch (error) {
      last = error;
      if (
        error instanceof RpcError &&
        (error.code === PERMISSION_DENIED || error.code === INVALID_PARAMS)
      ) throw error;
      const hint = error instanceof RpcError && error.code === NOT_LEADER
        ? (error.data as NotLeaderData | undefined)?.leaderUrl
        : null;
      if (hint) targets = [hint, ...urls];
      else await new Promise((wake) => setTimeout(wake, 250));
    } finally {
      connection?.close();
    }
  }
  throw new RpcError(
    UNAVAILABLE,
    `no replica at ${urls.join(", ")} answered ${method} within 30 s (last: ${
      (last as Error)?.message
    }): check the URLs and that the service has a leader`,
  );
}

/**
 * Takes replica `id` out of a running service (an operator's step for a
 * replica that died for good and cannot {@link ReplicatedService.leave}):
 * asks the service at `via` (client URLs of live replicas) for the
 * cluster, the member and the membership, and the leader to remove it,
 * proving `clusterSecret` (the replicas' shared secret) over them.
 *
 * @throws {RpcError} PERMISSION_DENIED for a wrong secret (or when the
 * membership changed again while it asked once more, its proof being over
 * the membership it was told), INVALID_PARAMS for a replica that is not a
 * member, UNAVAILABLE when no leader removed it within 30 s.
 */
export async function removeReplica(
  options: { via: readonly string[]; id: string; clusterSecret: string },
  dial: DialFunction,
): Promise<void> {
  const key = await ClusterKey.fromSecret(options.clusterSecret);
  const status = await askAny<ReplicaStatus>(
    dial,
    options.via,
    "replica.status",
    undefined,
  );
  const peerUrl = status.members[options.id];
  if (peerUrl === undefined) {
    throw new RpcError(
      INVALID_PARAMS,
      `${options.id} is not a member of the service (members: ${
        Object.keys(status.members).join(", ")
      })`,
    );
  }
  await withFreshProof(
    { index: status.configIndex, term: status.configTerm },
    async (point) =>
      await askAny(
        dial,
        options.via,
        "replica.remove",
        await removeParams(key, status.clusterId, options.id, peerUrl, point),
      ),
  );
}

/** The params of a `replica.remove` of `id` (at `peerUrl`), proven over `point`. */
async function removeParams(
  key: ClusterKey,
  cluster: string,
  id: string,
  peerUrl: string,
  point: SnapshotPoint,
): Promise<Record<string, unknown>> {
  const proof = await key.prove(
    "dialer",
    membershipProof(cluster, "remove", id, point, peerUrl),
  );
  return { id, configIndex: point.index, configTerm: point.term, proof };
}

/**
 * Runs `ask` with a proof over `point`, the membership the requester was
 * told; if the leader answers that the membership changed since (it was
 * told by a replica behind the leader, or a change raced the request),
 * asks once more over the leader's current one.
 */
async function withFreshProof<T>(
  point: SnapshotPoint,
  ask: (point: SnapshotPoint) => Promise<T>,
): Promise<T> {
  try {
    return await ask(point);
  } catch (error) {
    const current = error instanceof RpcError &&
        error.code === PERMISSION_DENIED &&
        (error.data as MembershipChangedData | undefined)?.permission ===
          "current-membership"
      ? pointOf(error.data)
      : null;
    if (current === null) throw error;
    return await ask(current);
  }
}

/** `{ configIndex, configTerm }` of `params` as a point, or null when either is not a whole number ≥ 0. */
function pointOf(params: unknown): SnapshotPoint | null {
  const { configIndex, configTerm } = (params ?? {}) as Record<
    string,
    unknown
  >;
  return Number.isSafeInteger(configIndex) && (configIndex as number) >= 0 &&
      Number.isSafeInteger(configTerm) && (configTerm as number) >= 0
    ? { index: configIndex as number, term: configTerm as number }
    : null;
}

/**
 * What a replica.add or replica.remove request proves with the cluster
 * secret (an HMAC over the cluster, the member, the action, the
 * membership it is made in and the member's URLs), in the peer
 * handshake's subject shape under its own `to` (no member is named
 * `replica.add@…`). The membership (`point`: the index and term of the
 * entry that made it) is what keeps a proof from being replayed: the
 * leader takes it only while its membership is that one, so a request
 * captured on the wire is dead after the next membership change (such as
 * the one it asked for).
 */
function membershipProof(
  cluster: string,
  action: "add" | "remove",
  id: string,
  point: SnapshotPoint,
  peerUrl: string,
  clientUrl = "",
): HandshakeSubject {
  return {
    cluster,
    from: id,
    to: `replica.${action}@config:${point.index}:${point.term}`,
    dialerNonce: peerUrl,
    acceptorNonce: clientUrl,
  };
}
