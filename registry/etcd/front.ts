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
// deno-lint-ignore no-import-prefix
import { isRecoverableError } from "npm:etcd3@1.1.2";
// etcd3's own fault-handling library (its dependency, the same version).
// deno-lint-ignore no-import-prefix
import { ConstantBackoff, handleWhen, retry } from "npm:cockatiel@3.2.1";
import {
  type BindResult,
  COMPACTED,
  type DeleteReason,
  type Endpoint,
  ID_IN_USE,
  LEASE_NOT_FOUND,
  type LeaseInfo,
  type LookupResult,
  makeEndpoint,
  REGISTRY_METHODS,
  UNAVAILABLE,
  WATCH_CANCELLED,
  WATCH_CANCELLED_NOTIFICATION,
  WATCH_EVENTS_NOTIFICATION,
  WATCH_LOADS_NOTIFICATION,
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
import type { TcpAddress } from "../../rpc/transport/transport.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import {
  Dashboard,
  type DashboardServer,
  dashboardWarning,
  serveDashboard,
} from "../node/dashboard.ts";
import {
  type Gauge,
  type MetricsServer,
  metricsWarning,
  NodeMetrics,
  serveMetrics,
} from "../node/metrics.ts";
import { processGauges } from "../../internal/metrics.ts";
import { LeaseRenewer } from "./keep_alive.ts";
import {
  bindingFields,
  bindingOf,
  createRevisionOf,
  EtcdMirror,
  keyParts,
  type Mirrored,
  parseStored,
  type Stored,
} from "./mirror.ts";
import { EtcdHealth } from "./health.ts";

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
  /** Where log lines go, with their level. @default console.error */
  log?(line: string, level?: "info" | "warn"): void;
  /** The front's name in `registry.status` (`--id`). @default "etcd" */
  id?: string;
  /** Largest frame a client may send, bytes. @default 8 MiB, as a node's */
  maxFrameBytes?: number;
  /** The client URL to advertise (`--advertise`), if not the listen address. */
  advertise?: string;
  /** TLS on the client port (`--tls-cert/--tls-key`, `--tls-client-ca`). */
  tls?: ServeOptions["tls"];
  /** The federation this front's cluster is part of, for `registry.status`. */
  federation?: unknown;
  /** Where to serve the dashboard (`--dashboard-listen`), if anywhere. */
  dashboardListen?: TcpAddress;
  /**
   * Where to serve `GET /metrics` (and the dashboard, as a node does) in
   * Prometheus's text format (`--metrics-listen`), if anywhere.
   */
  metricsListen?: TcpAddress;
}

/** How long one etcd call may take before the client tries another member, ms. */
const ETCD_CALL_TIMEOUT_MS = 2_000;
/** Pause between two attempts to reach etcd at start, ms. */
const CONNECT_RETRY_MS = 1_000;

/**
 * Shortest lease TTL, ms: etcd's own floor for a cluster with the
 * registry's default timing (1.5 × an election timeout of 1 s), and what
 * whole seconds allow.
 */
const MIN_TTL_MS = 1_000;

const M = REGISTRY_METHODS;

/** A watch a client opened on this front. */
interface OpenWatch {
  watcher: Watcher | null;
  prefix: string;
  loads: boolean;
  /** The last revision delivered (to resume from after a failure). */
  delivered: number;
}

