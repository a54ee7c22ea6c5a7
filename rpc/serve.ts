/**
 * Deno adapter: a JSON-RPC 2.0 TCP server. Uses `Deno.listen`; the rest of
 * `rpc/` is Web-standard only.
 *
 * @module
 */

import type { Methods } from "./dispatcher.ts";
import { fromDenoConn } from "./deno_tcp.ts";
import {
  type RpcSession,
  type ServerLimits,
  serveStream,
  type SessionMethods,
  validateServerLimits,
} from "./server_connection.ts";
import { formatTcpUrl, isWildcardHost, parseAdvertise } from "./transport.ts";

/** Options of {@link serve}. */
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
}

/** A running server, as returned by {@link serve}. */
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
}

/**
 * Starts a JSON-RPC 2.0 server on TCP (NDJSON frames), one
 * {@link serveStream} per accepted connection, Nagle's algorithm off.
 *
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen`
 * when the address cannot be bound.
 * @throws {RangeError} for limits that `validateServerLimits` refuses.
 *
 * @example
 * ```ts ignore
 * import { serve } from "./serve.ts";
 * const server = serve({
 *   port: 0,
 *   methods: { greet: (name: string) => `Hello, ${name}!` },
 * });
 * console.log(`listening on ${server.url}`);
 * await server.close();
 * ```
 */
export function serve(options: ServeOptions): RpcServer {
  const { hostname = "127.0.0.1", port = 0, signal } = options;
  const given = options.methods;
  const methods: Methods | SessionMethods = typeof given === "function"
    ? (session: RpcSession) => ({ "rpc.ping": () => "pong", ...given(session) })
    : { "rpc.ping": () => "pong", ...given };
  validateServerLimits(options);
  const advertised = options.advertise === undefined
    ? undefined
    : parseAdvertise(options.advertise);
  const listener = Deno.listen({ hostname, port, transport: "tcp" });
  const address = listener.addr;
  const connections = new Set<Promise<void>>();
  const stop = new AbortController();
  const goAway = new AbortController();
  let draining = false;
  const limits = {
    maxFrameBytes: options.maxFrameBytes,
    maxInFlight: options.maxInFlight,
    idleTimeoutMs: options.idleTimeoutMs,
    maxDeadlineMs: options.maxDeadlineMs,
    onInternalError: options.onInternalError,
    onMethodNotFound: options.onMethodNotFound,
    signal: stop.signal,
    goAway: goAway.signal,
  };

  const acceptLoop = async () => {
    while (!stop.signal.aborted) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (stop.signal.aborted || isListenerGone(error)) break;
        // A transient failure (e.g. too many open files): back off a little.
        console.error("rpc: accept failed:", error);
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      if (stop.signal.aborted) {
        try {
          conn.close();
        } catch {
          // Ignore.
        }
        break;
      }
      try {
        conn.setNoDelay(true);
      } catch {
        // The peer is already gone; serveStream will see it.
      }
      const done = serveStream(fromDenoConn(conn), methods, limits).finally(
        () => connections.delete(done),
      );
      connections.add(done);
    }
  };

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    if (closing === undefined) {
      signal?.removeEventListener("abort", onAbort);
      stop.abort();
      try {
        listener.close();
      } catch {
        // Already closed.
      }
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
  });
  return {
    hostname: address.hostname,
    port: address.port,
    url,
    wildcard: advertised === undefined && isWildcardHost(address.hostname),
    finished,
    close,
    drain,
  };
}

function isListenerGone(error: unknown): boolean {
  return error instanceof Deno.errors.BadResource ||
    error instanceof Deno.errors.Interrupted;
}
