/**
 * The bootstrap admin token file of a registry node: the first admin token
 * of a new cluster, made by the node that bootstraps it (not by a node
 * that joins) and written, mode 0600, beside the cluster secret. The
 * cluster's first leader records its hash in the replicated state
 * (`authBootstrap`, once per cluster); the text stays in the file only.
 *
 * @module
 */

import { hashToken, newToken, tokenIdOf } from "../../protocol/auth.ts";
import { createPrivateFileOnce } from "../../raft/cluster_secret.ts";

/** A bootstrap token as a node loaded it. */
export interface AdminToken {
  /** Where it is. */
  readonly path: string;
  /** The token's public id. */
  readonly tokenId: string;
  /** Its SHA-256 hash, as the state stores it. */
  readonly hash: string;
  /** Whether this start made the file. */
  readonly created: boolean;
}

/**
 * Reads the admin token in `path`, or makes one there when the file does
 * not exist: a fresh token written to a temporary file (mode 0600, fsync'ed),
 * hard-linked into place, and the folder fsync'ed, so that two nodes of one
 * host started together agree on one token and a crash leaves a whole file
 * or none.
 *
 * @throws {Error} naming the path, when the file cannot be read or made, or
 * holds no token (`rft_<tokenId>_<secret>`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { loadAdminToken } from "./admin_token.ts";
 * const dir = await Deno.makeTempDir();
 * const made = await loadAdminToken(`${dir}/admin_token`);
 * const again = await loadAdminToken(`${dir}/admin_token`);
 * assert.equal(made.created, true);
 * assert.equal(again.created, false);
 * assert.equal(again.tokenId, made.tokenId);
 * assert.match(await Deno.readTextFile(`${dir}/admin_token`), /^rft_[0-9a-f]{16}_/);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function loadAdminToken(path: string): Promise<AdminToken> {
  const existing = await readToken(path);
  if (existing !== null) return await tokenOf(path, existing, false);
  let made: { text: string; created: boolean };
  try {
    made = await createPrivateFileOnce(
      path,
      newToken().token + "\n",
      readToken,
    );
  } catch (error) {
    throw new Error(
      `cannot create the admin token file ${path}: ${(error as Error).message}`,
    );
  }
  return await tokenOf(path, made.text.trim(), made.created);
}

async function readToken(path: string): Promise<string | null> {
  try {
    return (await Deno.readTextFile(path)).trim();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw new Error(
      `cannot read the admin token file ${path}: ${(error as Error).message}`,
    );
  }
}

async function tokenOf(
  path: string,
  token: string,
  created: boolean,
): Promise<AdminToken> {
  const tokenId = tokenIdOf(token);
  if (tokenId === null) {
    throw new Error(
      `the admin token file ${path} holds no registry token (rft_<tokenId>_<secret>); remove it so the node makes a new one (only before the cluster's first start), or restore the file`,
    );
  }
  return { path, tokenId, hash: await hashToken(token), created };
}
