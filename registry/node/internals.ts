/**
 * A registry node's parts, for tests and for the registry's own
 * assembly (the `--join` loop of `registry/main.ts`): NOT exported from
 * `registry/mod.ts`. An embedder sees a {@link RegistryNode}; a test that
 * needs the Raft node, the state or the transport asks {@link internals}.
 *
 * @module
 */

import type { RegistryNode } from "./options.ts";
import type { RegistryNodeInternals } from "./parts.ts";
import { RegistryNodeAssembly } from "./assembly.ts";

export type { RegistryNodeInternals } from "./parts.ts";

/**
 * The parts of `node`.
 *
 * @throws {TypeError} when `node` was not started by `startRegistryNode`.
 */
export function internals(node: RegistryNode): RegistryNodeInternals {
  if (!(node instanceof RegistryNodeAssembly)) {
    throw new TypeError("not a node that startRegistryNode started");
  }
  return node;
}