/** A registry front over etcd, serving clients on its port. */
export class EtcdFront {
  readonly #options: EtcdFrontOptions;
  readonly #etcd: Etcd3;
  readonly #prefix: string;
  readonly #log: (line: string, level?: "info" | "warn") => void;
  readonly #renewer: LeaseRenewer;
  #mirror: EtcdMirror | undefined;
  #health: EtcdHealth | undefined;
  /** Leases this front revoked lately (for the reason of their deletes). */
  readonly #revoked = new Set<string>();
  /** Keys this front unbound lately (for the reason of their deletes). */
  readonly #unbound = new Set<string>();
  #server: RpcServer | undefined;
  #rotation = new Map<string, number>();
  #watchIds = 0;
  #watchCount = 0;
  #closed = false;
  #connecting: Promise<void> = Promise.resolve();
  /** The live page of `--dashboard-listen`: the bindings etcd holds. */
  readonly #dashboard = new Dashboard({
    status: () => this.#status() as unknown as RegistryStatus,
    progress: () => new Map(),
    lastIndex: () => 0,
    state: {
      names: () => this.#mirror?.names() ?? [],
      bindings: (name: string) => this.#mirror?.bindingFieldsOf(name) ?? [],
      verifyToken: () => Promise.resolve(undefined),
      token: () => undefined,
    },
    leases: {
      load: (id: string) => this.#load(id),
      remainingTimes: () => [],
    },
    authEnforced: () => false,
  });
  #dashboardServer: DashboardServer | undefined;
  /** RPC calls and writes, as a node counts them (`--metrics-listen`). */
  readonly #metrics: NodeMetrics;
  #metricsServer: MetricsServer | undefined;
  /** Resolves once the mirror is read (or the front closes first). */
  readonly #ready = Promise.withResolvers<void>();
  /** Why etcd calls fail since the last that succeeded, or null. */
  #etcdFailing: string | null = null;
  /** Why etcd has not been reached yet (for UNAVAILABLE answers). */
  #unreachable = "";

  private constructor(options: EtcdFrontOptions) {
    this.#options = options;
    this.#etcd = new Etcd3({
      hosts: [...options.endpoints],
      dialTimeout: ETCD_CALL_TIMEOUT_MS,
      // A member that stops answering (paused, cut off) costs a call this
      // long; etcd3 then retries it on another member.
      defaultCallOptions: (context) =>
        context.isStream ? {} : { deadline: Date.now() + ETCD_CALL_TIMEOUT_MS },
      // Streams (watches, keep-alives) notice a silent member by pings,
      // sent only while a stream is open and no more often than every
      // 10 s: etcd answers pings more frequent than its
      // --grpc-keepalive-min-time (5 s), or pings without a stream, with
      // a GOAWAY, and Deno's HTTP/2 has been seen to abort the process on
      // such a GOAWAY.
      grpcOptions: {
        "grpc.keepalive_time_ms": 10_000,
        "grpc.keepalive_timeout_ms": 3_000,
      },
      // Watches reconnect within a second of etcd coming back (etcd3's
      // default backs off up to 30 s, leaving the front's copy that stale).
      faultHandling: {
        watchBackoff: new CappedBackoff(100, 1_000),
        // Each retry goes to another member. etcd3's default retries
        // recoverable errors only: once a dead member's circuit breaker
        // opens, a call that lands there fails at once ("circuit breaker
        // is open") instead of trying a live member; that counts too.
        global: retry(
          handleWhen((error) =>
            isRecoverableError(error) ||
            /circuit breaker is open/i.test(String(error?.message))
          ),
          { maxAttempts: 5, backoff: new ConstantBackoff(20) },
        ),
      },
    });
    this.#prefix = options.prefix ?? "/rafter/";
    this.#log = options.log ?? ((line) => console.error(line));
    this.#renewer = new LeaseRenewer(this.#etcd);
    this.#metrics = new NodeMetrics(options.id ?? "etcd");
  }

  /**
   * Serves the registry API on the client port with `serve`, and reads
   * the bindings from etcd: waits up to 5 s for that, then goes on
   * trying every second while it answers UNAVAILABLE (saying why), as a
   * Raft node serves before it has a leader. Once etcd answered, it takes
   * part in the election of the front that runs health checks.
   *
   * @throws {Error} when the client port cannot be listened on.
   */
  static async start(
    options: EtcdFrontOptions,
    serve: (options: ServeOptions) => RpcServer,
  ): Promise<EtcdFront> {
    const front = new EtcdFront(options);
    try {
      front.#server = serve({
        hostname: options.hostname ?? "127.0.0.1",
        port: options.port ?? 7001,
        advertise: options.advertise,
        tls: options.tls,
        maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
        methods: (session: RpcSession) =>
          front.#metrics.instrument(session, front.#methods(session)),
        onCall: front.#metrics.onCall,
      });
      if (options.metricsListen !== undefined) {
        front.#metricsServer = serveMetrics(
          options.metricsListen,
          () => front.#metrics.render(() => front.#gauges()),
          (request) => front.#dashboard.handle(request),
        );
        front.#metrics.startLagProbe();
        const warning = metricsWarning(options.metricsListen);
        if (warning !== null) front.#log(warning, "warn");
        front.#log(`metrics on ${front.#metricsServer.url}`);
      }
      if (options.dashboardListen !== undefined) {
        front.#dashboardServer = serveDashboard(
          options.dashboardListen,
          front.#dashboard,
        );
        const warning = dashboardWarning(options.dashboardListen);
        if (warning !== null) front.#log(warning, "warn");
        front.#log(`dashboard on ${front.#dashboardServer.url}`);
      }
    } catch (error) {
      await front.#server?.close();
      front.#etcd.close();
      throw error;
    }
    front.#connecting = front.#connect();
    await Promise.race([
      front.#connecting,
      new Promise((resolve) => setTimeout(resolve, 5_000)),
    ]);
    return front;
  }

  /** Reads the bindings (retrying until etcd answers), then starts health checks. */
  async #connect(): Promise<void> {
    const where = this.#options.endpoints.join(", ");
    for (let attempt = 1; !this.#closed; attempt++) {
      try {
        const mirror = await withTimeout(
          EtcdMirror.start(this.#etcd, this.#prefix, this.#log),
          5_000,
          `etcd at ${where} did not answer within 5 s`,
        );
        if (this.#closed) {
          await mirror.close().catch(() => {});
          return;
        }
        this.#mirror = mirror;
        this.#health = new EtcdHealth(
          this.#etcd,
          mirror,
          this.#prefix,
          this.url,
          this.#log,
        );
        this.#ready.resolve();
        void this.#probeEtcd();
        mirror.listen(() => this.#dashboard.changed());
        this.#dashboard.changed();
        if (attempt > 1) this.#log(`etcd at ${where} answers: serving`);
        return;
      } catch (error) {
        const why = String((error as Error).message).split(". ")[0];
        this.#unreachable =
          `this front has not reached etcd at ${where} yet (${why}): check --etcd-endpoints and that a quorum of etcd's members runs; it keeps trying`;
        if (attempt === 1) {
          this.#log(
            `etcd at ${where} cannot be reached (${why}): check --etcd-endpoints and that etcd runs; answering UNAVAILABLE and trying again every ${
              CONNECT_RETRY_MS / 1000
            } s`,
            "warn",
          );
        }
        await new Promise((resolve) => setTimeout(resolve, CONNECT_RETRY_MS));
      }
    }
  }

  /** The client port's URL. */
  get url(): string {
    return this.#server!.url;
  }

  /** Whether this front runs the health checks now (it won their election). */
  get checksHealth(): boolean {
    return this.#health?.running ?? false;
  }

  /** Stops serving and closes the etcd client. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#ready.resolve();
    this.#dashboard.close();
    await this.#dashboardServer?.close();
    this.#metrics.stop();
    await this.#metricsServer?.close();
    await this.#server?.close();
    await this.#connecting;
    await this.#health?.close();
    await this.#mirror?.close().catch(() => {});
    this.#renewer.close();
    this.#etcd.close();
  }

  #key(name: string, id = ""): string {
    return `${this.#prefix}b/${name}/${id}`;
  }

  #load(leaseId: string | null): number | null {
    return leaseId === null ? null : this.#mirror!.loads.get(leaseId) ?? null;
  }

  /** The endpoint a mirrored binding is. */
  #endpoint(binding: Mirrored): Endpoint {
    const { name: _, ...fields } = bindingFields(binding);
    return makeEndpoint({ ...fields, load: this.#load(fields.leaseId) });
  }

  /** A key-value read from etcd as a mirrored binding (null: not one). */
  #binding(kv: IKeyValue): Mirrored | null {
    return bindingOf(this.#prefix, kv);
  }

  /** The bindings of `name` in creation order, read as `consistency` asks. */
  async #bindingsOf(
    name: string,
    consistency: "linearizable" | "serializable",
  ): Promise<{ bindings: Mirrored[]; revision: number }> {
    if (consistency === "serializable") {
      return {
        bindings: this.#mirror!.bindingsOf(name),
        revision: this.#mirror!.revision,
      };
    }
    // etcd's default range is linearizable (a ReadIndex on its leader).
    const answer = await this.#etcd.getAll().prefix(this.#key(name)).exec();
    const bindings = answer.kvs.map((kv) => this.#binding(kv)).filter((
      b,
    ): b is Mirrored => b !== null && b.name === name);
    bindings.sort((a, b) => a.createRevision - b.createRevision);
    return { bindings, revision: Number(answer.header.revision) };
  }

  #methods(session: RpcSession): Methods {
    const etcd = this.#etcd;
    // Every method but status: UNAVAILABLE until etcd answered once, and
    // an etcd failure (unreachable, no quorum) as UNAVAILABLE saying so.
    const served =
      ((schema: unknown, run: (...args: unknown[]) => unknown) =>
        method(
          schema as Parameters<typeof method>[0],
          (...args: unknown[]) => this.#etcdCall(() => run(...args)),
        )) as typeof method;
    const watches = new Map<string, OpenWatch>();
    let stopLoads = () => {};
    this.#ready.promise.then(() => {
      if (this.#mirror === undefined || session.signal.aborted) return;
      stopLoads = this.#mirror.listen((change) => {
        if (change.kind !== "load") return;
        this.#notifyLoads(session, watches, change.leaseId, change.load);
      });
    });
    session.signal.addEventListener("abort", () => {
      stopLoads();
      for (const watch of watches.values()) this.#endWatch(watch);
      watches.clear();
    });
    const notServed = (name: string) => () => {
      throw new RpcError(
        METHOD_NOT_FOUND,
        `${name} is not served by a registry over etcd (--engine etcd): use etcd's own tools (etcdctl) for members, snapshots and auth`,
      );
    };
    const grant = async (ttlMs: number, field: string) => {
      if (ttlMs < MIN_TTL_MS) {
        throw new RpcError(
          INVALID_PARAMS,
          `"${field}" is ${ttlMs} ms; a lease over etcd lives at least ${MIN_TTL_MS} ms (etcd counts whole seconds): ask for ${MIN_TTL_MS} ms or more`,
        );
      }
      return await etcd.leaseClient.leaseGrant({
        TTL: Math.ceil(ttlMs / 1000),
        ID: 0,
      });
    };
    const methods: Methods = {
      [M.leaseGrant]: served(REGISTRY_PARAMS[M.leaseGrant], async (p) => {
        const granted = await grant(p.ttlMs, "ttlMs");
        return {
          id: granted.ID,
          ttlMs: Number(granted.TTL) * 1000, // whole seconds, as etcd keeps it
          revision: Number(granted.header.revision),
        };
      }),
      [M.leaseKeepAlive]: served(
        REGISTRY_PARAMS[M.leaseKeepAlive],
        async (p) => {
          const ttl = await withTimeout(
            this.#renewer.renew(p.id),
            5_000,
            `etcd did not renew lease ${p.id} within 5 s`,
          );
          if (ttl <= 0) throw leaseNotFound(p.id);
          if (p.load !== undefined) await this.#reportLoad(p.id, p.load);
          return { id: p.id, ttlMs: ttl * 1000 };
        },
      ),
      [M.leaseRevoke]: served(REGISTRY_PARAMS[M.leaseRevoke], async (p) => {
        const info = await this.#timeToLive(p.id);
        this.#revoked.add(p.id);
        const revoked = await etcd.leaseClient.leaseRevoke({ ID: p.id });
        return {
          revision: Number(revoked.header.revision),
          removed: info.bindings.length,
        };
      }),
      [M.leaseTimeToLive]: served(
        REGISTRY_PARAMS[M.leaseTimeToLive],
        (p) => this.#timeToLive(p.id),
      ),
      [M.leaseList]: served(REGISTRY_PARAMS[M.leaseList], async () => {
        const listed = await etcd.leaseClient.leaseLeases();
        const leases: LeaseInfo[] = [];
        for (const { ID } of listed.leases ?? []) {
          try {
            leases.push(await this.#timeToLive(String(ID)));
          } catch (error) {
            // Gone since it was listed.
            if (!(error instanceof RpcError)) throw error;
          }
        }
        return { leases };
      }),
      [M.bind]: served(REGISTRY_PARAMS[M.bind], async (p) => {
        const { base } = p.name;
        if (p.scope === "local") {
          notServed("a local-scope bind")();
        }
        let leaseId = p.leaseId ?? null;
        let ttlMs: number | undefined;
        if (p.grant !== undefined) {
          const granted = await grant(p.grant.ttlMs, "grant.ttlMs");
          leaseId = granted.ID;
          ttlMs = Number(granted.TTL) * 1000; // rounded up, as etcd keeps it
        } else if (leaseId !== null) {
          await this.#timeToLive(leaseId); // LEASE_NOT_FOUND when gone
        }
        const endpoint = p.endpoint;
        const key = this.#key(base, endpoint.id);
        const existing = (await etcd.get(key).exec()).kvs[0];
        const held = existing === undefined ? null : parseStored(existing);
        if (held !== null) {
          if (
            held !== null && held.url !== endpoint.url &&
            held.leaseId !== null && held.leaseId !== leaseId
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
          check: endpoint.check ?? null,
        };
        // The same instance bound again keeps its createRevision; another
        // lease at this id is a new instance (a server restarted at its
        // URL), as on a Raft registry, so clients forget the old one's
        // failures.
        if (held !== null) {
          stored.born = held.leaseId === leaseId
            ? createRevisionOf(held, existing!)
            : "put";
        }
        if (
          held !== null && held.leaseId === leaseId &&
          JSON.stringify({ ...held, born: stored.born }) ===
            JSON.stringify(stored)
        ) {
          // Bound again as it is: nothing changes (no revision, no event),
          // as on a Raft registry.
          const result: BindResult = {
            revision: Number(existing!.mod_revision),
            name: base,
            endpoint: this.#endpoint(this.#binding(existing!)!),
            leaseId,
          };
          if (ttlMs !== undefined) result.ttlMs = ttlMs;
          return result;
        }
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
        const result: BindResult = {
          revision,
          name: base,
          endpoint: this.#endpoint({
            name: base,
            id: endpoint.id,
            stored,
            createRevision: stored.born === undefined || stored.born === "put"
              ? revision
              : stored.born,
            modRevision: revision,
          }),
          leaseId,
        };
        if (ttlMs !== undefined) result.ttlMs = ttlMs;
        return result;
      }),
      [M.unbind]: served(REGISTRY_PARAMS[M.unbind], async (p) => {
        if (p.scope === "local") notServed("a local-scope unbind")();
        const key = this.#key(p.name, p.id);
        this.#unbound.add(key);
        if (p.leaseId !== undefined) {
          // Only the binding this lease holds (a server's own unbind must
          // not remove the binding of a successor with the same id).
          const done = await etcd.if(key, "Lease", "==", p.leaseId).then(
            etcd.delete().key(key),
          ).commit();
          const removed = done.succeeded
            ? Number(done.responses[0]?.response_delete_range?.deleted ?? 0)
            : 0;
          if (removed === 0) this.#unbound.delete(key);
          return { revision: Number(done.header.revision), removed };
        }
        const deleted = await etcd.delete().key(key).exec();
        if (Number(deleted.deleted) === 0) this.#unbound.delete(key);
        return {
          revision: Number(deleted.header.revision),
          removed: Number(deleted.deleted),
        };
      }),
      [M.setState]: served(REGISTRY_PARAMS[M.setState], async (p) => {
        if (p.scope === "local") notServed("a local-scope setState")();
        const key = this.#key(p.name, p.id);
        const existing = (await etcd.get(key).exec()).kvs[0];
        const stored = existing === undefined ? null : parseStored(existing);
        if (
          stored === null ||
          (p.leaseId !== undefined && stored.leaseId !== p.leaseId)
        ) {
          throw new RpcError(
            INVALID_PARAMS,
            `no endpoint ${JSON.stringify(p.id)} is bound under ${
              JSON.stringify(p.name)
            }${p.leaseId === undefined ? "" : ` with lease ${p.leaseId}`}`,
          );
        }
        // Serving again after draining; an unhealthy endpoint stays
        // unhealthy until its checks pass, unless it drains.
        const state = p.state === "draining"
          ? "draining"
          : stored.state === "draining"
          ? "serving"
          : stored.state;
        if (state === stored.state) {
          return { revision: Number(existing!.mod_revision) };
        }
        const put = etcd.put(key).value(
          JSON.stringify({
            ...stored,
            state,
            born: createRevisionOf(stored, existing!),
          }),
        );
        if (stored.leaseId !== null) put.lease(stored.leaseId);
        const done = await etcd.if(
          key,
          "Mod",
          "==",
          Number(existing!.mod_revision),
        ).then(put).commit();
        if (!done.succeeded) {
          throw new RpcError(
            UNAVAILABLE,
            `endpoint "${p.id}" of "${p.name}" changed while its state was set: set it again`,
            { applied: false },
          );
        }
        return { revision: Number(done.header.revision) };
      }),
      [M.lookup]: served(REGISTRY_PARAMS[M.lookup], async (p) => {
        const { base, query } = p.name;
        const { bindings, revision } = await this.#bindingsOf(
          base,
          p.consistency,
        );
        const matching = bindings.filter((b) =>
          Object.entries(query).every(([k, v]) => b.stored.attrs[k] === v)
        );
        const serving = matching.filter((b) => b.stored.state === "serving");
        const draining = matching.filter((b) => b.stored.state === "draining");
        const unhealthy = p.includeUnhealthy
          ? matching.filter((b) => b.stored.state === "unhealthy")
          : [];
        let shift = 0;
        if (p.rotate && serving.length > 1) {
          const turn = this.#rotation.get(base) ?? 0;
          this.#rotation.set(base, (turn + 1) % Number.MAX_SAFE_INTEGER);
          shift = turn % serving.length;
        }
        const ordered = [
          ...serving.slice(shift),
          ...serving.slice(0, shift),
          ...draining,
          ...unhealthy,
        ];
        const result: LookupResult = {
          name: base,
          query,
          endpoints: ordered.slice(0, p.limit ?? ordered.length).map((b) =>
            this.#endpoint(b)
          ),
          total: ordered.length,
          revision,
        };
        return result;
      }),
      [M.list]: served(REGISTRY_PARAMS[M.list], async (p) => {
        const answer = p.consistency === "serializable" ? null : await etcd
          .getAll().prefix(`${this.#prefix}b/${p.prefix ?? ""}`).exec();
        const all = answer === null
          ? [...this.#mirror!.bindings.values()].filter((b) =>
            b.name.startsWith(p.prefix ?? "")
          )
          : answer.kvs.map((kv) => this.#binding(kv)).filter((
            b,
          ): b is Mirrored => b !== null);
        all.sort((a, b) => a.createRevision - b.createRevision);
        const byName = new Map<string, Endpoint[]>();
        for (const binding of all) {
          const list = byName.get(binding.name) ?? [];
          list.push(this.#endpoint(binding));
          byName.set(binding.name, list);
        }
        return {
          revision: answer === null
            ? this.#mirror!.revision
            : Number(answer.header.revision),
          names: [...byName].sort(([a], [b]) => a < b ? -1 : 1).map((
            [name, endpoints],
          ) => ({
            name,
            count: endpoints.length,
            ...(p.endpoints ? { endpoints } : {}),
          })),
        };
      }),
      [M.watch]: served(REGISTRY_PARAMS[M.watch], async (p) => {
        const watchId = p.watchId ?? `w${++this.#watchIds}`;
        const current = Number(
          (await etcd.get(`${this.#prefix}`).exec()).header.revision,
        );
        // fromRevision is the first to deliver (inclusive), as etcd's start.
        const from = p.fromRevision ?? current + 1;
        if (from <= current) await this.#checkNotCompacted(from, current);
        const watch: OpenWatch = {
          watcher: null,
          prefix: p.prefix,
          loads: p.loads,
          delivered: from - 1,
        };
        const watcher = await etcd.watch().prefix(
          `${this.#prefix}b/${p.prefix}`,
        ).withPreviousKV().startRevision(String(from)).create();
        watch.watcher = watcher;
        watches.set(watchId, watch);
        this.#watchCount++;
        watcher.on("data", (response) => {
          const events = this.#events(response.events);
          watch.delivered = Number(response.header.revision);
          if (events.length > 0) {
            session.notify(WATCH_EVENTS_NOTIFICATION, {
              watchId,
              revision: watch.delivered,
              events,
            } as unknown as Record<string, unknown>);
          }
        });
        watcher.on("error", (error: Error) => {
          // etcd ended the watch: the client watches again from where it
          // stopped (on this front or another), missing nothing.
          this.#log(
            `etcd watch ${watchId} ended (${error.message}); the client watches again`,
            "warn",
          );
          if (watches.get(watchId) !== watch) return;
          watches.delete(watchId);
          // Already cancelled by etcd: cancelling again makes etcd3 meet
          // an answer for a watcher it dropped, and throw (uncaught).
          this.#endWatch(watch, false);
          session.notify(WATCH_CANCELLED_NOTIFICATION, {
            watchId,
            code: WATCH_CANCELLED,
            message:
              `etcd ended this watch (${error.message}): watch again from resumeRevision`,
            resumeRevision: watch.delivered + 1,
          });
        });
        return { watchId, revision: current, compactRevision: 0 };
      }),
      [M.unwatch]: served(REGISTRY_PARAMS[M.unwatch], async (p) => {
        const watch = watches.get(p.watchId);
        watches.delete(p.watchId);
        if (watch !== undefined) await this.#endWatch(watch);
        return { cancelled: watch !== undefined };
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
        M.snapshot,
        M.snapshotChunk,
      ]
    ) {
      methods[name] = notServed(name);
    }
    return methods;
  }

  /** The gauges of one scrape: the bindings etcd holds, etcd's reach, the process. */
  #gauges(): Gauge[] {
    const mirror = this.#mirror;
    return [
      {
        name: "rafter_etcd_reachable",
        help:
          "1 while etcd answers this front; 0 before it first did, and from a failed etcd call until it answers again (asked every second).",
        value: this.etcdReachable ? 1 : 0,
      },
      {
        name: "rafter_etcd_health_checker",
        help:
          "1 while this front runs the health checks (it won their election through etcd), else 0.",
        value: this.checksHealth ? 1 : 0,
      },
      {
        name: "rafter_registry_revision",
        help:
          "etcd's revision this front's copy of the bindings is current to.",
        value: mirror?.revision ?? 0,
      },
      {
        name: "rafter_registry_names",
        help: "Names with at least one binding.",
        value: mirror?.names().length ?? 0,
      },
      {
        name: "rafter_registry_bindings",
        help: "Bindings (endpoints).",
        value: mirror?.bindings.size ?? 0,
      },
      {
        name: "rafter_registry_watchers",
        help: "Watches clients have open on this front.",
        value: this.#watchCount,
      },
      {
        name: "rafter_rpc_open_connections",
        help: "Client connections open on this front.",
        value: this.#metrics.openConnections,
      },
      ...processGauges(this.#metrics.takeMaxLagSeconds()),
    ];
  }

  /**
   * Runs a method's etcd work: UNAVAILABLE, saying why, until etcd
   * answered once; an error of etcd or its client (unreachable, no
   * quorum, a circuit opened) as UNAVAILABLE naming etcd, so that clients
   * retry another front and people know where to look. The first such
   * failure is logged, and etcd's recovery.
   */
  async #etcdCall<T>(run: () => T | Promise<T>): Promise<T> {
    if (this.#mirror === undefined) {
      throw new RpcError(UNAVAILABLE, `Unavailable: ${this.#unreachable}`);
    }
    try {
      return await run();
    } catch (error) {
      if (error instanceof RpcError) throw error;
      const why = this.#etcdFails(error);
      throw new RpcError(
        UNAVAILABLE,
        `Unavailable: etcd did not serve this call (${why}): check that a quorum of etcd's members at ${
          this.#options.endpoints.join(", ")
        } runs; the client tries another front meanwhile`,
      );
    }
  }

  /**
   * Asks etcd every 2 s (every second while it fails) with a read of one
   * key (linearizable: it needs a quorum), so that an idle front notices
   * an outage too, and recovery is told when it happens, not at the next
   * call; a call served from the copy never counts as etcd answering.
   */
  async #probeEtcd(): Promise<void> {
    while (!this.#closed) {
      await new Promise((resolve) =>
        setTimeout(resolve, this.#etcdFailing === null ? 2_000 : 1_000)
      );
      if (this.#closed) return;
      try {
        await this.#etcd.get(`${this.#prefix}probe`).exec();
        if (this.#etcdFailing !== null) {
          this.#etcdFailing = null;
          this.#log(`etcd answers again`);
        }
      } catch (error) {
        this.#etcdFails(error);
      }
    }
  }

  /** Notes that etcd failed a call: logged once per outage. */
  #etcdFails(error: unknown): string {
    const raw = String((error as Error)?.message ?? error);
    const why = /circuit breaker is open/i.test(raw)
      ? "every etcd member failed its recent calls, so the etcd client waits before trying them again"
      : raw.split(". ")[0].replace(/\s+/g, " ").slice(0, 200);
    if (this.#etcdFailing === null) {
      this.#etcdFailing = why;
      this.#log(
        `etcd at ${
          this.#options.endpoints.join(", ")
        } fails calls (${why}): answering UNAVAILABLE until it answers again`,
        "warn",
      );
    }
    return why;
  }

  /** Whether etcd answers this front now (it read the bindings, and no call failed since). */
  get etcdReachable(): boolean {
    return this.#mirror !== undefined && this.#etcdFailing === null;
  }

  /** Registry events of a response of an etcd watch on the bindings. */
  #events(
    etcdEvents: readonly {
      type: string;
      kv: IKeyValue;
      prev_kv?: IKeyValue;
    }[],
  ): WatchEvent[] {
    const events: WatchEvent[] = [];
    for (const event of etcdEvents) {
      const revision = Number(event.kv.mod_revision);
      if (event.type === "Put") {
        const binding = this.#binding(event.kv);
        if (binding === null) continue;
        events.push({
          type: "put",
          name: binding.name,
          endpoint: this.#endpoint(binding),
          revision,
        });
      } else if (event.prev_kv) {
        const binding = this.#binding(event.prev_kv);
        if (binding === null) continue;
        const endpoint = this.#endpoint(binding);
        const key = event.kv.key.toString();
        const reason: DeleteReason = this.#unbound.delete(key)
          ? "unbound"
          : endpoint.leaseId !== null && this.#revoked.has(endpoint.leaseId)
          ? "leaseRevoked"
          : "leaseExpired";
        events.push({
          type: "delete",
          name: binding.name,
          endpoint: { ...endpoint, modRevision: revision },
          revision,
          reason,
        });
      }
    }
    return events;
  }

  /** Sends a load change to this session's watches that asked for loads. */
  #notifyLoads(
    session: RpcSession,
    watches: ReadonlyMap<string, OpenWatch>,
    leaseId: string,
    load: number | null,
  ): void {
    const bound = [...this.#mirror!.bindings.values()].filter((b) =>
      b.stored.leaseId === leaseId
    );
    for (const [watchId, watch] of watches) {
      if (!watch.loads) continue;
      const loads = bound.filter((b) => b.name.startsWith(watch.prefix)).map((
        b,
      ) => ({ name: b.name, id: b.id, load }));
      if (loads.length > 0) {
        session.notify(WATCH_LOADS_NOTIFICATION, { watchId, loads });
      }
    }
  }

  /** Stores a load a server reported, when it changed (etcd carries it to every front). */
  async #reportLoad(leaseId: string, load: number): Promise<void> {
    if (this.#mirror!.loads.get(leaseId) === load) return;
    this.#mirror!.setLoad(leaseId, load);
    await this.#etcd.put(`${this.#prefix}load/${leaseId}`).value(String(load))
      .lease(leaseId).exec();
  }

  async #endWatch(watch: OpenWatch, cancel = true): Promise<void> {
    const watcher = watch.watcher;
    watch.watcher = null;
    if (watcher === null) return;
    this.#watchCount--;
    if (cancel) await watcher.cancel().catch(() => {});
  }

  /**
   * Throws COMPACTED when etcd no longer holds revision `from`, with the
   * oldest revision it holds (etcd says so to a watch from `from`).
   */
  async #checkNotCompacted(from: number, current: number): Promise<void> {
    try {
      await this.#etcd.get(this.#prefix).revision(from).exec();
      return;
    } catch (error) {
      if (!/compacted/i.test(String((error as Error).message))) throw error;
    }
    const compactRevision = await this.#compactRevision(from);
    throw new RpcError(
      COMPACTED,
      `Compacted: revision ${from} is older than the oldest revision etcd holds (${compactRevision}): list again (registry.list) and watch from the revision it returns`,
      { compactRevision, revision: current },
    );
  }

  /** The compact revision etcd reports to a watch from `from`. */
  async #compactRevision(from: number): Promise<number> {
    const stream = await this.#etcd.watchClient.watch();
    try {
      return await withTimeout(
        new Promise<number>((resolve, reject) => {
          stream.on("data", (response: { compact_revision?: string }) => {
            const compacted = Number(response.compact_revision ?? 0);
            if (compacted > 0) resolve(compacted);
          });
          stream.on("error", reject);
          stream.write({
            create_request: {
              key: Buffer.from(this.#prefix),
              start_revision: String(from),
            },
          });
        }),
        5_000,
        `etcd did not say which revisions it compacted within 5 s`,
      );
    } finally {
      stream.end();
    }
  }

  /** Lease `id` as `lease.timeToLive` reports it. */
  async #timeToLive(id: string): Promise<LeaseInfo> {
    const info = await this.#etcd.leaseClient.leaseTimeToLive({
      ID: id,
      keys: true,
    });
    const remaining = Number(info.TTL);
    if (remaining < 0) throw leaseNotFound(id);
    const bindingsPrefix = `${this.#prefix}b/`;
    return {
      id,
      ttlMs: Number(info.grantedTTL) * 1000,
      remainingMs: remaining * 1000,
      bindings: (info.keys ?? []).map((key) =>
        Buffer.from(key as unknown as string, "base64").toString()
      ).filter((key) => key.startsWith(bindingsPrefix)).map((key) =>
        keyParts(this.#prefix, key)
      ),
    };
  }

  #status(): Record<string, unknown> {
    return {
      id: this.#options.id ?? "etcd",
      url: this.url,
      peerUrl: "",
      term: 0,
      role: "leader",
      kind: "voter",
      leader: this.#options.id ?? "etcd",
      leaderUrl: this.url,
      commitIndex: 0,
      appliedIndex: 0,
      snapshotIndex: 0,
      revision: this.#mirror?.revision ?? 0,
      compactRevision: 0,
      leases: new Set(
        [...this.#mirror?.bindings.values() ?? []].map((b) => b.stored.leaseId)
          .filter((id) => id !== null),
      ).size,
      watchers: this.#watchCount,
      electionTimeoutMs: 0,
      minTtlMs: MIN_TTL_MS,
      members: [],
      security: null,
      federation: this.#options.federation ?? null,
      engine: {
        kind: "etcd",
        endpoints: [...this.#options.endpoints],
        checksHealth: this.checksHealth,
        reachable: this.etcdReachable,
        problem: this.#mirror === undefined
          ? this.#unreachable
          : this.#etcdFailing,
      },
    };
  }
}

/**
 * etcd3's watch reconnection backoff (cockatiel's `IBackoff` shape):
 * doubling from `initialMs` up to `maxMs`.
 */
class CappedBackoff {
  readonly duration: number;
  readonly #max: number;

  constructor(initialMs: number, maxMs: number) {
    this.duration = Math.min(initialMs, maxMs);
    this.#max = maxMs;
  }

  next(): CappedBackoff {
    return new CappedBackoff(this.duration * 2, this.#max);
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
