/**
 * Helpers of the real-process registry tests (private to `tests/`): a
 * client that binds continuously.
 *
 * @module
 */

import type { RegistryClient } from "../stub/registry_client/registry_client.ts";

/** Sequential binds under `name` until stopped; each acknowledged one is recorded. */
export class Binder {
  readonly acknowledged: string[] = [];
  /** performance.now() of each acknowledgement, in order. */
  readonly ackedAt: number[] = [];
  readonly errors: string[] = [];
  #stopped = false;
  readonly done: Promise<void>;

  /** Starts binding `e0`, `e1`, ... under `name`, at most 200,000 binds. */
  constructor(registry: RegistryClient, name: string) {
    this.done = this.#run(registry, name);
  }

  async #run(registry: RegistryClient, name: string): Promise<void> {
    for (let i = 0; i < 200_000 && !this.#stopped; i++) {
      const id = `e${i}`;
      try {
        await registry.bind(name, {
          id,
          url: `tcp://127.0.0.1:${10_000 + (i % 50_000)}`,
        }, { deadlineMs: 10_000 });
        this.acknowledged.push(id);
        this.ackedAt.push(performance.now());
      } catch (error) {
        this.errors.push(`${id}: ${(error as Error).message}`);
      }
    }
  }

  /** Stops after the bind under way; resolves once it is done. */
  stop(): Promise<void> {
    this.#stopped = true;
    return this.done;
  }

  /** Longest time between two acknowledgements within [from, to], ms. */
  maxGap(from = -Infinity, to = Infinity): number {
    let previous: number | null = null;
    let gap = 0;
    for (const at of this.ackedAt) {
      if (at < from) {
        previous = at;
        continue;
      }
      if (previous !== null) gap = Math.max(gap, at - previous);
      previous = at;
      if (at > to) break;
    }
    return gap;
  }
}
