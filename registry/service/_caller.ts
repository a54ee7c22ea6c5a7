/**
 * Who a client connection is, for access control: the token it presented
 * (`registry.authenticate`), re-read from the replicated state at every
 * call (a revoked token loses access at its next call), and the checks
 * each method makes with it. Auth is enforced when the replicated flag is
 * on (`registry.authEnable`) or the node was started with `--auth`; when
 * it is not, every check passes (as before auth existed), except those of
 * the access-management methods, which always want an admin token.
 *
 * @module
 */

import {
  PERMISSION_DENIED,
  type PermissionDeniedData,
  RpcError,
  UNAUTHENTICATED,
} from "../../rpc/errors.ts";
import type { Endpoint, WatchEvent } from "../../protocol/registry.ts";
import {
  type AuthenticateResult,
  parsePermission,
  permits,
} from "../../protocol/auth.ts";
import { ownerDenied, type TokenRecord } from "../state.ts";
import type { ServiceCore } from "./_core.ts";

/** The kinds of permission a method needs. */
export type Need = "read" | "bind" | "admin";

/** One client connection's identity and its checks. */
export class Caller {
  readonly #core: ServiceCore;
  #tokenId: string | null = null;

  /** @param core the service the connection calls. */
  constructor(core: ServiceCore) {
    this.#core = core;
  }

  /** Whether this node enforces auth now (replicated flag or `--auth`). */
  get enforced(): boolean {
    return this.#core.context.state.authEnabled ||
      this.#core.context.auth === true;
  }

  /** Acts as `tokenId` from now on (null: as nobody). */
  actAs(tokenId: string | null): void {
    this.#tokenId = tokenId;
  }

