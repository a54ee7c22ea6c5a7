/**
 * A fake registry that counts lookups, for the edge tests: a `serve()` on
 * 127.0.0.1 whose `registry.lookup` answers a fixed stubs list per name,
 * records each lookup it receives, and can hold its answers back until the
 * test lets them go (so that requests are certain to overlap one lookup).
 *
 * @module
 */

import { serve } from "../adapter/deno/serve.ts";
import {
  type Endpoint,
  type LookupResult,
  makeEndpoint,
  REGISTRY_METHODS,
} from "../protocol/registry.ts";

/** A running {@link countingRegistry}. */
export interface CountingRegistry {
  /** Its client URL, `tcp://127.0.0.1:PORT`. */
  readonly url: string;
  /** Lookups received so far (answered or held), by name. */
  received(name: string): number;
  /** Lookups answered so far, by name. */
  answered(name: string): number;
  /** Lookups received and not answered yet (held). */
  held(): number;
  /** From now on, lookups wait until {@link release}. */
  hold(): void;
  /** Answers the held lookups, and the next ones at once. */
  release(): void;
  /** Sets the endpoint URLs listed under `name` and bumps the revision. */
  list(name: string, urls: readonly string[]): void;
  /** The revision the next lookup answers. */
  revision(): number;
  /** Answers the held lookups, then stops. */
  close(): Promise<void>;
}

/** Starts a {@link CountingRegistry} listing `endpoints` (URLs by name). */
export function countingRegistry(
  endpoints: Record<string, readonly string[]> = {},
): CountingRegistry {
  const lists = new Map<string, Endpoint[]>();
  let revision = 1;
  const setList = (name: string, urls: readonly string[]) => {
    lists.set(
      name,
      urls.map((url, i) =>
        makeEndpoint({ id: `${name}-${i + 1}`, url, createRevision: 1 })
      ),
    );
  };
  for (const [name, urls] of Object.entries(endpoints)) setList(name, urls);
  const received = new Map<string, number>();
  const answered = new Map<string, number>();
  let holding = false;
  let waiting: (() => void)[] = [];
  const bump = (counts: Map<string, number>, name: string) =>
    counts.set(name, (counts.get(name) ?? 0) + 1);
  const server = serve({
    methods: {
      [REGISTRY_METHODS.lookup]: async (
        { name }: { name: string },
      ): Promise<LookupResult> => {
        bump(received, name);
        if (holding) await new Promise<void>((r) => waiting.push(r));
        bump(answered, name);
        const list = lists.get(name) ?? [];
        return {
          name,
          query: {},
          endpoints: list,
          total: list.length,
          revision,
        };
      },
    },
  });
  const release = () => {
    holding = false;
    const go = waiting;
    waiting = [];
    for (const resolve of go) resolve();
  };
  return {
    url: server.url,
    received: (name) => received.get(name) ?? 0,
    answered: (name) => answered.get(name) ?? 0,
    held: () => waiting.length,
    hold() {
      holding = true;
    },
    release,
    list(name, urls) {
      setList(name, urls);
      revision++;
    },
    revision: () => revision,
    async close() {
      release();
      await server.close();
    },
  };
}
