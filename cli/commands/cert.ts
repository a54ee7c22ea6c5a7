/**
 * `rafter cert ca|member|server|client`: a cluster CA and the certificates
 * it signs (ECDSA P-256, `cli/pki.ts`), written as PEM files: `NAME.pem`
 * (the certificate, mode 0644) and `NAME.key` (the private key, mode
 * 0600). Existing files are never overwritten without `--force`. Nothing
 * here talks to the registry.
 *
 * @module
 */

import { integer } from "../args.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT, UsageError } from "../errors.ts";
import type { CertifiedKey, CertSpec } from "../pki.ts";

const CERT_OPTIONS = {
  out: { type: "string" },
  days: { type: "string" },
  force: { type: "boolean" },
} as const;

const SIGNED_OPTIONS = {
  ...CERT_OPTIONS,
  ca: { type: "string" },
  host: { type: "string", multiple: true },
} as const;

const OUT_HELP = `  --out DIR         where to write the files (default: .)
  --days N          days of validity (default: 365; the CA: 3650)
  --force           overwrite files that exist`;

const SIGNED_HELP =
  `  --ca DIR          the CA's directory, with ca.pem and ca.key (required)
  --host HOST       a DNS name or IP address it is valid for (repeat)
${OUT_HELP}`;

/** The spec of `rafter cert ca`. */
export const certCaCommand: Command = {
  name: "cert ca",
  args: "",
  summary: "make a cluster CA (ca.pem, ca.key)",
  about: `Makes a self-signed certificate authority for a cluster and writes
DIR/ca.pem (give it to every member, server and client: --tls-ca) and
DIR/ca.key (mode 0600: keep it offline; whoever holds it can mint
members). --name sets its common name (default "Rafter CA").`,
  options: { ...CERT_OPTIONS, name: { type: "string" } },
  optionHelp:
    `  --name CN         the CA's common name (default: Rafter CA)\n${OUT_HELP}`,
  positionals: [0, 0],
  run: (c, _, v) => certCa(c, v),
};

/** The spec of `rafter cert member`. */
export const certMemberCommand: Command = {
  name: "cert member",
  args: "ID",
  summary: "certificate of registry member ID",
  about: `Makes the certificate of registry member ID, signed by the CA in --ca,
for the hosts given with --host (its addresses and names, as peers and
clients dial them), and writes DIR/ID.pem and DIR/ID.key. It names the
member with the SAN URI rafter://member/ID: peers accept a peer
connection only for the member its certificate names. Usable as a TLS
server and client certificate.`,
  options: SIGNED_OPTIONS,
  optionHelp: SIGNED_HELP,
  positionals: [1, 1],
  run: (c, [id], v) => certSigned(c, "member", id, v),
};

/** The spec of `rafter cert server`. */
export const certServerCommand: Command = {
  name: "cert server",
  args: "NAME",
  summary: "certificate of a server NAME",
  about:
    `Makes a TLS server certificate (common name NAME) for a service's server,
signed by the CA in --ca, valid for the hosts given with --host, and
writes DIR/NAME.pem and DIR/NAME.key.`,
  options: SIGNED_OPTIONS,
  optionHelp: SIGNED_HELP,
  positionals: [1, 1],
  run: (c, [name], v) => certSigned(c, "server", name, v),
};

/** The spec of `rafter cert client`. */
export const certClientCommand: Command = {
  name: "cert client",
  args: "NAME",
  summary: "client certificate NAME (mutual TLS)",
  about:
    `Makes a TLS client certificate (common name NAME) for mutual TLS, signed
by the CA in --ca, and writes DIR/NAME.pem and DIR/NAME.key.`,
  options: SIGNED_OPTIONS,
  optionHelp: SIGNED_HELP,
  positionals: [1, 1],
  run: (c, [name], v) => certSigned(c, "client", name, v),
};

/** The verbs of `rafter cert`, in the order the help lists them. */
export const CERT_COMMANDS: readonly Command[] = [
  certCaCommand,
  certMemberCommand,
  certServerCommand,
  certClientCommand,
];

/** Runs `rafter cert ca`. */
export async function certCa(
  context: Context,
  values: Values,
): Promise<number> {
  const { createCa } = await import("../pki.ts");
  const days = values.days === undefined
    ? 3650
    : integer(values.days as string, "--days", 1);
  const name = (values.name as string | undefined) ?? "Rafter CA";
  if (name.trim() === "") throw new UsageError("--name must not be empty");
  const dir = outDir(values);
  const files = await claim(dir, "ca", values.force === true);
  return await write(context, files, await createCa(name, days), {
    what: `CA "${name}"`,
  });
}

