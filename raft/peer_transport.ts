/**
 * Carries Raft messages between nodes as JSON-RPC notifications
 * (`raft.step`, params `[messages]`) over one long-lived, authenticated
 * connection per peer, dialed to the peer's peer port. Each connection
 * first runs the peer handshake (`peer_auth.ts`), which proves to both
 * sides that the other holds the cluster secret; only then are messages
 * sent. Over TLS (a `dialer` that opens TLS streams, which fill
 * `ByteStream.peerCertificate`) the acceptor's certificate must name the
 * member dialed (SAN `URI:rafter://member/<id>`); with
 * `requirePeerCertificates` an acceptor without one is refused too. Raft tolerates lost messages, so sends never block the node: while
 * a peer is unreachable its messages queue up to a bound and then drop,
 * and reconnects back off (a failed handshake backs off like a failed
 * connect).
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";
import { defaultDialer } from "../rpc/transport/default_dialer.ts";
import { messageOf } from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import type { ByteStream, Dialer } from "../rpc/transport/transport.ts";
import {
  authenticatePeer,
  checkMemberId,
  type ClusterKey,
  HANDSHAKE_TIMEOUT_MS,
  PeerHandshakeError,
  PeerIdentityError,
} from "./peer_auth.ts";
import { PeerDirectory, type PeerStatus } from "./peer_directory.ts";
import type { Message, NodeId } from "./types.ts";

/** The JSON-RPC method peers call to deliver messages. */
export const STEP_METHOD = "raft.step";

/** Settings of a {@link PeerTransport}. */
export interface PeerTransportOptions {
  /** This node's id: the `from` of every handshake. */
  id: NodeId;
  /**
   * Every member's id → its peer URL (`tcp://host:port`). This node's own
   * entry is not dialed.
   */
  peers: Readonly<Record<NodeId, string>>;
  /** The cluster secret every connection proves. */
  key: ClusterKey;
  /**
   * This node's cluster id (`DataDir.clusterId`), sent in every hello: a
   * peer of another cluster refuses the connection (see `peer_auth.ts`).
   */
  clusterId: string;
  /**
   * This node's client URL, announced to each peer in the handshake; read
   * at each handshake. @default no URL (null)
   */
  clientUrl?: () => string | null;
  /**
   * The member table to keep up to date (reachability, errors, learnt
   * client URLs). @default a new one, see {@link PeerTransport.directory}
   */
  directory?: PeerDirectory;
  /**
   * Opens connections; hand in a TLS dialer (one whose streams carry the
   * server's verified `peerCertificate`) to run the peer links over TLS.
   * @default the runtime's TCP dialer
   */
  dialer?: Dialer;
  /**
   * Refuse a peer whose stream has no certificate naming a member (plain
   * TCP included): set it with a TLS dialer and member certificates. A
   * certificate that names a member is checked against the id dialed
   * either way. @default false
   */
  requirePeerCertificates?: boolean;
  /** Messages kept per peer while its connection opens. @default 1024 */
  maxQueuedMessages?: number;
  /** First reconnect delay after a failure, ms. @default 50 */
  minBackoffMs?: number;
  /** Longest reconnect delay, ms. @default 1000 */
  maxBackoffMs?: number;
  /** Most messages in one notification. @default 64 */
  maxMessagesPerFrame?: number;
  /** Time allowed to connect, ms. @default 1000 */
  connectTimeoutMs?: number;
  /** Time allowed for the handshake, ms. @default 2000 */
  handshakeTimeoutMs?: number;
  /**
   * How often each peer is pinged (`rpc.ping` on its authenticated
   * connection), ms; 0 disables. A peer that does not answer within
   * `probeTimeoutMs` is reported unreachable even though its connection is
   * open (a stopped process, a host cut off), and reachable again once it
   * answers. The pings also keep idle connections from timing out and tell
   * both sides when they last heard each other. @default 1000
   */
  probeIntervalMs?: number;
  /** How long a ping may take before the peer counts as unreachable, ms. @default 2000 */
  probeTimeoutMs?: number;
  /**
   * Called when a peer answers a ping, with its id and the round-trip
   * time, ms, by the monotonic clock (`performance.now()`). For metrics;
   * it must not throw.
   */
  onPingAnswered?(peer: NodeId, ms: number): void;
}

