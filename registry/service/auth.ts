/**
 * The access API (`protocol/auth.ts`): `registry.authenticate` (a
 * connection presents its token), `registry.authStatus`, `authEnable` and
 * `authDisable` (the replicated switch), and `tokenCreate`, `tokenList`
 * and `tokenRevoke`. Tokens live in the replicated state as SHA-256
 * hashes; a token's text is made by the node serving `tokenCreate`, and
 * shown once, in its answer.
 *
 * @module
 */

import { RpcError, UNAUTHENTICATED } from "../../rpc/errors.ts";
import { method } from "../../rpc/server/method.ts";
import {
  AUTH_METHODS,
  type AuthenticateResult,
  type AuthStatusResult,
  hashToken,
  newToken,
  type TokenCreateResult,
  tokenIdOf,
  type TokenInfo,
} from "../../protocol/auth.ts";
import { AUTH_PARAMS } from "../../protocol/registry_params.ts";
import type { TokenRecord } from "../state.ts";
import type { ServiceCore } from "./_core.ts";
import type { Caller } from "./_caller.ts";

/** Most tokens the registry holds, by default (`maxTokens`). */
export const DEFAULT_MAX_TOKENS = 5_000;

const {
  authenticate,
  authStatus,
  authEnable,
  authDisable,
  tokenCreate,
  tokenList,
  tokenRevoke,
} = AUTH_METHODS;

/** The access methods of one connection, acting as `caller`. */
export function authMethods(
  core: ServiceCore,
  caller: Caller,
): Record<(typeof AUTH_METHODS)[keyof typeof AUTH_METHODS], unknown> {
  const { context } = core;

  function statusOf(revision = context.state.revision): AuthStatusResult {
    const { state } = context;
    return {
      enabled: caller.enforced,
      enabledInState: state.authEnabled,
      enforcedByNode: context.auth === true,
      tokens: state.tokenCount,
      you: caller.you(),
      revision,
    };
  }

  const where = context.adminTokenFile === undefined
    ? ""
    : `, written to ${context.adminTokenFile} on the node that bootstrapped the cluster`;

  return {
    [authenticate]: method(
      AUTH_PARAMS[authenticate],
      async ({ token }): Promise<AuthenticateResult> => {
        // A failed attempt leaves the connection with no token.
        caller.actAs(null);
        const tokenId = tokenIdOf(token);
        const known = await context.state.verifyToken(token);
        if (known === undefined) {
          throw new RpcError(
            UNAUTHENTICATED,
            tokenId === null
              ? "Unauthenticated: that is not a registry token (rft_<tokenId>_<secret>); check RAFTER_TOKEN"
              : `Unauthenticated: token ${tokenId} is not known to this registry (revoked, mistyped, or of another cluster); ask an admin for a token (rafter token create)`,
          );
        }
        caller.actAs(known.tokenId);
        return caller.you()!;
      },
    ),

    [authStatus]: method(AUTH_PARAMS[authStatus], () => {
      caller.authenticated(authStatus);
      return statusOf();
    }),

    [authEnable]: method(AUTH_PARAMS[authEnable], async () => {
      caller.needAdmin(authEnable, where);
      const value = await core.propose({ op: "authSet", enabled: true });
      return statusOf(value.revision);
    }),

    [authDisable]: method(AUTH_PARAMS[authDisable], async () => {
      caller.needAdmin(authDisable, where);
      const value = await core.propose({ op: "authSet", enabled: false });
      return statusOf(value.revision);
    }),

    [tokenCreate]: method(
      AUTH_PARAMS[tokenCreate],
      async ({ name, permissions }): Promise<TokenCreateResult> => {
        caller.needAdmin(tokenCreate, where);
        const { token, tokenId } = newToken();
        const record: TokenRecord = {
          tokenId,
          name,
          hash: await hashToken(token),
          permissions,
          createdAt: Date.now(),
        };
        const value = await core.propose({
          op: "tokenCreate",
          token: record,
          maxTokens: context.maxTokens ?? DEFAULT_MAX_TOKENS,
        });
        return { ...infoOf(record), token, revision: value.revision };
      },
    ),

    [tokenList]: method(AUTH_PARAMS[tokenList], () => {
      caller.needAdmin(tokenList, where);
      return {
        tokens: context.state.tokens().map(infoOf),
        revision: context.state.revision,
      };
    }),

    [tokenRevoke]: method(AUTH_PARAMS[tokenRevoke], async ({ tokenId }) => {
      caller.needAdmin(tokenRevoke, where);
      const value = await core.propose({ op: "tokenRevoke", tokenId });
      return { revoked: value.revoked ?? false, revision: value.revision };
    }),
  };
}

/** A token without its hash. */
function infoOf(token: TokenRecord): TokenInfo {
  return {
    tokenId: token.tokenId,
    name: token.name,
    permissions: [...token.permissions],
    createdAt: token.createdAt,
  };
}
