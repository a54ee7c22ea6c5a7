/**
 * A TLS listener on `node:tls` (Node, and Deno's Node compatibility):
 * the certificate from files or PEM text, client certificates asked for
 * and verified, a handshake deadline, throttled handshake-failure logs,
 * and reloading on SIGHUP, on file change, or on request.
 *
 * @module
 */

import { createSecureContext, createServer, type TLSSocket } from "node:tls";
import type { Duplex } from "node:stream";
import { stat } from "node:fs/promises";
import process from "node:process";
import { hostOf, type StreamListener } from "../../rpc/server/server.ts";
import {
  formatTcpUrl,
  type TcpAddress,
} from "../../rpc/transport/transport.ts";
import {
  DEFAULT_MAX_PENDING_HANDSHAKES,
  DEFAULT_MAX_PENDING_HANDSHAKES_PER_ADDRESS,
  DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_TLS_WATCH_INTERVAL_MS,
  type TlsServerError,
  type TlsServerErrorCode,
  type TlsServerOptions,
} from "../../rpc/transport/tls.ts";
import {
  checkKeyPair,
  peerCertificateOf,
  pemName,
  pemOf,
} from "./certificate.ts";
import { acceptQueue, fromNodeSocket } from "./node_socket.ts";

/** A handshake failure is logged at most once per remote address in this window. */
const HANDSHAKE_LOG_WINDOW_MS = 60_000;
/** Remote addresses remembered for the log throttle before old ones are dropped. */
const HANDSHAKE_LOG_MAX_HOSTS = 1_024;

/**
 * TCP connections accepted elsewhere (Deno's `Deno.listen`, which binds
 * synchronously, unlike `node:net`), as `node:stream` duplexes with the
 * peer's `remoteAddress` and `remotePort` on them.
 */
export interface ConnectionSource {
  /** The address it is bound to. */
  readonly address: TcpAddress;
  /** The next connection, or null once closed; throws on a transient failure. */
  accept(): Promise<Duplex | null>;
  /** Stops accepting. Idempotent. */
  close(): void;
}

/** A {@link StreamListener} of TLS streams, with its certificate reload. */
export interface TlsListener extends StreamListener {
  readonly secure: true;
  /** Resolves once it listens; rejects with the listen error. */
  readonly listening: Promise<void>;
  /** Re-reads the certificate files; rejects (keeping the old ones) when they are unusable. */
  reloadTls(): Promise<void>;
}

/** The key, certificate and client CA of one secure context. */
interface Material {
  key: string;
  cert: string;
  ca?: string;
}

/**
 * Checks `options` and reads its PEM material.
 *
 * @throws {TypeError} for a missing or unreadable file, a certificate and
 * key that do not belong together, or a client-certificate policy without
 * a CA; {@link RangeError} for a bad `handshakeTimeoutMs` or
 * `watchIntervalMs`.
 */
export function readTlsServerMaterial(options: TlsServerOptions): Material {
  const policy = options.clientCert ?? "none";
  if (!["none", "request", "require"].includes(policy)) {
    throw new TypeError(
      `tls.clientCert must be "none", "request" or "require", not ${
        JSON.stringify(policy)
      }`,
    );
  }
  for (const name of ["handshakeTimeoutMs", "watchIntervalMs"] as const) {
    const value = options[name];
    if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
      throw new RangeError(
        `tls.${name} must be a positive number of ms, not ${value}`,
      );
    }
  }
  const cert = pemOf(options.certFile, options.cert, "cert", "tls");
  const key = pemOf(options.keyFile, options.key, "key", "tls");
  const ca = pemOf(options.caFile, options.ca, "ca", "tls");
  if (cert === undefined || key === undefined) {
    throw new TypeError(
      "tls needs the server's certificate and key: give tls.certFile and tls.keyFile (or tls.cert and tls.key as PEM text)",
    );
  }
  if (policy !== "none" && ca === undefined) {
    throw new TypeError(
      `tls.clientCert "${policy}" needs the CA that signs client certificates: give tls.caFile (or tls.ca)`,
    );
  }
  checkKeyPair(
    cert,
    key,
    pemName(options.certFile, "cert", "tls"),
    pemName(options.keyFile, "key", "tls"),
  );
  try {
    createSecureContext({ key, cert, ca });
  } catch (error) {
    throw new TypeError(
      `tls: the certificate, key or CA cannot be used (${
        (error as Error).message
      }): give PEM files`,
    );
  }
  return ca === undefined ? { key, cert } : { key, cert, ca };
}

