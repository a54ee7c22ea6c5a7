/**
 * The watch API: `registry.watch` streams the changes under a prefix to
 * the connection that asked (from the node's history window), and
 * `registry.unwatch` stops one.
 *
 * @module
 */

import { method } from "../../rpc/server/method.ts";
import type { RpcSession } from "../../rpc/server/server_connection.ts";
import { REGISTRY_METHODS } from "../../protocol/registry.ts";
import { REGISTRY_PARAMS } from "../../protocol/registry_params.ts";
import type { MethodTable, ServiceCore } from "./_core.ts";

const { watch, unwatch } = REGISTRY_METHODS;

/** The watch methods of one client connection. */
export function watchMethods(
  core: ServiceCore,
  session: RpcSession,
): MethodTable<typeof watch | typeof unwatch> {
  const { watches } = core.context;
  return {
    [watch]: method(
      REGISTRY_PARAMS[watch],
      (p) => watches.watch(session, p),
    ),
    [unwatch]: method(
      REGISTRY_PARAMS[unwatch],
      (p) => ({ cancelled: watches.unwatch(session, p.watchId) }),
    ),
  };
}
