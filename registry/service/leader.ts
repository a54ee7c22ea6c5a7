/**
 * The leadership API: `registry.leaderTransfer` hands leadership to another
 * voter and waits until it leads (Raft dissertation §3.10).
 *
 * @module
 */

import { RpcError } from "../../rpc/errors.ts";
import { method } from "../../rpc/server/method.ts";
import { NotLeaderError } from "../../raft/core.ts";
import { RaftUnavailableError } from "../../raft/node.ts";
import {
  LEADER_TRANSFER_FAILED,
  type LeaderTransferFailedData,
  type LeaderTransferResult,
  REGISTRY_METHODS,
} from "../../protocol/registry.ts";
import { REGISTRY_PARAMS } from "../../protocol/registry_params.ts";
import { invalid, type MethodTable, type ServiceCore } from "./_core.ts";
import type { Caller } from "./_caller.ts";

const { leaderTransfer } = REGISTRY_METHODS;

/** The leader transfer method of one connection: with auth enforced, admin only. */
export function leaderMethods(
  core: ServiceCore,
  caller: Caller,
): MethodTable<typeof leaderTransfer> {
  const { context } = core;
  return {
    /**
     * Hands leadership to `to` (default: the most up-to-date other voter)
     * and waits until another member leads (Raft dissertation §3.10).
     */
    [leaderTransfer]: method(
      REGISTRY_PARAMS[leaderTransfer],
      async (p): Promise<LeaderTransferResult> => {
        caller.need(leaderTransfer, "admin");
        const members = context.status().members.map((m) => m.id);
        if (
          p.to !== undefined &&
          (typeof p.to !== "string" || !members.includes(p.to))
        ) {
          throw invalid(
            `"to" must name a member of this registry (${
              members.join(", ")
            }), not ${JSON.stringify(p.to)}`,
          );
        }
        const to = p.to as string | undefined;
        const timeoutMs = p.timeoutMs ?? 2 * context.electionTimeoutMs;
        const raft = context.raft;
        const before = raft.status;
        if (before.role !== "leader") {
          throw core.rpcError(new NotLeaderError(before.leader), "write");
        }
        const started = performance.now();
        let leader: string;
        try {
          leader = await raft.transferLeadership({ target: to, timeoutMs });
        } catch (error) {
          if (error instanceof RangeError) {
            throw transferFailed(
              `Leader transfer failed: ${before.id} is the only voter of this registry; there is no other member to hand leadership to`,
              { reason: "noOtherVoter", target: to ?? null, leader: before.id },
            );
          }
          if (
            error instanceof RaftUnavailableError &&
            raft.status.role === "leader"
          ) {
            throw transferFailed(
              `Leader transfer failed: no other member took over from ${before.id}${
                to === undefined ? "" : ` (to ${to})`
              } within ${timeoutMs} ms, so ${before.id} leads on; rafter member list shows how far behind each member is, rafter status whether it is reachable`,
              { reason: "timeout", target: to ?? null, leader: before.id },
            );
          }
          throw core.rpcError(error, "write");
        }
        return {
          leader,
          leaderUrl: context.clientUrlOf(leader),
          previousLeader: before.id,
          term: raft.status.term,
          tookMs: leader === before.id
            ? 0
            : Math.round(performance.now() - started),
        };
      },
    ),
  };
}

function transferFailed(
  message: string,
  data: LeaderTransferFailedData,
): RpcError {
  return new RpcError(LEADER_TRANSFER_FAILED, message, data);
}
