/**
 * Helpers shared by the tests of this folder (not part of the public API).
 *
 * @module
 */

import { type Endpoint, makeEndpoint } from "../protocol/registry.ts";
import {
  type RegistryNode,
  startRegistryNode,
} from "../registry/registry_node.ts";

/**
 * A single-node registry on a free 127.0.0.1 port, in a fresh temporary
 * folder named with `prefix`, with fast ticks (10 ms, elections after 5):
 * the caller stops it and removes `dir`.
 */
export async function startTestRegistry(
  prefix: string,
): Promise<{ registry: RegistryNode; dir: string }> {
  const dir = await Deno.makeTempDir({ prefix });
  const registry = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: dir,
    tickMs: 10,
    electionTicks: 5,
  });
  return { registry, dir };
}

/** A serving, global endpoint `id` at 127.0.0.1:`port`, with `overrides`. */
export function endpoint(
  id: string,
  port: number,
  overrides: Partial<Endpoint> = {},
): Endpoint {
  return makeEndpoint({
    id,
    url: `tcp://127.0.0.1:${port}`,
    createRevision: 1,
    modRevision: 1,
    ...overrides,
  });
}
