/**
 * The simulated network between the simulator's nodes: every message takes
 * a random delay (so messages reorder), and while faults are active it may
 * be lost or duplicated. Links can be cut: symmetric partitions (groups
 * that only talk among themselves), asymmetric ones (one direction of a
 * link cut, e.g. a node that hears but is not heard), and flapping
 * partitions that come and go every few steps. A message is dropped when
 * its link is cut at sending or at delivery.
 *
 * @module
 */

import type { Message, NodeId } from "../types.ts";
import type { Prng } from "./prng.ts";

/** Delay and fault settings of a {@link SimNetwork}. */
export interface SimNetworkConfig {
  /** Fewest steps a message takes to arrive (>= 1). */
  minDelay: number;
  /** Most steps a message takes to arrive; delays differ, so they reorder. */
  maxDelay: number;
  /** Probability that a message is lost (while faults are active). */
  lossRate: number;
  /** Probability that a message is delivered twice (own delay each). */
  duplicateRate: number;
}

/** What the network did, by kind. */
export interface NetworkStats {
  /** Messages handed to the network. */
  sent: number;
  /** Lost at random. */
  lost: number;
  /** Delivered a second time. */
  duplicated: number;
  /** Dropped because their link was cut (partition, asymmetric or flapping). */
  cut: number;
}

/** More messages in flight than this means the cores amplify traffic. */
export const maxInFlight = 100_000;

/** A flapping partition: cut during the even periods, whole in the odd ones. */
interface Flap {
  layout: Map<NodeId, number>;
  start: number;
  period: number;
  until: number;
}

/**
 * The network. The simulator calls {@link send} for every message a driver
 * sends and {@link deliver} once per step.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Prng } from "./prng.ts";
 * import { SimNetwork } from "./network.ts";
 * const net = new SimNetwork(new Prng(1), ["n1", "n2"], {
 *   minDelay: 1, maxDelay: 1, lossRate: 0, duplicateRate: 0,
 * });
 * net.send({ type: "timeoutNow", from: "n1", to: "n2", term: 1 }, 0);
 * const got: string[] = [];
 * net.deliver(1, (m) => got.push(m.to));
 * assert.deepEqual(got, ["n2"]);
 * ```
 */
export class SimNetwork {
  /** Counters, by kind. */
  readonly stats: NetworkStats = { sent: 0, lost: 0, duplicated: 0, cut: 0 };
  /** Loss and duplication apply only while this is true. */
  faultsActive = true;
  readonly #rng: Prng;
  readonly #ids: readonly NodeId[];
  readonly #config: SimNetworkConfig;
  readonly #inFlight = new Map<number, Message[]>();
  #count = 0;
  #now = 0;
  /** Group number per node, or null when fully connected. */
  #groups: Map<NodeId, number> | null = null;
  /** Cut directed links, as "from>to". */
  readonly #oneWay = new Set<string>();
  #flap: Flap | null = null;

  /**
   * Makes a fully connected network.
   *
   * @param rng draws delays, losses and duplicates.
   * @param ids every node's id.
   * @param config delays and fault rates.
   */
  constructor(rng: Prng, ids: readonly NodeId[], config: SimNetworkConfig) {
    this.#rng = rng;
    this.#ids = ids;
    this.#config = config;
  }

  /** Messages in flight. */
  get inFlight(): number {
    return this.#count;
  }

  /**
   * Splits the network into groups that only talk among themselves; nodes
   * not named form one more group. `partition([])` reconnects the groups
   * (one-way cuts and flapping stay until {@link heal}).
   */
  partition(groups: readonly (readonly NodeId[])[]): void {
    this.#groups = groups.length === 0 ? null : this.#layout(groups);
  }

  /** Cuts the link from `from` to `to` only (an asymmetric partition). */
  cutOneWay(from: NodeId, to: NodeId): void {
    this.#oneWay.add(`${from}>${to}`);
  }

  /**
   * A flapping partition: `groups` are cut apart during the first `period`
   * steps from now, joined during the next `period`, and so on for
   * `duration` steps.
   */
  flap(
    groups: readonly (readonly NodeId[])[],
    period: number,
    duration: number,
  ): void {
    this.#flap = {
      layout: this.#layout(groups),
      start: this.#now,
      period: Math.max(1, period),
      until: this.#now + duration,
    };
  }

  /** Reconnects everything: groups, one-way cuts and flapping. */
  heal(): void {
    this.#groups = null;
    this.#oneWay.clear();
    this.#flap = null;
  }

  /** Whether a message from `from` reaches `to` now. */
  connected(from: NodeId, to: NodeId): boolean {
    if (
      this.#groups !== null && this.#groups.get(from) !== this.#groups.get(to)
    ) {
      return false;
    }
    if (this.#oneWay.size > 0 && this.#oneWay.has(`${from}>${to}`)) {
      return false;
    }
    const flap = this.#flap;
    if (flap !== null && this.#now < flap.until) {
      const cut = Math.floor((this.#now - flap.start) / flap.period) % 2 === 0;
      if (cut && flap.layout.get(from) !== flap.layout.get(to)) return false;
    }
    return true;
  }

  /**
   * Puts a message on the wire at step `now`.
   *
   * @returns false when there are more than {@link maxInFlight} messages in
   * flight (a message storm).
   */
  send(message: Message, now: number): boolean {
    this.#now = now;
    this.stats.sent++;
    if (!this.connected(message.from, message.to)) {
      this.stats.cut++;
      return true;
    }
    const rng = this.#rng;
    if (this.faultsActive && rng.chance(this.#config.lossRate)) {
      this.stats.lost++;
      return true;
    }
    let copies = 1;
    if (this.faultsActive && rng.chance(this.#config.duplicateRate)) {
      copies = 2;
      this.stats.duplicated++;
    }
    for (let i = 0; i < copies; i++) {
      const at = now + rng.int(this.#config.minDelay, this.#config.maxDelay);
      let bucket = this.#inFlight.get(at);
      if (bucket === undefined) this.#inFlight.set(at, bucket = []);
      bucket.push(message);
      this.#count++;
    }
    return this.#count <= maxInFlight;
  }

  /**
   * Hands the messages due at step `now` whose link is whole to `receive`,
   * each a fresh copy (as a real network would).
   */
  deliver(now: number, receive: (message: Message) => void): void {
    this.#now = now;
    const bucket = this.#inFlight.get(now);
    if (bucket === undefined) return;
    this.#inFlight.delete(now);
    this.#count -= bucket.length;
    for (const message of bucket) {
      if (!this.connected(message.from, message.to)) {
        this.stats.cut++;
        continue;
      }
      receive(
        message.type === "append"
          ? { ...message, entries: message.entries.map((e) => ({ ...e })) }
          : { ...message },
      );
    }
  }

  #layout(groups: readonly (readonly NodeId[])[]): Map<NodeId, number> {
    const layout = new Map<NodeId, number>();
    groups.forEach((group, i) => group.forEach((id) => layout.set(id, i)));
    for (const id of this.#ids) {
      if (!layout.has(id)) layout.set(id, groups.length);
    }
    return layout;
  }
}
