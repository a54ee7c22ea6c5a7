/**
 * Presenting a bearer token on a new connection, before any other call is
 * sent on it: `registry.authenticate {token}` on registry connections
 * (`protocol/auth.ts`), `rpc.authenticate {token}` on connections to user
 * servers (the `authenticate` hook of `serve()`). A token the peer refuses
 * ends in an {@link AuthenticationError}, which names the peer and the
 * token's public id (never its secret) and says what to do; it is not
 * retried on another node, which would refuse it too.
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import {
  type ErrorObject,
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  PERMISSION_DENIED,
  RpcError,
  UNAUTHENTICATED,
} from "../rpc/errors.ts";
import { AUTH_METHODS, tokenIdOf } from "../protocol/auth.ts";

/** The method a user server takes a token with (see `serve()`'s `authenticate`). */
export const SERVER_AUTHENTICATE_METHOD = "rpc.authenticate";

/** `data` of an {@link AuthenticationError}. */
export interface AuthenticationErrorData {
  /** The peer that refused: a registry node's or a server's URL. */
  url: string;
  /** The refused token's public id, or null when it is no `rft_…` token. */
  tokenId: string | null;
  /** What the peer answered. */
  answer: ErrorObject;
}

/**
 * A peer refused this client's token when the connection presented it:
 * code UNAUTHENTICATED (-32012), whatever the peer answered (its answer is
 * in `data.answer`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { AuthenticationError } from "./authenticate.ts";
 * const error = new AuthenticationError("refused", {
 *   url: "tcp://127.0.0.1:7001",
 *   tokenId: "0123456789abcdef",
 *   answer: { code: -32012, message: "Unauthenticated: unknown token" },
 * });
 * assert.equal(error.code, -32012);
 * assert.equal(error.url, "tcp://127.0.0.1:7001");
 * ```
 */
export class AuthenticationError extends RpcError {
  /** The peer that refused the token. */
  readonly url: string;
  /** The refused token's public id, or null. */
  readonly tokenId: string | null;

  /** Makes the error; `data` is {@link AuthenticationErrorData}. */
  constructor(message: string, data: AuthenticationErrorData) {
    super(UNAUTHENTICATED, message, data);
    this.name = "AuthenticationError";
    this.url = data.url;
    this.tokenId = data.tokenId;
  }
}

/** Who a token is presented to: the registry, or a user server. */
export type TokenPeer = "registry" | "server";

/**
 * Checks a registry token's form (`rft_<16 hex>_<43 base64url>`), so a
 * mistyped token is told at once and not at the first call.
 *
 * @throws {TypeError} naming the option and the expected form (not the token).
 */
export function checkRegistryToken(token: string, option = "token"): string {
  if (tokenIdOf(token) === null) {
    throw new TypeError(
      `${option} is not a Rafter registry token: expected rft_<16 hex digits>_<43 characters>, as rafter token create prints`,
    );
  }
  return token;
}

/**
 * Presents `token` on `connection`: `registry.authenticate` to a registry
 * node, `rpc.authenticate` to a server. On any failure the connection is
 * closed (it takes no calls unauthenticated).
 *
 * @throws {AuthenticationError} when the peer refused the token (or takes
 * none); the ConnectionError or local DEADLINE_EXCEEDED of the call when
 * the peer did not answer (another node may).
 */
export async function presentToken(
  connection: RpcConnection,
  peer: TokenPeer,
  token: string,
  timeoutMs: number,
): Promise<void> {
  const method = peer === "registry"
    ? AUTH_METHODS.authenticate
    : SERVER_AUTHENTICATE_METHOD;
  try {
    await connection.call(method, { token }, { timeoutMs });
  } catch (error) {
    connection.close();
    throw refusal(error, connection.url, peer, token) ?? error;
  }
}

/** The {@link AuthenticationError} an answer to an authenticate call means, or null. */
function refusal(
  error: unknown,
  url: string,
  peer: TokenPeer,
  token: string,
): AuthenticationError | null {
  if (!(error instanceof RpcError)) return null;
  const answer = error.toJSON();
  const tokenId = tokenIdOf(token);
  const data: AuthenticationErrorData = { url, tokenId, answer };
  const which = tokenId === null ? "the token" : `token ${tokenId}`;
  const fix = peer === "registry"
    ? "give connect() a valid `token` (the CLI: --token or RAFTER_TOKEN); an admin makes one with rafter token create NAME --perm read:<prefix> and lists them with rafter token list"
    : "give connect() a `serverToken` this server's authenticate hook accepts";
  switch (error.code) {
    case UNAUTHENTICATED:
    case PERMISSION_DENIED:
    case INVALID_PARAMS:
      return new AuthenticationError(
        `Unauthenticated: the ${peer} at ${url} refused ${which} (${answer.message}): it is unknown, revoked or malformed; ${fix}`,
        data,
      );
    case METHOD_NOT_FOUND:
      return new AuthenticationError(
        `Unauthenticated: the ${peer} at ${url} takes no token (it has no ${
          peer === "registry" ? AUTH_METHODS.authenticate : "rpc.authenticate"
        }), so ${which} was not checked; upgrade it, or connect without ${
          peer === "registry" ? "`token`" : "`serverToken`"
        } to a ${peer} that has no access control`,
        data,
      );
    default:
      // No answer (closed, timed out) or another refusal (a limit): as is.
      return null;
  }
}
