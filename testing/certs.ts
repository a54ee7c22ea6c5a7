/**
 * Throw-away certificates for tests: a fresh CA per call, made at test time
 * with the generator `rafter cert` uses (`cli/pki.ts`); no key is ever
 * committed. Files are written 0600 into a folder the caller owns.
 *
 * @module
 */

import { join } from "node:path";
import { type CertifiedKey, createCa, createCert } from "../cli/pki.ts";

/** The files of one certified key, as written by {@link makeTestPki}. */
export interface CertFiles {
  /** Path of the PEM certificate. */
  certFile: string;
  /** Path of the PEM private key. */
  keyFile: string;
  /** The PEMs themselves. */
  pem: CertifiedKey;
}

/** A throw-away PKI: the CA's files and one certificate per name. */
export interface TestPki {
  /** Path of the CA certificate (what clients and peers trust). */
  caFile: string;
  /** The CA's certificate and key. */
  ca: CertifiedKey;
  /**
   * The certificate made for each entry of `names`: valid for
   * `localhost` and `127.0.0.1`, for server and client use; member
   * names also carry `URI:rafter://member/<id>`.
   */
  certs: Record<string, CertFiles>;
}

/**
 * Makes a CA named `caName` in `dir` and a certificate per name:
 * `members` identify registry members (SAN `rafter://member/<id>`),
 * `others` (servers, clients) do not. Valid for one day.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { withTempDir } from "./temp.ts";
 * import { makeTestPki } from "./certs.ts";
 * await withTempDir(async (dir) => {
 *   const pki = await makeTestPki(dir, { members: ["n1"], others: ["client"] });
 *   assert.match(await Deno.readTextFile(pki.caFile), /BEGIN CERTIFICATE/);
 *   assert.equal((await Deno.stat(pki.certs.n1.keyFile)).mode! & 0o777, 0o600);
 *   assert.deepEqual(Object.keys(pki.certs).sort(), ["client", "n1"]);
 * });
 * ```
 */
export async function makeTestPki(
  dir: string,
  names: {
    members?: readonly string[];
    others?: readonly string[];
    caName?: string;
  } = {},
): Promise<TestPki> {
  const ca = await createCa(names.caName ?? "Rafter test CA", 1);
  const caFile = join(dir, "ca.pem");
  await write(caFile, ca.cert);
  const certs: Record<string, CertFiles> = {};
  const all = [
    ...(names.members ?? []).map((name) => ({ name, member: true })),
    ...(names.others ?? []).map((name) => ({ name, member: false })),
  ];
  for (const { name, member } of all) {
    const pem = await createCert(ca, {
      commonName: name,
      dnsNames: ["localhost"],
      ips: ["127.0.0.1"],
      member: member ? name : undefined,
      days: 1,
    });
    const certFile = join(dir, `${name}.pem`);
    const keyFile = join(dir, `${name}.key`);
    await write(certFile, pem.cert);
    await write(keyFile, pem.key);
    certs[name] = { certFile, keyFile, pem };
  }
  return { caFile, ca, certs };
}

async function write(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(path, text, { mode: 0o600 });
  await Deno.chmod(path, 0o600);
}
