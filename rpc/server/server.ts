/**
 * The runtime-free half of a TCP server: serves each byte stream a
 * {@link StreamListener} accepts with {@link serveStream}, and closes or
 * drains them all. Each runtime entry's `serve()` (Deno: `Deno.listen`,
 * Node: `node:net`) is a listener handed to {@link serveListener}.
 *
 * @module
 */

import type { Methods } from "./dispatcher.ts";
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
  refuseStream,
  type RpcSession,
  type ServerLimits,
  serveStream,
  type SessionMethods,
  validateServerLimits,
} from "./server_connection.ts";
import { LIMIT_EXCEEDED, RpcError } from "../errors.ts";
import {
  type ByteStream,
  formatTcpUrl,
  isWildcardHost,
  parseAdvertise,
  type TcpAddress,
} from "../transport/transport.ts";
import type { TlsServerOptions } from "../transport/tls.ts";

/** Options of `serve()` (each runtime entry has one) and {@link serveListener}. */
export interface ServeOptions extends ServerLimits {
  /** Interface to listen on (default `"127.0.0.1"`; `"0.0.0.0"` for all). */
  hostname?: string;
  /** TCP port (default 0: an ephemeral port, see {@link RpcServer.port}). */
  port?: number;
  /**
   * The address clients should use, when it differs from the one listened
   * on: a host (`"10.0.0.5"`, `"api.example.com"`) or `host:port` (behind a
   * port mapping). Needed when listening on a wildcard address (`0.0.0.0`,
   * `::`), which no remote client can dial: {@link RpcServer.url} then
   * names this address. Default: the address listened on.
   */
  advertise?: string;
  /**
   * The method table, or a function that makes one per connection (to keep
   * per-client state or push notifications; see {@link RpcSession}). The
   * built-in `rpc.ping` (returns `"pong"`) is added unless the table has its
   * own. A plain table's own properties are copied when the server starts:
   * methods added to it later are not served.
   */
  methods: Methods | SessionMethods;
  /** Aborting it closes the server, like {@link RpcServer.close}. */
  signal?: AbortSignal;
  /**
   * Listen with TLS (the server's URL is then `tls://host:port`): the
   * certificate and key, the CA of client certificates, whether to ask
   * for one, the handshake deadline and reloading. See
   * {@link TlsServerOptions}. The Deno and Node adapters honour it.
   */
  tls?: TlsServerOptions;
  /**
   * Serve Prometheus metrics of this server on `GET /metrics` of a
   * plain-HTTP port of their own (off by default): calls by method and
   * outcome, a latency histogram by method, open connections, bytes in
   * and out, the process's memory and event-loop delay. The Deno and Node
   * adapters honour it; {@link RpcServer.metricsUrl} is where they are.
   */
  metrics?: ServeMetricsOptions;
}

/** The `metrics` option of `serve()`. */
export interface ServeMetricsOptions {
  /**
   * `host:port` to serve the metrics on (port 0: an ephemeral one). A
   * non-loopback address is logged as a warning: the metrics have no
   * authentication. @default "127.0.0.1:9464"
   */
  listen?: string;
}

/** A running server, as returned by `serve()` and {@link serveListener}. */
export interface RpcServer {
  /** The address it listens on, e.g. `"127.0.0.1"`. */
  readonly hostname: string;
  /** The port it listens on (the actual one when 0 was asked for). */
  readonly port: number;
  /**
   * Whether {@link url} names a wildcard address (listening on `0.0.0.0` or
   * `::` without `advertise`): such a URL cannot be bound in a registry.
   */
  readonly wildcard: boolean;
  /**
   * `tcp://host:port` with the actual port (or the `advertise` address),
   * ready to bind in a registry. For a wildcard listen address without
   * `advertise` it names the wildcard, which a registry refuses to bind.
   */
  readonly url: string;
  /**
   * Resolves once the server has stopped listening and every connection is
   * finished. Never rejects.
   */
  readonly finished: Promise<void>;
  /**
   * Stops listening and closes every open connection (responses still being
   * computed are dropped). Resolves like {@link finished}; safe to call more
   * than once.
   */
  close(): Promise<void>;
  /**
   * Shuts down gracefully: stops listening, sends every connection the
   * `rpc.goaway` notification, keeps answering what still arrives, and
   * finishes when the clients have closed their connections (Rafter
   * clients do once their calls are answered) or, at the latest, after
   * `graceMs` (default 5_000 ms), when it closes what is left.
   */
  drain(graceMs?: number): Promise<void>;
  /**
   * A TLS server (`tls` option) only: re-reads its certificate files and
   * uses them for new connections (open ones keep theirs). Rejects, and
   * keeps the old certificate, when they are unreadable or do not match.
   */
  reloadTls?(): Promise<void>;
  /**
   * With the `metrics` option: `http://host:port/metrics`, with the actual
   * port. The metrics port closes when the server finishes.
   */
  readonly metricsUrl?: string;
}

/**
 * A listening socket, as a runtime adapter sees it: what it is bound to,
 * the next accepted connection, and a way to stop.
 */
