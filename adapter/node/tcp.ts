/**
 * Node adapter: `node:net` sockets as {@link ByteStream}s, and the dialer
 * that opens them.
 *
 * @module
 */

import { connect as netConnect } from "node:net";
import type { Dialer } from "../../rpc/transport/transport.ts";
import type { TlsClientOptions } from "../../rpc/transport/tls.ts";
import { fromNodeSocket, openSocket } from "../tls/node_socket.ts";
import { endpointDialer } from "../tls/client.ts";

export { fromNodeSocket };

/**
 * A {@link Dialer} for Node: `tcp://host:port` with `node:net`,
 * `tls://host:port` with `node:tls` (Nagle's algorithm off). A `tls://`
 * stream has `secure: true` and the server's verified certificate as
 * `peerCertificate`.
 *
 * @param tls for `tls://` URLs: the CA to trust (default: the system's
 * roots), a client certificate to present (mutual TLS), `serverName`;
 * files are read at each dial.
 * @returns the dialer; it rejects with a {@link TypeError} for a malformed
 * URL or an unreadable file, with an `Error` that says what to do for an
 * untrusted certificate or a name mismatch, with the socket's error
 * (e.g. `ECONNREFUSED`) or the signal's reason.
 */
export function nodeDialer(tls: TlsClientOptions = {}): Dialer {
  return endpointDialer(tls, (hostname, port, signal) =>
    openSocket(
      () => netConnect({ host: hostname, port, noDelay: true }),
      "connect",
      signal,
      fromNodeSocket,
    ));
}

/**
 * Opens a TCP connection with `node:net` (Nagle's algorithm off): what
 * `connect()` and `dial()` of `@rafter/rpc/node` use unless given another;
 * `tls://` URLs with `node:tls`, trusting the system's roots (pass options
 * to {@link nodeDialer} for another CA or a client certificate).
 *
 * @param url `tcp://host:port` or `tls://host:port`.
 * @param options `signal` aborts the attempt (the socket is destroyed).
 * @throws {TypeError} for a malformed URL.
 * @throws the socket's error (e.g. `ECONNREFUSED`) or the signal's reason.
 */
export const nodeTcpDialer: Dialer = nodeDialer();
