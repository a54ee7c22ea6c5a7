/**
 * Certificates for a Rafter cluster, made with `@peculiar/x509` on
 * WebCrypto (ECDSA P-256, SHA-256): a cluster CA, and certificates it
 * signs for registry members, servers and clients. What `rafter cert`
 * writes, and what the tests make their throw-away CA with.
 *
 * A member's certificate names it with the subject alternative name
 * `URI:rafter://member/<id>` ({@link memberUri}): peers accept a peer
 * connection only for the member its certificate names. Host names and IP
 * addresses go in DNS and IP SANs, which TLS clients check against the
 * host they dial.
 *
 * @module
 */

// @peculiar/x509 resolves its parsers through tsyringe, which needs the
// Reflect metadata polyfill loaded first (a global: this module is for the
// CLI and tests, never imported by the library).
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

/** A certificate and its private key, PEM-encoded. */
export interface CertifiedKey {
  /** The certificate (`-----BEGIN CERTIFICATE-----`). */
  cert: string;
  /** The PKCS #8 private key (`-----BEGIN PRIVATE KEY-----`). */
  key: string;
}

/** What a certificate made by {@link createCert} is for and names. */
export interface CertSpec {
  /** The subject's common name, e.g. `"n1"` or `"billing-server"`. */
  commonName: string;
  /** DNS names it is valid for (e.g. `"localhost"`, `"n1.example.com"`). */
  dnsNames?: readonly string[];
  /** IP addresses it is valid for (e.g. `"127.0.0.1"`, `"10.0.0.5"`). */
  ips?: readonly string[];
  /**
   * The registry member it identifies: adds `URI:rafter://member/<id>`
   * (several, for tests of certificates that name more than one).
   */
  member?: string | readonly string[];
  /** Usable by a TLS server. @default true */
  server?: boolean;
  /** Usable by a TLS client (mutual TLS). @default true */
  client?: boolean;
  /** Days of validity from now. @default 365 */
  days?: number;
}

const ALGORITHM = {
  name: "ECDSA",
  namedCurve: "P-256",
  hash: "SHA-256",
} as const;

/**
 * The SAN URI naming registry member `id`: `rafter://member/<id>`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { memberUri } from "./pki.ts";
 * assert.equal(memberUri("n1"), "rafter://member/n1");
 * ```
 */
export function memberUri(id: string): string {
  return `rafter://member/${encodeURIComponent(id)}`;
}

/**
 * Makes a self-signed CA (basic constraints CA, key usage certSign and
 * cRLSign).
 *
 * @param commonName the CA's name. @default "Rafter CA"
 * @param days days of validity. @default 3650
 */
export async function createCa(
  commonName = "Rafter CA",
  days = 3650,
): Promise<CertifiedKey> {
  const keys = await crypto.subtle.generateKey(ALGORITHM, true, [
    "sign",
    "verify",
  ]);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${escapeDn(commonName)}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + days * 86_400_000),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString("pem"), key: await pemOfKey(keys.privateKey) };
}

/**
 * Makes a certificate signed by `ca` for `spec`.
 *
 * @throws {TypeError} when `spec` names nothing (no common name) or an IP
 * address is malformed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { X509Certificate } from "node:crypto";
 * import { createCa, createCert } from "./pki.ts";
 * const ca = await createCa("test CA", 1);
 * const n1 = await createCert(ca, { commonName: "n1", ips: ["127.0.0.1"], member: "n1", days: 1 });
 * const parsed = new X509Certificate(n1.cert);
 * assert.equal(parsed.verify(new X509Certificate(ca.cert).publicKey), true);
 * assert.match(parsed.subjectAltName ?? "", /URI:rafter:\/\/member\/n1/);
 * ```
 */
export async function createCert(
  ca: CertifiedKey,
  spec: CertSpec,
): Promise<CertifiedKey> {
  if (spec.commonName === "") {
    throw new TypeError("a certificate needs a common name");
  }
  const caCert = new x509.X509Certificate(ca.cert);
  const caKey = await importKey(ca.key);
  const keys = await crypto.subtle.generateKey(ALGORITHM, true, [
    "sign",
    "verify",
  ]);
  const names: x509.JsonGeneralName[] = [
    ...(spec.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(spec.ips ?? []).map((value) => ({ type: "ip" as const, value })),
    ...[spec.member ?? []].flat().map((id) => ({
      type: "url" as const,
      value: memberUri(id),
    })),
  ];
  const usages: string[] = [];
  if (spec.server !== false) usages.push(x509.ExtendedKeyUsage.serverAuth);
  if (spec.client !== false) usages.push(x509.ExtendedKeyUsage.clientAuth);
  const now = Date.now();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement,
      true,
    ),
    new x509.ExtendedKeyUsageExtension(usages, false),
    await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
  ];
  if (names.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension(names, false));
  }
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${escapeDn(spec.commonName)}`,
    issuer: caCert.subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + (spec.days ?? 365) * 86_400_000),
    signingKey: caKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALGORITHM,
    extensions,
  });
  return { cert: cert.toString("pem"), key: await pemOfKey(keys.privateKey) };
}

async function pemOfKey(key: CryptoKey): Promise<string> {
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(pkcs8, "PRIVATE KEY");
}

async function importKey(pem: string): Promise<CryptoKey> {
  const [der] = x509.PemConverter.decode(pem);
  if (der === undefined) throw new TypeError("no PEM private key found");
  return await crypto.subtle.importKey("pkcs8", der, ALGORITHM, false, [
    "sign",
  ]);
}

/** A random positive 128-bit serial number, hex. */
function serial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f;
  bytes[0] |= 0x01;
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Escapes the characters RFC 4514 reserves in a DN attribute value. */
function escapeDn(value: string): string {
  return value.replace(/[,+"\\<>;=]/g, (c) => `\\${c}`);
}
