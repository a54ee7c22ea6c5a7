/**
 * `connect()`: the entry point of a Rafter client. One client holds the
 * registry client, the watch connection, a connection pool and a cluster
 * map per name, shared by all its stubs.
 *
 * @module
 */

import { type Dialer, parseTcpUrl } from "../rpc/transport/transport.ts";
import type { Codec } from "../rpc/codec/codec.ts";
import { codecNamed } from "../rpc/codec/codecs.ts";
import { DEADLINE_EXCEEDED, RpcError } from "../rpc/errors.ts";
import { DEFAULT_CONNECT_TIMEOUT_MS } from "../rpc/transport/dial.ts";
import {
  type BindResult,
  type EndpointSpec,
  type ListResult,
  type LookupResult,
  type Scope,
  UNAVAILABLE,
  type UnbindResult,
} from "../protocol/registry.ts";
import {
  ClusterMap,
  type ClusterMapOptions,
  type EndpointStatus,
} from "./cluster_map/cluster_map.ts";
import { FailoverMap } from "./cluster_map/failover_map.ts";
import {
  ClusterStub,
  type Stub,
  type StubCallOptions,
  type StubContext,
  type StubOptions,
} from "./call/cluster_stub.ts";
import {
  ConnectionPool,
  type ConnectionPoolOptions,
} from "./connection_pool.ts";
import {
  HealthBook,
  type HealthOptions,
} from "./cluster_map/endpoint_health.ts";
import type { EdgeCache, EdgeRequestIo } from "./edge_cache.ts";
import { presentToken } from "./authenticate.ts";
import {
  type BindOptions,
  type RegistryCallOptions,
  RegistryClient,
  type RegistryClientOptions,
} from "./registry_client/registry_client.ts";
import {
  type BindableServer,
  bindServer,
  type BindServerOptions,
  type ServerBinding,
} from "./binding/bind_server.ts";
import {
  RegistryWatch,
  WatchClient,
  type WatchOptions,
  type WatchUpdate,
} from "./registry_client/watch.ts";

const DEFAULT_LOCAL_HOSTS = ["127.0.0.1", "::1", "localhost"];

/** The host of a `tcp://host:port` URL (no brackets). */
function hostOf(url: string): string {
  try {
    return parseTcpUrl(url).hostname;
  } catch {
    return "";
  }
}

/**
 * How long a cluster map waits for a linearizable lookup before it takes a
 * serializable one (one node's view), ms.
 */
const LINEARIZABLE_MAP_LOOKUP_MS = 3_000;

