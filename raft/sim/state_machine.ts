/**
 * The simulated state machine: a small key-value map (each client payload
 * sets one of 8 keys), the number of entries applied and a rolling digest
 * of them. It can be serialised into a snapshot ({@link SimStateMachine.take})
 * and rebuilt from one ({@link SimStateMachine.restore}), Raft paper §7; its
 * {@link SimStateMachine.fingerprint} lets the checker compare a node's state
 * with the state of the applied record at the same index (State Machine
 * Safety across snapshots).
 *
 * @module
 */

import type { Entry } from "../types.ts";

/** FNV-1a over a string, 32 bits. */
function fnv(text: string, seed = 0x811c9dc5): number {
  let hash = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** What a snapshot of a {@link SimStateMachine} holds (its JSON). */
interface SimState {
  count: number;
  digest: number;
  kv: [string, string][];
}

/**
 * One node's state machine.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStateMachine } from "./state_machine.ts";
 * const a = new SimStateMachine();
 * a.apply({ index: 1, term: 1, data: "p1.1" });
 * const b = new SimStateMachine();
 * b.restore(a.take());
 * assert.equal(a.fingerprint(), b.fingerprint());
 * ```
 */
export class SimStateMachine {
  #kv = new Map<string, string>();
  #count = 0;
  #digest = 0;

  /** Applies one normal entry (config entries do not reach it). */
  apply(entry: Entry): void {
    this.#count++;
    this.#digest = fnv(
      `${entry.index}/${entry.term}/${entry.data}`,
      this.#digest,
    );
    if (entry.data !== "") {
      this.#kv.set(`k${fnv(entry.data) % 8}`, entry.data);
    }
  }

  /** Serialises the state (a snapshot's data). */
  take(): string {
    const state: SimState = {
      count: this.#count,
      digest: this.#digest,
      kv: [...this.#kv].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
    };
    return JSON.stringify(state);
  }

  /**
   * Replaces the state with a snapshot's.
   *
   * @throws {Error} when `data` is not what {@link take} returns.
   */
  restore(data: string): void {
    const state = JSON.parse(data) as SimState;
    if (
      typeof state?.count !== "number" || typeof state.digest !== "number" ||
      !Array.isArray(state.kv)
    ) {
      throw new Error(`not a simulated state machine snapshot: ${data}`);
    }
    this.#count = state.count;
    this.#digest = state.digest;
    this.#kv = new Map(state.kv);
  }

  /** A number that differs (but for hash collisions) when the states do. */
  fingerprint(): number {
    let hash = fnv(`${this.#count}/${this.#digest}`);
    for (const key of [...this.#kv.keys()].sort()) {
      hash = fnv(`${key}=${this.#kv.get(key)};`, hash);
    }
    return hash;
  }

  /** The fingerprint of a snapshot's data. */
  static fingerprintOf(data: string): number {
    const machine = new SimStateMachine();
    machine.restore(data);
    return machine.fingerprint();
  }
}
