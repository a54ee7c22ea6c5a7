/**
 * What a registry node checks before it writes anything to disk: that its
 * ports are free, whether its data folder exists already (so a failed
 * start can remove a folder it made), and that its peer certificate names
 * it.
 *
 * @module
 */

import { X509Certificate } from "node:crypto";
import {
  formatTcpUrl,
  splitAltNames,
  type TcpAddress,
} from "../rpc/transport/transport.ts";
import { MEMBER_URI_PREFIX, memberIdOf } from "../raft/peer_auth.ts";

/** Whether anything exists at `path`. */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * Binds each address and lets it go again, so a port another process holds
 * is reported before anything is written to disk. Port 0 (any free port)
 * is not checked.
 *
 * @throws {Deno.errors.AddrInUse} naming the port (see {@link listening}).
 */
export function portsFree(
  addresses: readonly [which: string, address: TcpAddress][],
): void {
  for (const [which, address] of addresses) {
    if (address.port === 0) continue;
    listening(which, address, () =>
      Deno.listen({
        hostname: address.hostname,
        port: address.port,
        transport: "tcp",
      })).close();
  }
}

/** Runs `start`, naming the port (`which`: client or peer) in an "address in use" error. */
export function listening<T>(
  which: string,
  address: TcpAddress,
  start: () => T,
): T {
  try {
    return start();
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) {
      throw new Deno.errors.AddrInUse(
        `the ${which} port ${
          formatTcpUrl(address)
        } is in use (${error.message})`,
      );
    }
    throw error;
  }
}

/**
 * Why the peer certificate in `certFile` cannot be member `id`'s, else
 * undefined: it names another member (SAN `URI:rafter://member/<other>`),
 * none, or several. The other members would refuse every connection of
 * a node started with it, so it is refused at start. A file that cannot
 * be read or parsed is left to the TLS start-up, which says why.
 */
export function peerCertificateMismatch(
  certFile: string,
  id: string,
): string | undefined {
  let altNames: string[];
  try {
    const text = Deno.readTextFileSync(certFile);
    altNames = splitAltNames(new X509Certificate(text).subjectAltName);
  } catch {
    return undefined;
  }
  const named = memberIdOf({
    commonName: "",
    altNames,
    fingerprint256: "",
    validTo: "",
  });
  if (named === id) return undefined;
  const fix =
    `give this node its own member certificate (rafter cert member ${id} --ca DIR --host HOST) with --peer-tls-cert and --peer-tls-key`;
  const members = altNames.filter((name) => name.startsWith(MEMBER_URI_PREFIX));
  if (named !== null) {
    return `--peer-tls-cert ${certFile} is member ${
      JSON.stringify(named)
    }'s certificate (${MEMBER_URI_PREFIX}${
      encodeURIComponent(named)
    }), not this node's (--id ${id}): the other members would refuse it; ${fix}`;
  }
  return `--peer-tls-cert ${certFile} names ${
    members.length === 0
      ? `no member (no ${MEMBER_URI_PREFIX}<id> SAN)`
      : `no single member (${members.join(", ")})`
  }, so it is not this node's (--id ${id}): the other members would refuse it; ${fix}`;
}
