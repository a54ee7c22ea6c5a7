/**
 * The registry's client API, implemented against the contract of
 * `protocol/registry.ts`, one file per API under `service/` (as etcd's
 * v3rpc has key.go, watch.go, lease.go, member.go):
 *
 * - `bindings.ts`: bind, unbind, setState, lookup, list;
 * - `watch.ts`: watch, unwatch;
 * - `lease.ts`: grant, keepAlive, revoke, timeToLive, list;
 * - `leader.ts`: leaderTransfer;
 * - `member.ts`: memberList, memberAdd, memberPromote, memberRemove;
 * - `status.ts`: status;
 * - `snapshot.ts`: snapshot, snapshotChunk (backups);
 * - `auth.ts`: authenticate, authStatus, authEnable, authDisable,
 *   tokenCreate, tokenList, tokenRevoke (`protocol/auth.ts`);
 *
 * each validating its params with the declarations of
 * `protocol/registry_params.ts` (through `method(schema, handler)`), and
 * sharing `_core.ts`: Raft proposals, read barriers, leader checks and the
 * registry's error codes.
 *
 * **Access control** (`protocol/auth.ts`, `service/_caller.ts`). The
 * methods are built for each connection, which holds the token it
 * presented with `registry.authenticate`; the token is re-read from the
 * replicated state at every call, so a revoked one fails at its next call
 * (and its watches end). Auth is enforced when the replicated switch is
 * on (`registry.authEnable`) or the node runs with `--auth`; then every
 * call but `rpc.ping` and `registry.authenticate` needs a valid token
 * (UNAUTHENTICATED, -32012, otherwise), and:
 *
 * - `lookup` needs `read` on the name, `watch` `read` on its prefix;
 *   `list` answers only the names the token may read;
 * - `bind` needs `bind` on the name; `unbind` and `setState` too, on the
 *   caller's own endpoints only; binding with a lease needs the lease to
 *   be the caller's;
 * - `lease.grant` needs some `bind`; `keepAlive`, `revoke`, `timeToLive`
 *   the caller's own lease; `lease.list` lists the caller's leases;
 * - `status`, `memberList`, `authStatus` need a valid token;
 * - `memberAdd`/`Promote`/`Remove`, `leaderTransfer`, `snapshot` and
 *   `snapshotChunk` need `admin`, which
 *   may also act on anything of anyone;
 * - lease ids in lookups, lists and watch events are shown only to the
 *   lease's owner and to admins (others see `leaseId: null`).
 *
 * A refusal is PERMISSION_DENIED (-32013) with `data: { method,
 * permission, name? }` and says what to ask an admin for. Ownership is
 * recorded as the token id of the connection that made a binding or
 * lease (none for an anonymous one: only an admin may change those once
 * auth is on), and checked where the command applies, on every replica
 * alike. `tokenCreate`, `tokenList`, `tokenRevoke`, `authEnable` and
 * `authDisable` always need an admin token, auth on or not. With auth
 * not enforced, every other method behaves as before auth existed.
 *
 * Limits (LIMIT_EXCEEDED, -32014, `data: { limit, value }`): watches per
 * connection (`maxWatchesPerConnection`), bindings per lease
 * (`maxBindingsPerLease`, counted by the state), tokens (`maxTokens`).
 *
 * @module
 */

import type { Methods } from "../rpc/server/dispatcher.ts";
import type {
  RpcSession,
  SessionMethods,
} from "../rpc/server/server_connection.ts";
import type { RegistryMethod } from "../protocol/registry.ts";
import {
  type MethodTable,
  type RegistryContext,
  ServiceCore,
} from "./service/_core.ts";
import { authMethods } from "./service/auth.ts";
import {
  type BindingCaches,
  bindingCaches,
  bindingMethods,
} from "./service/bindings.ts";
import { Caller } from "./service/_caller.ts";
import { leaderMethods } from "./service/leader.ts";
import { leaseMethods } from "./service/lease.ts";
import { memberMethods } from "./service/member.ts";
import { HeldSnapshots, snapshotMethods } from "./service/snapshot.ts";
import { statusMethods } from "./service/status.ts";
import { watchMethods } from "./service/watch.ts";

export type { RegistryContext } from "./service/_core.ts";

/**
 * Builds the registry's JSON-RPC methods for each client connection. Params
 * are named (an object); `registry.bind`, `registry.unbind` and
 * `registry.lookup` also take them by position in the order the contract
 * lists them.
 *
 * Errors: -32602 for bad params (the message names the field);
 * NOT_LEADER (-32001) on a follower for writes and lease calls, with
 * `data: { leaderId, leaderUrl }`; UNAVAILABLE (-32006) when no leader is
 * known or a write or linearizable read could not complete in time (retry
 * after `data.retryAfterMs`); LEASE_NOT_FOUND (-32007); COMPACTED (-32008)
 * for a watch from a revision older than the history window; ID_IN_USE
 * (-32015, `data: { name, id, leaseId, url, ttlMs }`) for a bind whose id
 * another live lease holds at another URL.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { startRegistryNode } from "./mod.ts";
 * // A node serves registryMethods(context) on its client port.
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({ id: "n1", listen: { hostname: "127.0.0.1", port: 0 }, dataDir });
 * const connection = await dial(node.url);
 * const status = await connection.call("registry.status") as { id: string };
 * assert.equal(status.id, "n1");
 * await assert.rejects(connection.call("registry.lookup", [""]), {
 *   code: -32602,
 *   message: 'Invalid params: "name" must be a non-empty string',
 * });
 * connection.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export function registryMethods(context: RegistryContext): SessionMethods {
  const service = new RegistryService(context);
  return (session) => service.methods(session);
}

/** The registry's methods: each API's table, built for each connection. */
class RegistryService {
  readonly #core: ServiceCore;
  readonly #caches: BindingCaches = bindingCaches();
  readonly #snapshots = new HeldSnapshots();

  constructor(context: RegistryContext) {
    this.#core = new ServiceCore(context);
  }

  /**
   * The methods of one client connection, acting as the token it
   * authenticates with (held here, for the connection's lifetime).
   */
  methods(session: RpcSession): Methods {
    const core = this.#core;
    const caller = new Caller(core);
    closeUnauthenticated(session, caller, core.context.authTimeoutMs ?? 10_000);
    const methods: MethodTable<RegistryMethod> = {
      ...bindingMethods(core, caller, this.#caches),
      ...leaseMethods(core, caller),
      ...leaderMethods(core, caller),
      ...memberMethods(core, caller),
      ...statusMethods(core, caller),
      ...snapshotMethods(core, caller, this.#snapshots),
      ...watchMethods(core, session, caller),
    };
    return { ...methods, ...authMethods(core, caller) } as Methods;
  }
}

/**
 * With auth enforced when it opens, closes `session` if it has no valid
 * token `timeoutMs` after it opened (an anonymous connection would otherwise
 * hold a slot of the connection caps until the idle timeout). One timer
 * per connection, cleared when the connection ends.
 */
function closeUnauthenticated(
  session: RpcSession,
  caller: Caller,
  timeoutMs: number,
): void {
  // Without auth on, no timer per connection (a switch turned on later
  // refuses the calls of connections already open anyway).
  if (timeoutMs <= 0 || !caller.enforced) return;
  const timer = setTimeout(() => {
    if (caller.enforced && caller.token() === null) session.close();
  }, timeoutMs);
  session.signal.addEventListener("abort", () => clearTimeout(timer), {
    once: true,
  });
}
