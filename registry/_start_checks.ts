/**
 * What a registry node checks before it writes anything to disk: that its
 * ports are free, and whether its data folder exists already (so a failed
 * start can remove a folder it made).
 *
 * @module
 */

import { formatTcpUrl, type TcpAddress } from "../rpc/transport/transport.ts";

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
