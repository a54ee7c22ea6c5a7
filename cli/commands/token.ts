/**
 * `rafter token create|list|revoke`: the registry's bearer tokens (admin).
 * `create` prints the new token once (the registry keeps only its hash);
 * `list` shows ids, names and permissions, never secrets; `revoke` ends a
 * token by id.
 *
 * @module
 */

import {
  MAX_TOKEN_NAME_LENGTH,
  normalizePermission,
} from "../../protocol/auth.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT, UsageError } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter token create`. */
export const tokenCreateCommand: Command = {
  name: "token create",
  args: "NAME",
  summary: "make a token (admin); printed once",
  about:
    `Makes a token named NAME (1..${MAX_TOKEN_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -) with the
permissions given by --perm (at least one, repeatable):
  read:PREFIX   look up, list and watch names starting with PREFIX
  bind:PREFIX   bind, unbind, drain own endpoints and manage own leases
                under PREFIX (implies read:PREFIX)
  admin         everything: members, leadership, tokens, auth
PREFIX * (or empty) covers every name. Prints the token, rft_<id>_<secret>,
once: the registry keeps only its hash, so store it now (e.g. in a secret
store, then RAFTER_TOKEN or connect(urls, { token })). Needs an admin token.`,
  options: { perm: { type: "string", multiple: true } },
  optionHelp:
    "  --perm PERM       a permission: read:PREFIX, bind:PREFIX or admin (repeat)",
  positionals: [1, 1],
  run: (c, [name], v) => tokenCreate(c, checkTokenName(name), permissions(v)),
};

/** The spec of `rafter token list`. */
export const tokenListCommand: Command = {
  name: "token list",
  args: "",
  summary: "every token: id, name, permissions (admin)",
  about: `Lists every token: its id (what rafter token revoke takes), name,
permissions and when it was made. Secrets are never shown. Needs an admin
token.`,
  positionals: [0, 0],
  run: (c) => tokenList(c),
};

/** The spec of `rafter token revoke`. */
export const tokenRevokeCommand: Command = {
  name: "token revoke",
  args: "TOKEN_ID",
  summary: "revoke a token by id (admin)",
  about: `Revokes the token whose id is TOKEN_ID (16 hex digits, as rafter token
list shows): connections that use it are refused from then on. Exit 4
when there is no such token. Needs an admin token.`,
  positionals: [1, 1],
  run: (c, [tokenId]) => tokenRevoke(c, checkTokenId(tokenId)),
};

/** The verbs of `rafter token`, in the order the help lists them. */
export const TOKEN_COMMANDS: readonly Command[] = [
  tokenCreateCommand,
  tokenListCommand,
  tokenRevokeCommand,
];

function checkTokenName(name: string): string {
  if (
    name.length === 0 || name.length > MAX_TOKEN_NAME_LENGTH ||
    !/^[A-Za-z0-9._-]+$/.test(name)
  ) {
    throw new UsageError(
      `token NAME must be 1..${MAX_TOKEN_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -, not ${
        JSON.stringify(name)
      }`,
    );
  }
  return name;
}

function checkTokenId(tokenId: string): string {
  if (!/^[0-9a-f]{16}$/.test(tokenId)) {
    throw new UsageError(
      `TOKEN_ID must be 16 hex digits (the id rafter token list shows, not the token itself), not ${
        /^rft_/.test(tokenId) ? "a token" : JSON.stringify(tokenId)
      }`,
    );
  }
  return tokenId;
}

/** The `--perm` values, normalized; at least one. */
function permissions(values: Values): string[] {
  const given = (values.perm as string[] | undefined) ?? [];
  if (given.length === 0) {
    throw new UsageError(
      "give at least one --perm: read:PREFIX, bind:PREFIX or admin",
    );
  }
  return given.map((text) => {
    try {
      return normalizePermission(text);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  });
}

/** Runs `rafter token create`. */
export async function tokenCreate(
  context: Context,
  name: string,
  perms: string[],
): Promise<number> {
  const { client, globals, out, err } = context;
  const made = await client.registry.tokenCreate(name, perms);
  if (globals.json) {
    out(JSON.stringify(made, null, 2));
    return EXIT.ok;
  }
  out(made.token);
  err(
    `made token ${made.tokenId} "${made.name}" (${
      made.permissions.join(", ")
    }) at revision ${made.revision}; the token above is not shown again: store it now`,
  );
  return EXIT.ok;
}

/** Runs `rafter token list`. */
export async function tokenList(context: Context): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.tokenList();
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
    return EXIT.ok;
  }
  out(formatTable(
    ["TOKEN_ID", "NAME", "PERMISSIONS", "CREATED"],
    result.tokens.map((t) => [
      t.tokenId,
      t.name,
      t.permissions.join(","),
      new Date(t.createdAt).toISOString(),
    ]),
  ));
  out(`revision ${result.revision}`);
  return EXIT.ok;
}

/** Runs `rafter token revoke`. */
export async function tokenRevoke(
  context: Context,
  tokenId: string,
): Promise<number> {
  const { client, globals, out, err } = context;
  const result = await client.registry.tokenRevoke(tokenId);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else if (!result.revoked) {
    err(
      `rafter: there is no token ${tokenId}; rafter token list shows the tokens`,
    );
  } else out(`revoked token ${tokenId} at revision ${result.revision}`);
  return result.revoked ? EXIT.ok : EXIT.notFound;
}
