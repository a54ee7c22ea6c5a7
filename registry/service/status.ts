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

const { status } = REGISTRY_METHODS;

/** The status method. */
export function statusMethods(core: ServiceCore): MethodTable<typeof status> {
  return {
    [status]: method(
      REGISTRY_PARAMS[status],
      () => core.context.status(),
    ),
  };
}
