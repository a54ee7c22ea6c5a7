/**
 * The bindings API: `registry.bind`, `unbind`, `setState` (writes, through
 * Raft, or on this node alone for `scope: "local"`), `registry.lookup` and
 * `registry.list` (reads of the replicated state merged with this node's
 * local area).
 *
 * @module
 */

import { method } from "../../rpc/server/method.ts";
import { RpcError } from "../../rpc/errors.ts";
import {
  type BindResult,
  type Endpoint,
  type ListedName,
  REGISTRY_METHODS,
} from "../../protocol/registry.ts";
import {
  minTtlProblem,
  type ParsedEndpoint,
  REGISTRY_PARAMS,
} from "../../protocol/registry_params.ts";
import { localEndpoint } from "../local_area.ts";
import { type Binding, type Command, idInUse } from "../state.ts";
import {
  invalid,
  leaseNotFound,
  type MethodTable,
  newLeaseId,
  type ServiceCore,
} from "./_core.ts";
import { type Caller, notYours } from "./_caller.ts";

/** A lookup's bindings sorted by state, and the content they were read from. */
interface SortedBindings {
  stateChanges: number;
  localChanges: number;
  serving: Readonly<Binding>[];
  draining: Readonly<Binding>[];
  unhealthy: Readonly<Binding>[];
  /** Which of them are this node's local bindings (copies). */
  locals: Set<Readonly<Binding>>;
}

/** Names (with their query) whose sorted bindings are kept for lookups. */
const SORTED_CACHE_ENTRIES = 256;

const {
  bind,
  unbind,
  setState,
  lookup,
  list,
} = REGISTRY_METHODS;

/** What the bindings methods of every connection share: lookup caches. */
export interface BindingCaches {
  /** Round-robin turn of each name. */
  readonly rotation: Map<string, number>;
  /** Sorted bindings by name and query (see `sorted`). */
  readonly sorted: Map<string, SortedBindings>;
}

/** Empty {@link BindingCaches}, made once per service. */
export function bindingCaches(): BindingCaches {
  return { rotation: new Map(), sorted: new Map() };
}

/**
 * The bindings methods of one connection (`caller`). Named params, and
 * for `bind`, `unbind` and `lookup` positional ones in the order the
 * contract lists them. With auth enforced: bind, unbind and setState need
 * `bind` on the name, and touch only the caller's own bindings and leases
 * (an admin's: anyone's); lookup needs `read` on the name; list answers
 * the names the caller may read; lease ids are shown to their owners (and
 * admins) only.
 */
export function bindingMethods(
  core: ServiceCore,
  caller: Caller,
  caches: BindingCaches,
): MethodTable<
  | typeof bind
  | typeof unbind
  | typeof setState
  | typeof lookup
  | typeof list
