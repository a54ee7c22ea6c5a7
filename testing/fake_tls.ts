/**
 * A stand-in for mutual TLS in tests of what is built on it: in-memory
 * byte-stream pairs whose two ends carry `secure: true` and the other
 * end's certificate (`ByteStream.peerCertificate`), as a TLS listener that
 * asks for client certificates and a TLS dialer fill them once the
 * handshake has verified the chain. No cryptography happens: a test says
 * which certificate each listener and dialer "presents", and checks what
 * the code does with the identities. {@link TcpCertNetwork} does the same
 * over real TCP sockets on 127.0.0.1. Swap either's `serve` and `dialer`
 * for a real TLS `serve` and dialer to run the same test over real TLS.
 *
 * @module
 */

import {
  type RpcServer,
  serveListener,
  type ServeOptions,
  type StreamListener,
} from "../rpc/server/server.ts";
import {
  type ByteStream,
  type Dialer,
  parseTcpUrl,
  type PeerCertificate,
} from "../rpc/transport/transport.ts";
import { fromDenoConn } from "../adapter/deno/tcp.ts";
import { fedReadable } from "./rpc.ts";

/**
 * A certificate as a TLS layer reports it, naming each of `members` in a
 * SAN `URI:rafter://member/<id>` (as `cli/pki.ts` issues them), plus
 * `DNS:localhost` and `IP Address:127.0.0.1`; `extra` SANs are appended.
 */
export function memberCertificate(
  members: readonly string[],
  extra: readonly string[] = [],
): PeerCertificate {
  return {
    commonName: members[0] ?? "client",
    altNames: [
      "DNS:localhost",
      "IP Address:127.0.0.1",
      ...members.map((id) => `URI:rafter://member/${encodeURIComponent(id)}`),
      ...extra,
    ],
    fingerprint256: Array.from({ length: 32 }, () => "AB").join(":"),
    validTo: "2099-01-01T00:00:00.000Z",
  };
}

/** One direction of a pair: what one end writes, the other reads. */
function pipe() {
  const fed = fedReadable();
  const end = () => fed.end();
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      if (fed.ended) throw new Error("stream closed");
      fed.enqueue(chunk.slice());
    },
    close: end,
    abort: end,
  });
  return { readable: fed.readable, writable, end };
}

/**
 * Two connected in-memory {@link ByteStream}s; closing either ends both
 * directions, as closing a socket does.
 */
export function streamPair(): [ByteStream, ByteStream] {
  const ab = pipe();
  const ba = pipe();
  const close = () => {
    ab.end();
    ba.end();
  };
  return [
    { readable: ba.readable, writable: ab.writable, close },
    { readable: ab.readable, writable: ba.writable, close },
  ];
}

interface Listening {
  certificate: PeerCertificate | null;
  accept(stream: ByteStream): void;
}

/**
 * Listeners and dialers on in-memory "TLS" streams. URLs are
 * `tcp://fake-tls.invalid:<n>` (never resolvable, so a real dialer given
 * one fails instead of reaching something).
 */
export class FakeTlsNetwork {
  readonly #listening = new Map<string, Listening>();
  #nextPort = 1;
  #nextClient = 40_000;

