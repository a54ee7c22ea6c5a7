/**
 * The TLS options of servers and dialers, runtime-free (types only, and
 * their defaults): `serve({ tls })` of `@rafter/rpc/deno` and
 * `@rafter/rpc/node` takes {@link TlsServerOptions}; `dial(url, { tls })`,
 * `connect(urls, { tls })`, `denoDialer(tls)` and `nodeDialer(tls)` take
 * {@link TlsClientOptions} for `tls://` URLs.
 *
 * Certificates and keys are PEM, given as files (`certFile`, `keyFile`,
 * `caFile`: read at start, re-read on reload) or as the PEM text itself
 * (`cert`, `key`, `ca`, for embedders; a file wins over text when both
 * are given).
 *
 * @module
 */

/**
 * Whether a TLS server asks clients for a certificate: `"none"` (default),
 * `"request"` (asks; a client without one is accepted, one with a
 * certificate the CA did not sign is refused), `"require"` (a client
 * without a certificate signed by the CA is refused).
 */
export type ClientCertPolicy = "none" | "request" | "require";

/** Why a TLS server reports an error to {@link TlsServerOptions.onError}. */
export type TlsServerErrorCode =
  /** A client's TLS handshake failed or timed out (at most once per remote address per minute). */
  | "TLS_HANDSHAKE_FAILED"
  /** A reload found unreadable or mismatched files; the old certificate stays. */
  | "TLS_RELOAD_FAILED";

/** An error a TLS server reports (it goes on serving). */
export interface TlsServerError extends Error {
  /** What failed. */
  readonly code: TlsServerErrorCode;
  /** The client's `host:port`, for a handshake failure. */
  readonly remoteAddress?: string;
}

/** The `tls` option of `serve()`: listen with TLS. */
export interface TlsServerOptions {
  /** Path of the server's PEM certificate (chain), read at start and on reload. */
  certFile?: string;
  /** Path of the server's PEM private key. */
  keyFile?: string;
  /** Path of the PEM CA certificate(s) client certificates must chain to. */
  caFile?: string;
  /** The certificate as PEM text (when no `certFile`). */
  cert?: string;
  /** The private key as PEM text (when no `keyFile`). */
  key?: string;
  /** The client CA as PEM text (when no `caFile`). */
  ca?: string;
  /**
   * Ask clients for a certificate (see {@link ClientCertPolicy}); default
   * `"none"`. `"request"` and `"require"` need `caFile` or `ca`. A verified
   * client certificate is the session's `peerCertificate`.
   */
  clientCert?: ClientCertPolicy;
  /**
   * A connection that has not finished its TLS handshake this many ms
   * after it was accepted is closed. Default {@link DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS}.
   */
  handshakeTimeoutMs?: number;
  /**
   * Most TLS handshakes under way at once; a connection beyond is closed at
   * once (it is not yet counted by the server's `maxConnections`). Default
   * {@link DEFAULT_MAX_PENDING_HANDSHAKES}.
   */
  maxPendingHandshakes?: number;
  /**
   * Most TLS handshakes under way from one remote address (IPv6: one /64).
   * Default {@link DEFAULT_MAX_PENDING_HANDSHAKES_PER_ADDRESS}.
   */
  maxPendingHandshakesPerAddress?: number;
  /**
   * Re-read the files on SIGHUP (where the runtime has it). Default: true
   * when a file is given, false for PEM text. The listener is removed when
   * the server closes.
   */
  reloadOnSignal?: boolean;
  /**
   * Re-read the files when one changes (their mtime is polled every
   * `watchIntervalMs`, one timer per server, stopped on close). Default:
   * true when a file is given.
   */
  watchFiles?: boolean;
  /** Poll interval of `watchFiles`, ms. Default {@link DEFAULT_TLS_WATCH_INTERVAL_MS}. */
  watchIntervalMs?: number;
  /**
   * Called for a failed handshake (throttled) or a failed reload; the
   * server goes on. Default: `console.error` of the message.
   */
  onError?: (error: TlsServerError) => void;
  /**
   * Called after the files were re-read and took effect on SIGHUP or a file
   * change (`why` says which), for a log line; not for `reloadTls()`.
   */
  onReload?: (why: string) => void;
}

/** TLS options of a dialer, for `tls://` URLs. */
export interface TlsClientOptions {
  /**
   * Path of the PEM CA certificate(s) the server's certificate must chain
   * to. Default: the system's trusted roots.
   */
  caFile?: string;
  /** The CA as PEM text (when no `caFile`). */
  ca?: string;
  /** Path of a PEM client certificate to present (mutual TLS); needs `keyFile`/`key`. */
  certFile?: string;
  /** Path of the client certificate's PEM private key. */
  keyFile?: string;
  /** The client certificate as PEM text (when no `certFile`). */
  cert?: string;
  /** The client key as PEM text (when no `keyFile`). */
  key?: string;
  /**
   * The name to verify the server's certificate against (and to send as
   * SNI). Default: the URL's host (an IP address is checked against the
   * certificate's IP SANs).
   */
  serverName?: string;
  /**
   * Verify the server's certificate (default true). False accepts any
   * certificate: tests only, it gives up the server's authentication.
   */
  rejectUnauthorized?: boolean;
}

/** The `tls` option of `connect()` and `dial()` of `@rafter/rpc/deno` and `@rafter/rpc/node`. */
export interface TlsDialOptions {
  /**
   * How to open `tls://` URLs (registry members, endpoints) when no
   * `dialer` is given: the CA to trust (default: the system's roots), a
   * client certificate for mutual TLS, `serverName`. See
   * {@link TlsClientOptions}.
   */
  tls?: TlsClientOptions;
}

/** Default of {@link TlsServerOptions.handshakeTimeoutMs}. */
export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/** Default of {@link TlsServerOptions.maxPendingHandshakes}: 1_024. */
export const DEFAULT_MAX_PENDING_HANDSHAKES = 1_024;

/** Default of {@link TlsServerOptions.maxPendingHandshakesPerAddress}: 64. */
export const DEFAULT_MAX_PENDING_HANDSHAKES_PER_ADDRESS = 64;

/** Default of {@link TlsServerOptions.watchIntervalMs}. */
export const DEFAULT_TLS_WATCH_INTERVAL_MS = 1_500;
