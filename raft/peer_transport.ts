/**
 * Carries Raft messages between nodes as JSON-RPC notifications
 * (`raft.step`, params `[messages]`) over one long-lived connection per
 * peer. Raft tolerates lost messages, so sends never block the node: while
 * a peer is unreachable its messages queue up to a bound and then drop,
 * and reconnects back off.
 *
 * @module
 */

import type { RpcConnection } from "../rpc/connection.ts";
import { dial } from "../rpc/dial.ts";
import type { Dialer } from "../rpc/transport.ts";
import type { Message, NodeId } from "./types.ts";

/** The JSON-RPC method peers call to deliver messages. */
export const STEP_METHOD = "raft.step";

/** Settings of a {@link PeerTransport}. */
export interface PeerTransportOptions {
  /** Peer id → `tcp://host:port` URL. The sender's own id may be present. */
  peers: Readonly<Record<NodeId, string>>;
  /** Opens connections; default Deno TCP. */
  dialer?: Dialer;
  /** Messages kept per peer while its connection opens. Default 1024. */
  maxQueuedMessages?: number;
  /** First reconnect delay after a failure, ms. Default 50. */
  minBackoffMs?: number;
  /** Longest reconnect delay, ms. Default 1000. */
  maxBackoffMs?: number;
  /** Most messages in one notification. Default 64. */
  maxMessagesPerFrame?: number;
}

/**
 * Sends each message to the peer named by its `to` field.
 *
 * @example
 * ```ts ignore
 * import { PeerTransport } from "./peer_transport.ts";
 * const transport = new PeerTransport({ peers: { n2: "tcp://127.0.0.1:7002" } });
 * transport.send([{ type: "voteResponse", from: "n1", to: "n2", term: 1, granted: true }]);
 * transport.close();
 * ```
 */
export class PeerTransport {
  readonly #peers = new Map<NodeId, PeerLink>();

  /**
   * Sets up a link per peer; each connects on its first send.
   *
   * @param options peers and pacing; see {@link PeerTransportOptions}.
   */
  constructor(options: PeerTransportOptions) {
    for (const [id, url] of Object.entries(options.peers)) {
      this.#peers.set(id, new PeerLink(url, options));
    }
  }

  /** Queues messages for delivery; unknown destinations are dropped. */
  send(messages: readonly Message[]): void {
    const byPeer = new Map<NodeId, Message[]>();
    for (const message of messages) {
      const batch = byPeer.get(message.to);
      if (batch === undefined) byPeer.set(message.to, [message]);
      else batch.push(message);
    }
    for (const [id, batch] of byPeer) this.#peers.get(id)?.send(batch);
  }

  /** Closes every peer connection; later sends are dropped. */
  close(): void {
    for (const link of this.#peers.values()) link.close();
  }
}

class PeerLink {
  readonly #url: string;
  readonly #dialer?: Dialer;
  readonly #maxQueued: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #maxPerFrame: number;
  #connection: RpcConnection | null = null;
  #connecting = false;
  #queue: Message[] = [];
  #backoffMs = 0;
  #retryAt = 0;
  #closed = false;

  constructor(url: string, options: PeerTransportOptions) {
    this.#url = url;
    this.#dialer = options.dialer;
    this.#maxQueued = options.maxQueuedMessages ?? 1024;
    this.#minBackoffMs = options.minBackoffMs ?? 50;
    this.#maxBackoffMs = options.maxBackoffMs ?? 1000;
    this.#maxPerFrame = options.maxMessagesPerFrame ?? 64;
  }

  send(messages: Message[]): void {
    if (this.#closed) return;
    const connection = this.#connection;
    if (connection !== null && !connection.isClosed) {
      this.#write(connection, messages);
      return;
    }
    this.#queue.push(...messages);
    if (this.#queue.length > this.#maxQueued) {
      this.#queue.splice(0, this.#queue.length - this.#maxQueued);
    }
    this.#connect();
  }

  close(): void {
    this.#closed = true;
    this.#queue = [];
    this.#connection?.close();
    this.#connection = null;
  }

  #write(connection: RpcConnection, messages: Message[]): void {
    for (let i = 0; i < messages.length; i += this.#maxPerFrame) {
      const frame = messages.slice(i, i + this.#maxPerFrame);
      connection.notify(STEP_METHOD, [frame]).catch(() => {
        // Lost messages are retried by Raft itself (heartbeats, probes).
      });
    }
  }

  #connect(): void {
    if (this.#connecting || this.#closed || Date.now() < this.#retryAt) return;
    this.#connecting = true;
    dial(this.#url, { dialer: this.#dialer, connectTimeoutMs: 1000 })
      .then((connection) => {
        if (this.#closed) {
          connection.close();
          return;
        }
        this.#connection = connection;
        this.#backoffMs = 0;
        const queued = this.#queue;
        this.#queue = [];
        this.#write(connection, queued);
      })
      .catch(() => {
        this.#backoffMs = Math.min(
          Math.max(this.#backoffMs * 2, this.#minBackoffMs),
          this.#maxBackoffMs,
        );
        this.#retryAt = Date.now() + this.#backoffMs;
        this.#queue = [];
      })
      .finally(() => {
        this.#connecting = false;
      });
  }
}
