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
import { type Caller, notYours } from "./_caller.ts";

const {
  leaseGrant,
  leaseKeepAlive,
  leaseRevoke,
  leaseTimeToLive,
  leaseList,
} = REGISTRY_METHODS;

/**
 * The lease methods of one connection (`caller`). With auth enforced,
 * `lease.grant` needs some `bind` permission and records the caller as
 * the lease's owner; the other methods touch only the caller's own leases
 * (an admin's: anyone's), and `lease.list` lists only those.
 */
export function leaseMethods(
  core: ServiceCore,
  caller: Caller,
): MethodTable<
  | typeof leaseGrant
  | typeof leaseKeepAlive
  | typeof leaseRevoke
  | typeof leaseTimeToLive
  | typeof leaseList
> {
  const { context } = core;

  function leaseInfo(method: string, id: string): LeaseInfo | undefined {
    const lease = context.state.lease(id);
    if (lease === undefined) return undefined;
    if (!caller.mayManage(lease.owner)) throw notYours(method, `lease ${id}`);
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
      caller.needAnyBind(leaseGrant);
      const problem = minTtlProblem(p.ttlMs, "ttlMs", context.minTtlMs);
      if (problem !== null) throw invalid(problem);
      const id = p.id ?? newLeaseId();
      const owner = caller.owner();
      const value = await core.propose({
        op: "leaseGrant",
        id,
        ttlMs: p.ttlMs,
        ...(owner === undefined ? {} : { owner }),
      });
      return { id, ttlMs: p.ttlMs, revision: value.revision };
    }),

    [leaseKeepAlive]: method(
      REGISTRY_PARAMS[leaseKeepAlive],
      async ({ id, load }) => {
        caller.authenticated(leaseKeepAlive);
        core.requireLeaderReady();
        const check = () => {
          const lease = context.state.lease(id);
          if (lease === undefined || context.leases.isExpiring(id)) {
            throw leaseNotFound(id);
          }
          if (!caller.mayManage(lease.owner)) {
            throw notYours(leaseKeepAlive, `lease ${id}`);
          }
          return lease;
        };
        check();
        // A leader cut off from the majority may not know it was deposed
        // (and the lease revoked or expired by the new one): confirm the
        // leadership with a ReadIndex round first, as a linearizable read
        // does (Raft dissertation §6.4), so a renewal is never answered
        // from a stale state (issue 17).
        await core.barrier();
        core.requireLeaderReady();
        const lease = check();
        context.leases.keepAlive(id, load);
        return { id, ttlMs: lease.ttlMs };
      },
    ),

    [leaseRevoke]: method(REGISTRY_PARAMS[leaseRevoke], async ({ id }) => {
      caller.authenticated(leaseRevoke);
      const guard = caller.guard();
      const value = await core.propose({
        op: "leaseRevoke",
        id,
        ...(guard === undefined ? {} : { guard }),
      });
      return { revision: value.revision, removed: value.removed ?? 0 };
    }),

    [leaseTimeToLive]: method(REGISTRY_PARAMS[leaseTimeToLive], ({ id }) => {
      caller.authenticated(leaseTimeToLive);
      core.requireLeaderReady();
      const info = leaseInfo(leaseTimeToLive, id);
      if (info === undefined) throw leaseNotFound(id);
      return info;
    }),

    [leaseList]: method(REGISTRY_PARAMS[leaseList], () => {
      caller.authenticated(leaseList);
      core.requireLeaderReady();
      return {
        leases: context.state.leases()
          .filter(({ owner }) => caller.mayManage(owner))
          .map(({ id }) => leaseInfo(leaseList, id)!),
      };
    }),
  };
}
