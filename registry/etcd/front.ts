/**
 * The registry API over an existing etcd v3 cluster (`deno task registry
 * --engine etcd --etcd-endpoints URLS`): a front that serves the same
 * `registry.*` and `lease.*` methods as a Rafter registry node, on the
 * same client port protocol, with etcd as the store and the consensus
 * group. Clients, stubs and the CLI do not know the difference. Fronts
 * hold no state of their own (but watches and reported loads), so several
 * can run over one etcd cluster.
 *
 * The key layout (under `prefix`, default `/rafter/`):
 *
 * - `<prefix>b/<name>/<id>`: one binding, its value the endpoint as JSON
 *   (`{ url, attrs, weight, zone, state, leaseId }`), attached to its etcd
 *   lease when it has one (so it goes when the lease does);
 * - leases are etcd leases: a Rafter lease id is the etcd lease id in
 *   decimal, and TTLs are rounded up to whole seconds (etcd's unit);
 * - revisions are etcd's: a binding's `createRevision`/`modRevision` are
 *   its key's, and a watch from revision R is an etcd watch from R.
 *
 * Not served over etcd (answered METHOD_NOT_FOUND, saying so): tokens and
 * auth, active health checks, local-scope bindings, membership and
 * snapshots (etcd's own tools do those).
 *
 * @module
 */

// deno-lint-ignore no-import-prefix
import { Etcd3, type IKeyValue, type Watcher } from "npm:etcd3@1.1.2";
import {
  type Attributes,
  type BindResult,
  type DeleteReason,
  type Endpoint,
  ID_IN_USE,
  LEASE_NOT_FOUND,
  type LeaseInfo,
  type LookupResult,
  makeEndpoint,
  REGISTRY_METHODS,
  UNAVAILABLE,
  type WatchEvent,
} from "../../protocol/registry.ts";
import { REGISTRY_PARAMS } from "../../protocol/registry_params.ts";
import { method } from "../../rpc/server/method.ts";
import type { Methods, RpcSession } from "../../rpc/server/method.ts";
import type { RpcServer, ServeOptions } from "../../rpc/server/server.ts";
import {
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  RpcError,
} from "../../rpc/errors.ts";
import { withDeadline } from "../../internal/timing.ts";

/** Settings of an etcd front. */
export interface EtcdFrontOptions {
  /** etcd client URLs (`http://host:2379`). */
  endpoints: readonly string[];
  /** Key prefix of the registry in etcd. @default "/rafter/" */
  prefix?: string;
  /** Client port's interface. @default "127.0.0.1" */
  hostname?: string;
  /** Client port. @default 7001 */
  port?: number;
  /** Where log lines go. @default console.error */
  log?(line: string): void;
}

/** What a binding's etcd value holds. */
interface Stored {
  url: string;
  attrs: Attributes;
  weight: number;
  zone: string | null;
  state: "serving" | "draining";
  leaseId: string | null;
}

const M = REGISTRY_METHODS;

/** A registry front over etcd, serving clients on its port. */
export class EtcdFront {
  readonly #options: EtcdFrontOptions;
  readonly #etcd: Etcd3;
  readonly #prefix: string;
  readonly #log: (line: string) => void;
  /** Loads servers reported with their keep-alives, by lease (volatile). */
  readonly #loads = new Map<string, number>();
  /** Leases this front revoked lately (for the reason of their deletes). */
  readonly #revoked = new Set<string>();
  /** Keys this front unbound lately (for the reason of their deletes). */
  readonly #unbound = new Set<string>();
  #server: RpcServer | undefined;
  #rotation = new Map<string, number>();
  #watchIds = 0;

  private constructor(options: EtcdFrontOptions) {
    this.#options = options;
    this.#etcd = new Etcd3({ hosts: [...options.endpoints] });
    this.#prefix = options.prefix ?? "/rafter/";
    this.#log = options.log ?? ((line) => console.error(line));
  }

