/**
 * The byte-stream abstraction every RPC connection runs over, and the
 * `tcp://host:port` and `tls://host:port` URLs that name endpoints
 * (`tls://` is TCP with TLS on it: the dialers of `@rafter/rpc/deno`,
 * `/node` and `/cloudflare` open it with TLS, a server with the `tls`
 * option of `serve()` has a `tls://` URL). Web-standard only: runtime
 * adapters (Deno, Node, Cloudflare sockets) produce a {@link ByteStream}.
 *
 * @module
 */

/**
 * A full-duplex byte stream, such as a TCP connection. `Deno.Conn` and the
 * socket of Cloudflare's `connect()` both have this shape.
 */
export interface ByteStream {
  /** Bytes from the peer; ends when the peer closes its side. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes to the peer. */
  readonly writable: WritableStream<Uint8Array>;
  /** Closes both directions at once; safe to call more than once. */
  close(): void;
  /** The peer's address (`host:port`) when the transport knows it, for logs. */
  readonly remoteAddress?: string;
  /**
   * Whether the stream runs over TLS (a `tls://` endpoint or a TLS listener).
   * Absent or false: plain TCP.
   */
  readonly secure?: boolean;
  /**
   * The certificate the peer presented and the TLS layer verified against
   * the configured CA (a client certificate on a listener that asked for
   * one, the server's on a dialed stream); null or absent when there is
   * none (plain TCP, or a TLS client that sent no certificate).
   */
  readonly peerCertificate?: PeerCertificate | null;
}

/**
 * A verified X.509 certificate of the other end of a TLS stream, reduced
 * to what identity checks need.
 */
export interface PeerCertificate {
  /** The subject's common name (CN), or "" when it has none. */
  readonly commonName: string;
  /**
   * The subject alternative names, each with its type as OpenSSL prints
   * it: `DNS:n1.example.com`, `IP Address:10.0.0.5`,
   * `URI:rafter://member/n1`.
   */
  readonly altNames: readonly string[];
  /** SHA-256 fingerprint of the DER certificate, colon-separated hex. */
  readonly fingerprint256: string;
  /** End of validity, as an ISO 8601 date. */
  readonly validTo: string;
}

/**
 * Splits OpenSSL's `subjectaltname` text (`"DNS:a, IP Address:10.0.0.5,
 * URI:rafter://member/n1"`) into its entries.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { splitAltNames } from "./transport.ts";
 * assert.deepEqual(
 *   splitAltNames("DNS:localhost, IP Address:127.0.0.1, URI:rafter://member/n1"),
 *   ["DNS:localhost", "IP Address:127.0.0.1", "URI:rafter://member/n1"],
 * );
 * assert.deepEqual(splitAltNames(undefined), []);
 * ```
 */
export function splitAltNames(text: string | undefined): string[] {
  if (text === undefined || text.trim() === "") return [];
  return text.split(/,\s*(?=[A-Za-z][A-Za-z ]*:)/).map((part) => part.trim())
    .filter((part) => part !== "");
}

/** Options a {@link Dialer} may honour. */
export interface DialerOptions {
  /** Aborts the connection attempt (used for connect timeouts). */
  signal?: AbortSignal;
}

/**
 * Opens a byte stream to an endpoint URL such as `tcp://127.0.0.1:7001`.
 * Rejects when the connection cannot be opened. A dialer should stop trying
 * when `options.signal` aborts; one that ignores it still works, and the
 * stream it opens too late is closed by the caller.
 */
export type Dialer = (
  url: string,
  options?: DialerOptions,
) => Promise<ByteStream>;

/** Host and port of a `tcp://host:port` or `tls://host:port` URL. */
export interface TcpAddress {
  /** Host name or IP address (IPv6 without brackets). */
  hostname: string;
  /** TCP port, 1..65535. */
  port: number;
  /**
   * True for a `tls://` endpoint (TLS over TCP); absent or false for
   * `tcp://`. {@link parseTcpUrl} sets it only for `tls://`, so
   * `formatTcpUrl(parseTcpUrl(url))` keeps the scheme.
   */
  tls?: boolean;
}

