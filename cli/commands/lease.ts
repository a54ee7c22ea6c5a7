/**
 * `rafter lease grant|revoke|ttl|ls|keepalive`: grants a lease (bindings
 * on it go away when it expires), revokes one with its bindings, shows the
 * time left on one or on every lease, and renews one once.
 *
 * @module
 */

import type { LeaseInfo } from "../../protocol/registry.ts";
import { integer } from "../args.ts";
import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter lease grant`. */
export const leaseGrantCommand: Command = {
  name: "lease grant",
  args: "TTL_MS",
  summary: "grant a lease of TTL_MS ms",
  about: `Grants a lease that expires TTL_MS ms after its last keep-alive
(at least 1.5 × the registry's election timeout).`,
  options: { id: { type: "string" } },
  optionHelp: "  --id ID           the lease id (default: a random one)",
  positionals: [1, 1],
  run: (c, [ttl], v) =>
    leaseGrant(c, integer(ttl, "TTL_MS", 1), v.id as string | undefined),
};

/** The spec of `rafter lease revoke`. */
export const leaseRevokeCommand: Command = {
  name: "lease revoke",
  args: "ID",
  summary: "revoke a lease and its bindings",
  about:
    "Revokes lease ID and removes its bindings. Exit 4 for an unknown lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseRevoke(c, id),
};

/** The spec of `rafter lease ttl`. */
export const leaseTtlCommand: Command = {
  name: "lease ttl",
  args: "ID",
  summary: "time left on a lease; its bindings",
  about:
    "Time left on lease ID, and its bindings. Exit 4 for an unknown lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseTtl(c, id),
};

/** The spec of `rafter lease ls`. */
export const leaseListCommand: Command = {
  name: "lease ls",
  args: "",
  summary: "every lease",
  about: "Lists every lease: its TTL, the time left, and its bindings.",
  positionals: [0, 0],
  run: (c) => leaseList(c),
};

/** The spec of `rafter lease keepalive`. */
export const leaseKeepAliveCommand: Command = {
  name: "lease keepalive",
  args: "ID",
  summary: "renew a lease once",
  about: "Renews lease ID once. Exit 4 for an unknown (or expired) lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseKeepAlive(c, id),
};

/** The verbs of `rafter lease`, in the order the help lists them. */
export const LEASE_COMMANDS: readonly Command[] = [
  leaseGrantCommand,
  leaseRevokeCommand,
  leaseTtlCommand,
  leaseListCommand,
  leaseKeepAliveCommand,
];

/** Runs `rafter lease grant`. */
export async function leaseGrant(
  context: Context,
  ttlMs: number,
  id: string | undefined,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.grantLease(ttlMs, { id });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(
      `lease ${result.id} granted, ttl ${result.ttlMs} ms (bind with --lease ${result.id}; renew with rafter lease keepalive ${result.id})`,
    );
  }
  return EXIT.ok;
}

/** Runs `rafter lease revoke`. */
export async function leaseRevoke(
  context: Context,
  id: string,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.revokeLease(id);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(
      `lease ${id} revoked, ${result.removed} binding${
        result.removed === 1 ? "" : "s"
      } removed (revision ${result.revision})`,
    );
  }
  return EXIT.ok;
}

/** Runs `rafter lease keepalive`. */
export async function leaseKeepAlive(
  context: Context,
  id: string,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.keepAlive(id);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else out(`lease ${result.id} renewed, ttl ${result.ttlMs} ms`);
  return EXIT.ok;
}

/** Runs `rafter lease ttl`. */
export async function leaseTtl(context: Context, id: string): Promise<number> {
  const { client, globals, out } = context;
  const info = await client.registry.timeToLive(id);
  if (globals.json) out(JSON.stringify(info, null, 2));
  else out(leaseTable([info]));
  return EXIT.ok;
}

/** Runs `rafter lease ls`. */
export async function leaseList(context: Context): Promise<number> {
  const { client, globals, out } = context;
  const { leases } = await client.registry.leases();
  if (globals.json) out(JSON.stringify({ leases }, null, 2));
  else out(leaseTable(leases));
  return EXIT.ok;
}

function leaseTable(leases: readonly LeaseInfo[]): string {
  return formatTable(
    ["LEASE", "TTL_MS", "REMAINING_MS", "BINDINGS"],
    leases.map((l) => [
      l.id,
      String(l.ttlMs),
      String(l.remainingMs),
      l.bindings.map((b) => `${b.name}/${b.id}`).join(", ") || "-",
    ]),
  );
}