  /**
   * Checks that etcd answers, then serves the registry API on the client
   * port with `serve`.
   *
   * @throws {RpcError} UNAVAILABLE when etcd does not answer within 5 s.
   */
  static async start(
    options: EtcdFrontOptions,
    serve: (options: ServeOptions) => RpcServer,
  ): Promise<EtcdFront> {
    const front = new EtcdFront(options);
    try {
      const where = options.endpoints.join(", ");
      await withTimeout(
        front.#etcd.getAll().prefix(front.#prefix).keys(),
        5_000,
        `etcd at ${where} did not answer within 5 s: check --etcd-endpoints and that etcd runs`,
      ).catch((error) => {
        if (error instanceof RpcError) throw error;
        throw new RpcError(
          UNAVAILABLE,
          `etcd at ${where} cannot be reached (${
            String((error as Error).message).split(". ")[0]
          }): check --etcd-endpoints and that etcd runs`,
        );
      });
      front.#server = serve({
        hostname: options.hostname ?? "127.0.0.1",
        port: options.port ?? 7001,
        methods: (session: RpcSession) => front.#methods(session),
      });
    } catch (error) {
      front.#etcd.close();
      throw error;
    }
    return front;
  }

  /** The client port's URL. */
  get url(): string {
    return this.#server!.url;
  }

  /** Stops serving and closes the etcd client. */
  async close(): Promise<void> {
    await this.#server?.close();
    this.#etcd.close();
  }

  #key(name: string, id = ""): string {
    return `${this.#prefix}b/${name}/${id}`;
  }

  #endpoint(kv: IKeyValue, id: string): Endpoint {
    const stored = JSON.parse(kv.value.toString()) as Stored;
    return makeEndpoint({
      id,
      url: stored.url,
      attrs: stored.attrs,
      weight: stored.weight,
      zone: stored.zone,
      state: stored.state,
      leaseId: stored.leaseId,
      createRevision: Number(kv.create_revision),
      modRevision: Number(kv.mod_revision),
      load: stored.leaseId === null
        ? null
        : this.#loads.get(stored.leaseId) ?? null,
    });
  }

  /** The key's name and id (`<prefix>b/<name>/<id>`; names may hold `/`). */
  #parts(key: string): { name: string; id: string } {
    const rest = key.slice(this.#prefix.length + 2);
    const slash = rest.lastIndexOf("/");
    return { name: rest.slice(0, slash), id: rest.slice(slash + 1) };
  }

  #methods(session: RpcSession): Methods {
    const etcd = this.#etcd;
    const watches = new Map<string, Watcher>();
    session.signal.addEventListener("abort", () => {
      for (const watcher of watches.values()) void watcher.cancel();
    });
    const notServed = (name: string) => () => {
      throw new RpcError(
        METHOD_NOT_FOUND,
        `${name} is not served by a registry over etcd (--engine etcd): use etcd's own tools (etcdctl) for members, snapshots and auth`,
      );
    };
    const methods: Methods = {
      [M.leaseGrant]: method(REGISTRY_PARAMS[M.leaseGrant], async (p) => {
        const granted = await etcd.leaseClient.leaseGrant({
          TTL: Math.max(1, Math.ceil(p.ttlMs / 1000)),
          ID: 0,
        });
        return {
          id: granted.ID,
          ttlMs: p.ttlMs,
          revision: Number(granted.header.revision),
        };
      }),
      [M.leaseKeepAlive]: method(
        REGISTRY_PARAMS[M.leaseKeepAlive],
        async (p) => {
          const ttl = await this.#keepAlive(p.id);
          if (p.load !== undefined) this.#loads.set(p.id, p.load);
          return { id: p.id, ttlMs: ttl * 1000 };
        },
      ),
      [M.leaseRevoke]: method(REGISTRY_PARAMS[M.leaseRevoke], async (p) => {
        const info = await this.#timeToLive(p.id);
        this.#revoked.add(p.id);
        const revoked = await etcd.leaseClient.leaseRevoke({ ID: p.id });
        this.#loads.delete(p.id);
        return {
          revision: Number(revoked.header.revision),
          removed: info.bindings.length,
        };
      }),
      [M.leaseTimeToLive]: method(
        REGISTRY_PARAMS[M.leaseTimeToLive],
        (p) => this.#timeToLive(p.id),
      ),
      [M.bind]: method(REGISTRY_PARAMS[M.bind], async (p) => {
        const { base } = p.name;
        if (p.scope === "local") {
          notServed("a local-scope bind")();
        }
        let leaseId = p.leaseId ?? null;
        let ttlMs: number | undefined;
        if (p.grant !== undefined) {
          const granted = await etcd.leaseClient.leaseGrant({
            TTL: Math.max(1, Math.ceil(p.grant.ttlMs / 1000)),
            ID: 0,
          });
          leaseId = granted.ID;
          ttlMs = p.grant.ttlMs;
        } else if (leaseId !== null) {
          await this.#timeToLive(leaseId); // LEASE_NOT_FOUND when gone
        }
        const endpoint = p.endpoint;
        const key = this.#key(base, endpoint.id);
        const existing = (await etcd.get(key).exec()).kvs[0];
        if (existing !== undefined) {
          const held = JSON.parse(existing.value.toString()) as Stored;
          if (
            held.url !== endpoint.url && held.leaseId !== null &&
            held.leaseId !== leaseId
          ) {
            throw new RpcError(
              ID_IN_USE,
              `Id in use: endpoint "${endpoint.id}" of "${base}" is held by another live server at ${held.url} (lease ${held.leaseId}); start this one with another id, stop the other server, or wait for its lease to expire`,
              {
                name: base,
                id: endpoint.id,
                url: held.url,
                leaseId: held.leaseId,
              },
            );
          }
        }
        const stored: Stored = {
          url: endpoint.url,
          attrs: endpoint.attrs,
          weight: endpoint.weight,
          zone: endpoint.zone,
          state: "serving",
          leaseId,
        };
        const put = etcd.put(key).value(JSON.stringify(stored));
        if (leaseId !== null) put.lease(leaseId);
        // Only over what was read: a concurrent bind of the id loses.
        const committed = await etcd.if(
          key,
          "Mod",
          "==",
          existing === undefined ? 0 : Number(existing.mod_revision),
        ).then(put).commit();
        if (!committed.succeeded) {
          throw new RpcError(
            UNAVAILABLE,
            `endpoint "${endpoint.id}" of "${base}" changed while it was bound: bind again`,
            { applied: false },
          );
        }
        const revision = Number(committed.header.revision);
        const after = (await etcd.get(key).exec()).kvs[0];
        const result: BindResult = {
          revision,
          name: base,
          endpoint: this.#endpoint(after, endpoint.id),
          leaseId,
        };
        if (ttlMs !== undefined) result.ttlMs = ttlMs;
        return result;
      }),
      [M.unbind]: method(REGISTRY_PARAMS[M.unbind], async (p) => {
        const key = this.#key(p.name, p.id);
        this.#unbound.add(key);
        const deleted = await etcd.delete().key(key).exec();
        return {
          revision: Number(deleted.header.revision),
          removed: Number(deleted.deleted),
        };
      }),
      [M.setState]: method(REGISTRY_PARAMS[M.setState], async (p) => {
        const key = this.#key(p.name, p.id);
        const existing = (await etcd.get(key).exec()).kvs[0];
        if (existing === undefined) {
          throw new RpcError(
            INVALID_PARAMS,
            `nothing is bound as "${p.id}" under "${p.name}"`,
          );
        }
        const stored = JSON.parse(existing.value.toString()) as Stored;
        stored.state = p.state;
        const put = etcd.put(key).value(JSON.stringify(stored));
        if (stored.leaseId !== null) put.lease(stored.leaseId);
        const done = await put.exec();
        return { revision: Number(done.header.revision) };
      }),
      [M.lookup]: method(REGISTRY_PARAMS[M.lookup], async (p) => {
        const { base, query } = p.name;
        // Linearizable (etcd's default range); serializable is a local read
        // of the etcd member asked.
        const answer = await etcd.getAll().prefix(this.#key(base)).exec();
        const matching = answer.kvs.map((kv) =>
          this.#endpoint(kv, this.#parts(kv.key.toString()).id)
        ).filter((e) =>
          Object.entries(query).every(([k, v]) => e.attrs[k] === v)
        );
        const serving = matching.filter((e) => e.state === "serving");
        const draining = matching.filter((e) => e.state === "draining");
        let shift = 0;
        if (p.rotate && serving.length > 1) {
          const turn = this.#rotation.get(base) ?? 0;
          this.#rotation.set(base, turn + 1);
          shift = turn % serving.length;
        }
        const ordered = [
          ...serving.slice(shift),
          ...serving.slice(0, shift),
          ...draining,
        ];
        const result: LookupResult = {
          name: base,
          query,
          endpoints: ordered.slice(0, p.limit ?? ordered.length),
          total: ordered.length,
          revision: Number(answer.header.revision),
        };
        return result;
      }),
      [M.list]: method(REGISTRY_PARAMS[M.list], async (p) => {
        const answer = await etcd.getAll().prefix(
          `${this.#prefix}b/${p.prefix ?? ""}`,
        ).exec();
        const byName = new Map<string, Endpoint[]>();
        for (const kv of answer.kvs) {
          const { name, id } = this.#parts(kv.key.toString());
          const list = byName.get(name) ?? [];
          list.push(this.#endpoint(kv, id));
          byName.set(name, list);
        }
        return {
          revision: Number(answer.header.revision),
          names: [...byName].sort(([a], [b]) => a < b ? -1 : 1).map((
            [name, endpoints],
          ) => ({
            name,
            count: endpoints.length,
            ...(p.endpoints ? { endpoints } : {}),
          })),
        };
      }),
      [M.watch]: method(REGISTRY_PARAMS[M.watch], async (p) => {
        const watchId = p.watchId ?? `w${++this.#watchIds}`;
        const current = Number(
          (await etcd.get(`${this.#prefix}`).exec()).header.revision,
        );
        // fromRevision is the first to deliver (inclusive), as etcd's start.
        const from = p.fromRevision ?? current + 1;
        const builder = etcd.watch().prefix(`${this.#prefix}b/${p.prefix}`)
          .withPreviousKV().startRevision(String(from));
        const watcher = await builder.create();
        watches.set(watchId, watcher);
        watcher.on("data", (response) => {
          const events: WatchEvent[] = [];
          for (const event of response.events) {
            const { name, id } = this.#parts(event.kv.key.toString());
            const revision = Number(event.kv.mod_revision);
            if (event.type === "Put") {
              events.push({
                type: "put",
                name,
                endpoint: this.#endpoint(event.kv, id),
                revision,
              });
            } else if (event.prev_kv) {
              const endpoint = this.#endpoint(event.prev_kv, id);
              const key = event.kv.key.toString();
              const reason: DeleteReason = this.#unbound.delete(key)
                ? "unbound"
                : endpoint.leaseId !== null &&
                    this.#revoked.has(endpoint.leaseId)
                ? "leaseRevoked"
                : "leaseExpired";
              events.push({
                type: "delete",
                name,
                endpoint: { ...endpoint, modRevision: revision },
                revision,
                reason,
              });
            }
          }
          if (events.length > 0) {
            session.notify("registry.events", {
              watchId,
              revision: Number(response.header.revision),
              events,
            } as unknown as Record<string, unknown>);
          }
        });
        watcher.on(
          "error",
          (error: Error) =>
            this.#log(`etcd watch ${watchId}: ${error.message}`),
        );
        return { watchId, revision: current, compactRevision: 0 };
      }),
      [M.unwatch]: method(REGISTRY_PARAMS[M.unwatch], async (p) => {
        const watcher = watches.get(p.watchId);
        watches.delete(p.watchId);
        if (watcher !== undefined) await watcher.cancel();
        return { cancelled: watcher !== undefined };
      }),
      [M.status]: () => this.#status(),
    };
    for (
      const name of [
        M.leaderTransfer,
        M.memberList,
        M.memberAdd,
        M.memberPromote,
        M.memberRemove,
        M.leaseList,
        M.snapshot,
        M.snapshotChunk,
      ]
    ) {
      methods[name] = notServed(name);
    }
    return methods;
  }

  /** Renews lease `id` once; its TTL in seconds. */
  async #keepAlive(id: string): Promise<number> {
    const stream = await this.#etcd.leaseClient.leaseKeepAlive();
    try {
      const answer = await withTimeout(
        new Promise<{ TTL: string }>((resolve, reject) => {
          stream.on("data", resolve);
          stream.on("error", reject);
          stream.write({ ID: id });
        }),
        5_000,
        `etcd did not renew lease ${id} within 5 s`,
      );
      const ttl = Number(answer.TTL);
      if (ttl <= 0) throw leaseNotFound(id);
      return ttl;
    } finally {
      stream.end();
    }
  }

  async #timeToLive(id: string): Promise<LeaseInfo> {
    const info = await this.#etcd.leaseClient.leaseTimeToLive({
      ID: id,
      keys: true,
    });
    const remaining = Number(info.TTL);
    if (remaining < 0) throw leaseNotFound(id);
    return {
      id,
      ttlMs: Number(info.grantedTTL) * 1000,
      remainingMs: remaining * 1000,
      bindings: (info.keys ?? []).map((key) =>
        this.#parts(Buffer.from(key as unknown as string, "base64").toString())
      ),
    };
  }

  #status(): Record<string, unknown> {
    return {
      id: "etcd",
      url: this.url,
      peerUrl: "",
      term: 0,
      role: "leader",
      kind: "voter",
      leader: "etcd",
      leaderUrl: this.url,
      commitIndex: 0,
      appliedIndex: 0,
      snapshotIndex: 0,
      revision: 0,
      compactRevision: 0,
      leases: 0,
      watchers: 0,
      electionTimeoutMs: 0,
      minTtlMs: 1_000,
      members: [],
      security: null,
      federation: null,
      engine: { kind: "etcd", endpoints: [...this.#options.endpoints] },
    };
  }
}

function leaseNotFound(id: string): RpcError {
  return new RpcError(
    LEASE_NOT_FOUND,
    `Lease not found: ${id} (it expired or was revoked): grant a new one and bind again`,
    { leaseId: id },
  );
}

/** `promise`, or UNAVAILABLE saying `message` after `ms`. */
function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  message: string,
): Promise<T> {
  return withDeadline(
    promise,
    Date.now() + ms,
    undefined,
    () => new RpcError(UNAVAILABLE, message),
    () => new RpcError(UNAVAILABLE, message),
  );
}