/** An endpoint URL, parsed by {@link parseEndpointUrl}: whether it needs TLS is always said. */
export interface EndpointAddress extends TcpAddress {
  /** True for `tls://host:port`, false for `tcp://host:port` (or a bare `host:port`). */
  tls: boolean;
}

/**
 * Parses an endpoint URL: `tcp://host:port`, `tls://host:port` (TLS over
 * TCP), or a bare `host:port` (taken as `tcp://`).
 *
 * @throws {TypeError} when the URL has another scheme, no host, a port
 * outside 1..65535, or a path, query, fragment or user name; the message
 * names the URL and the expected form.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseEndpointUrl } from "./transport.ts";
 * assert.deepEqual(parseEndpointUrl("tls://[::1]:7001"), { hostname: "::1", port: 7001, tls: true });
 * assert.deepEqual(parseEndpointUrl("127.0.0.1:7001"), { hostname: "127.0.0.1", port: 7001, tls: false });
 * ```
 */
export function parseEndpointUrl(url: string): EndpointAddress {
  const text = url.includes("://") ? url : `tcp://${url}`;
  // The tcp:// wording is what callers and their tests have always seen;
  // tls:// is the same form with TLS.
  const expected = "tcp://host:port";
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new TypeError(`invalid endpoint URL "${url}": expected ${expected}`);
  }
  const port = Number(parsed.port);
  if (
    (parsed.protocol !== "tcp:" && parsed.protocol !== "tls:") ||
    parsed.hostname === "" || !Number.isInteger(port) || port < 1 ||
    port > 65535
  ) {
    throw new TypeError(
      `invalid endpoint URL "${url}": expected ${expected} with a port in 1..65535`,
    );
  }
  const scheme = parsed.protocol.slice(0, -1);
  if (
    (parsed.pathname !== "" && parsed.pathname !== "/") ||
    parsed.search !== "" || parsed.hash !== "" || parsed.username !== "" ||
    parsed.password !== "" || text.includes("?") || text.includes("#")
  ) {
    throw new TypeError(
      `invalid endpoint URL "${url}": a ${scheme}:// URL has no path, query, fragment or user name; give only ${scheme}://host:port`,
    );
  }
  const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  return { hostname, port, tls: scheme === "tls" };
}

/**
 * Parses a `tcp://host:port` URL, a `tls://host:port` URL (the result then
 * has `tls: true`; for `tcp://` it has no `tls`), or a bare `host:port`.
 * Use {@link parseEndpointUrl} to always get `tls`.
 *
 * @throws {TypeError} when the URL has another scheme, no host, a port
 * outside 1..65535, or a path, query, fragment or user name; the message
 * names the URL and the expected form.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseTcpUrl } from "./transport.ts";
 * assert.deepEqual(parseTcpUrl("tcp://127.0.0.1:7001"), { hostname: "127.0.0.1", port: 7001 });
 * assert.deepEqual(parseTcpUrl("tls://localhost:7001"), { hostname: "localhost", port: 7001, tls: true });
 * ```
 */
export function parseTcpUrl(url: string): TcpAddress {
  const { hostname, port, tls } = parseEndpointUrl(url);
  return tls ? { hostname, port, tls } : { hostname, port };
}

/**
 * Formats a host and port as a `tcp://host:port` URL, or `tls://host:port`
 * when `address.tls` is true (IPv6 in brackets).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatEndpointUrl } from "./transport.ts";
 * assert.equal(formatEndpointUrl({ hostname: "::1", port: 7001, tls: true }), "tls://[::1]:7001");
 * assert.equal(formatEndpointUrl({ hostname: "10.0.0.5", port: 80 }), "tcp://10.0.0.5:80");
 * ```
 */
export function formatEndpointUrl(address: TcpAddress): string {
  const host = address.hostname.includes(":")
    ? `[${address.hostname}]`
    : address.hostname;
  return `${address.tls === true ? "tls" : "tcp"}://${host}:${address.port}`;
}

