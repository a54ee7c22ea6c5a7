/**
 * `rafter auth enable|disable|status`: turns the registry's access control
 * on or off (admin), and shows whether it is on and which token the
 * command acts as.
 *
 * @module
 */

import type { AuthStatusResult } from "../../protocol/auth.ts";
import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";

/** The spec of `rafter auth status`. */
export const authStatusCommand: Command = {
  name: "auth status",
  args: "",
  summary: "whether access control is on, and who you are",
  about:
    `Shows whether the registry node enforces access control (turned on in the
replicated state with rafter auth enable, or by the node's --auth), how
many tokens there are, and which token this command acts as (--token or
RAFTER_TOKEN): its id, name and permissions.`,
  positionals: [0, 0],
  run: async (c) => printStatus(c, await c.client.registry.authStatus()),
};

/** The spec of `rafter auth enable`. */
export const authEnableCommand: Command = {
  name: "auth enable",
  args: "",
  summary: "turn access control on (admin)",
  about:
    `Turns access control on for the whole cluster (replicated): from then on
every client must present a token (connect(urls, { token }), or
RAFTER_TOKEN for the CLI) and may only do what its permissions allow.
Needs an admin token, such as the bootstrap token a new cluster prints on
its first start; make the tokens your servers and clients need first
(rafter token create). Enabling it again changes nothing.`,
  positionals: [0, 0],
  run: async (c) => printStatus(c, await c.client.registry.authEnable()),
};

/** The spec of `rafter auth disable`. */
export const authDisableCommand: Command = {
  name: "auth disable",
  args: "",
  summary: "turn access control off (admin)",
  about:
    `Turns access control off in the replicated state (admin): tokens are kept
but no longer needed. A node started with --auth enforces it anyway.`,
  positionals: [0, 0],
  run: async (c) => printStatus(c, await c.client.registry.authDisable()),
};

/** The verbs of `rafter auth`, in the order the help lists them. */
export const AUTH_COMMANDS: readonly Command[] = [
  authStatusCommand,
  authEnableCommand,
  authDisableCommand,
];

function printStatus(context: Context, status: AuthStatusResult): number {
  const { globals, out } = context;
  if (globals.json) {
    out(JSON.stringify(status, null, 2));
    return EXIT.ok;
  }
  const why = status.enabled
    ? status.enabledInState
      ? "turned on for the cluster"
      : "enforced by this node's --auth"
    : "anyone may call";
  out(`access control: ${status.enabled ? "on" : "off"} (${why})`);
  out(`tokens: ${status.tokens}`);
  const you = status.you;
  out(
    you === null
      ? "you: no token"
      : `you: token ${you.tokenId} "${you.name}" (${
        you.permissions.join(", ")
      })`,
  );
  out(`revision ${status.revision}`);
  return EXIT.ok;
}
