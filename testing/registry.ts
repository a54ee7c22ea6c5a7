/**
 * In-process registry nodes for tests, with their parts showing
 * ({@link RegistryNodeInternals}, as `internals` gives them: the Raft
 * node, the state, the transport). Embedders use `registry/mod.ts` (or
 * `registry/main.ts`, the Deno entry), whose `RegistryNode` shows only
 * what they need. The node itself is `registry/node/assembly.ts`.
 *
 * @module
 */

import { startRegistryNode as startDenoNode } from "../registry/main.ts";
import type { RegistryNodeOptions } from "../registry/node/options.ts";
import {
  internals,
  type RegistryNodeInternals,
} from "../registry/node/internals.ts";

export type { RegistryNodeInternals } from "../registry/node/internals.ts";

/** A started node with its parts (for tests: {@link RegistryNodeInternals}). */
export type RegistryNode = RegistryNodeInternals;

/**
 * Starts a node on Deno (`registry/main.ts`'s `startRegistryNode`) and
 * gives it with its parts.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { startRegistryNode } from "./registry.ts";
 * import { waitFor } from "./time.ts";
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 * });
 * try {
 *   // A single node elects itself.
 *   await waitFor(() => node.raft.status.role === "leader", "n1 leads", 5_000);
 *   assert.equal(node.state.revision, 0);
 * } finally {
 *   await node.stop();
 *   await Deno.remove(dataDir, { recursive: true });
 * }
 * ```
 */
export async function startRegistryNode(
  options: RegistryNodeOptions,
): Promise<RegistryNodeInternals> {
  return internals(await startDenoNode(options));
}
