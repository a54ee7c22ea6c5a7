/**
 * PEM material from files or text, and `node:tls` peer certificates as
 * {@link PeerCertificate}s.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import { createPrivateKey, X509Certificate } from "node:crypto";
import {
  type PeerCertificate,
  splitAltNames,
} from "../../rpc/transport/transport.ts";

/**
 * Reads the PEM file `path` (`what` names it in errors: `"tls.certFile"`).
 *
 * @throws {TypeError} naming the option, the file and the cause when it
 * cannot be read or holds no PEM block.
 */
export function readPemFile(path: string, what: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new TypeError(
      `${what} "${path}" cannot be read (${
        (error as Error).message
      }): give the path of a PEM file this process may read`,
    );
  }
  if (!text.includes("-----BEGIN ")) {
    throw new TypeError(
      `${what} "${path}" holds no PEM block (-----BEGIN …-----): give a PEM file`,
    );
  }
  return text;
}

/**
 * The PEM of a file option, else of a text option, else undefined
 * (`prefix` names them in errors: `"tls"`).
 */
export function pemOf(
  file: string | undefined,
  text: string | undefined,
  name: "cert" | "key" | "ca",
  prefix: string,
): string | undefined {
  if (file !== undefined) return readPemFile(file, `${prefix}.${name}File`);
  return text;
}

/** The shape of `getPeerCertificate()` this module reads (Node and Deno's `node:tls`). */
export interface NodePeerCertificate {
  subject?: { CN?: string | string[] } | null;
  subjectaltname?: string;
  fingerprint256?: string;
  valid_to?: string;
  raw?: unknown;
}

/**
 * `certificate` (from `getPeerCertificate()`) as a {@link PeerCertificate},
 * or null when the peer sent none (Node gives `{}`, Deno `undefined`).
 */
export function peerCertificateOf(
  certificate: NodePeerCertificate | undefined | null,
): PeerCertificate | null {
  if (
    certificate === undefined || certificate === null ||
    certificate.fingerprint256 === undefined
  ) {
    return null;
  }
  const cn = certificate.subject?.CN;
  const validTo = new Date(certificate.valid_to ?? "");
  return {
    commonName: Array.isArray(cn) ? cn[0] ?? "" : cn ?? "",
    altNames: splitAltNames(certificate.subjectaltname),
    fingerprint256: certificate.fingerprint256,
    validTo: Number.isNaN(validTo.getTime()) ? "" : validTo.toISOString(),
  };
}

/**
 * Checks that `key` is the private key of the (first) certificate in
 * `cert`; `certName`/`keyName` say where they came from in errors.
 *
 * @throws {TypeError} when either is not valid PEM or they do not belong
 * together, saying what to give instead.
 */
export function checkKeyPair(
  cert: string,
  key: string,
  certName: string,
  keyName: string,
): void {
  let matches: boolean;
  try {
    matches = new X509Certificate(cert).checkPrivateKey(createPrivateKey(key));
  } catch (error) {
    throw new TypeError(
      `the certificate ${certName} and key ${keyName} cannot be used (${
        (error as Error).message
      }): give a PEM certificate and its PEM private key`,
    );
  }
  if (!matches) {
    throw new TypeError(
      `the certificate ${certName} and key ${keyName} cannot be used (key values mismatch): give the private key the certificate was issued for`,
    );
  }
}

/** How an error names a PEM option: the file, else the text option. */
export function pemName(
  file: string | undefined,
  name: "cert" | "key" | "ca",
  prefix: string,
): string {
  return file === undefined
    ? `(${prefix}.${name})`
    : `${prefix}.${name}File "${file}"`;
}
