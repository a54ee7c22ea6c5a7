/**
 * What the replica programs (the counter's and the whiteboard's) read
 * from their command line and environment alike.
 *
 * @module
 */

import { DEFAULT_REGISTRY_URL } from "../../mod.ts";

/** The common settings of a replica program. */
export interface ReplicaArgs {
  id: string;
  dataDir: string;
  /** Replica id → `tcp://host:port` of its peer port. */
  peers: Record<string, string>;
  /** The replicas' shared secret, from `$RAFTER_SERVICE_SECRET`. */
  secret: string;
  /** The registry's URLs. */
  registry: string[];
  /**
   * `--tls-cert`, `--tls-key`, `--tls-ca`: this replica's certificate
   * (naming it: `rafter cert member <id>`) and the replicas' CA, for TLS on
   * its client port and mutual TLS between the replicas; undefined without.
   */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

/** The TLS options of a replica program, for `parseArgs`. */
export const TLS_OPTIONS = {
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-ca": { type: "string" },
} as const;

/** The options every replica program takes, for `parseArgs`. */
export const REPLICA_OPTIONS = {
  id: { type: "string" },
  peers: { type: "string" },
  data: { type: "string" },
  join: { type: "string" },
  port: { type: "string", default: "0" },
  registry: { type: "string" },
  "tick-ms": { type: "string", default: "100" },
  ...TLS_OPTIONS,
  "watch-stdin": { type: "boolean", default: false },
  help: { type: "boolean", default: false },
} as const;

/**
 * What a replica program does with a bad option or setting: prints what
 * was wrong and `usage`, and exits 2.
 */
export function failWith(usage: string): (message: string) => never {
  return (message) => {
    console.error(`error: ${message}\n\n${usage}`);
    Deno.exit(2);
  };
}

/** The usage lines of {@link TLS_OPTIONS}. */
export const TLS_USAGE =
  `  --tls-cert FILE  this replica's certificate (rafter cert member ID), with
  --tls-key FILE   its key, and
  --tls-ca FILE    the replicas' CA: TLS on the client port, mutual TLS
                   between the replicas (all three, or none)`;

/**
 * Reads `--id`, `--data`, `--peers` (`id=host:port,…`), `--registry` (else
 * `$RAFTER_REGISTRY`, else the default) and `$RAFTER_SERVICE_SECRET`;
 * `fail` is told what is missing or wrong.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { replicaArgs } from "./args.ts";
 * Deno.env.set("RAFTER_SERVICE_SECRET", "x".repeat(32));
 * const args = replicaArgs(
 *   { id: "c1", data: "d1", peers: "c1=127.0.0.1:7301,c2=tcp://127.0.0.1:7302" },
 *   (m) => { throw new Error(m); },
 * );
 * assert.deepEqual(args.peers, { c1: "tcp://127.0.0.1:7301", c2: "tcp://127.0.0.1:7302" });
 * assert.throws(() => replicaArgs({ id: "c1", data: "d", peers: "c1" }, (m) => { throw new Error(m); }), /is not id=host:port/);
 * ```
 */
export function replicaArgs(
  values: {
    id?: string;
    data?: string;
    peers?: string;
    registry?: string;
    "tls-cert"?: string;
    "tls-key"?: string;
    "tls-ca"?: string;
  },
  fail: (message: string) => never,
): ReplicaArgs {
  const id = values.id ?? fail("--id is required");
  const dataDir = values.data ?? fail("--data is required");
  const peers: Record<string, string> = {};
  for (const item of (values.peers ?? fail("--peers is required")).split(",")) {
    const [peer, address] = item.split("=");
    const url = address?.startsWith("tcp://") ? address : `tcp://${address}`;
    if (!peer || !address || !/^tcp:\/\/[^/:]+:\d+$/.test(url)) {
      fail(`--peers: ${JSON.stringify(item)} is not id=host:port`);
    }
    peers[peer] = url;
  }
  const secret = Deno.env.get("RAFTER_SERVICE_SECRET") ??
    fail(
      "set RAFTER_SERVICE_SECRET (e.g. $(openssl rand -hex 32)), the same for every replica",
    );
  const registry = (values.registry ?? Deno.env.get("RAFTER_REGISTRY") ??
    DEFAULT_REGISTRY_URL).split(",");
  const tlsFiles = [values["tls-cert"], values["tls-key"], values["tls-ca"]];
  const given = tlsFiles.filter((f) => f !== undefined).length;
  if (given !== 0 && given !== 3) {
    fail("give --tls-cert, --tls-key and --tls-ca together (or none)");
  }
  const tls = given === 3
    ? {
      certFile: values["tls-cert"]!,
      keyFile: values["tls-key"]!,
      caFile: values["tls-ca"]!,
    }
    : undefined;
  return { id, dataDir, peers, secret, registry, tls };
}

/** The `startReplica` TLS options of {@link ReplicaArgs.tls}. */
export function replicaTls(tls: ReplicaArgs["tls"]): {
  tls?: { certFile: string; keyFile: string };
  peerTls?: { certFile: string; keyFile: string; caFile: string };
  tlsCaFile?: string;
} {
  if (tls === undefined) return {};
  return {
    tls: { certFile: tls.certFile, keyFile: tls.keyFile },
    peerTls: tls,
    tlsCaFile: tls.caFile,
  };
}
