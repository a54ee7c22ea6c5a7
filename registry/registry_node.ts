/**
 * Where the tests that predate `registry/node/` import a node from: a
 * node with its parts showing ({@link RegistryNodeInternals}, as
 * `internals` gives them). Embedders use `registry/mod.ts` (or
 * `registry/main.ts`, the Deno entry), whose `RegistryNode` shows only
 * what they need. The node itself is `registry/node/assembly.ts`.
 *
 * @module
 */

import { startRegistryNode as startDenoNode } from "./main.ts";
import type { RegistryNodeOptions } from "./node/options.ts";
import { internals, type RegistryNodeInternals } from "./node/internals.ts";

export type { RegistryNodeOptions } from "./node/options.ts";
export {
  type RegistryNodeSnapshot,
  restoreRegistrySnapshot,
} from "./node/replica.ts";
export type { RegistryNodeInternals } from "./node/internals.ts";

/** A started node with its parts (for tests: {@link RegistryNodeInternals}). */
export type RegistryNode = RegistryNodeInternals;

/**
 * Starts a node on Deno (`registry/main.ts`'s `startRegistryNode`) and
 * gives it with its parts.
 *
 * @example
 * ```ts ignore
 * import { startRegistryNode } from "./registry_node.ts";
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir: await Deno.makeTempDir(),
 * });
 * console.log(node.raft.status.role, node.state.revision);
 * await node.stop();
 * ```
 */
export async function startRegistryNode(
  options: RegistryNodeOptions,
): Promise<RegistryNodeInternals> {
  return internals(await startDenoNode(options));
}
