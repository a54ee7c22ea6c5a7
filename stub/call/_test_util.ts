/**
 * Test helpers of `stub/call/`: a cluster map over a fixed list of
 * endpoints, with no registry.
 *
 * @module
 */

import type { Endpoint } from "../../protocol/registry.ts";
import { ClusterMap } from "../cluster_map/cluster_map.ts";
import type { HealthBook } from "../cluster_map/endpoint_health.ts";

/** The map of `name` whose every lookup answers `endpoints`. */
export function fixedMap(
  name: string,
  endpoints: Endpoint[],
  health: HealthBook,
): ClusterMap {
  return new ClusterMap(name, {
    lookup: () =>
      Promise.resolve({
        name,
        query: {},
        revision: 1,
        endpoints,
        total: endpoints.length,
      }),
  }, { health });
}
