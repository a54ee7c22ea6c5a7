/**
 * What a node knows about the other members of its cluster: where their
 * peer ports are, the client URLs they announced in the peer handshake,
 * whether this node can reach them now and why not, and when it last
 * heard from them. The {@link PeerTransport} and the peer server keep it
 * up to date; status pages and logs read it. Web-standard.
 *
 * @module
 */

import type { NodeId } from "./types.ts";

/** One member as {@link PeerDirectory.status} reports it. */
export interface PeerStatus {
  /** Member id. */
  id: NodeId;
  /** Its peer URL (`tcp://host:port`). */
  peerUrl: string;
  /** The client URL it announced (or this node's own), or null until learnt. */
  clientUrl: string | null;
  /** Whether this entry is the node itself. */
  self: boolean;
  /**
   * Whether this node's connection to it is open and authenticated (always
   * true for self).
   */
  reachable: boolean;
  /**
   * Why it is not reachable: the last connect or handshake error (e.g.
   * `"connection refused"`, `"peer rejected our cluster secret"`), or null
   * (reachable, or not tried yet).
   */
  lastError: string | null;
  /**
   * When an authenticated message from it last arrived on this node's peer
   * port, ms since the epoch (`Date.now()`), or null if never.
   */
  lastHeardAt: number | null;
}

/**
 * The member table of one node.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { PeerDirectory } from "./peer_directory.ts";
 * const directory = new PeerDirectory("n1", {
 *   n1: "tcp://127.0.0.1:7101",
 *   n2: "tcp://127.0.0.1:7102",
 * });
 * directory.failed("n2", "connection refused");
 * assert.deepEqual(directory.unreachable(), [
 *   { id: "n2", peerUrl: "tcp://127.0.0.1:7102", reason: "connection refused" },
 * ]);
 * ```
 */
export class PeerDirectory {
  /** This node's id. */
  readonly self: NodeId;
  readonly #members = new Map<NodeId, PeerStatus>();
  /** Ids removed by {@link remove} (bounded by the ids ever added). */
  readonly #removed = new Set<NodeId>();

  /**
   * Makes the table; no member but this node is reachable yet.
   *
   * @param self this node's id, a key of `peers`.
   * @param peers every member's id → peer URL, this node included.
   * @throws {RangeError} when `self` is not among `peers`.
   */
  constructor(self: NodeId, peers: Readonly<Record<NodeId, string>>) {
    if (!Object.hasOwn(peers, self)) {
      throw new RangeError(`node ${self} is not among the members`);
    }
    this.self = self;
    for (const [id, peerUrl] of Object.entries(peers)) {
      this.#members.set(id, {
        id,
        peerUrl,
        clientUrl: null,
        self: id === self,
        reachable: id === self,
        lastError: null,
        lastHeardAt: null,
      });
    }
  }

  /** Every member id, this node included, in the order given. */
  get ids(): NodeId[] {
    return [...this.#members.keys()];
  }

  /** Whether `id` is a member. */
  has(id: NodeId): boolean {
    return this.#members.has(id);
  }

  /**
   * Removes member `id` (a membership change): its connections are no
   * longer accepted, and the peer port drops the messages it still sends.
   * Removing this node itself, or a stranger, does nothing.
   *
   * @returns whether `id` was a member and is removed.
   */
  remove(id: NodeId): boolean {
    if (id === this.self) return false;
    const removed = this.#members.delete(id);
    if (removed) this.#removed.add(id);
    return removed;
  }

  /**
   * Whether `id` was a member this directory removed (and not added back):
   * such a peer is refused, unlike one this node never knew (a member added
   * by a change this node has not seen yet).
   */
  wasRemoved(id: NodeId): boolean {
    return this.#removed.has(id);
  }

  /**
   * Adds member `id` at `peerUrl` (a membership change), or records its
   * new peer URL when it is a member already (its reachability is kept).
   *
   * @returns whether `id` was not a member before.
   */
  add(id: NodeId, peerUrl: string): boolean {
    this.#removed.delete(id);
    const member = this.#members.get(id);
    if (member !== undefined) {
      member.peerUrl = peerUrl;
      return false;
    }
    this.#members.set(id, {
      id,
      peerUrl,
      clientUrl: null,
      self: id === this.self,
      reachable: id === this.self,
      lastError: null,
      lastHeardAt: null,
    });
    return true;
  }

  /** The peer URL of member `id`, or null for a stranger. */
  peerUrl(id: NodeId): string | null {
    return this.#members.get(id)?.peerUrl ?? null;
  }

  /** The client URL member `id` announced (or this node's own), or null. */
  clientUrl(id: NodeId): string | null {
    return this.#members.get(id)?.clientUrl ?? null;
  }

  /** Records a member's client URL (null leaves a known one in place). */
  setClientUrl(id: NodeId, url: string | null): void {
    const member = this.#members.get(id);
    if (member !== undefined && url !== null) member.clientUrl = url;
  }

  /** Records that this node's connection to `id` is open and authenticated. */
  connected(id: NodeId): void {
    const member = this.#members.get(id);
    if (member === undefined || member.self) return;
    member.reachable = true;
    member.lastError = null;
  }

  /** Records that `id` cannot be reached now, and why. */
  failed(id: NodeId, reason: string): void {
    const member = this.#members.get(id);
    if (member === undefined || member.self) return;
    member.reachable = false;
    member.lastError = reason;
  }

  /** Records that an authenticated message from `id` arrived. */
  heard(id: NodeId, at: number = Date.now()): void {
    const member = this.#members.get(id);
    if (member !== undefined && !member.self) member.lastHeardAt = at;
  }

  /** Every member (copies), in the order given. */
  status(): PeerStatus[] {
    return [...this.#members.values()].map((member) => ({ ...member }));
  }

  /**
   * The members this node cannot reach now, with why (`"not connected
   * yet"` before the first attempt ends).
   */
  unreachable(): { id: NodeId; peerUrl: string; reason: string }[] {
    return [...this.#members.values()]
      .filter((member) => !member.reachable)
      .map((member) => ({
        id: member.id,
        peerUrl: member.peerUrl,
        reason: member.lastError ?? "not connected yet",
      }));
  }
}