function tlsError(
  code: TlsServerErrorCode,
  message: string,
  remoteAddress?: string,
): TlsServerError {
  return Object.assign(new Error(message), {
    name: "TlsServerError",
    code,
    ...(remoteAddress === undefined ? {} : { remoteAddress }),
  });
}

/**
 * Listens with TLS on `hostname:port` (`node:tls`), Nagle's algorithm off,
 * and serves the accepted connections as streams with `secure: true` and
 * the verified client certificate as `peerCertificate`.
 *
 * @param options the `tls` option of `serve()`.
 * @param bind where to listen (`node:net`; port 0: ephemeral, see
 * `address` once `listening` resolved), or a {@link ConnectionSource}
 * whose connections are served.
 * @throws {TypeError} / {RangeError} for unusable options (see
 * {@link readTlsServerMaterial}), before anything listens.
 */
export function openTlsListener(
  options: TlsServerOptions,
  bind: TcpAddress | ConnectionSource,
): TlsListener {
  const material = readTlsServerMaterial(options);
  const policy = options.clientCert ?? "none";
  const handshakeMs = options.handshakeTimeoutMs ??
    DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS;
  const fromFiles = options.certFile !== undefined ||
    options.keyFile !== undefined || options.caFile !== undefined;
  const report = options.onError ??
    ((error: TlsServerError) => console.error(`rpc: ${error.message}`));
  const logged = new Map<string, number>();
  const reportHandshake = (host: string | undefined, what: string) => {
    const now = Date.now();
    const key = host ?? "unknown";
    const last = logged.get(key);
    if (last !== undefined && now - last < HANDSHAKE_LOG_WINDOW_MS) return;
    if (logged.size >= HANDSHAKE_LOG_MAX_HOSTS) {
      for (const [old, at] of logged) {
        if (now - at >= HANDSHAKE_LOG_WINDOW_MS) logged.delete(old);
      }
      if (logged.size >= HANDSHAKE_LOG_MAX_HOSTS) logged.clear();
    }
    logged.set(key, now);
    report(tlsError(
      "TLS_HANDSHAKE_FAILED",
      `TLS handshake with ${key} failed: ${what} (logged once a minute per address)`,
      host,
    ));
  };

  const server = createServer({
    ...material,
    requestCert: policy !== "none",
    rejectUnauthorized: policy === "require",
    handshakeTimeout: handshakeMs,
  });
  const queue = acceptQueue(
    (socket: TLSSocket) => {
      const stream = fromNodeSocket(socket);
      const peer = peerOf(socket);
      return Object.assign(stream, {
        secure: true,
        peerCertificate: policy === "none"
          ? null
          : peerCertificateOf(socket.getPeerCertificate()),
        remoteAddress: stream.remoteAddress ??
          (peer.remoteAddress === undefined ? undefined : formatTcpUrl({
            hostname: peer.remoteAddress,
            port: peer.remotePort ?? 0,
          }).slice("tcp://".length)),
      });
    },
    (socket) => socket.destroy(),
  );
  server.on("secureConnection", (socket: TLSSocket) => {
    secured.add(peerOf(socket));
    settle(rawOf(socket));
    if (
      policy === "request" && !socket.authorized &&
      peerCertificateOf(socket.getPeerCertificate()) !== null
    ) {
      reportHandshake(
        peerOf(socket).remoteAddress,
        `client certificate refused (${
          String(socket.authorizationError)
        }): it is not signed by the CA of tls.caFile`,
      );
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    queue.push(socket);
  });
  // A failed or timed-out handshake (`handshakeTimeout`): Node destroys
  // the socket itself, Deno's `node:tls` does not. Deno's socket no longer
  // knows the peer's address here: a source's connection reports itself
  // when it closes unsecured (below), with the latest error.
  let lastHandshakeError = "closed before the handshake finished";
  server.on("tlsClientError", (error: Error, socket: TLSSocket) => {
    const what = /timeout/i.test(error.message)
      ? `not finished within ${handshakeMs} ms (tls.handshakeTimeoutMs)`
      : error.message;
    const peer = socket === undefined ? {} : peerOf(socket);
    if (peer.remoteAddress !== undefined || source === undefined) {
      reportHandshake(peer.remoteAddress, what);
    } else {
      lastHandshakeError = what;
    }
    socket?.destroy();
  });
  const secured = new WeakSet<object>();
  // Handshakes under way, by remote host: a connection that has not
  // finished its handshake is not yet counted by the server's connection
  // caps, so it is capped here (per address and in all).
  const maxPending = options.maxPendingHandshakes ??
    DEFAULT_MAX_PENDING_HANDSHAKES;
  const maxPendingPerAddress = options.maxPendingHandshakesPerAddress ??
    DEFAULT_MAX_PENDING_HANDSHAKES_PER_ADDRESS;
  const pendingByHost = new Map<string, number>();
  const pendingRaw = new WeakMap<object, string>();
  let pendingTotal = 0;
  const settle = (raw: object | undefined) => {
    const host = raw === undefined ? undefined : pendingRaw.get(raw);
    if (host === undefined) return;
    pendingRaw.delete(raw!);
    pendingTotal--;
    const left = (pendingByHost.get(host) ?? 1) - 1;
    if (left <= 0) pendingByHost.delete(host);
    else pendingByHost.set(host, left);
  };
  server.on("connection", (raw: Duplex & { remoteAddress?: string }) => {
    (raw as { setNoDelay?(on: boolean): void }).setNoDelay?.(true);
    const host = hostOf(raw.remoteAddress) ?? "unknown";
    const fromHost = pendingByHost.get(host) ?? 0;
    if (pendingTotal >= maxPending || fromHost >= maxPendingPerAddress) {
      reportHandshake(
        raw.remoteAddress,
        pendingTotal >= maxPending
          ? `refused: ${pendingTotal} TLS handshakes already under way (tls.maxPendingHandshakes ${maxPending})`
          : `refused: ${fromHost} TLS handshakes from ${host} already under way (tls.maxPendingHandshakesPerAddress ${maxPendingPerAddress})`,
      );
      raw.destroy();
      return;
    }
    pendingRaw.set(raw, host);
    pendingTotal++;
    pendingByHost.set(host, fromHost + 1);
    // A peer that leaves mid-handshake may only end its side: that frees
    // the slot too (the TLS layer closes the rest).
    for (const event of ["close", "end", "error"]) {
      raw.once(event, () => settle(raw));
    }
  });

  const source = "accept" in bind ? bind : undefined;
  const at = bind as TcpAddress;
  const listening = source !== undefined
    ? feed(source)
    : new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: at.hostname, port: at.port }, () => {
        server.off("error", reject);
        server.on("error", (error: Error) => {
          console.error("rpc: accept failed:", error);
        });
        resolve();
      });
    });
  /** Hands the source's connections to the TLS server until it closes. */
  function feed(source: ConnectionSource): Promise<void> {
    void (async () => {
      while (!queue.closed) {
        let raw: Duplex | null;
        try {
          raw = await source.accept();
        } catch (error) {
          if (queue.closed) break;
          console.error("rpc: accept failed:", error);
          await new Promise((resolve) => setTimeout(resolve, 100));
          continue;
        }
        if (raw === null) break;
        if (queue.closed) {
          raw.destroy();
          break;
        }
        const from = raw as Duplex & { remoteAddress?: string };
        raw.once("close", () => {
          if (secured.has(raw) || queue.closed) return;
          reportHandshake(from.remoteAddress, lastHandshakeError);
        });
        server.emit("connection", raw);
      }
    })();
    return Promise.resolve();
  }

  const reloadTls = (): Promise<void> => {
    try {
      server.setSecureContext(readTlsServerMaterial(options));
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  };
  const autoReload = async (why: string) => {
    try {
      await reloadTls();
      options.onReload?.(why);
    } catch (error) {
      report(tlsError(
        "TLS_RELOAD_FAILED",
        `TLS certificate reload (${why}) failed, still serving the previous certificate: ${
          (error as Error).message
        }`,
      ));
    }
  };

  let watchTimer: ReturnType<typeof setInterval> | undefined;
  const files = [options.certFile, options.keyFile, options.caFile].filter(
    (file): file is string => file !== undefined,
  );
  const watching = (options.watchFiles ?? fromFiles) && files.length > 0;
  /** The files as last loaded (mtime, size, inode), for the poll. */
  let seen: string | undefined;
  const signature = async () =>
    (await Promise.all(files.map(async (file) => {
      try {
        const info = await stat(file);
        return `${info.mtimeMs}/${info.size}/${info.ino}`;
      } catch {
        return "missing";
      }
    }))).join(",");

  // A SIGHUP takes the files as they are now, so the poll does not load
  // (and log) the same change a second time.
  const onSignal = () =>
    void (async () => {
      if (watching) seen = await signature();
      await autoReload("SIGHUP");
    })();
  const onSignalWanted = (options.reloadOnSignal ?? fromFiles) &&
    process.platform !== "win32";
  if (onSignalWanted) process.on("SIGHUP", onSignal);

  if (watching) {
    let polling = false;
    void signature().then((first) => seen ??= first);
    watchTimer = setInterval(async () => {
      if (polling) return;
      polling = true;
      try {
        const now = await signature();
        if (seen !== undefined && now !== seen && watchTimer !== undefined) {
          seen = now;
          await autoReload("a certificate file changed");
        }
        seen ??= now;
      } finally {
        polling = false;
      }
    }, options.watchIntervalMs ?? DEFAULT_TLS_WATCH_INTERVAL_MS);
  }

  const close = () => {
    if (queue.closed) return;
    queue.close();
    if (onSignalWanted) process.off("SIGHUP", onSignal);
    clearInterval(watchTimer);
    watchTimer = undefined;
    if (source === undefined) server.close();
    else source.close();
  };
  listening.catch(() => close());

  return {
    secure: true,
    listening,
    get address(): TcpAddress {
      if (source !== undefined) return source.address;
      const bound = server.address();
      return bound !== null && typeof bound !== "string"
        ? { hostname: bound.address, port: bound.port }
        : { hostname: at.hostname, port: at.port };
    },
    accept: () => queue.accept(),
    close,
    reloadTls,
  };
}

/**
 * The peer's address of an accepted TLS socket: its own, else that of the
 * duplex it runs on (a {@link ConnectionSource}'s, which Deno's `node:tls`
 * does not pass on: it is found through the socket's stream wrapper).
 */
/** The TCP connection under a server-side TLS socket (Node and Deno). */
function rawOf(socket: TLSSocket): object | undefined {
  const wrapped = socket as unknown as {
    _handle?: { _parentWrap?: { stream?: Duplex } };
    _parent?: Duplex;
  };
  return wrapped._parent ?? wrapped._handle?._parentWrap?.stream;
}

function peerOf(
  socket: TLSSocket,
): { remoteAddress?: string; remotePort?: number } {
  if (socket.remoteAddress !== undefined) return socket;
  const wrapped = socket as unknown as {
    _handle?: { _parentWrap?: { stream?: Duplex } };
    _parent?: Duplex;
  };
  const raw = wrapped._handle?._parentWrap?.stream ?? wrapped._parent;
  return (raw ?? {}) as { remoteAddress?: string; remotePort?: number };
}
