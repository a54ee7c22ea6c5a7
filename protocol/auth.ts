/**
 * The registry's access control contract (as etcd's RBAC and Consul's ACL
 * tokens): bearer tokens, the permissions a token carries, and the methods
 * that manage them. Shared by the registry service, its clients and the CLI.
 *
 * - A **token** is `rft_<tokenId>_<secret>`: a public id (16 hex digits,
 *   what `token list` shows and `token revoke` takes) and 32 random bytes
 *   (base64url). The registry stores only its SHA-256 hash, in the
 *   replicated state, and compares hashes in constant time.
 * - A **permission** is a string: `read:<prefix>` (lookup, watch and list
 *   names starting with prefix), `bind:<prefix>` (bind, unbind, setState of
 *   own endpoints under names starting with prefix, and grant and manage
 *   own leases; implies `read:<prefix>`), or `admin` (everything: members,
 *   leadership, tokens, auth, and other tokens' endpoints and leases). A
 *   prefix `*` (or empty) covers every name; a trailing `*` is dropped
 *   (`bind:billing*` is `bind:billing`).
 * - With auth on, a connection calls {@link AUTH_METHODS.authenticate}
 *   first; until then every method but `rpc.ping` and the authenticate
 *   call itself is refused with UNAUTHENTICATED (-32012). A call the token
 *   does not permit is refused with PERMISSION_DENIED (-32013), whose
 *   `data` names the permission and the name.
 *
 * @module
 */

/** Methods of the registry's client port that manage access. */
export const AUTH_METHODS = {
  /**
   * Presents a token for this connection: {@link AuthenticateParams} →
   * {@link AuthenticateResult}. Allowed before authentication; calling it
   * again switches the connection to the new token.
   */
  authenticate: "registry.authenticate",
  /** Whether auth is on, and who this connection is: → {@link AuthStatusResult}. */
  authStatus: "registry.authStatus",
  /** Turns auth on (admin; the caller must hold an admin token): → {@link AuthStatusResult}. */
  authEnable: "registry.authEnable",
  /** Turns auth off (admin): → {@link AuthStatusResult}. */
  authDisable: "registry.authDisable",
  /** Makes a token (admin): {@link TokenCreateParams} → {@link TokenCreateResult}. */
  tokenCreate: "registry.tokenCreate",
  /** Every token, without secrets (admin): → {@link TokenListResult}. */
  tokenList: "registry.tokenList",
  /** Revokes a token (admin): {@link TokenIdParams} → {@link TokenRevokeResult}. */
  tokenRevoke: "registry.tokenRevoke",
} as const;

/** An access-management method name. */
export type AuthMethod = (typeof AUTH_METHODS)[keyof typeof AUTH_METHODS];

/**
 * The access-management methods that change the replicated state, so a
 * follower answers them NOT_LEADER (as `LEADER_METHODS` of the registry's
 * contract): a client follows the hint. `registry.authenticate` is not
 * one: it is per connection, so a client that moves to another node
 * authenticates there again.
 */
export const AUTH_LEADER_METHODS: ReadonlySet<AuthMethod> = new Set<
  AuthMethod
>([
  AUTH_METHODS.authEnable,
  AUTH_METHODS.authDisable,
  AUTH_METHODS.tokenCreate,
  AUTH_METHODS.tokenRevoke,
]);

/** A permission string: `read:<prefix>`, `bind:<prefix>` or `admin`. */
export type Permission = string;

/** A permission, parsed. */
export type ParsedPermission =
  | { kind: "read" | "bind"; prefix: string }
  | { kind: "admin" };

/** Params of `registry.authenticate`. */
export interface AuthenticateParams {
  /** The bearer token, `rft_<tokenId>_<secret>`. */
  token: string;
}

/** What a token is, without its secret. */
export interface TokenInfo {
  /** The token's public id: 16 hex digits. */
  tokenId: string;
  /** A label chosen at creation, e.g. `"billing-servers"`. */
  name: string;
  /** Its permissions, normalized (see {@link normalizePermission}). */
  permissions: Permission[];
  /** When it was made, ms since the epoch (the leader's clock). */
  createdAt: number;
}

/** Result of `registry.authenticate`: the token the connection now acts as. */
export interface AuthenticateResult extends TokenInfo {
  /** Whether the token carries `admin`. */
  admin: boolean;
}

/** Result of `registry.authStatus`, `registry.authEnable`, `registry.authDisable`. */
export interface AuthStatusResult {
  /** Whether this node enforces auth (replicated setting or the node's `--auth`). */
  enabled: boolean;
  /** Whether auth is on in the replicated state (`rafter auth enable`). */
  enabledInState: boolean;
  /** Whether this node was started with `--auth` (enforced whatever the state says). */
  enforcedByNode: boolean;
  /** Tokens in the replicated state. */
  tokens: number;
  /** The token this connection acts as, or null. */
  you: AuthenticateResult | null;
  /** The state's revision after the change (enable/disable) or at the read. */
  revision: number;
}

/** Params of `registry.tokenCreate`. */
export interface TokenCreateParams {
  /** A label, 1..64 characters of `[A-Za-z0-9._-]`. */
  name: string;
  /** At least one permission string. */
  permissions: Permission[];
}