/**
 * Formats a host and port as a `tcp://host:port` URL (IPv6 in brackets);
 * `tls://host:port` when `address.tls` is true. The same as
 * {@link formatEndpointUrl}, kept for existing callers.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatTcpUrl } from "./transport.ts";
 * assert.equal(formatTcpUrl({ hostname: "::1", port: 7001 }), "tcp://[::1]:7001");
 * ```
 */
export function formatTcpUrl(address: TcpAddress): string {
  return formatEndpointUrl(address);
}

/**
 * Parses an address to listen on: `host:port` or `tcp://host:port`, where
 * port 0 asks the system for a free port. (No `tls` in the result, so it
 * can be spread into `serve()` options, whose `tls` is the TLS setup.)
 *
 * @throws {TypeError} when the text is not of that form or the port is
 * outside 0..65535.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseListenAddress } from "./transport.ts";
 * assert.deepEqual(parseListenAddress("127.0.0.1:0"), { hostname: "127.0.0.1", port: 0 });
 * ```
 */
export function parseListenAddress(
  text: string,
): { hostname: string; port: number } {
  const match = /^(?:tcp:\/\/)?(\[[^\]]+\]|[^:/]+):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (match === null || port > 65535) {
    throw new TypeError(
      `invalid listen address "${text}": expected host:port with a port in 0..65535`,
    );
  }
  return { hostname: match[1].replace(/^\[(.*)\]$/, "$1"), port };
}

/**
 * Whether `hostname` is a wildcard (any-interface) address: `0.0.0.0`,
 * `::`, or an equivalent spelling. A server may listen on one, but no
 * client can dial it, so it must never be bound in a registry.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isWildcardHost } from "./transport.ts";
 * assert.equal(isWildcardHost("0.0.0.0"), true);
 * assert.equal(isWildcardHost("127.0.0.1"), false);
 * ```
 */
export function isWildcardHost(hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, "$1");
  return host === "0.0.0.0" || /^[0:]+$/.test(host) && host.includes("::") ||
    host === "0:0:0:0:0:0:0:0";
}

/**
 * Parses an advertised address: `host` or `host:port` (`[v6]:port` for
 * IPv6), optionally prefixed with `tcp://` or `tls://` (the scheme of a
 * server's URL comes from whether it listens with TLS, not from this).
 *
 * @throws {TypeError} when the text is empty, names a wildcard address, or
 * has a port outside 1..65535.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseAdvertise } from "./transport.ts";
 * assert.deepEqual(parseAdvertise("10.0.0.5"), { hostname: "10.0.0.5", port: undefined });
 * assert.deepEqual(parseAdvertise("10.0.0.5:9001"), { hostname: "10.0.0.5", port: 9001 });
 * assert.deepEqual(parseAdvertise("tls://10.0.0.5:9001"), { hostname: "10.0.0.5", port: 9001 });
 * ```
 */
export function parseAdvertise(
  text: string,
): { hostname: string; port: number | undefined } {
  const bare = /^t(?:cp|ls):\/\//.test(text)
    ? text.slice("tcp://".length)
    : text;
  const match = /^(\[[^\]]+\]|[^:/\[\]]+)(?::(\d{1,5}))?$/.exec(bare) ??
    /^([0-9a-fA-F:]+:[0-9a-fA-F:]*)$/.exec(bare);
  const port = match?.[2] === undefined ? undefined : Number(match[2]);
  if (match === null || (port !== undefined && (port < 1 || port > 65535))) {
    throw new TypeError(
      `invalid advertise address "${text}": expected host or host:port with a port in 1..65535`,
    );
  }
  const hostname = match[1].replace(/^\[(.*)\]$/, "$1");
  if (isWildcardHost(hostname)) {
    throw new TypeError(
      `invalid advertise address "${text}": a wildcard address cannot be dialed; advertise the host's reachable address`,
    );
  }
  return { hostname, port };
}