/**
 * Sends each message to the peer named by its `to` field, and
 * application-level notifications with {@link PeerTransport.notify}.
 * Nothing is dialed until {@link PeerTransport.start}; from then on the
 * transport keeps a connection open to every peer (so reachability is
 * known even for peers this node has nothing to say to), reconnecting
 * after failures.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterKey } from "./peer_auth.ts";
 * import { PeerDirectory } from "./peer_directory.ts";
 * import { servePeers } from "./deno.ts";
 * import { PeerTransport } from "./peer_transport.ts";
 * import type { Message } from "./types.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * // Member n2's peer port, here in the same process.
 * const { promise: delivered, resolve } = Promise.withResolvers<Message[]>();
 * const server = servePeers({
 *   id: "n2", clusterId, key, onStep: resolve,
 *   directory: new PeerDirectory("n2", { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" }),
 * });
 * const transport = new PeerTransport({
 *   id: "n1",
 *   peers: { n1: "tcp://127.0.0.1:7101", n2: server.url },
 *   key,
 *   clusterId,
 * });
 * transport.start();
 * transport.send([{ type: "voteResponse", from: "n1", to: "n2", term: 1, granted: true }]);
 * assert.deepEqual(await delivered, [
 *   { type: "voteResponse", from: "n1", to: "n2", term: 1, granted: true },
 * ]);
 * assert.equal(transport.peerStatus().find((peer) => peer.id === "n2")?.reachable, true);
 * transport.close();
 * await server.close();
 * ```
 */
export class PeerTransport {
  /** The member table this transport keeps up to date. */
  readonly directory: PeerDirectory;
  readonly #peers = new Map<NodeId, PeerLink>();
  /** Peers admitted by {@link admitPeer} that no configuration listed yet. */
  readonly #provisional = new Set<NodeId>();
  readonly #probeIntervalMs: number;
  readonly #probeTimeoutMs: number;
  readonly #options: PeerTransportOptions;
  #prober: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  #started = false;
  readonly #lostListeners: ((id: NodeId) => void)[] = [];
  readonly #stats: PeerTransportStats = { identityRefused: 0, redials: 0 };
  readonly #onLost = (id: NodeId) => {
    for (const listener of this.#lostListeners) listener(id);
  };