/** Runs `rafter cert member|server|client`. */
export async function certSigned(
  context: Context,
  kind: "member" | "server" | "client",
  name: string,
  values: Values,
): Promise<number> {
  checkFileName(name, kind === "member" ? "ID" : "NAME");
  const caDir = values.ca as string | undefined;
  if (caDir === undefined) {
    throw new UsageError(
      "--ca DIR is required: the directory with ca.pem and ca.key (rafter cert ca --out DIR makes them)",
    );
  }
  const hosts = (values.host as string[] | undefined) ?? [];
  const spec: CertSpec = {
    commonName: name,
    ...splitHosts(hosts),
    member: kind === "member" ? name : undefined,
    server: kind !== "client",
    client: kind !== "server",
    days: values.days === undefined
      ? 365
      : integer(values.days as string, "--days", 1),
  };
  const ca = await readCa(caDir);
  const { createCert } = await import("../pki.ts");
  const dir = outDir(values);
  const files = await claim(dir, name, values.force === true);
  return await write(context, files, await createCert(ca, spec), {
    what: `${kind} certificate "${name}"${
      hosts.length === 0 ? "" : ` for ${hosts.join(", ")}`
    }`,
  });
}

function outDir(values: Values): string {
  const dir = (values.out as string | undefined) ?? ".";
  if (dir === "") throw new UsageError("--out must name a directory");
  return dir;
}

/** A name that is safe as a file name (no path, no dot files). */
function checkFileName(name: string, what: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) {
    throw new UsageError(
      `${what} must be 1..64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, not ${
        JSON.stringify(name)
      }`,
    );
  }
}

/** `--host` values as IP addresses and DNS names. */
function splitHosts(hosts: string[]): { ips: string[]; dnsNames: string[] } {
  const ips: string[] = [];
  const dnsNames: string[] = [];
  for (const host of hosts) {
    if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.includes(":")) {
      ips.push(host.replace(/^\[(.*)\]$/, "$1"));
    } else if (
      /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$/
        .test(host)
    ) {
      dnsNames.push(host.toLowerCase());
    } else {
      throw new UsageError(
        `--host must be a DNS name or an IP address, not ${
          JSON.stringify(host)
        }`,
      );
    }
  }
  return { ips, dnsNames };
}

async function readCa(dir: string): Promise<CertifiedKey> {
  try {
    return {
      cert: await Deno.readTextFile(`${dir}/ca.pem`),
      key: await Deno.readTextFile(`${dir}/ca.key`),
    };
  } catch (error) {
    throw new Error(
      `cannot read the CA in ${dir} (ca.pem and ca.key): ${
        (error as Error).message
      }; make one with rafter cert ca --out ${dir}`,
    );
  }
}

/** The two files to write, after checking that none exists (unless `force`). */
async function claim(
  dir: string,
  name: string,
  force: boolean,
): Promise<{ cert: string; key: string; force: boolean }> {
  const files = { cert: `${dir}/${name}.pem`, key: `${dir}/${name}.key` };
  for (const path of [files.cert, files.key]) {
    const info = await statOf(path);
    if (info === null) continue;
    if (!force) {
      throw new Error(
        `${path} exists: not overwritten (--force overwrites it)`,
      );
    }
    if (!info.isFile) {
      throw new Error(`${path} is not a plain file (a link?): not overwritten`);
    }
  }
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  return { ...files, force };
}

async function statOf(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** Writes the key (0600) and the certificate (0644); prints what it wrote. */
async function write(
  context: Context,
  files: { cert: string; key: string; force: boolean },
  made: CertifiedKey,
  { what }: { what: string },
): Promise<number> {
  const { globals, out } = context;
  // createNew: a file that appeared since the check is not overwritten.
  await Deno.writeTextFile(files.key, made.key, {
    mode: 0o600,
    createNew: !files.force,
  });
  // An overwritten key file keeps its old mode: set it.
  await Deno.chmod(files.key, 0o600);
  await Deno.writeTextFile(files.cert, made.cert, {
    mode: 0o644,
    createNew: !files.force,
  });
  if (globals.json) {
    out(JSON.stringify({ cert: files.cert, key: files.key }, null, 2));
  } else {
    out(
      `wrote ${what}: ${files.cert} (certificate), ${files.key} (private key, mode 0600)`,
    );
  }
  return EXIT.ok;
}