export interface StreamListener {
  /** The address it is bound to (the actual port when 0 was asked for). */
  readonly address: TcpAddress;
  /**
   * The next accepted connection (Nagle's algorithm off), or null once the
   * listener is closed.
   *
   * @throws on a transient accept failure (the server logs it and retries
   * after 100 ms).
   */
  accept(): Promise<ByteStream | null>;
  /** Stops accepting; a pending {@link accept} resolves null. Idempotent. */
  close(): void;
  /** Whether it accepts TLS streams (the server's URL is then `tls://`). */
  readonly secure?: boolean;
  /** A TLS listener's certificate reload: becomes {@link RpcServer.reloadTls}. */
  reloadTls?(): Promise<void>;
}

/**
 * Validates `options` before a runtime adapter listens: the methods and
 * the limits.
 *
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
 */
export function validateServeOptions(options: ServeOptions): void {
  validateServerLimits(options);
  if (options.advertise !== undefined) parseAdvertise(options.advertise);
}

/**
 * Serves JSON-RPC 2.0 on every connection `listener` accepts, one
 * {@link serveStream} each, with the options of `serve()`; the built-in
 * `rpc.ping` is added to the methods. It counts the open connections, in
 * all and per remote host: one over `maxConnections` or
 * `maxConnectionsPerAddress` is answered a -32014 LIMIT_EXCEEDED error
 * frame and closed.
 *
 * @param listener an adapter's bound listener (it is closed with the server).
 * @param options methods, limits, `advertise`, `signal` (`hostname` and
 * `port` were the adapter's to listen on).
 * @returns the running server.
 * @throws {TypeError} for an `advertise` address that is not host or host:port.
 */
export function serveListener(
  listener: StreamListener,
  options: ServeOptions,
): RpcServer {
  const { signal } = options;
  const given = options.methods;
  const methods: Methods | SessionMethods = typeof given === "function"
    ? (session: RpcSession) => ({ "rpc.ping": ping, ...given(session) })
    : { "rpc.ping": ping, ...given };
  const advertised = options.advertise === undefined
    ? undefined
    : parseAdvertise(options.advertise);
  const address = listener.address;
  const connections = new Set<Promise<void>>();
  const stop = new AbortController();
  const goAway = new AbortController();
  let draining = false;
  const limits = {
    maxFrameBytes: options.maxFrameBytes,
    maxInFlight: options.maxInFlight,
    idleTimeoutMs: options.idleTimeoutMs,
    frameTimeoutMs: options.frameTimeoutMs,
    maxQueuedBytes: options.maxQueuedBytes,
    writeTimeoutMs: options.writeTimeoutMs,
    maxDeadlineMs: options.maxDeadlineMs,
    authenticate: options.authenticate,
    authTimeoutMs: options.authTimeoutMs,
    onInternalError: options.onInternalError,
    onMethodNotFound: options.onMethodNotFound,
    onCall: options.onCall,
    signal: stop.signal,
    goAway: goAway.signal,
  };
  const admission = new Admission(options);

  /** Serves `stream`, or refuses it when it is over a connection cap. */
  const start = (stream: ByteStream) => {
    const host = hostOf(stream.remoteAddress);
    const refused = admission.admit(host);
    if (refused !== undefined) {
      if (admission.refusing >= MAX_REFUSING) {
        // A flood of them: no error frames, just close.
        stream.close();
        return;
      }
      admission.refusing++;
      const done = refuseStream(stream, refused, stop.signal).finally(() => {
        admission.refusing--;
        connections.delete(done);
      });
      connections.add(done);
      return;
    }
    const done = serveStream(stream, methods, limits).finally(() => {
      admission.release(host);
      connections.delete(done);
    });
    connections.add(done);
  };

  const acceptLoop = async () => {
    while (!stop.signal.aborted) {
      let stream: ByteStream | null;
      try {
        stream = await listener.accept();
      } catch (error) {
        if (stop.signal.aborted) break;
        // A transient failure (e.g. too many open files): back off a little.
        console.error("rpc: accept failed:", error);
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (stream === null) break;
      if (stop.signal.aborted) {
        stream.close();
        break;
      }
      start(stream);
    }
  };

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    if (closing === undefined) {
      signal?.removeEventListener("abort", onAbort);
      stop.abort();
      listener.close();
      closing = finished;
    }
    return closing;
  };
  const onAbort = () => void close();

  const finished = acceptLoop().then(async () => {
    if (!draining) close();
    while (connections.size > 0) await Promise.all([...connections]);
  });

  const drain = async (graceMs = 5_000): Promise<void> => {
    if (closing !== undefined || draining) return finished;
    draining = true;
    try {
      listener.close();
    } catch {
      // Already closed.
    }
    goAway.abort();
    const timer = setTimeout(() => void close(), graceMs);
    await finished;
    clearTimeout(timer);
  };

  if (signal?.aborted) close();
  else signal?.addEventListener("abort", onAbort, { once: true });

  const url = formatTcpUrl({
    hostname: advertised?.hostname ?? address.hostname,
    port: advertised?.port ?? address.port,
    tls: listener.secure === true,
  });
  return {
    hostname: address.hostname,
    port: address.port,
    url,
    wildcard: advertised === undefined && isWildcardHost(address.hostname),
    finished,
    close,
    drain,
    ...(listener.reloadTls === undefined
      ? {}
      : { reloadTls: () => listener.reloadTls!() }),
  };
}

