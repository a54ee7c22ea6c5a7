/**
 * The cluster secret file every member of a Raft cluster shares: read it,
 * or create it when it does not exist yet. Uses `Deno.*` file APIs (the
 * handshake itself, in `peer_auth.ts`, is Web-standard).
 *
 * @module
 */

import { parentDir, syncDir, writeAll } from "./_atomic_file.ts";
import {
  MIN_SECRET_LENGTH,
  NONCE_BYTES,
  randomBase64url,
} from "./peer_auth.ts";

/** Options of {@link loadClusterSecret}. */
export interface LoadClusterSecretOptions {
  /**
   * Receives one line when a secret was generated (`level` "info"), and a
   * warning when the file is readable by other users ("warn"). @default no
   * logging
   */
  log?(line: string, level: "info" | "warn"): void;
}

/** A secret file that cannot be used; the message says what to do. */
export class ClusterSecretError extends Error {
  /**
   * Makes the error.
   *
   * @param message what is wrong with the file and how to fix it.
   */
  constructor(message: string) {
    super(message);
    this.name = "ClusterSecretError";
  }
}

/**
 * Reads the cluster secret from `path` (surrounding whitespace trimmed).
 *
 * When the file does not exist, generates a secret of {@link NONCE_BYTES}
 * random bytes (base64url, 43 characters) and creates the file with mode
 * 0600, atomically: the secret is written to a temporary file beside it,
 * which is then hard-linked into place. If another process created the
 * file first (nodes of one host started together), the link fails and
 * that process's secret is read instead, so all of them agree on one.
 * Logs `generated a new cluster secret in PATH; give this file to every
 * other node` when it made one.
 *
 * @returns the secret's text.
 * @throws {ClusterSecretError} when the file holds fewer than
 * {@link MIN_SECRET_LENGTH} characters (the message says how to make a
 * good one), or it cannot be read or created (the message names the path).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { loadClusterSecret } from "./cluster_secret.ts";
 * const dir = await Deno.makeTempDir();
 * const first = await loadClusterSecret(`${dir}/cluster_secret`); // generated
 * const again = await loadClusterSecret(`${dir}/cluster_secret`); // read back
 * assert.equal(again, first);
 * assert.equal(first.length, 43);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function loadClusterSecret(
  path: string,
  options: LoadClusterSecretOptions = {},
): Promise<string> {
  const existing = await readSecret(path);
  if (existing !== null) return checked(path, existing, options);
  const created = await createSecret(path);
  if (created.generated) {
    options.log?.(
      `generated a new cluster secret in ${path}; give this file to every other node`,
      "info",
    );
  }
  return checked(path, created.secret, options);
}

async function readSecret(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw new ClusterSecretError(
      `cannot read the cluster secret file ${path}: ${
        (error as Error).message
      }`,
    );
  }
}

async function createSecret(
  path: string,
): Promise<{ secret: string; generated: boolean }> {
  try {
    const { text, created } = await createPrivateFileOnce(
      path,
      randomBase64url(NONCE_BYTES) + "\n",
      readSecret,
    );
    return { secret: text, generated: created };
  } catch (error) {
    if (error instanceof ClusterSecretError) throw error;
    throw new ClusterSecretError(
      `cannot create the cluster secret file ${path}: ${
        (error as Error).message
      }`,
    );
  }
}

/**
 * Creates `path` holding `text`, readable by its owner only (0600), unless
 * it exists: written to a temporary file and fsynced, then linked into
 * place (so no reader sees it half written, and of two processes racing
 * only one wins), then the folder fsynced. When another process made it
 * first, its text (read with `read`) is the one. For files a cluster
 * makes once and shares: the cluster secret, the bootstrap admin token.
 *
 * @returns the file's text and whether this call created it.
 * @throws the error of the failed write, link or sync.
 */
export async function createPrivateFileOnce(
  path: string,
  text: string,
  read: (path: string) => Promise<string | null>,
): Promise<{ text: string; created: boolean }> {
  const tmp = `${path}.${randomBase64url(6)}.tmp`;
  try {
    const file = await Deno.open(tmp, {
      write: true,
      createNew: true,
      mode: 0o600,
    });
    try {
      await writeAll(file, new TextEncoder().encode(text));
      await file.sync();
    } finally {
      file.close();
    }
    try {
      await Deno.link(tmp, path);
    } catch (error) {
      if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
      // Another process made it first: its text is the one.
      const theirs = await read(path);
      if (theirs !== null) return { text: theirs, created: false };
      throw error;
    }
    await syncDir(parentDir(path));
    return { text, created: true };
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
}

async function checked(
  path: string,
  text: string,
  options: LoadClusterSecretOptions,
): Promise<string> {
  const secret = text.trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new ClusterSecretError(
      `the cluster secret in ${path} has ${secret.length} characters; it needs at least ${MIN_SECRET_LENGTH}. Make one with \`openssl rand -base64 32 > ${path}\` (then chmod 600 it), or remove the file so a node generates one, and give the same file to every node`,
    );
  }
  if (Deno.build.os !== "windows") {
    const mode = (await Deno.stat(path).catch(() => null))?.mode ?? null;
    if (mode !== null && (mode & 0o077) !== 0) {
      options.log?.(
        `warning: the cluster secret file ${path} is readable by other users (mode ${
          (mode & 0o777).toString(8).padStart(4, "0")
        }); chmod 600 it`,
        "warn",
      );
    }
  }
  return secret;
}
