/**
 * A fake registry with access control, for the tests of the client's
 * tokens and the CLI's auth commands: a `serve()` whose per-connection
 * methods refuse everything but `registry.authenticate` (and `rpc.ping`)
 * with UNAUTHENTICATED until the connection presented a known token,
 * answer PERMISSION_DENIED for the methods `deny` names, and record the
 * order of the calls on each connection.
 *
 * @module
 */

import { serve } from "../adapter/deno/serve.ts";
import { PERMISSION_DENIED, RpcError, UNAUTHENTICATED } from "../rpc/errors.ts";
import type { RpcServer } from "../rpc/server/server.ts";
import type { RpcSession } from "../rpc/server/method.ts";
import {
  AUTH_METHODS,
  type AuthenticateResult,
  newToken,
  normalizePermission,
  type TokenInfo,
} from "../protocol/auth.ts";
import { REGISTRY_METHODS } from "../protocol/registry.ts";

/** Settings of {@link fakeAuthRegistry}. */
export interface FakeAuthOptions {
  /** Methods answered PERMISSION_DENIED (after authentication). */
  deny?: readonly string[];
  /** How long `registry.authenticate` takes to answer, ms. @default 0 */
  authDelayMs?: number;
  /** What `registry.lookup` answers: endpoint URLs by name. */
  endpoints?: Record<string, string[]>;
}

/** A running fake registry. */
export interface FakeAuthRegistry {
  /** Its client URL. */
  url: string;
  /** An admin token it accepts. */
  admin: string;
  /** Method names called on each connection, in order (one array per connection). */
  calls: string[][];
  /** Tokens by id, with their secrets. */
  tokens: Map<string, TokenInfo & { token: string }>;
  /** Closes every connection from the server side. */
  closeConnections(): void;
  /** Stops it. */
  close(): Promise<void>;
}