/** Settings of {@link connect}. */
export interface ConnectOptions
  extends RegistryClientOptions, ClusterMapOptions {
  /** Opens byte streams. Default: `defaultDialer()` (the runtime entries' `connect` pass theirs). */
  dialer?: Dialer;
  /** Time allowed to open a connection, ms. @default 2_000 */
  connectTimeoutMs?: number;
  /**
   * Wire codec of every connection this client opens (registry, watch,
   * servers): `"json"` (NDJSON) or `"cbor"` (the connection opens with
   * `d9 d9 f7`, then each frame is a 4-byte big-endian length and one CBOR
   * item). Rafter servers and registry nodes accept both on one port.
   * @default "json"
   */
  codec?: Codec;
  /**
   * Keep cluster maps current with a registry watch (one connection per
   * client, to one registry node at a time). Without it a map looks its
   * name up again only when it runs empty. @default true
   */
  watch?: boolean;
  /**
   * Have that watch bring the loads servers report with their keep-alives
   * as they change (`registry.watch` with `loads: true`), so `load` on the
   * candidates (and `leastLoaded`) follows them between lookups; false:
   * loads only from lookups. @default true
   */
  watchLoads?: boolean;
  /**
   * This client's failure zone (e.g. `"eu-west-1a"`): endpoints bound with
   * the same zone are `local` to it (for `weightedRoundRobin({ preferLocal })`).
   * Without it, endpoints on one of `localHosts` are local.
   */
  zone?: string;
  /**
   * Sibling registry clusters of a federation (each its own consensus
   * group) → their registry client URLs: `stub("name@b")` calls the
   * servers bound under `name` in cluster `b`, and a stub with
   * `failover: true` turns to them when this cluster has no serving
   * endpoint of the name. Default: what this cluster's registry tells in
   * `registry.status` (`--domain`, `--cluster-name`, `--siblings`), asked
   * once when first needed.
   */
  clusters?: Readonly<Record<string, readonly string[]>>;
  /** Hosts that count as this client's own. @default ["127.0.0.1", "::1", "localhost"] */
  localHosts?: readonly string[];
  /** Connections per endpoint, idle close, reconnect back-off. */
  pool?: Omit<
    ConnectionPoolOptions,
    "dialer" | "connectTimeoutMs" | "codec" | "handshake"
  >;
  /**
   * The bearer token for the servers this client's stubs call (not the
   * registry's `token`): each connection to a server calls
   * `rpc.authenticate {token}` before any call is sent on it (again after
   * each reconnect), and calls issued meanwhile wait for it. A token the
   * server refuses fails those calls, unsent and not retried elsewhere,
   * with a `ServerError` of code UNAUTHENTICATED (-32012) that carries the
   * `AuthenticationError`'s message and data (`{ url, tokenId, answer }`).
   * The token is never sent to a registry node, whose connections are kept
   * apart. Without it servers get no token.
   *
   * @example
   * ```ts ignore
   * // not run: needs a registry and servers that check tokens
   * import { connect } from "@rafter/rpc/deno";
   * const client = connect("tcp://10.0.0.5:7001", {
   *   token: Deno.env.get("RAFTER_TOKEN"), // for the registry
   *   serverToken: Deno.env.get("BILLING_TOKEN"), // for the billing servers
   * });
   * await client.call("billing", "charge", { cents: 100 });
   * ```
   */
  serverToken?: string;
  /** When this client ejects a server as an outlier, and for how long. */
  health?: HealthOptions;
  /** How long a probe (`rpc.ping`) of an ejected server may take, ms. @default 1_000 */
  probeTimeoutMs?: number;
  /**
   * Edge mode, for runtimes where no socket or timer may outlive a request
   * (Cloudflare Workers): make one client per request with the isolate's
   * {@link EdgeCache} and close it before the response is returned. The
   * client then keeps no watch (the map is looked up, at most once a TTL),
   * takes a stubs list from the cache while it is fresh, stores the ones it
   * reads, and judges servers with the cache's health records (`health` is
   * ignored). Concurrent requests share one lookup of a name, and a list
   * past its TTL is served while it is refreshed in the background (see
   * {@link EdgeCache}).
   */
  edge?: EdgeCache;
  /**
   * Edge mode: how a background refresh of a stale stubs list outlives the
   * request. Give the runtime's `waitUntil` (Cloudflare Workers:
   * `(work) => ctx.waitUntil(work)`): the refresh runs on a registry
   * connection of its own, opened by this request and closed when the
   * refresh ends, and `close()` leaves it running. Undefined: it runs
   * detached, for runtimes where work may outlive a request (`deno serve`,
   * Deno Deploy, Node). `null`: no background work; a stale list is looked
   * up before the request goes on.
   */
  waitUntil?: ((work: Promise<unknown>) => void) | null;
}

