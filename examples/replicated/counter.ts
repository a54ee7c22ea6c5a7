/**
 * A replicated counter: the smallest replicated service. Its state is one
 * number per counter name; `add` is a write (proposed through Raft and
 * applied on every replica in log order), `get` a linearizable read,
 * `peek` a local read (this replica's value, maybe behind).
 *
 * A write that carries a `requestId` is applied once however often it is
 * retried (the replicas remember the outcomes of the last 10,000 ids), so
 * a client can declare `add` idempotent and let the stub retry it after a
 * leader's death.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { StateMachine } from "../../replicated/mod.ts";
 * import { counter } from "./counter.ts";
 * const machine = new StateMachine(counter);
 * machine.apply(StateMachine.encode("add", [{ counter: "a", by: 2, requestId: "x1" }], "x1"));
 * machine.apply(StateMachine.encode("add", [{ counter: "a", by: 2, requestId: "x1" }], "x1"));
 * assert.equal(machine.read("get", [{ counter: "a" }]), 2); // applied once
 * ```
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import type { ServiceDefinition } from "../../replicated/mod.ts";

/** The counter's state: counter name → value. */
export type Counters = Record<string, number>;

/** The counter's methods, as a stub sees them. */
export interface Counter {
  /** Adds `by` (default 1) to `counter`; returns the new value. */
  add(params: { counter: string; by?: number; requestId?: string }): number;
  /** The counter's value, with every acknowledged `add` in it. */
  get(params: { counter: string }): number;
  /** This replica's value now (may miss the latest adds). */
  peek(params: { counter: string }): number;
}

function counterName(params: unknown): string {
  const name = (params as { counter?: unknown } | undefined)?.counter;
  if (typeof name !== "string" || name.length === 0 || name.length > 256) {
    throw new RpcError(
      INVALID_PARAMS,
      'Invalid params: name the counter: { "counter": "visits", "by": 1 }',
    );
  }
  return name;
}

/** The counter service definition. */
export const counter: ServiceDefinition<Counters> = {
  initial: () => ({}),
  writes: {
    add(state, params: { by?: unknown }) {
      const name = counterName(params);
      const by = params.by ?? 1;
      if (typeof by !== "number" || !Number.isSafeInteger(by)) {
        throw new RpcError(
          INVALID_PARAMS,
          "Invalid params: by must be an integer (default 1)",
        );
      }
      state[name] = (state[name] ?? 0) + by;
      return state[name];
    },
  },
  reads: {
    get: (state, params) => state[counterName(params)] ?? 0,
  },
  localReads: {
    peek: (state, params) => state[counterName(params)] ?? 0,
  },
};
