/**
 * The table of the CLI's commands (all but `rafter registry`, which hands
 * its words to the registry node), in the order `rafter --help` lists them.
 *
 * @module
 */

import type { Command } from "./context.ts";
import { AUTH_COMMANDS } from "./commands/auth.ts";
import { bindCommand } from "./commands/bind.ts";
import { CERT_COMMANDS } from "./commands/cert.ts";
import { TOKEN_COMMANDS } from "./commands/token.ts";
import { callCommand } from "./commands/call.ts";
import { drainCommand } from "./commands/drain.ts";
import { LEADER_COMMANDS } from "./commands/leader.ts";
import { LEASE_COMMANDS } from "./commands/lease.ts";
import { lookupCommand } from "./commands/lookup.ts";
import { lsCommand } from "./commands/ls.ts";
import { MEMBER_COMMANDS } from "./commands/member.ts";
import { SNAPSHOT_COMMANDS } from "./commands/snapshot.ts";
import { statusCommand } from "./commands/status.ts";
import { unbindCommand } from "./commands/unbind.ts";
import { watchCommand } from "./commands/watch.ts";

/** Every command of the table, in the order `rafter --help` lists them. */
export const COMMAND_LIST: readonly Command[] = [
  statusCommand,
  lsCommand,
  lookupCommand,
  watchCommand,
  bindCommand,
  unbindCommand,
  drainCommand,
  ...LEASE_COMMANDS,
  ...LEADER_COMMANDS,
  ...MEMBER_COMMANDS,
  ...SNAPSHOT_COMMANDS,
  callCommand,
  ...AUTH_COMMANDS,
  ...TOKEN_COMMANDS,
  ...CERT_COMMANDS,
];