/** Starts a {@link FakeAuthRegistry} on 127.0.0.1 (an ephemeral port). */
export function fakeAuthRegistry(
  options: FakeAuthOptions = {},
): FakeAuthRegistry {
  const tokens = new Map<string, TokenInfo & { token: string }>();
  const admin = newToken();
  tokens.set(admin.tokenId, {
    ...admin,
    name: "bootstrap",
    permissions: ["admin"],
    createdAt: Date.now(),
  });
  const calls: string[][] = [];
  const sessions = new Set<RpcSession>();
  let enabled = true;
  let revision = 1;
  const deny = new Set(options.deny ?? []);
  const server: RpcServer = serve({
    methods: (session) => {
      const seen: string[] = [];
      calls.push(seen);
      sessions.add(session);
      session.signal.addEventListener("abort", () => sessions.delete(session));
      let you: AuthenticateResult | null = null;
      const status = () => ({
        enabled,
        enabledInState: enabled,
        enforcedByNode: false,
        tokens: tokens.size,
        you,
        revision,
      });
      /** A method that needs an authenticated connection. */
      const guarded =
        <P, R>(method: string, run: (params: P) => R) => (params: P): R => {
          seen.push(method);
          if (enabled && you === null) {
            throw new RpcError(
              UNAUTHENTICATED,
              `Unauthenticated: ${method} needs a token; call registry.authenticate first`,
            );
          }
          if (deny.has(method)) {
            throw new RpcError(
              PERMISSION_DENIED,
              `Permission denied: ${method} needs admin`,
              { method, permission: "admin" },
            );
          }
          return run(params);
        };
      return {
        [AUTH_METHODS.authenticate]: async ({ token }: { token: string }) => {
          if (options.authDelayMs) {
            await new Promise((r) => setTimeout(r, options.authDelayMs));
          }
          // Recorded when it answers: a call that did not wait for it
          // shows up before it.
          seen.push(AUTH_METHODS.authenticate);
          const found = [...tokens.values()].find((t) => t.token === token);
          if (found === undefined) {
            throw new RpcError(
              UNAUTHENTICATED,
              "Unauthenticated: unknown or revoked token",
            );
          }
          const { token: _, ...info } = found;
          you = { ...info, admin: info.permissions.includes("admin") };
          return you;
        },
        [AUTH_METHODS.authStatus]: guarded(AUTH_METHODS.authStatus, status),
        [AUTH_METHODS.authEnable]: guarded(AUTH_METHODS.authEnable, () => {
          enabled = true;
          revision++;
          return status();
        }),
        [AUTH_METHODS.authDisable]: guarded(AUTH_METHODS.authDisable, () => {
          enabled = false;
          revision++;
          return status();
        }),
        [AUTH_METHODS.tokenCreate]: guarded(
          AUTH_METHODS.tokenCreate,
          ({ name, permissions }: { name: string; permissions: string[] }) => {
            const made = newToken();
            const info = {
              tokenId: made.tokenId,
              name,
              permissions: permissions.map(normalizePermission),
              createdAt: Date.now(),
            };
            tokens.set(made.tokenId, { ...info, token: made.token });
            return { ...info, token: made.token, revision: ++revision };
          },
        ),
        [AUTH_METHODS.tokenList]: guarded(AUTH_METHODS.tokenList, () => ({
          tokens: [...tokens.values()].map(({ token: _, ...info }) => info),
          revision,
        })),
        [AUTH_METHODS.tokenRevoke]: guarded(
          AUTH_METHODS.tokenRevoke,
          ({ tokenId }: { tokenId: string }) => ({
            revoked: tokens.delete(tokenId),
            revision: ++revision,
          }),
        ),
        [REGISTRY_METHODS.lookup]: guarded(
          REGISTRY_METHODS.lookup,
          ({ name }: { name: string }) => {
            const endpoints = (options.endpoints?.[name] ?? []).map((
              url,
              i,
            ) => ({
              id: `${name}-${i + 1}`,
              url,
              attrs: {},
              weight: 1,
              zone: null,
              leaseId: null,
              createRevision: 1,
              modRevision: 1,
              state: "serving" as const,
              load: null,
              scope: "global" as const,
              check: null,
            }));
            return {
              name,
              query: {},
              endpoints,
              total: endpoints.length,
              revision,
            };
          },
        ),
        [REGISTRY_METHODS.list]: guarded(REGISTRY_METHODS.list, () => ({
          names: [],
          revision,
        })),
        // Only its refusal matters to the tests (rafter status, no token).
        [REGISTRY_METHODS.status]: guarded(REGISTRY_METHODS.status, () => {
          throw new RpcError(UNAUTHENTICATED, "not modelled");
        }),
        [REGISTRY_METHODS.watch]: guarded(
          REGISTRY_METHODS.watch,
          ({ watchId }: { watchId: string }) => ({ watchId, revision }),
        ),
        // Recorded, so a test sees a server token that reached the registry.
        "rpc.authenticate": () => {
          seen.push("rpc.authenticate");
          throw new RpcError(UNAUTHENTICATED, "not a server");
        },
        [REGISTRY_METHODS.unwatch]: guarded(
          REGISTRY_METHODS.unwatch,
          () => ({ removed: true }),
        ),
      };
    },
  });
  return {
    url: server.url,
    admin: admin.token,
    calls,
    tokens,
    closeConnections() {
      for (const session of [...sessions]) session.close();
    },
    close: () => server.close(),
  };
}

/** A user server that checks tokens, and what each connection called. */
export interface TokenServer {
  /** The server: `echo(text)` answers `text` once authenticated. */
  server: RpcServer;
  /** Method names called on each connection, in order. */
  calls: string[][];
}

/**
 * A user server whose connections must call `rpc.authenticate {token}`
 * with `token` first (it answers after `authDelayMs`): `echo` then
 * answers its text, and before that `"refused"`.
 */
export function tokenServer(token: string, authDelayMs = 0): TokenServer {
  const calls: string[][] = [];
  const server = serve({
    methods: () => {
      const seen: string[] = [];
      calls.push(seen);
      let ok = false;
      return {
        "rpc.authenticate": async (params: { token: string }) => {
          await new Promise((r) => setTimeout(r, authDelayMs));
          seen.push("rpc.authenticate");
          ok = params.token === token;
          if (!ok) {
            throw new RpcError(UNAUTHENTICATED, "Unauthenticated: bad token");
          }
          return { ok };
        },
        echo: (text: string) => {
          seen.push("echo");
          return ok ? text : "refused";
        },
      };
    },
  });
  return { server, calls };
}