  /**
   * Sets up a link per peer; none connects before {@link start}.
   *
   * @param options peers, key and pacing; see {@link PeerTransportOptions}.
   * @throws {RangeError} when `id` is not among `peers`, or a member id
   * contains `|` or is empty.
   */
  constructor(options: PeerTransportOptions) {
    for (const id of Object.keys(options.peers)) checkMemberId(id);
    this.#options = options;
    this.directory = options.directory ??
      new PeerDirectory(options.id, options.peers);
    for (const [id, url] of Object.entries(options.peers)) {
      if (id === options.id) continue;
      this.#peers.set(
        id,
        new PeerLink(
          id,
          url,
          options,
          this.directory,
          this.#onLost,
          this.#stats,
        ),
      );
    }
    this.#probeIntervalMs = options.probeIntervalMs ?? 1_000;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 2_000;
  }

  /**
   * Calls `listener` with a peer's id each time an authenticated connection
   * to that peer ends (closed or reset by the other side: a peer whose
   * process exited), not when this transport closes or drops the link. A
   * {@link RaftNode} listens, to stand for election soon when the leader's
   * connection ends (`RaftCore.leaderConnectionLost`).
   */
  onConnectionLost(listener: (id: NodeId) => void): void {
    this.#lostListeners.push(listener);
  }

  /** Starts connecting to every peer (and keeps reconnecting). Idempotent. */
  start(): void {
    if (this.#closed) return;
    this.#started = true;
    for (const link of this.#peers.values()) link.start();
    if (this.#probeIntervalMs > 0 && this.#prober === undefined) {
      this.#prober = setInterval(() => {
        for (const link of this.#peers.values()) {
          link.probe(this.#probeTimeoutMs);
        }
      }, this.#probeIntervalMs);
    }
  }

  /**
   * Queues messages for delivery, each to the peer its `to` names; unknown
   * destinations are dropped.
   */
  send(messages: readonly Message[]): void {
    const byPeer = new Map<NodeId, Message[]>();
    for (const message of messages) {
      const batch = byPeer.get(message.to);
      if (batch === undefined) byPeer.set(message.to, [message]);
      else batch.push(message);
    }
    for (const [id, batch] of byPeer) {
      this.#peers.get(id)?.send(batch.map((message) => ({ message })));
    }
  }

  /**
   * Queues an application-level notification to one peer, delivered on the
   * same authenticated connection as the Raft messages (in order with
   * them) to the handler the peer registered for `method`. Best effort,
   * like Raft messages: dropped when the queue overflows or the connection
   * fails.
   *
   * @param params named params (an object), passed to the peer's handler.
   * @returns false, queueing nothing, when `peerId` is not a peer or the
   * transport is closed.
   */
  notify(
    peerId: NodeId,
    method: string,
    params?: Record<string, unknown>,
  ): boolean {
    const link = this.#peers.get(peerId);
    if (link === undefined) return false;
    return link.send([{ method, params }]);
  }

  /**
   * Adds `id` at `peerUrl` as a provisional member: an authenticated peer
   * this node's configuration does not list yet (see
   * `PeerAcceptorOptions.onNewPeer`). It is dialed like a member and kept
   * across {@link updateMembers} until a configuration lists it (then it is
   * an ordinary member) or removes it after listing it. At most 16 at a
   * time.
   *
   * @returns whether it was added (false when it is a member already, was
   * removed, or the limit is reached).
   */
  admitPeer(id: NodeId, peerUrl: string): boolean {
    if (
      id === this.directory.self || this.directory.has(id) ||
      this.directory.wasRemoved(id) || this.#provisional.size >= 16
    ) {
      return false;
    }
    checkMemberId(id);
    this.#provisional.add(id);
    this.directory.add(id, peerUrl);
    const link = new PeerLink(
      id,
      peerUrl,
      this.#options,
      this.directory,
      this.#onLost,
      this.#stats,
    );
    this.#peers.get(id)?.close();
    this.#peers.set(id, link);
    if (this.#started && !this.#closed) link.start();
    return true;
  }

  /**
   * Follows a membership change (Raft dissertation §4.1: a node uses the
   * latest configuration in its log): opens a link to every member of
   * `peers` it has none to (or whose peer URL moved) and adds it to the
   * directory; removes from the directory every member not in `peers`
   * (its messages are dropped and its handshakes refused from then on)
   * and closes its link, after `lingerMs` so that a last notification
   * (such as "you were removed") can still go out. This node's own entry
   * is never dialed or removed, nor are provisional members
   * ({@link admitPeer}) that `peers` does not list yet.
   *
   * @param peers every member's id → peer URL after the change.
   * @param options.lingerMs how long a removed member's link stays open for
   * notifications, ms. Default 0 (closed at once).
   * @throws {RangeError} when a member id is empty or contains `|`.
   */
  updateMembers(
    peers: Readonly<Record<NodeId, string>>,
    options: { lingerMs?: number } = {},
  ): void {
    for (const id of Object.keys(peers)) checkMemberId(id);
    const self = this.directory.self;
    for (const [id, url] of Object.entries(peers)) {
      this.#provisional.delete(id);
      if (id === self) continue;
      const known = this.directory.peerUrl(id);
      this.directory.add(id, url);
      const link = this.#peers.get(id);
      if (link !== undefined && known === url) continue;
      link?.close();
      const fresh = new PeerLink(
        id,
        url,
        this.#options,
        this.directory,
        this.#onLost,
        this.#stats,
      );
      this.#peers.set(id, fresh);
      if (this.#started && !this.#closed) fresh.start();
    }
    for (const id of this.directory.ids) {
      if (
        id === self || Object.hasOwn(peers, id) || this.#provisional.has(id)
      ) continue;
      this.directory.remove(id);
      const link = this.#peers.get(id);
      if (link === undefined) continue;
      const lingerMs = options.lingerMs ?? 0;
      const close = () => {
        if (this.#peers.get(id) === link) this.#peers.delete(id);
        link.close();
      };
      if (lingerMs > 0) setTimeout(close, lingerMs);
      else close();
    }
  }

  /** Counts of refused peers since the transport was made (a copy). */
  get stats(): PeerTransportStats {
    return { ...this.#stats };
  }

  /** Every member as this node sees it now; see {@link PeerDirectory.status}. */
  peerStatus(): PeerStatus[] {
    return this.directory.status();
  }

  /** Closes every peer connection; later sends are dropped. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#prober);
    this.#prober = undefined;
    for (const link of this.#peers.values()) link.close();
  }
}

/** Counts kept by a {@link PeerTransport}. */
export interface PeerTransportStats {
  /**
   * Connections dropped because the acceptor's certificate named another
   * member than the one dialed, or none while `requirePeerCertificates`
   * is set, or because the acceptor refused this node's certificate.
   */
  identityRefused: number;
  /**
   * New connections dialled because a ping on the open one went
   * unanswered: after a network partition heals, the old connection may
   * stay silent until TCP's backed-off retransmission fires (tens of
   * seconds), while a new one carries traffic at once.
   */
  redials: number;
}

/** A queued item: a Raft message, or an application notification. */
type Outgoing =
  | { message: Message }
  | { method: string; params?: Params };

class PeerLink {
  readonly #id: NodeId;
  readonly #url: string;
  readonly #options: PeerTransportOptions;
  readonly #directory: PeerDirectory;
  readonly #maxQueued: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #maxPerFrame: number;
  #connection: RpcConnection | null = null;
  #connecting = false;
  #started = false;
  #queue: Outgoing[] = [];
  #backoffMs = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #probing = false;
  /**
   * Whether the open connection went silent (a ping timed out): until a
   * new one is authenticated, or the old one answers again, the link
   * keeps redialling on its back-off instead of waiting for the next
   * ping to time out.
   */
  #silent = false;
  readonly #onLost: (id: NodeId) => void;
  readonly #stats: PeerTransportStats;

  constructor(
    id: NodeId,
    url: string,
    options: PeerTransportOptions,
    directory: PeerDirectory,
    onLost: (id: NodeId) => void,
    stats: PeerTransportStats,
  ) {
    this.#id = id;
    this.#stats = stats;
    this.#onLost = onLost;
    this.#url = url;
    this.#options = options;
    this.#directory = directory;
    this.#maxQueued = options.maxQueuedMessages ?? 1024;
    this.#minBackoffMs = options.minBackoffMs ?? 50;
    this.#maxBackoffMs = options.maxBackoffMs ?? 1000;
    this.#maxPerFrame = options.maxMessagesPerFrame ?? 64;
  }

  start(): void {
    this.#started = true;
    this.#ensure();
  }

  send(items: Outgoing[]): boolean {
    if (this.#closed) return false;
    const connection = this.#connection;
    if (connection !== null && !connection.isClosed) {
      this.#write(connection, items);
      return true;
    }
    this.#queue.push(...items);
    if (this.#queue.length > this.#maxQueued) {
      this.#queue.splice(0, this.#queue.length - this.#maxQueued);
    }
    this.#ensure();
    return true;
  }

  /**
   * Pings the peer on the open connection: an answer marks it reachable
   * and heard from now; none within `timeoutMs` marks it unreachable and
   * dials a new connection beside it. The old one stays until the new one
   * is authenticated (a paused peer that resumes answers on it again);
   * then the new one takes over and the old one is closed, so a healed
   * partition costs one ping timeout plus a dial, not TCP's backed-off
   * retransmission of the old connection. A redial that fails is tried
   * again on the link's back-off (at most `maxBackoffMs` apart) until one
   * succeeds or the old connection answers, so however long the partition
   * lasted, the heal costs at most one back-off and a dial.
   */
  probe(timeoutMs: number): void {
    const connection = this.#connection;
    if (connection === null || connection.isClosed || this.#probing) return;
    this.#probing = true;
    const sent = performance.now();
    connection.call("rpc.ping", undefined, { timeoutMs }).then(
      () => {
        this.#options.onPingAnswered?.(this.#id, performance.now() - sent);
        if (this.#connection !== connection) return;
        this.#silent = false;
        this.#directory.connected(this.#id);
        this.#directory.heard(this.#id);
      },
      () => {
        if (this.#connection !== connection || connection.isClosed) return;
        this.#directory.failed(
          this.#id,
          `no answer to a ping within ${timeoutMs} ms (the process stopped, or the host is cut off?)`,
        );
        this.#silent = true;
        this.#redial();
      },
    ).finally(() => {
      this.#probing = false;
    });
  }

  /** Dials a new connection beside the open, silent one (see {@link probe}). */
  #redial(): void {
    if (this.#closed || this.#connecting || this.#timer !== undefined) return;
    this.#stats.redials++;
    void this.#connect();
  }

  close(): void {
    this.#closed = true;
    this.#queue = [];
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#connection?.close();
    this.#connection = null;
  }

  /** Writes items in order: runs of Raft messages share frames. */
  #write(connection: RpcConnection, items: Outgoing[]): void {
    const ignore = () => {
      // Lost messages are retried by Raft itself (heartbeats, probes).
    };
    let run: Message[] = [];
    const flush = () => {
      for (let i = 0; i < run.length; i += this.#maxPerFrame) {
        const frame = run.slice(i, i + this.#maxPerFrame);
        connection.notify(STEP_METHOD, [frame]).catch(ignore);
      }
      run = [];
    };
    for (const item of items) {
      if ("message" in item) {
        run.push(item.message);
        continue;
      }
      flush();
      connection.notify(item.method, item.params).catch(ignore);
    }
    flush();
  }

  /** Connects unless connected, connecting, waiting to retry, or not started. */
  #ensure(): void {
    if (
      !this.#started || this.#closed || this.#connecting ||
      this.#timer !== undefined
    ) {
      return;
    }
    const connection = this.#connection;
    if (connection !== null && !connection.isClosed) return;
    this.#connect();
  }

  #retryAfter(ms: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#silent) this.#redial();
      else this.#ensure();
    }, ms);
  }

  async #connect(): Promise<void> {
    this.#connecting = true;
    let connection: RpcConnection | null = null;
    try {
      // The stream itself, for the certificate its TLS layer verified.
      let stream: ByteStream | null = null;
      const dialer = this.#options.dialer ?? defaultDialer();
      connection = await dial(this.#url, {
        dialer: async (url, options) => (stream = await dialer(url, options)),
        connectTimeoutMs: this.#options.connectTimeoutMs ?? 1000,
      });
      if (this.#closed) return;
      const { clientUrl } = await authenticatePeer(connection, {
        key: this.#options.key,
        clusterId: this.#options.clusterId,
        from: this.#options.id,
        to: this.#id,
        clientUrl: this.#options.clientUrl?.() ?? null,
        peerUrl: this.#directory.peerUrl(this.#options.id),
        timeoutMs: this.#options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS,
        peerCertificate: (stream as ByteStream | null)?.peerCertificate ?? null,
        secure: (stream as ByteStream | null)?.secure === true,
        requireCertificate: this.#options.requirePeerCertificates ?? false,
      });
      if (this.#closed) return;
      this.#directory.setClientUrl(this.#id, clientUrl);
      this.#directory.connected(this.#id);
      this.#backoffMs = 0;
      this.#silent = false;
      const previous = this.#connection;
      this.#connection = connection;
      previous?.close();
      const authenticated = connection;
      connection = null;
      authenticated.closed.then(() => this.#lost(authenticated));
      const queued = this.#queue;
      this.#queue = [];
      this.#write(authenticated, queued);
    } catch (error) {
      if (this.#closed) return;
      if (error instanceof PeerIdentityError) this.#stats.identityRefused++;
      this.#directory.failed(this.#id, describeFailure(error));
      this.#backoffMs = Math.min(
        Math.max(this.#backoffMs * 2, this.#minBackoffMs),
        this.#maxBackoffMs,
      );
      this.#queue = [];
      this.#retryAfter(this.#backoffMs);
    } finally {
      connection?.close();
      this.#connecting = false;
    }
  }

  /** The authenticated connection ended: reconnect shortly. */
  #lost(connection: RpcConnection): void {
    if (this.#connection !== connection || this.#closed) return;
    this.#connection = null;
    this.#silent = false;
    this.#directory.failed(this.#id, "connection closed");
    this.#retryAfter(this.#minBackoffMs);
    this.#onLost(this.#id);
  }
}

/**
 * A short reason for a failed connect or handshake, for `lastError` and
 * logs: `"connection refused"`, `"connect timed out"`, or the handshake's
 * own message.
 */
export function describeFailure(error: unknown): string {
  if (error instanceof PeerHandshakeError) return error.message;
  const cause = (error as { cause?: unknown } | null)?.cause;
  const name = (cause as { name?: unknown } | null)?.name;
  switch (name) {
    case "ConnectionRefused":
      return "connection refused";
    case "ConnectionReset":
      return "connection reset";
    case "TimeoutError":
    case "TimedOut":
      return "connect timed out";
    case "AddrNotAvailable":
    case "NotFound":
      return `cannot resolve or reach the address (${messageOf(cause)})`;
  }
  return messageOf(cause ?? error).replace(/^cannot connect to \S+: /, "");
}