  /** The connection's token as the state holds it now, or null (none, or revoked). */
  token(): TokenRecord | null {
    if (this.#tokenId === null) return null;
    return this.#core.context.state.token(this.#tokenId) ?? null;
  }

  /** Whether the connection's token carries `admin`. */
  get admin(): boolean {
    const token = this.token();
    return token !== null && permits(token.permissions, "admin");
  }

  /** The connection's token as `authenticate` and `authStatus` show it. */
  you(): AuthenticateResult | null {
    const token = this.token();
    if (token === null) return null;
    return {
      tokenId: token.tokenId,
      name: token.name,
      permissions: [...token.permissions],
      createdAt: token.createdAt,
      admin: permits(token.permissions, "admin"),
    };
  }

  /**
   * The valid token of the connection, or null when auth is not enforced.
   *
   * @throws {RpcError} UNAUTHENTICATED when auth is enforced and the
   * connection presented no token, or its token was revoked.
   */
  authenticated(method: string): TokenRecord | null {
    const token = this.token();
    if (token !== null || !this.enforced) return token;
    throw this.#unauthenticated(method);
  }

  /**
   * Checks that the connection may call `method` needing `need` on `name`.
   *
   * @throws {RpcError} UNAUTHENTICATED, or PERMISSION_DENIED naming the
   * permission and the name.
   */
  need(method: string, need: Need, name = ""): void {
    const token = this.authenticated(method);
    if (token === null || permits(token.permissions, need, name)) return;
    throw denied(method, need, name, token);
  }

  /**
   * Checks that the connection holds some `bind` permission (or admin):
   * for `lease.grant`, which names no name.
   */
  needAnyBind(method: string): void {
    const token = this.authenticated(method);
    if (token === null) return;
    const any = token.permissions.some((text) => {
      try {
        return parsePermission(text).kind !== "read";
      } catch {
        return false;
      }
    });
    if (!any) throw denied(method, "bind", "", token, "bind:<prefix>");
  }

  /**
   * Checks that the connection holds an admin token, whether auth is
   * enforced or not (tokens and the auth switch are never anyone's).
   */
  needAdmin(method: string, hint = ""): void {
    const token = this.token();
    if (token === null) {
      throw new RpcError(
        UNAUTHENTICATED,
        `Unauthenticated: ${method} needs an admin token${
          this.#tokenId === null
            ? ", and this connection has presented none"
            : `, and this connection's token ${this.#tokenId} was revoked`
        }; set RAFTER_TOKEN to an admin token (such as the bootstrap token${hint}) or call registry.authenticate with it first`,
      );
    }
    if (!permits(token.permissions, "admin")) {
      throw denied(method, "admin", "", token);
    }
  }

  /**
   * Whether the connection may touch what `owner` owns: always when auth
   * is not enforced or the token is an admin's; else only its own.
   */
  mayManage(owner: string | undefined): boolean {
    if (!this.enforced) return true;
    const token = this.token();
    if (token === null) return false;
    return permits(token.permissions, "admin") || owner === token.tokenId;
  }

  /** Whether the connection may read `name` (lists, filters). */
  mayRead(name: string): boolean {
    if (!this.enforced) return true;
    const token = this.token();
    return token !== null && permits(token.permissions, "read", name);
  }

  /**
   * The token id to record as the owner of what the connection creates:
   * its token's, when it authenticated (auth enforced or not, so a server
   * that authenticates before auth is turned on keeps its bindings and
   * leases after), else none.
   */
  owner(): string | undefined {
    return this.token()?.tokenId;
  }

  /**
   * The token id whose ownership a command checks when it applies: the
   * connection's, when auth is enforced and it is no admin; else none.
   */
  guard(): string | undefined {
    if (!this.enforced) return undefined;
    const token = this.token();
    if (token === null || permits(token.permissions, "admin")) return undefined;
    return token.tokenId;
  }

  /**
   * `endpoint` as the connection may see it: with auth enforced, a lease
   * id only to its lease's owner and to admins (a lease that ended is no
   * secret any more).
   */
  view(endpoint: Endpoint): Endpoint {
    const leaseId = endpoint.leaseId;
    if (leaseId === null || !this.enforced) return endpoint;
    const lease = this.#core.context.state.lease(leaseId);
    if (lease === undefined || this.mayManage(lease.owner)) return endpoint;
    return { ...endpoint, leaseId: null };
  }

  /** Events as the connection may see them (see {@link view}). */
  viewEvents(events: WatchEvent[]): WatchEvent[] {
    if (!this.enforced) return events;
    return events.map((event) => {
      const endpoint = this.view(event.endpoint);
      return endpoint === event.endpoint ? event : { ...event, endpoint };
    });
  }

  #unauthenticated(method: string): RpcError {
    return new RpcError(
      UNAUTHENTICATED,
      this.#tokenId === null
        ? `Unauthenticated: ${method} needs a token: auth is on and this connection has presented none; set RAFTER_TOKEN (ask an admin for one: rafter token create) or call registry.authenticate first`
        : `Unauthenticated: this connection's token ${this.#tokenId} was revoked; authenticate with another token (ask an admin for one)`,
    );
  }
}

/** PERMISSION_DENIED for `method`, needing `need` on `name`. */
function denied(
  method: string,
  need: Need,
  name: string,
  token: TokenRecord,
  permission = need === "admin" ? "admin" : `${need}:${name || "*"}`,
): RpcError {
  const data: PermissionDeniedData = { method, permission };
  if (name !== "") data.name = name;
  const on = name === "" ? "" : ` on ${JSON.stringify(name)}`;
  return new RpcError(
    PERMISSION_DENIED,
    `Permission denied: ${method}${on} needs ${permission}, which token ${
      JSON.stringify(token.name)
    } (${token.tokenId}) lacks (it has ${
      token.permissions.join(", ")
    }); ask an admin for a token with ${permission}`,
    data,
  );
}

/** PERMISSION_DENIED: `what` belongs to another token (see `ownerDenied`). */
export function notYours(
  method: string,
  what: string,
  name?: string,
): RpcError {
  const { code, message, data } = ownerDenied(method, what, name);
  return new RpcError(code, message, data);
}