/** The built-in `rpc.ping`: one function for every connection. */
const ping = () => "pong";

/**
 * Connections being refused (an error frame, then close) at once, at most;
 * beyond it a connection over a cap is closed without one, so a flood of
 * them costs little.
 */
const MAX_REFUSING = 64;

/** The connection counts of one server, and its caps. */
class Admission {
  readonly #max: number;
  readonly #maxPerAddress: number;
  #open = 0;
  readonly #byHost = new Map<string, number>();
  /** Connections being refused now. */
  refusing = 0;

  constructor(limits: ServerLimits) {
    this.#max = limits.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    this.#maxPerAddress = limits.maxConnectionsPerAddress ??
      DEFAULT_MAX_CONNECTIONS_PER_ADDRESS;
  }

  /**
   * Counts a new connection from `host`, or returns the error to refuse it
   * with (it is then not counted).
   */
  admit(host: string | undefined): RpcError | undefined {
    if (this.#open >= this.#max) {
      return new RpcError(
        LIMIT_EXCEEDED,
        `Limit exceeded: the server has ${this.#max} connections open, its limit (maxConnections); try again later or another server, or raise the server's maxConnections`,
        { limit: "maxConnections", value: this.#max },
      );
    }
    const count = host === undefined ? 0 : this.#byHost.get(host) ?? 0;
    if (count >= this.#maxPerAddress) {
      return new RpcError(
        LIMIT_EXCEEDED,
        `Limit exceeded: ${count} connections from ${host} are open, the server's limit per address (maxConnectionsPerAddress); close idle connections, or raise the server's maxConnectionsPerAddress`,
        { limit: "maxConnectionsPerAddress", value: this.#maxPerAddress },
      );
    }
    this.#open++;
    if (host !== undefined) this.#byHost.set(host, count + 1);
    return undefined;
  }

  /** A connection `admit` counted has closed. */
  release(host: string | undefined): void {
    this.#open--;
    if (host === undefined) return;
    const count = (this.#byHost.get(host) ?? 1) - 1;
    if (count > 0) this.#byHost.set(host, count);
    else this.#byHost.delete(host);
  }
}

/**
 * The host a remote address (`host:port`, `[v6]:port`) counts under for
 * `maxConnectionsPerAddress`: an IPv4 address as it is (an IPv4-mapped
 * IPv6 address as its IPv4 address), an IPv6 address as its /64 prefix
 * (one site or host gets a whole /64, so counting single IPv6 addresses
 * would let it open connections without bound), anything else as written;
 * undefined when the address is unknown.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { hostOf } from "./server.ts";
 * assert.equal(hostOf("10.0.0.5:51234"), "10.0.0.5");
 * assert.equal(hostOf("[::1]:51234"), "0:0:0:0::/64");
 * assert.equal(hostOf("[2001:db8:1:2::7]:443"), "2001:db8:1:2::/64");
 * assert.equal(hostOf("[2001:DB8:1:2:aa:bb:cc:dd]:443"), "2001:db8:1:2::/64");
 * assert.equal(hostOf("[::ffff:10.0.0.5]:51234"), "10.0.0.5");
 * assert.equal(hostOf(undefined), undefined);
 * ```
 */
export function hostOf(remoteAddress: string | undefined): string | undefined {
  if (remoteAddress === undefined || remoteAddress === "") return undefined;
  const bracketed = /^\[([^\]]*)\](?::\d*)?$/.exec(remoteAddress);
  const host =
    (bracketed !== null
      ? bracketed[1]
      : remoteAddress.split(":").length === 2
      ? remoteAddress.slice(0, remoteAddress.lastIndexOf(":"))
      : remoteAddress).toLowerCase();
  const mapped = /^(?:0*:)*:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
  if (mapped !== null) return mapped[1];
  if (!host.includes(":")) return host;
  const groups = ipv6Groups(host.replace(/%.*$/, ""));
  return groups === undefined
    ? host
    : `${
      groups.slice(0, 4).map((group) => parseInt(group, 16).toString(16)).join(
        ":",
      )
    }::/64`;
}

/** The eight groups of an IPv6 address (`::` expanded), or undefined. */
function ipv6Groups(host: string): string[] | undefined {
  const halves = host.split("::");
  if (halves.length > 2) return undefined;
  const head = halves[0] === "" ? [] : halves[0].split(":");
  const tail = halves.length === 1 || halves[1] === ""
    ? []
    : halves[1].split(":");
  if (tail.length > 0 && tail[tail.length - 1].includes(".")) {
    tail.splice(tail.length - 1, 1, "0", "0"); // an embedded IPv4 tail
  }
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [
    ...head,
    ...Array(halves.length === 1 ? 0 : missing).fill("0"),
    ...tail,
  ];
  return groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))
    ? groups
    : undefined;
}
