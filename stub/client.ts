/**
 * `connect()`: the entry point of a Rafter client. One client holds the
 * registry client, a connection pool and a cluster map per name, shared by
 * all its stubs.
 *
 * @module
 */

import type { Dialer } from "../rpc/transport.ts";
import type {
  Consistency,
  LookupResult,
  WriteResult,
} from "../registry/types.ts";
import { ClusterMap, type ClusterMapOptions } from "./cluster_map.ts";
import {
  ClusterStub,
  type Stub,
  type StubCallOptions,
  type StubOptions,
} from "./cluster_stub.ts";
import { ConnectionPool } from "./connection_pool.ts";
import {
  type RegistryCallOptions,
  RegistryClient,
  type RegistryClientOptions,
} from "./registry_client.ts";

/** Settings of {@link connect}. */
export interface ConnectOptions
  extends RegistryClientOptions, ClusterMapOptions {
  /** Opens byte streams; default TCP through `Deno.connect`. Pass one on other runtimes. */
  dialer?: Dialer;
  /** Time allowed to open a connection, ms. Default 2000. */
  connectTimeoutMs?: number;
}

/**
 * A connected Rafter client. Connections open lazily, on first use.
 *
 * @example
 * ```ts ignore
 * import { connect } from "./client.ts";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect(["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"]);
 * const hello = client.stub<Hello>("hello");
 * console.log((await hello.greet("Ada")).greeting);
 * client.close();
 * ```
 */
export class RafterClient {
  /** The registry client (bind, unbind, lookup, status). */
  readonly registry: RegistryClient;
  readonly #pool: ConnectionPool;
  readonly #options: ConnectOptions;
  readonly #maps = new Map<string, ClusterMap>();
  readonly #stubs = new Map<string, ClusterStub>();

  /** Use {@link connect}. */
  constructor(registryUrls: readonly string[], options: ConnectOptions = {}) {
    this.#options = options;
    this.#pool = new ConnectionPool({
      dialer: options.dialer,
      connectTimeoutMs: options.connectTimeoutMs,
    });
    this.registry = new RegistryClient(registryUrls, this.#pool, options);
  }

  /** Binds `endpoint` under `name`; see {@link RegistryClient.bind}. */
  bind(
    name: string,
    endpoint: { id?: string; url: string },
    options?: RegistryCallOptions,
  ): Promise<WriteResult> {
    return this.registry.bind(name, endpoint, options);
  }

  /** Unbinds endpoint `id` from `name`; see {@link RegistryClient.unbind}. */
  unbind(
    name: string,
    id: string,
    options?: RegistryCallOptions,
  ): Promise<WriteResult> {
    return this.registry.unbind(name, id, options);
  }

  /** The stubs list of `name`; see {@link RegistryClient.lookup}. */
  lookup(
    name: string,
    options?: RegistryCallOptions & { consistency?: Consistency },
  ): Promise<LookupResult> {
    return this.registry.lookup(name, options);
  }

  /**
   * A typed cluster stub for `name`: `stub.method(...args)` calls `method`
   * with positional params on a server chosen by the distributor.
   */
  stub<T>(name: string, options: StubOptions = {}): Stub<T> {
    return new ClusterStub(name, this.#map(name), this.#pool, options).proxy<
      T
    >();
  }

  /**
   * Calls `method` on a server of `name` with per-call options (deadline,
   * AbortSignal), through a default stub of that name.
   */
  call<R = unknown>(
    name: string,
    method: string,
    params: unknown[] = [],
    options?: StubCallOptions,
  ): Promise<R> {
    let stub = this.#stubs.get(name);
    if (stub === undefined) {
      stub = new ClusterStub(name, this.#map(name), this.#pool);
      this.#stubs.set(name, stub);
    }
    return stub.call<R>(method, params, options);
  }

  /** Closes every connection. The client stays usable (it reconnects). */
  close(): void {
    this.#pool.close();
  }

  #map(name: string): ClusterMap {
    let map = this.#maps.get(name);
    if (map === undefined) {
      map = new ClusterMap(
        () => this.registry.endpoints(name),
        this.#options,
      );
      this.#maps.set(name, map);
    }
    return map;
  }
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
 * ```ts ignore
 * import { connect } from "./client.ts";
 * const client = connect("tcp://127.0.0.1:7001");
 * await client.bind("hello", { id: "h1", url: "tcp://127.0.0.1:9001" });
 * client.close();
 * ```
 */
export function connect(
  registryUrls: string | readonly string[],
  options: ConnectOptions = {},
): RafterClient {
  const urls = typeof registryUrls === "string" ? [registryUrls] : registryUrls;
  return new RafterClient(urls, options);
}
