/**
 * The Rafter registry: a replicated map from service name to endpoints,
 * kept consistent by Raft. It holds the contract (`protocol.ts`: every
 * method's params and result, watch notifications, error codes), the state
 * machine (bindings, leases, revisions, the watch history window,
 * snapshots), the JSON-RPC service (`registry.*`, `lease.*`), lease timing
 * (`lease_keeper.ts`), watches (`watch_hub.ts`), the local area, health
 * checks, and `startRegistryNode`, which runs one node on a client port
 * and a peer port (authenticated by the cluster secret);
 * `registry/main.ts` is its command line.
 *
 * @example
 * ```ts ignore
 * import { startRegistryNode } from "./mod.ts";
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 7001 },
 *   dataDir: "./data/n1",
 * });
 * await node.stop();
 * ```
 *
 * @module
 */

export * from "../protocol/registry.ts";
export * from "./state.ts";
export * from "./service.ts";
export * from "./lease_keeper.ts";
export * from "./watch_hub.ts";
export * from "./local_area.ts";
export * from "./health_checker.ts";
export * from "./params.ts";
export * from "./registry_node.ts";