/**
 * A connected Rafter client. Connections open lazily, on first use.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { connect } from "./client.ts";
 * import { serve } from "../adapter/deno/serve.ts";
 * import { startRegistryNode } from "../registry/mod.ts";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = serve({
 *   methods: { greet: (name: string) => ({ greeting: `Hello, ${name}!`, server: "h1" }) },
 * });
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect([node.url]);
 * await client.bind("hello", { id: "h1", url: server.url });
 * const hello = client.stub<Hello>("hello");
 * assert.deepEqual(await hello.greet("Ada"), { greeting: "Hello, Ada!", server: "h1" });
 * client.close();
 * await server.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export class RafterClient {
  /** The registry client (bind, unbind, lookup, leases, status). */
  readonly registry: RegistryClient;
  /** The client's watch connection, shared by all its watches and cluster maps. */
  readonly watches: WatchClient;
  readonly #pool: ConnectionPool;
  readonly #registryPool: ConnectionPool;
  readonly #health: HealthBook;
  readonly #options: ConnectOptions;
  readonly #registryUrls: readonly string[];
  readonly #poolOptions: ConnectionPoolOptions;
  readonly #maps = new Map<string, ClusterMap>();
  readonly #stubs = new Map<string, ClusterStub>();
  /** Sibling clusters' registry and watch clients, made when first used. */
  readonly #siblings = new Map<
    string,
    { registry: RegistryClient; watches: WatchClient }
  >();
  /** The sibling clusters' URLs: the option's, or those the registry told. */
  #clusters: Promise<Domain> | null = null;

  /** Use {@link connect}. */
  constructor(registryUrls: readonly string[], options: ConnectOptions = {}) {
    // A codec that cannot be used is refused here, not at the first call.
    codecNamed(options.codec);
    this.#options = options;
    this.#registryUrls = registryUrls;
    const connectTimeoutMs = options.connectTimeoutMs ??
      DEFAULT_CONNECT_TIMEOUT_MS;
    const poolOptions: ConnectionPoolOptions = {
      ...options.pool,
      dialer: options.dialer,
      connectTimeoutMs,
      codec: options.codec,
    };
    this.#poolOptions = poolOptions;
    const serverToken = options.serverToken;
    if (serverToken !== undefined && serverToken === "") {
      throw new TypeError("serverToken is empty: give the token, or omit it");
    }
    // Servers and registry nodes get apart pools: each peer sees only its
    // own token.
    this.#pool = new ConnectionPool({
      ...poolOptions,
      handshake: serverToken === undefined
        ? undefined
        : (connection) =>
          presentToken(
            connection,
            "server",
            serverToken,
            options.attemptTimeoutMs ?? 4_000,
          ),
    });
    this.#registryPool = new ConnectionPool(poolOptions);
    this.#health = options.edge?.health ?? new HealthBook(options.health);
    this.registry = new RegistryClient(
      registryUrls,
      this.#registryPool,
      options,
    );
    this.watches = new WatchClient(this.registry, {
      dialer: options.dialer,
      connectTimeoutMs,
      codec: options.codec,
      callTimeoutMs: options.attemptTimeoutMs,
      token: options.token,
    });
  }

  /** Binds `endpoint` under `name`; see {@link RegistryClient.bind}. */
  bind(
    name: string,
    endpoint: EndpointSpec,
    options?: BindOptions,
  ): Promise<BindResult> {
    return this.registry.bind(name, endpoint, options);
  }

  /** Unbinds endpoint `id` from `name`; see {@link RegistryClient.unbind}. */
  unbind(
    name: string,
    id: string,
    options?: RegistryCallOptions & { leaseId?: string; scope?: Scope },
  ): Promise<UnbindResult> {
    return this.registry.unbind(name, id, options);
  }

  /**
   * The stubs list of `name` (in sibling cluster `c` for `name@c`); see
   * {@link RegistryClient.lookup}.
   */
  async lookup(
    name: string,
    options?: Parameters<RegistryClient["lookup"]>[1],
  ): Promise<LookupResult> {
    // name@cluster: that sibling cluster's registry (see `clusters`).
    if (clusterSuffix(name) === null) {
      return await this.registry.lookup(name, options);
    }
    const place = await this.#placeOf(name);
    return await inCluster(
      place,
      place.registry.lookup(place.name, options),
    );
  }

  /** Names under `prefix`; see {@link RegistryClient.list}. */
  list(
    prefix?: string,
    options?: Parameters<RegistryClient["list"]>[1],
  ): Promise<ListResult> {
    return this.registry.list(prefix, options);
  }

  /**
   * Watches every name under `prefix`, resuming through another registry
   * node when one fails; see {@link WatchClient.watch}. `prefix@cluster`
   * watches `prefix` in sibling cluster `cluster`, through its registry
   * (as `lookup` and stubs of `name@cluster`); the updates name `b`'s
   * names, without the suffix.
   */
  watch(
    prefix: string,
    options: WatchOptions = {},
    onUpdate?: (update: WatchUpdate) => void,
  ): RegistryWatch {
    if (clusterSuffix(prefix) === null) {
      return this.watches.watch(prefix, options, onUpdate);
    }
    // The sibling's registry is known once the domain is (a lookup away):
    // this watch relays the one opened there.
    let inner: RegistryWatch | null = null;
    const outer = new RegistryWatch(
      prefix,
      options,
      () => inner?.close(),
      onUpdate,
    );
    const { signal, ...rest } = options;
    signal?.addEventListener("abort", () => outer.close(), { once: true });
    if (signal?.aborted) outer.close();
    this.#placeOf(prefix).then((place) => {
      if (outer.closed) return;
      const opened = place.watches.watch(place.name, rest, (update) => {
        outer.next = opened.next;
        outer.deliver(update);
      });
      inner = opened;
      opened.ended.then(() => {
        if (opened.error !== null) outer.fail(opened.error);
        else outer.close();
      });
    }, (error) =>
      outer.fail(
        error instanceof RpcError
          ? error
          : new RpcError(-32603, `watch ${prefix}: ${String(error)}`),
      ));
    return outer;
  }

  /**
   * Binds `server` under `name` with a lease it keeps alive; see
   * {@link bindServer}.
   */
  bindServer(
    name: string,
    server: BindableServer | string,
    options?: BindServerOptions,
  ): Promise<ServerBinding> {
    return bindServer(this.registry, name, server, options);
  }

  /**
   * A typed cluster stub for `name`: `stub.method(...args)` calls `method`
   * with positional params on a server chosen by the distributor.
   * `name?key=value` only uses the servers with those attributes.
   */
  stub<T>(
    name: string,
    options: StubOptions & { failover?: boolean } = {},
  ): Stub<T> {
    const { failover, ...stubOptions } = options;
    const context = this.#stubContext(name);
    if (failover === true) context.map = this.#failoverMap(name);
    return new ClusterStub(name, context, stubOptions).proxy<T>();
  }

  /**
   * The federation's sibling clusters and their registry URLs: the
   * `clusters` option, or what this cluster's registry tells (asked once;
   * empty when it is not federated).
   */
  async clusters(): Promise<Readonly<Record<string, readonly string[]>>> {
    return (await this.#domain()).siblings;
  }

  /** This cluster's name (null when not told) and its siblings. */
  #domain(): Promise<Domain> {
    if (this.#clusters === null) {
      const given = this.#options.clusters;
      this.#clusters = given !== undefined
        ? Promise.resolve({ cluster: null, siblings: given })
        : this.registry.status().then((status) => ({
          cluster: status.federation?.cluster ?? null,
          siblings: status.federation?.siblings ?? {},
        }));
      // A failed ask is asked again next time.
      this.#clusters.catch(() => this.#clusters = null);
    }
    return this.#clusters;
  }

  /** `name` (its own map) in this cluster, then in each sibling, for a fail-over stub. */
  #failoverMap(name: string): FailoverMap {
    return new FailoverMap(this.#map(name), async () => {
      const clusters = await this.clusters();
      return Object.keys(clusters).map((cluster) => ({
        cluster,
        map: this.#map(`${name}@${cluster}`),
      }));
    });
  }

  /** The registry and watch clients of sibling `cluster` (made once). */
  #sibling(
    cluster: string,
    urls: readonly string[],
  ): { registry: RegistryClient; watches: WatchClient } {
    let sibling = this.#siblings.get(cluster);
    if (sibling === undefined) {
      const options = this.#options;
      const registry = new RegistryClient(urls, this.#registryPool, options);
      const watches = new WatchClient(registry, {
        dialer: options.dialer,
        connectTimeoutMs: options.connectTimeoutMs ??
          DEFAULT_CONNECT_TIMEOUT_MS,
        codec: options.codec,
        callTimeoutMs: options.attemptTimeoutMs,
        token: options.token,
      });
      sibling = { registry, watches };
      this.#siblings.set(cluster, sibling);
    }
    return sibling;
  }

  /**
   * Where `name` is looked up: `name@cluster` with a sibling `cluster`
   * goes to that cluster's registry (the base name); any other name
   * (including one whose `@…` is not a sibling) to this cluster's.
   */
  async #placeOf(name: string): Promise<Place> {
    const at = clusterSuffix(name);
    if (at !== null) {
      const domain = await this.#domain().catch((): Domain => ({
        cluster: null,
        siblings: {},
      }));
      const urls = domain.siblings[at.cluster];
      if (urls !== undefined) {
        return {
          name: at.base,
          cluster: at.cluster,
          ...this.#sibling(at.cluster, urls),
        };
      }
      if (at.cluster === domain.cluster) {
        return {
          name: at.base,
          registry: this.registry,
          watches: this.watches,
        };
      }
    }
    return { name, registry: this.registry, watches: this.watches };
  }

  /**
   * The state of every endpoint of `name` in this client's cluster map
   * (serving, suspect, ejected, draining, removed) with why; empty before
   * the first call to the name.
   */
  endpointStates(name: string): EndpointStatus[] {
    return this.#maps.get(name)?.states() ?? [];
  }

  /**
   * How fresh this client's cluster map of `name` is: the registry
   * revision it reflects and when it last changed (`Date.now()` ms; null
   * before the first lookup), and whether a watch keeps it current.
   * Revision 0 before the first lookup (made by the first call);
   * undefined before the first stub or call of the name.
   */
  mapAge(
    name: string,
  ):
    | { revision: number; updatedAt: number | null; watched: boolean }
    | undefined {
    const map = this.#maps.get(name);
    if (map === undefined) return undefined;
    return {
      revision: map.revision,
      updatedAt: map.updatedAt,
      watched: map.watched,
    };
  }

  /**
   * Calls `method` on a server of `name` with `params` (positional, or
   * named as an object) and per-call options (deadline, AbortSignal),
   * through a default stub of that name; `idempotent: true` lets a call
   * that may have reached a failed server run again elsewhere.
   */
  call<R = unknown>(
    name: string,
    method: string,
    params: unknown[] | Record<string, unknown> = [],
    options: StubCallOptions & { idempotent?: boolean } = {},
  ): Promise<R> {
    const key = `${options.idempotent === true ? "i" : "-"}${name}`;
    let stub = this.#stubs.get(key);
    if (stub === undefined) {
      stub = new ClusterStub(name, this.#stubContext(name), {
        idempotent: options.idempotent ?? false,
      });
      this.#stubs.set(key, stub);
    }
    return stub.call<R>(method, params, options);
  }

  /**
   * Cancels everything under way (registry calls and its stubs' calls
   * reject with CANCELLED, a stub call is not retried elsewhere, watches
   * end, keep-alives of {@link bindServer} stop, so their leases lapse:
   * close those bindings first for a graceful exit) and closes every
   * connection. The client cannot be used afterwards: its stubs' calls
   * reject with CANCELLED without opening a connection.
   */
  close(): void {
    this.registry.close();
    this.watches.close();
    for (const sibling of this.#siblings.values()) {
      sibling.registry.close();
      sibling.watches.close();
    }
    for (const map of this.#maps.values()) map.close();
    this.#pool.close();
    this.#registryPool.close();
  }

  /**
   * A linearizable lookup for a cluster map; when the registry cannot
   * serve one (no quorum), the endpoints one node knows: a possibly stale
   * list to call beats none.
   */
  async #lookupForMap(
    name: string,
    registry = this.registry,
  ): Promise<LookupResult> {
    try {
      return await registry.lookup(name, {
        rotate: false,
        deadlineMs: Math.min(
          LINEARIZABLE_MAP_LOOKUP_MS,
          this.#options.deadlineMs ?? Infinity,
        ),
      });
    } catch (error) {
      if (!noQuorum(error)) throw error;
      return await registry.lookup(name, {
        rotate: false,
        consistency: "serializable",
      });
    }
  }

  #stubContext(name: string): StubContext {
    return {
      map: this.#map(name),
      pool: this.#pool,
      health: this.#health,
      closed: this.registry.signal,
    };
  }

  #map(name: string): ClusterMap {
    let map = this.#maps.get(name);
    if (map === undefined) {
      const edge = this.#options.edge;
      const watch = edge === undefined && (this.#options.watch ?? true);
      let looked = false;
      const localHosts = this.#options.localHosts ?? DEFAULT_LOCAL_HOSTS;
      const zone = this.#options.zone;
      // A sibling cluster's name: its registry, once the domain is known
      // (the watch starts after the first lookup, so it is by then).
      let place: Place | null = null;
      const federated = clusterSuffix(name) !== null;
      const placed = async () => place ??= await this.#placeOf(name);
      map = new ClusterMap(federated ? clusterSuffix(name)!.base : name, {
        lookup: federated
          ? async () => {
            const where = await placed();
            return await inCluster(
              where,
              this.#lookupForMap(where.name, where.registry),
            );
          }
          : edge === undefined
          ? () => this.#lookupForMap(name)
          : () => {
            // A request's first lookup takes the isolate's list (fresh,
            // stale while refreshed, or another request's lookup); any
            // later one (everything in play failed) asks.
            const io = this.#edgeIo(name);
            if (looked) return edge.lookUp(name, io);
            looked = true;
            return edge.read(name, io);
          },
        watch: watch
          ? (fromRevision, onUpdate, onLoads) =>
            (place?.watches ?? this.watches).watch(
              (place?.name ?? name).split("?")[0],
              {
                fromRevision,
                onLoads: (this.#options.watchLoads ?? true)
                  ? onLoads
                  : undefined,
              },
              onUpdate,
            )
          : undefined,
      }, {
        health: this.#health,
        isLocal: (endpoint) =>
          zone !== undefined
            ? endpoint.zone === zone
            : localHosts.includes(hostOf(endpoint.url)),
        probe: (url) => this.#probe(url),
        onLeave: (url) => this.#pool.drain(url),
      }, this.#options);
      this.#maps.set(name, map);
    }
    return map;
  }

  /** What this client (one request) gives its edge cache to look `name` up. */
  #edgeIo(name: string): EdgeRequestIo {
    const waitUntil = this.#options.waitUntil;
    return {
      lookup: () => this.#lookupForMap(name),
      signal: this.registry.signal,
      background: waitUntil === null ? undefined : {
        lookup: () => this.#backgroundLookup(name),
        // Detached: the work never rejects (the cache catches its error).
        keep: waitUntil ?? (() => {}),
      },
    };
  }

  /**
   * A lookup of `name` on a registry connection of its own, closed when it
   * settles: a background refresh, which outlives this client's `close()`.
   */
  async #backgroundLookup(name: string): Promise<LookupResult> {
    const pool = new ConnectionPool(this.#poolOptions);
    const registry = new RegistryClient(
      this.#registryUrls,
      pool,
      this.#options,
    );
    try {
      return await this.#lookupForMap(name, registry);
    } finally {
      registry.close();
      pool.close();
    }
  }

  /** An ejected server answers `rpc.ping` in time: it may take calls again. */
  async #probe(url: string): Promise<boolean> {
    const timeoutMs = this.#options.probeTimeoutMs ?? 1_000;
    try {
      const connection = await this.#pool.get(url);
      await connection.call("rpc.ping", undefined, { timeoutMs });
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Whether a registry error means a node answered but could not serve a
 * linearizable read (no quorum), as opposed to no node answering at all.
 */
function noQuorum(error: unknown): boolean {
  if (!(error instanceof RpcError)) return false;
  const data = error.data as
    | { tried?: unknown; lastError?: { code?: unknown } }
    | undefined;
  if (error.code === UNAVAILABLE) return data?.tried === undefined;
  return error.code === DEADLINE_EXCEEDED &&
    data?.lastError?.code === UNAVAILABLE;
}

/**
 * Connects to a Rafter registry cluster. Nothing is opened until the first
 * call; then the client tries the URLs in turn and follows leader hints.
 *
 * @param registryUrls one URL or several (`tcp://host:port`); list two or
 * three nodes so the client survives a node's death.
 * @throws {TypeError} when no URL is given.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { connect } from "./client.ts";
 * import { startRegistryNode } from "../registry/mod.ts";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const client = connect([node.url]);
 * const { revision } = await client.bind("hello", { id: "h1", url: "tcp://127.0.0.1:9001" });
 * assert.equal((await client.lookup("hello")).revision, revision);
 * client.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export function connect(
  registryUrls: string | readonly string[],
  options: ConnectOptions = {},
): RafterClient {
  const urls = typeof registryUrls === "string" ? [registryUrls] : registryUrls;
  return new RafterClient(urls, options);
}

/** This client's cluster (null when not told) and its siblings' registry URLs. */
interface Domain {
  cluster: string | null;
  siblings: Readonly<Record<string, readonly string[]>>;
}

/** Where a cluster map's name is looked up and watched. */
interface Place {
  /** The name there. */
  name: string;
  registry: RegistryClient;
  watches: WatchClient;
  /** The sibling cluster, or undefined for this client's own. */
  cluster?: string;
}

/**
 * `lookup`, its failure saying which sibling cluster's registry failed
 * (its URLs are not the ones this client was given).
 */
async function inCluster<T>(place: Place, lookup: Promise<T>): Promise<T> {
  try {
    return await lookup;
  } catch (error) {
    if (place.cluster === undefined || !(error instanceof RpcError)) {
      throw error;
    }
    throw new RpcError(
      error.code,
      `${error.message} (looking up "${place.name}" in sibling cluster ${place.cluster}, whose registry this cluster's registry named)`,
      error.data,
    );
  }
}

/**
 * `name@cluster` split into its base name and the cluster (a simple name:
 * letters, digits, `_ . -`), or null when `name` has no such suffix.
 * Exported for the CLI's messages (no entry point re-exports it).
 */
export function clusterSuffix(
  name: string,
): { base: string; cluster: string } | null {
  const at = name.lastIndexOf("@");
  if (at <= 0) return null;
  const cluster = name.slice(at + 1);
  return /^[A-Za-z0-9_.-]{1,64}$/.test(cluster)
    ? { base: name.slice(0, at), cluster }
    : null;
}
