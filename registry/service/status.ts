/**
 * The status API: `registry.status`, the node's view of consensus, its
 * state and the members.
 *
 * @module
 */

import { method } from "../../rpc/server/method.ts";
import { REGISTRY_METHODS } from "../../protocol/registry.ts";
import { REGISTRY_PARAMS } from "../../protocol/registry_params.ts";
import type { MethodTable, ServiceCore } from "./_core.ts";
import type { Caller } from "./_caller.ts";

const { status } = REGISTRY_METHODS;

/** The status method of one connection: with auth enforced, any valid token. */
export function statusMethods(
  core: ServiceCore,
  caller: Caller,
): MethodTable<typeof status> {
  return {
    [status]: method(
      REGISTRY_PARAMS[status],
      () => {
        caller.authenticated(status);
        return core.context.status();
      },
    ),
  };
}
