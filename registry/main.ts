/**
 * Runs one registry node.
 *
 * ```sh
 * # a 3-node cluster, one command per node
 * deno run -A registry/main.ts --id n1 --listen 127.0.0.1:7001 \
 *   --peers n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003 --data ./data/n1
 * # a single-node registry on 127.0.0.1:7001 with data in ./data/n1
 * deno run -A registry/main.ts
 * ```
 *
 * Stops cleanly on SIGINT or SIGTERM; its log stays in the data folder and
 * a restart with the same `--id` and `--data` resumes from it.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  formatTcpUrl,
  parseListenAddress,
  parseTcpUrl,
  type TcpAddress,
} from "../rpc/transport.ts";
import { type RegistryNode, startRegistryNode } from "./registry_node.ts";

const USAGE = `usage: deno run -A registry/main.ts [options]

  --id ID            this node's id (default n1; required with --peers)
  --listen HOST:PORT address to serve on (default: this node's --peers entry,
                     or 127.0.0.1:7001)
  --peers LIST       every voter as id=host:port, comma-separated, this node
                     included; omit for a single-node registry
  --data DIR         folder for this node's log (default ./data/ID)
  --tick-ms N        milliseconds per Raft tick (default 100)
  --election-ticks N election timeout in ticks (default 10, at least 2)
  --watch-stdin      exit when standard input closes (for supervisors and
                     tests, so a node never outlives its parent)
  --help             show this text`;

/** Parsed command line of a registry node. */
export interface RegistryArgs {
  id: string;
  listen: TcpAddress;
  peers: Record<string, string> | undefined;
  dataDir: string;
  tickMs: number;
  electionTicks: number;
  watchStdin: boolean;
}

/**
 * Parses the command line.
 *
 * @throws {Error} with a message that names the bad option and the expected
 * form.
 *
 * @example
 * ```ts
 * import { parseRegistryArgs } from "./main.ts";
 * const args = parseRegistryArgs(["--id", "n2", "--peers", "n1=127.0.0.1:7001,n2=127.0.0.1:7002"]);
 * console.log(args.listen.port, args.dataDir); // 7002 ./data/n2
 * ```
 */
export function parseRegistryArgs(argv: string[]): RegistryArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      id: { type: "string" },
      listen: { type: "string" },
      peers: { type: "string" },
      data: { type: "string" },
      "tick-ms": { type: "string" },
      "election-ticks": { type: "string" },
      "watch-stdin": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new HelpRequested();
  if (values.id !== undefined && values.id.trim() === "") {
    throw new Error("--id must not be empty");
  }
  let peers: Record<string, string> | undefined;
  if (values.peers !== undefined) {
    if (values.id === undefined) {
      throw new Error(
        "--id is required with --peers: which of the peers is this node?",
      );
    }
    peers = {};
    for (const item of values.peers.split(",").filter((s) => s.trim() !== "")) {
      const [id, address, extra] = item.trim().split("=");
      if (!id || !address || extra !== undefined) {
        throw new Error(
          `--peers item "${item}" is not of the form id=host:port`,
        );
      }
      if (id in peers) {
        throw new Error(`--peers lists the id "${id}" more than once`);
      }
      try {
        peers[id] = formatTcpUrl(parseTcpUrl(address));
      } catch (error) {
        throw new Error(`--peers item "${item}": ${(error as Error).message}`);
      }
    }
    if (!(values.id in peers)) {
      throw new Error(`--peers does not list this node's id "${values.id}"`);
    }
  }
  const id = values.id ?? "n1";
  const listen = values.listen !== undefined
    ? listenAddress(values.listen)
    : peers !== undefined
    ? parseTcpUrl(peers[id])
    : { hostname: "127.0.0.1", port: 7001 };
  return {
    id,
    listen,
    peers,
    dataDir: values.data ?? `./data/${id}`,
    tickMs: positiveInteger(values["tick-ms"], "--tick-ms", 100),
    // At least 2: a leader heartbeats every tick, more often than the
    // election timeout.
    electionTicks: positiveInteger(
      values["election-ticks"],
      "--election-ticks",
      10,
      2,
    ),
    watchStdin: values["watch-stdin"] ?? false,
  };
}

class HelpRequested extends Error {}

function listenAddress(text: string): TcpAddress {
  try {
    return parseListenAddress(text);
  } catch (error) {
    throw new Error(`--listen: ${(error as Error).message}`);
  }
}

function positiveInteger(
  text: string | undefined,
  option: string,
  fallback: number,
  min = 1,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isSafeInteger(value) || value < min) {
    throw new Error(
      min === 1
        ? `${option} must be a positive integer, got "${text}"`
        : `${option} must be an integer of at least ${min}, got "${text}"`,
    );
  }
  return value;
}

async function main(): Promise<number> {
  let args: RegistryArgs;
  try {
    args = parseRegistryArgs(Deno.args);
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(USAGE);
      return 0;
    }
    console.error(`registry: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const log = (line: string) => console.log(line);
  let fatal: unknown = null;
  const stopped = Promise.withResolvers<void>();
  let node: RegistryNode;
  try {
    node = await startRegistryNode({
      id: args.id,
      listen: args.listen,
      peers: args.peers,
      dataDir: args.dataDir,
      tickMs: args.tickMs,
      electionTicks: args.electionTicks,
      log,
      onFatal: (error) => {
        fatal = error;
        stopped.resolve();
      },
    });
  } catch (error) {
    const hint = error instanceof Deno.errors.AddrInUse
      ? "; another process (a registry node already running?) listens there: stop it or pass another --listen"
      : "";
    console.error(
      `registry ${args.id}: cannot start on ${
        formatTcpUrl(args.listen)
      } with data ${args.dataDir}: ${(error as Error).message}${hint}`,
    );
    return 1;
  }
  const cluster = Object.keys(args.peers ?? { [args.id]: "" }).join(",");
  log(
    `registry ${args.id} listening on ${node.url} (cluster ${cluster}; data ${args.dataDir})`,
  );
  const stop = () => stopped.resolve();
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  if (args.watchStdin) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
      stop();
    })();
  }
  await stopped.promise;
  await node.stop({ graceMs: 1000 });
  if (fatal !== null) {
    console.error(`registry ${args.id}: storage failed, stopped:`, fatal);
    return 1;
  }
  log(`registry ${args.id} stopped`);
  return 0;
}

if (import.meta.main) {
  Deno.exit(await main());
}
