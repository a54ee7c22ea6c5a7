/**
 * The local area of one registry node (after JOnAS CMI): bindings made with
 * `scope: "local"` live only in this node's memory. They are never
 * replicated, other nodes never see them, lookups on this node merge them
 * with the global bindings, and they disappear when the node restarts or
 * when the lease they are attached to ends.
 *
 * @module
 */

import {
  type Attributes,
  type Endpoint,
  matchesQuery,
} from "../protocol/registry.ts";
import { type Binding, toEndpoint } from "./state.ts";

/**
 * Local bindings by name, in binding order.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { LocalArea } from "./local_area.ts";
 * const area = new LocalArea();
 * area.bind({
 *   name: "cache", id: "c1", url: "tcp://127.0.0.1:9100", attrs: {}, weight: 1,
 *   zone: null, leaseId: "L1", createRevision: 4, modRevision: 4,
 *   state: "serving", check: null,
 * });
 * assert.equal(area.bindings("cache").length, 1);
 * area.leaseEnded("L1");
 * assert.equal(area.bindings("cache").length, 0);
 * ```
 */
export class LocalArea {
  readonly #bindings = new Map<string, Map<string, Binding>>();
  #changes = 0;

  /**
   * Counts every change (bind, unbind, state, a lease's end): while it
   * stays the same, so do the local bindings.
   */
  get changes(): number {
    return this.#changes;
  }

  /** Adds or replaces a local binding. */
  bind(binding: Binding): void {
    this.#changes++;
    let bound = this.#bindings.get(binding.name);
    if (bound === undefined) {
      bound = new Map();
      this.#bindings.set(binding.name, bound);
    }
    bound.set(binding.id, { ...binding, attrs: { ...binding.attrs } });
  }

  /**
   * Removes local binding `id` of `name` (only if attached to `leaseId`,
   * when given). @returns whether one was removed.
   */
  unbind(name: string, id: string, leaseId?: string): boolean {
    const bound = this.#bindings.get(name);
    const binding = bound?.get(id);
    if (
      binding === undefined ||
      (leaseId !== undefined && binding.leaseId !== leaseId)
    ) {
      return false;
    }
    bound!.delete(id);
    if (bound!.size === 0) this.#bindings.delete(name);
    this.#changes++;
    return true;
  }

  /**
   * Marks local binding `id` of `name` serving or draining.
   * @returns the binding after the change, or undefined when there is none
   * (or it is attached to another lease than `leaseId`).
   */
  setState(
    name: string,
    id: string,
    state: "serving" | "draining",
    leaseId?: string,
  ): Binding | undefined {
    const binding = this.#bindings.get(name)?.get(id);
    if (
      binding === undefined ||
      (leaseId !== undefined && binding.leaseId !== leaseId)
    ) {
      return undefined;
    }
    binding.state = state;
    this.#changes++;
    return { ...binding, attrs: { ...binding.attrs } };
  }

  /** Local bindings of `name` matching `query` (copies). */
  bindings(name: string, query: Attributes = {}): Binding[] {
    const result: Binding[] = [];
    for (const binding of this.#bindings.get(name)?.values() ?? []) {
      if (matchesQuery(binding.attrs, query)) {
        result.push({ ...binding, attrs: { ...binding.attrs } });
      }
    }
    return result;
  }

  /** The local binding `id` of `name`, if any. */
  binding(name: string, id: string): Binding | undefined {
    const binding = this.#bindings.get(name)?.get(id);
    return binding === undefined
      ? undefined
      : { ...binding, attrs: { ...binding.attrs } };
  }

  /** Names with local bindings starting with `prefix`, with their counts. */
  names(prefix = ""): { name: string; count: number }[] {
    const names: { name: string; count: number }[] = [];
    for (const [name, bound] of this.#bindings) {
      if (name.startsWith(prefix)) names.push({ name, count: bound.size });
    }
    return names;
  }

  /** A lease ended (revoked or expired): its local bindings go with it. */
  leaseEnded(leaseId: string): number {
    let removed = 0;
    for (const [name, bound] of this.#bindings) {
      for (const [id, binding] of bound) {
        if (binding.leaseId === leaseId) {
          bound.delete(id);
          removed++;
        }
      }
      if (bound.size === 0) this.#bindings.delete(name);
    }
    if (removed > 0) this.#changes++;
    return removed;
  }

  /** Local bindings attached to `leaseId`, as `{ name, id }`. */
  ofLease(leaseId: string): { name: string; id: string }[] {
    const result: { name: string; id: string }[] = [];
    for (const bound of this.#bindings.values()) {
      for (const binding of bound.values()) {
        if (binding.leaseId === leaseId) {
          result.push({ name: binding.name, id: binding.id });
        }
      }
    }
    return result;
  }

  /** How many local bindings there are. */
  get size(): number {
    let size = 0;
    for (const bound of this.#bindings.values()) size += bound.size;
    return size;
  }
}

/** A local binding as an endpoint. */
export function localEndpoint(
  binding: Binding,
  load: number | null,
): Endpoint {
  return { ...toEndpoint(binding, load), scope: "local" };
}
