/**
 * The lease API: `lease.grant` and `lease.revoke` (through Raft),
 * `lease.keepAlive`, `lease.timeToLive` and `lease.list` (answered by the
 * leader, which alone times leases).
 *
 * @module
 */

import { method } from "../../rpc/server/method.ts";
import { type LeaseInfo, REGISTRY_METHODS } from "../../protocol/registry.ts";
import {
  minTtlProblem,
  REGISTRY_PARAMS,
} from "../../protocol/registry_params.ts";
import {
  invalid,
  leaseNotFound,
  type MethodTable,
  newLeaseId,
  type ServiceCore,
} from "./_core.ts";

const {
  leaseGrant,
  leaseKeepAlive,
  leaseRevoke,
  leaseTimeToLive,
  leaseList,
} = REGISTRY_METHODS;

/** The lease methods of one service. */
export function leaseMethods(
  core: ServiceCore,
): MethodTable<
  | typeof leaseGrant
  | typeof leaseKeepAlive
  | typeof leaseRevoke
  | typeof leaseTimeToLive
  | typeof leaseList
> {
  const { context } = core;

  function leaseInfo(id: string): LeaseInfo | undefined {
    const lease = context.state.lease(id);
    if (lease === undefined) return undefined;
    const bindings = lease.bindings.map((key) => {
      const newline = key.indexOf("\n");
      return { name: key.slice(0, newline), id: key.slice(newline + 1) };
    });
    return {
      id,
      ttlMs: lease.ttlMs,
      remainingMs: context.leases.remainingMs(id, lease.ttlMs),
      bindings,
    };
  }

  return {
    [leaseGrant]: method(REGISTRY_PARAMS[leaseGrant], async (p) => {
      const problem = minTtlProblem(p.ttlMs, "ttlMs", context.minTtlMs);
      if (problem !== null) throw invalid(problem);
      const id = p.id ?? newLeaseId();
      const value = await core.propose({
        op: "leaseGrant",
        id,
        ttlMs: p.ttlMs,
      });
      return { id, ttlMs: p.ttlMs, revision: value.revision };
    }),

    [leaseKeepAlive]: method(
      REGISTRY_PARAMS[leaseKeepAlive],
      ({ id, load }) => {
        core.requireLeaderReady();
        const lease = context.state.lease(id);
        if (lease === undefined || context.leases.isExpiring(id)) {
          throw leaseNotFound(id);
        }
        context.leases.keepAlive(id, load);
        return { id, ttlMs: lease.ttlMs };
      },
    ),

    [leaseRevoke]: method(REGISTRY_PARAMS[leaseRevoke], async ({ id }) => {
      const value = await core.propose({ op: "leaseRevoke", id });
      return { revision: value.revision, removed: value.removed ?? 0 };
    }),

    [leaseTimeToLive]: method(REGISTRY_PARAMS[leaseTimeToLive], ({ id }) => {
      core.requireLeaderReady();
      const info = leaseInfo(id);
      if (info === undefined) throw leaseNotFound(id);
      return info;
    }),

    [leaseList]: method(REGISTRY_PARAMS[leaseList], () => {
      core.requireLeaderReady();
      return {
        leases: context.state.leases().map(({ id }) => leaseInfo(id)!),
      };
    }),
  };
}
