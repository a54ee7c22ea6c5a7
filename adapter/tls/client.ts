/**
 * Opening `tls://` endpoints with `node:tls` (Node, and Deno's Node
 * compatibility, whose TLS sockets, unlike `Deno.connectTls`, show the
 * server's certificate).
 *
 * @module
 */

import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { isIP } from "node:net";
import {
  type ByteStream,
  type Dialer,
  type DialerOptions,
  parseEndpointUrl,
  type TcpAddress,
} from "../../rpc/transport/transport.ts";
import type { TlsClientOptions } from "../../rpc/transport/tls.ts";
import {
  checkKeyPair,
  peerCertificateOf,
  pemName,
  pemOf,
} from "./certificate.ts";
import { fromNodeSocket, openSocket } from "./node_socket.ts";
import type { TlsFailure } from "../../rpc/errors.ts";

/** Errors of certificate verification, by OpenSSL's code (Node) or message (Deno). */
const UNTRUSTED =
  /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED|CERT_UNTRUSTED|UnknownIssuer|unable to verify|self[- ]signed|unknown ?issuer|certificate verify failed/i;
const NAME_MISMATCH =
  /ERR_TLS_CERT_ALTNAME_INVALID|Hostname\/IP does not match|NotValidForName|not valid for name|hostname mismatch|altnames/i;
const EXPIRED = /CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|expired|not yet valid/i;

/**
 * Checks `options` and reads the PEM material a TLS dial needs.
 *
 * @throws {TypeError} for an unreadable file or a client certificate
 * without its key (or the reverse).
 */
export function tlsClientConnectionOptions(
  options: TlsClientOptions,
): ConnectionOptions {
  const ca = pemOf(options.caFile, options.ca, "ca", "tls");
  const cert = pemOf(options.certFile, options.cert, "cert", "tls");
  const key = pemOf(options.keyFile, options.key, "key", "tls");
  if ((cert === undefined) !== (key === undefined)) {
    throw new TypeError(
      "tls: a client certificate needs its private key: give both tls.certFile and tls.keyFile (or tls.cert and tls.key)",
    );
  }
  if (cert !== undefined && key !== undefined) {
    checkKeyPair(
      cert,
      key,
      pemName(options.certFile, "cert", "tls"),
      pemName(options.keyFile, "key", "tls"),
    );
  }
  return {
    ...(ca === undefined ? {} : { ca }),
    ...(cert === undefined ? {} : { cert, key }),
    rejectUnauthorized: options.rejectUnauthorized ?? true,
  };
}

/** `error` of a TLS dial to `url`, with what to do about it. */
function explained(
  error: unknown,
  url: string,
  options: TlsClientOptions,
): Error {
  const text = `${(error as { code?: string }).code ?? ""} ${
    (error as Error)?.message ?? String(error)
  }`;
  let advice: string | undefined;
  let tlsFailure: TlsFailure | undefined;
  if (NAME_MISMATCH.test(text)) {
    tlsFailure = "nameMismatch";
    advice =
      `the server's certificate is not valid for the name dialed (${url}): dial a host name or IP address the certificate lists, or set tls.serverName to one it lists`;
  } else if (EXPIRED.test(text)) {
    tlsFailure = "expired";
    advice =
      `the server's certificate is expired or not yet valid: renew it, or check the clocks`;
  } else if (UNTRUSTED.test(text)) {
    tlsFailure = "untrusted";
    advice = `the server's certificate is not trusted${
      options.caFile === undefined
        ? " by the system's roots"
        : ` by tls.caFile "${options.caFile}"`
    }: pass tls.caFile with the CA that signed the server's certificate`;
  } else if (
    /CertificateRequired|certificate required|alert number 116/i.test(text)
  ) {
    tlsFailure = "clientCertificate";
    advice =
      "the server requires a client certificate: pass tls.certFile and tls.keyFile of one its CA signed";
  } else if (
    /bad ?certificate|alert number 42|DecryptError|unknown ca|alert number 48/i
      .test(text)
  ) {
    tlsFailure = "clientCertificate";
    advice =
      "the server refused the client certificate: use one signed by the CA the server trusts";
  }
  if (advice === undefined) return error as Error;
  return Object.assign(
    new Error(`TLS to ${url} failed: ${advice} (${text.trim()})`, {
      cause: error,
    }),
    { code: (error as { code?: string }).code ?? "TLS_FAILED", tlsFailure },
  );
}

/**
 * Opens TLS to `address` (`url` names it in errors) with `node:tls`,
 * Nagle's algorithm off. Verifies the server's certificate against
 * `options.caFile`/`ca` (else the system's roots) and its name against
 * `options.serverName` or the URL's host (IP SANs for an IP), presents
 * the client certificate when given.
 *
 * @returns the stream, `secure: true`, `peerCertificate` the server's.
 * @throws {TypeError} for unreadable files (see {@link tlsClientConnectionOptions}).
 * @throws an `Error` that says what to do for an untrusted certificate, a
 * name mismatch or a refused client certificate, its `tlsFailure` saying
 * which (see `tlsFailureOf`); the socket's error otherwise; the signal's
 * reason when it aborts.
 */
export function dialTls(
  address: TcpAddress,
  url: string,
  options: TlsClientOptions,
  dialOptions?: DialerOptions,
): Promise<ByteStream> {
  let connection: ConnectionOptions;
  try {
    connection = tlsClientConnectionOptions(options);
  } catch (error) {
    return Promise.reject(error);
  }
  const servername = options.serverName ??
    (isIP(address.hostname) === 0 ? address.hostname : undefined);
  return openSocket(
    () => {
      const socket = tlsConnect({
        ...connection,
        host: address.hostname,
        port: address.port,
        ...(servername === undefined ? {} : { servername }),
      });
      socket.setNoDelay(true);
      return socket;
    },
    "secureConnect",
    dialOptions?.signal,
    (socket) =>
      Object.assign(fromNodeSocket(socket), {
        secure: true,
        peerCertificate: peerCertificateOf(socket.getPeerCertificate()),
      }),
    (error) => explained(error, url, options),
  );
}

/**
 * A {@link Dialer} of `tcp://` URLs (with `tcp`) and `tls://` ones (with
 * {@link dialTls} and `tls`): what `denoDialer` and `nodeDialer` are.
 */
export function endpointDialer(
  tls: TlsClientOptions,
  tcp: (
    hostname: string,
    port: number,
    signal: AbortSignal | undefined,
  ) => Promise<ByteStream>,
): Dialer {
  return (url, options) => {
    let address;
    try {
      address = parseEndpointUrl(url);
    } catch (error) {
      return Promise.reject(error);
    }
    if (address.tls) return dialTls(address, url, tls, options);
    return tcp(address.hostname, address.port, options?.signal);
  };
}

/**
 * `options` with its `tls` turned into the `dialer` of a runtime entry's
 * `connect()` or `dial()`: a given `dialer` wins; else `plain` without
 * `tls`, `make(tls)` with it.
 */
export function withEntryDialer<O extends { dialer?: Dialer }>(
  options: O & { tls?: TlsClientOptions },
  plain: Dialer,
  make: (tls: TlsClientOptions) => Dialer,
): O {
  const { tls, ...rest } = options;
  return {
    ...rest,
    dialer: rest.dialer ?? (tls === undefined ? plain : make(tls)),
  } as O;
}
