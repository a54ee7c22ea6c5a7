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
import type { Caller } from "./_caller.ts";

const { watch, unwatch } = REGISTRY_METHODS;

/**
 * The watch methods of one client connection (`caller`). With auth
 * enforced, a watch needs `read` on its prefix, at the call and at every
 * delivery (a watch whose token was revoked, or lost the permission, is
 * cancelled), and its events show lease ids only to their owners (and
 * admins).
 */
export function watchMethods(
  core: ServiceCore,
  session: RpcSession,
  caller: Caller,
): MethodTable<typeof watch | typeof unwatch> {
  const { watches } = core.context;
  return {
    [watch]: method(
      REGISTRY_PARAMS[watch],
      (p) => {
        caller.need(watch, "read", p.prefix);
        return watches.watch(session, p, (events) => {
          if (!caller.enforced) return events;
          if (!caller.mayRead(p.prefix)) return null;
          return caller.viewEvents(events);
        });
      },
    ),
    [unwatch]: method(
      REGISTRY_PARAMS[unwatch],
      (p) => ({ cancelled: watches.unwatch(session, p.watchId) }),
    ),
  };
}