  /**
   * A listener that presents `certificate` to every dialer and hands its
   * accepted streams the dialer's certificate (null: the client sent none).
   */
  listen(
    certificate: PeerCertificate | null,
  ): StreamListener & { url: string } {
    const port = this.#nextPort++;
    const url = `tcp://fake-tls.invalid:${port}`;
    const queue: ByteStream[] = [];
    const waiting: ((stream: ByteStream | null) => void)[] = [];
    let closed = false;
    this.#listening.set(url, {
      certificate,
      accept: (stream) => {
        const next = waiting.shift();
        if (next !== undefined) next(stream);
        else queue.push(stream);
      },
    });
    return {
      url,
      address: { hostname: "fake-tls.invalid", port },
      accept: () => {
        if (closed) return Promise.resolve(null);
        const ready = queue.shift();
        if (ready !== undefined) return Promise.resolve(ready);
        return new Promise((resolve) => waiting.push(resolve));
      },
      close: () => {
        if (closed) return;
        closed = true;
        this.#listening.delete(url);
        for (const resolve of waiting.splice(0)) resolve(null);
        for (const stream of queue.splice(0)) stream.close();
      },
    };
  }

  /**
   * A `serve` function (as `servePeersOn` takes) whose server listens on
   * this network and presents `certificate`; `onListen` gets the URL.
   */
  serve(
    certificate: PeerCertificate | null,
  ): (options: ServeOptions) => RpcServer {
    return (options) => serveListener(this.listen(certificate), options);
  }

  /** A dialer that presents `certificate` (null: none) to listeners. */
  dialer(certificate: PeerCertificate | null): Dialer {
    return (url) => {
      const listening = this.#listening.get(url);
      if (listening === undefined) {
        const cause = new Error(`nothing listens at ${url}`);
        cause.name = "ConnectionRefused";
        return Promise.reject(
          new Error(`cannot connect to ${url}: connection refused`, { cause }),
        );
      }
      const [client, server] = streamPair();
      const port = this.#nextClient++;
      listening.accept({
        ...server,
        secure: true,
        peerCertificate: certificate,
        remoteAddress: `127.0.0.1:${port}`,
      });
      return Promise.resolve({
        ...client,
        secure: true,
        peerCertificate: listening.certificate,
        remoteAddress: url.slice("tcp://".length),
      });
    };
  }
}

/**
 * Like {@link FakeTlsNetwork}, over real TCP connections on 127.0.0.1:
 * each accepted connection carries the certificate its dialer "presents"
 * (matched by the dialer's local port), and each dialed one the
 * listener's.
 */
export class TcpCertNetwork {
  readonly #serverCerts = new Map<string, PeerCertificate | null>();
  readonly #clientCerts = new Map<number, PeerCertificate | null>();
  readonly #waiting = new Map<number, (cert: PeerCertificate | null) => void>();

  /** A `serve` function whose server listens on 127.0.0.1 and presents `certificate`. */
  serve(
    certificate: PeerCertificate | null,
  ): (options: ServeOptions) => RpcServer {
    return (options) => {
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const address = listener.addr;
      const url = `tcp://127.0.0.1:${address.port}`;
      this.#serverCerts.set(url, certificate);
      let closed = false;
      return serveListener({
        address,
        accept: async () => {
          let conn: Deno.TcpConn;
          try {
            conn = await listener.accept();
          } catch (error) {
            if (closed) return null;
            throw error;
          }
          conn.setNoDelay(true);
          const peer = await this.#clientCertOf(conn.remoteAddr.port);
          // Set the fields: a stream is a class instance, which a spread
          // would strip of its readable and writable getters.
          return Object.assign(fromDenoConn(conn), {
            secure: true,
            peerCertificate: peer,
          });
        },
        close: () => {
          if (closed) return;
          closed = true;
          this.#serverCerts.delete(url);
          listener.close();
        },
      }, options);
    };
  }

  /** A dialer that presents `certificate` (null: none) to listeners. */
  dialer(certificate: PeerCertificate | null): Dialer {
    return async (url) => {
      const conn = await Deno.connect(parseTcpUrl(url));
      conn.setNoDelay(true);
      const port = conn.localAddr.port;
      const waiter = this.#waiting.get(port);
      if (waiter !== undefined) {
        this.#waiting.delete(port);
        waiter(certificate);
      } else this.#clientCerts.set(port, certificate);
      return Object.assign(fromDenoConn(conn), {
        secure: true,
        peerCertificate: this.#serverCerts.get(url) ?? null,
      });
    };
  }

  /** The certificate the dialer on `port` presents; null after 2 s of silence. */
  #clientCertOf(port: number): Promise<PeerCertificate | null> {
    if (this.#clientCerts.has(port)) {
      const cert = this.#clientCerts.get(port)!;
      this.#clientCerts.delete(port);
      return Promise.resolve(cert);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(port);
        resolve(null);
      }, 2_000);
      this.#waiting.set(port, (cert) => {
        clearTimeout(timer);
        resolve(cert);
      });
    });
  }
}