/** Result of `registry.tokenCreate`: the only time the secret is shown. */
export interface TokenCreateResult extends TokenInfo {
  /** The bearer token, `rft_<tokenId>_<secret>`; not stored, not shown again. */
  token: string;
  /** The state's revision after the change. */
  revision: number;
}

/** Result of `registry.tokenList`. */
export interface TokenListResult {
  /** Every token, by creation time. */
  tokens: TokenInfo[];
  /** The state's revision at the read. */
  revision: number;
}

/** Params of `registry.tokenRevoke`. */
export interface TokenIdParams {
  /** The token's public id. */
  tokenId: string;
}

/** Result of `registry.tokenRevoke`. */
export interface TokenRevokeResult {
  /** False when no such token existed. */
  revoked: boolean;
  /** The state's revision after the change. */
  revision: number;
}

/** The name of the admin token a new cluster makes on its first start: `"bootstrap"`. */
export const BOOTSTRAP_TOKEN_NAME = "bootstrap";

/** Longest token name, characters: 64. */
export const MAX_TOKEN_NAME_LENGTH = 64;

const TOKEN_PATTERN = /^rft_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

/**
 * The token id of a well-formed token, or null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { newToken, tokenIdOf } from "./auth.ts";
 * const { token, tokenId } = newToken();
 * assert.equal(tokenIdOf(token), tokenId);
 * assert.equal(tokenIdOf("rft_nothex_x"), null);
 * ```
 */
export function tokenIdOf(token: string): string | null {
  return TOKEN_PATTERN.exec(token)?.[1] ?? null;
}

/** A fresh random token and its id. */
export function newToken(): { token: string; tokenId: string } {
  const id = crypto.getRandomValues(new Uint8Array(8));
  const secret = crypto.getRandomValues(new Uint8Array(32));
  const tokenId = [...id].map((b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
  const text = btoa(String.fromCharCode(...secret)).replace(/\+/g, "-")
    .replace(/\//g, "_").replace(/=+$/, "");
  return { token: `rft_${tokenId}_${text}`, tokenId };
}

/** The stored form of a token: SHA-256 of its text, lowercase hex. */
export async function hashToken(token: string): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(token),
  );
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}

/** Whether two equal-length hex digests are equal, in constant time. */
export function digestsEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) {
    difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  }
  return difference === 0;
}

/**
 * Parses a permission string.
 *
 * @throws {TypeError} naming the string and the accepted forms.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parsePermission } from "./auth.ts";
 * assert.deepEqual(parsePermission("bind:billing*"), { kind: "bind", prefix: "billing" });
 * assert.deepEqual(parsePermission("read:*"), { kind: "read", prefix: "" });
 * assert.deepEqual(parsePermission("admin"), { kind: "admin" });
 * assert.throws(() => parsePermission("write:x"), /read:<prefix>/);
 * ```
 */
export function parsePermission(text: string): ParsedPermission {
  if (text === "admin") return { kind: "admin" };
  const match = /^(read|bind):(.*)$/.exec(text);
  if (match === null || match[2].length > 256 || /\s/.test(match[2])) {
    throw new TypeError(
      `invalid permission ${
        JSON.stringify(text)
      }: expected read:<prefix>, bind:<prefix> or admin (prefix * for every name)`,
    );
  }
  return {
    kind: match[1] as "read" | "bind",
    prefix: match[2].replace(/\*$/, ""),
  };
}

/**
 * The canonical string of a permission: `read:*` for every name.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { normalizePermission } from "./auth.ts";
 * assert.equal(normalizePermission("read:"), "read:*");
 * assert.equal(normalizePermission("bind:billing*"), "bind:billing");
 * ```
 */
export function normalizePermission(text: string): Permission {
  const parsed = parsePermission(text);
  if (parsed.kind === "admin") return "admin";
  return `${parsed.kind}:${parsed.prefix === "" ? "*" : parsed.prefix}`;
}

/**
 * Whether `permissions` allow `need` on `name` (a base name, without its
 * query): `admin` allows everything, `bind` also allows `read`, and a
 * prefix covers the names that start with it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { permits } from "./auth.ts";
 * assert.equal(permits(["bind:billing"], "read", "billing.pay"), true);
 * assert.equal(permits(["read:billing"], "bind", "billing.pay"), false);
 * assert.equal(permits(["bind:billing"], "bind", "search"), false);
 * assert.equal(permits(["admin"], "admin"), true);
 * assert.equal(permits(["bind:*"], "admin"), false);
 * ```
 */
export function permits(
  permissions: readonly Permission[],
  need: "read" | "bind" | "admin",
  name = "",
): boolean {
  for (const text of permissions) {
    let permission: ParsedPermission;
    try {
      permission = parsePermission(text);
    } catch {
      continue;
    }
    if (permission.kind === "admin") return true;
    if (need === "admin") continue;
    if (need === "bind" && permission.kind !== "bind") continue;
    if (name.startsWith(permission.prefix)) return true;
  }
  return false;
}