> {
  const { context } = core;
  const { rotation, sorted: sortedCache } = caches;

  async function bindLocal(
    name: string,
    endpoint: ParsedEndpoint,
    leaseId: string | undefined,
  ): Promise<BindResult> {
    if (endpoint.check !== undefined) {
      throw invalid(
        "a local binding cannot have a health check: checks are run by the leader, which does not see local bindings",
      );
    }
    const { state, local } = context;
    if (leaseId !== undefined) {
      await core.barrier();
      const lease = state.lease(leaseId);
      if (lease === undefined) throw leaseNotFound(leaseId);
      if (!caller.mayManage(lease.owner)) {
        throw notYours(bind, `lease ${leaseId}`, name);
      }
    }
    const previous = local.binding(name, endpoint.id);
    if (previous !== undefined && !caller.mayManage(previous.owner)) {
      throw notYours(
        bind,
        `local endpoint ${JSON.stringify(endpoint.id)} of ${
          JSON.stringify(name)
        }`,
        name,
      );
    }
    if (previous !== undefined) {
      // The rule of the replicated bind (state.ts idInUse), on this node.
      if (previous.leaseId !== null) await core.barrier();
      const held = previous.leaseId === null
        ? undefined
        : state.lease(previous.leaseId);
      const refusal = idInUse(
        previous,
        leaseId ?? null,
        endpoint.url,
        held?.ttlMs,
      );
      if (refusal !== null) {
        throw new RpcError(refusal.code, refusal.message, refusal.data);
      }
    }
    const binding: Binding = {
      name,
      id: endpoint.id,
      url: endpoint.url,
      attrs: endpoint.attrs ?? {},
      weight: endpoint.weight ?? 1,
      zone: endpoint.zone ?? null,
      leaseId: leaseId ?? null,
      createRevision: state.revision,
      modRevision: state.revision,
      state: "serving",
      check: null,
    };
    const owner = caller.owner();
    if (owner !== undefined) binding.owner = owner;
    local.bind(binding);
    return {
      revision: state.revision,
      name,
      endpoint: localEndpoint(binding, core.load(binding.leaseId)),
      leaseId: binding.leaseId,
    };
  }

  /**
   * The bindings a lookup of `base?query` answers from, sorted by state in
   * binding order (global ones, then this node's local ones), not copied.
   * Sorted once per content: reused while neither the replicated state
   * nor the local area changed, so a lookup of 100 endpoints out of
   * 10,000 does not walk the 10,000 every time.
   */
  function sorted(
    base: string,
    query: Record<string, string>,
    includeUnhealthy: boolean,
  ): SortedBindings {
    const { state, local } = context;
    const key = `${includeUnhealthy ? "u" : "s"} ${base} ${
      JSON.stringify(Object.entries(query).sort())
    }`;
    const cached = sortedCache.get(key);
    if (
      cached !== undefined && cached.stateChanges === state.changes &&
      cached.localChanges === local.changes
    ) {
      return cached;
    }
    const localBindings = local.bindings(base, query);
    const localIds = new Set(localBindings.map((b) => b.id));
    const result: SortedBindings = {
      stateChanges: state.changes,
      localChanges: local.changes,
      serving: [],
      draining: [],
      unhealthy: [],
      locals: new Set(localBindings),
    };
    const sort = (binding: Readonly<Binding>) => {
      if (binding.state === "serving") result.serving.push(binding);
      else if (binding.state === "draining") result.draining.push(binding);
      else if (includeUnhealthy) result.unhealthy.push(binding);
    };
    for (const binding of state.matchingBindings(base, query)) {
      if (!localIds.has(binding.id)) sort(binding);
    }
    for (const binding of localBindings) sort(binding);
    sortedCache.delete(key);
    sortedCache.set(key, result);
    if (sortedCache.size > SORTED_CACHE_ENTRIES) {
      sortedCache.delete(sortedCache.keys().next().value!);
    }
    return result;
  }

  /** Global then local endpoints of `name` matching `query`, in binding order. */
  function endpointsOf(
    name: string,
    query: Record<string, string>,
  ): Endpoint[] {
    const { state, local } = context;
    const locals = local.bindings(name, query);
    const localIds = new Set(locals.map((b) => b.id));
    return [
      ...state.bindings(name, query).filter((b) => !localIds.has(b.id)).map(
        (b) => core.endpoint(b),
      ),
      ...locals.map((b) => localEndpoint(b, core.load(b.leaseId))),
    ].map((endpoint) => caller.view(endpoint));
  }

  return {
    [bind]: method(REGISTRY_PARAMS[bind], async (p): Promise<BindResult> => {
      const { base } = p.name;
      caller.need(bind, "bind", base);
      let grant: { id: string; ttlMs: number } | undefined;
      if (p.grant !== undefined) {
        const problem = minTtlProblem(
          p.grant.ttlMs,
          "grant.ttlMs",
          context.minTtlMs,
        );
        if (problem !== null) throw invalid(problem);
        grant = { id: newLeaseId(), ttlMs: p.grant.ttlMs };
      }
      if (p.scope === "local") {
        if (grant !== undefined) {
          throw invalid(
            'a local binding cannot grant its lease in the same call; call lease.grant (on the leader) first, then bind with "leaseId" on this node',
          );
        }
        return await bindLocal(base, p.endpoint, p.leaseId);
      }
      const command: Command = {
        op: "bind",
        name: base,
        endpoint: p.endpoint,
        exclusiveId: true,
      };
      if (p.leaseId !== undefined) command.leaseId = p.leaseId;
      if (grant !== undefined) command.grant = grant;
      const owner = caller.owner();
      const guard = caller.guard();
      if (owner !== undefined) command.owner = owner;
      if (guard !== undefined) command.guard = guard;
      if (p.leaseId !== undefined) {
        command.maxLeaseBindings = context.maxBindingsPerLease ??
          DEFAULT_MAX_BINDINGS_PER_LEASE;
      }
      const value = await core.propose(command);
      const binding = value.binding!;
      const result: BindResult = {
        revision: value.revision,
        name: base,
        endpoint: core.endpoint(binding),
        leaseId: binding.leaseId,
      };
      if (value.lease !== undefined) result.ttlMs = value.lease.ttlMs;
      return result;
    }),

    [unbind]: method(REGISTRY_PARAMS[unbind], async (p) => {
      caller.need(unbind, "bind", p.name);
      if (p.scope === "local") {
        mayChangeLocal(unbind, p.name, p.id);
        const removed = context.local.unbind(p.name, p.id, p.leaseId) ? 1 : 0;
        return { revision: context.state.revision, removed };
      }
      const command: Command = { op: "unbind", name: p.name, id: p.id };
      if (p.leaseId !== undefined) command.leaseId = p.leaseId;
      const guard = caller.guard();
      if (guard !== undefined) command.guard = guard;
      const value = await core.propose(command);
      return { revision: value.revision, removed: value.removed ?? 0 };
    }),

    [setState]: method(REGISTRY_PARAMS[setState], async (p) => {
      const { name, id, state, leaseId } = p;
      caller.need(setState, "bind", name);
      if (p.scope === "local") {
        mayChangeLocal(setState, name, id);
        if (context.local.setState(name, id, state, leaseId) === undefined) {
          throw invalid(
            `no local endpoint ${JSON.stringify(id)} is bound under ${
              JSON.stringify(name)
            } on this node`,
          );
        }
        return { revision: context.state.revision };
      }
      const command: Command = { op: "setState", name, id, state };
      if (leaseId !== undefined) command.leaseId = leaseId;
      const guard = caller.guard();
      if (guard !== undefined) command.guard = guard;
      const value = await core.propose(command);
      return { revision: value.revision };
    }),

    [lookup]: method(REGISTRY_PARAMS[lookup], async (p) => {
      const { base, query } = p.name;
      caller.need(lookup, "read", base);
      if (p.consistency === "linearizable") await core.barrier();
      const { serving, draining, unhealthy, locals } = sorted(
        base,
        query,
        p.includeUnhealthy,
      );
      let shift = 0;
      if (p.rotate && serving.length > 1) {
        const turn = rotation.get(base) ?? 0;
        rotation.set(base, (turn + 1) % Number.MAX_SAFE_INTEGER);
        shift = turn % serving.length;
      }
      const total = serving.length + draining.length + unhealthy.length;
      const count = Math.min(p.limit ?? total, total);
      const picked: Readonly<Binding>[] = [];
      for (let i = 0; i < count; i++) {
        picked.push(
          i < serving.length
            ? serving[(shift + i) % serving.length]
            : i < serving.length + draining.length
            ? draining[i - serving.length]
            : unhealthy[i - serving.length - draining.length],
        );
      }
      return {
        name: base,
        query,
        endpoints: picked.map((binding) =>
          caller.view(
            locals.has(binding)
              ? localEndpoint(binding, core.load(binding.leaseId))
              : core.endpoint(binding),
          )
        ),
        total,
        revision: context.state.revision,
      };
    }),

    [list]: method(REGISTRY_PARAMS[list], async (p) => {
      caller.authenticated(list);
      if (p.consistency === "linearizable") await core.barrier();
      const { state, local } = context;
      const counts = new Map<string, number>();
      for (const { name, count } of state.names(p.prefix)) {
        counts.set(name, count);
      }
      for (const { name, count } of local.names(p.prefix)) {
        counts.set(name, (counts.get(name) ?? 0) + count);
      }
      const readable = [...counts.keys()].filter((name) =>
        caller.mayRead(name)
      );
      const names: ListedName[] = readable.sort().map((name) => {
        const listed: ListedName = { name, count: counts.get(name)! };
        if (p.endpoints) listed.endpoints = endpointsOf(name, {});
        return listed;
      });
      return { revision: state.revision, names };
    }),
  };

  /** Refuses to change a local binding another token made. */
  function mayChangeLocal(method: string, name: string, id: string): void {
    const binding = context.local.binding(name, id);
    if (binding !== undefined && !caller.mayManage(binding.owner)) {
      throw notYours(
        method,
        `local endpoint ${JSON.stringify(id)} of ${JSON.stringify(name)}`,
        name,
      );
    }
  }
}

/** Most bindings on one lease, by default (`maxBindingsPerLease`). */
export const DEFAULT_MAX_BINDINGS_PER_LEASE = 1_000;
