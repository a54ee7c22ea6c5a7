/**
 * Peer links over real TLS for the peer-identity tests: each certificate
 * a test asks for (as a {@link PeerCertificate} made by
 * `memberCertificate`) becomes a real one, signed by a throw-away CA, that
 * names the same members; servers listen with `serve({ tls })` asking for
 * client certificates, dialers present theirs. A null server certificate
 * listens on plain TCP; a null client certificate dials TLS without one.
 *
 * @module
 */

import { type CertifiedKey, createCa, createCert } from "../cli/pki.ts";
import { serve } from "../adapter/deno/serve.ts";
import { denoDialer } from "../adapter/deno/tcp.ts";
import type { RpcServer, ServeOptions } from "../rpc/server/server.ts";
import type { Dialer, PeerCertificate } from "../rpc/transport/transport.ts";

const MEMBER_URI = /^URI:rafter:\/\/member\/(.+)$/;

/** Links whose certificates are real, made once per network. */
export class RealTlsNetwork {
  readonly #ca: CertifiedKey;
  readonly #certs = new Map<string, Promise<CertifiedKey>>();

  private constructor(ca: CertifiedKey) {
    this.#ca = ca;
  }

  /** A network with a fresh CA. */
  static async create(): Promise<RealTlsNetwork> {
    return new RealTlsNetwork(await createCa("peer identity test CA", 1));
  }

  /** Makes the real certificates for `certificates` ahead of use. */
  async prepare(certificates: readonly PeerCertificate[]): Promise<void> {
    await Promise.all(certificates.map((cert) => this.#real(cert)));
  }

  /** A `serve` whose server runs TLS with the real form of `certificate`. */
  serve(
    certificate: PeerCertificate | null,
  ): (options: ServeOptions) => RpcServer {
    return (options) => {
      if (certificate === null) return serve(options);
      const pem = this.#ready(certificate);
      return serve({
        ...options,
        tls: {
          cert: pem.cert,
          key: pem.key,
          ca: this.#ca.cert,
          clientCert: "request",
        },
      });
    };
  }

  /**
   * A dialer that presents the real form of `certificate` (null: none)
   * and trusts this network's CA, or `trust`'s.
   */
  dialer(
    certificate: PeerCertificate | null,
    trust: RealTlsNetwork = this,
  ): Dialer {
    const pem = certificate === null ? null : this.#ready(certificate);
    return denoDialer({
      ca: trust.#ca.cert,
      ...(pem === null ? {} : { cert: pem.cert, key: pem.key }),
    });
  }

  #key(certificate: PeerCertificate): string {
    return JSON.stringify(certificate.altNames);
  }

  #real(certificate: PeerCertificate): Promise<CertifiedKey> {
    const key = this.#key(certificate);
    let made = this.#certs.get(key);
    if (made === undefined) {
      const members = certificate.altNames.flatMap((name) => {
        const match = MEMBER_URI.exec(name);
        return match === null ? [] : [decodeURIComponent(match[1])];
      });
      made = createCert(this.#ca, {
        commonName: certificate.commonName || "client",
        dnsNames: ["localhost"],
        ips: ["127.0.0.1"],
        member: members,
        days: 1,
      });
      this.#certs.set(key, made);
      made.then((pem) => this.#done.set(key, pem));
    }
    return made;
  }

  readonly #done = new Map<string, CertifiedKey>();

  #ready(certificate: PeerCertificate): CertifiedKey {
    const pem = this.#done.get(this.#key(certificate));
    if (pem === undefined) {
      throw new Error(
        `no real certificate made for ${
          certificate.altNames.join(", ")
        }: call prepare() with it first`,
      );
    }
    return pem;
  }
}
