/**
 * `rafter leader transfer`: asks the leader to hand leadership to a given
 * member, or the most up-to-date other one, waits until another member
 * leads, and prints who leads now.
 *
 * @module
 */

import type { LeaderTransferResult } from "../../protocol/registry.ts";
import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";

/** The spec of `rafter leader transfer`. */
export const leaderTransferCommand: Command = {
  name: "leader transfer",
  args: "",
  summary: "hand leadership to another member",
  about: `Asks the leader to hand leadership over (Raft dissertation §3.10) to
--to ID, or else to the most up-to-date other member, and waits until
another member leads; prints who leads now. Naming the member that
already leads changes nothing. The leader waits up to --timeout-ms less
one second (at most 60 s) for another member to take over. Exit 1 when
the member is unknown, there is no other member, or no member took over
in time (the leader then leads on).`,
  options: { to: { type: "string" } },
  optionHelp:
    "  --to ID           the member to lead next (default: the most up to date)",
  positionals: [0, 0],
  run: (c, _, v) => leaderTransfer(c, v.to as string | undefined),
};

/** The verbs of `rafter leader`. */
export const LEADER_COMMANDS: readonly Command[] = [leaderTransferCommand];

/** Runs `rafter leader transfer`. */
export async function leaderTransfer(
  context: Context,
  to: string | undefined,
): Promise<number> {
  const { client, globals, out } = context;
  // The leader waits at most this long for a member to take over, leaving
  // time for its answer within --timeout-ms (so a slow hand-over answers
  // "not in time" rather than being retried elsewhere).
  const timeoutMs = Math.max(
    1,
    Math.min(
      60_000,
      globals.timeoutMs - Math.min(1_000, Math.floor(globals.timeoutMs / 2)),
    ),
  );
  const result: LeaderTransferResult = await client.registry.leaderTransfer({
    to,
    timeoutMs,
    attemptTimeoutMs: globals.timeoutMs,
  });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else if (result.leader === result.previousLeader) {
    out(
      `${result.leader} already leads (term ${result.term}); nothing to do`,
    );
  } else {
    out(
      `leadership moved from ${result.previousLeader} to ${result.leader} in ${result.tookMs} ms; ${result.leader} leads term ${result.term}${
        result.leaderUrl === null ? "" : ` at ${result.leaderUrl}`
      }`,
    );
  }
  return EXIT.ok;
}
