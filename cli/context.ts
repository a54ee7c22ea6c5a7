/**
 * The shapes every command shares: the {@link Command} spec a command file
 * exports (its name, usage, help and options, and its run function) and
 * the {@link Context} its run function gets (the cluster stub, the global
 * options, where to print).
 *
 * @module
 */

import type { RafterClient } from "../stub/client.ts";
import type { ClusterTarget } from "./cluster_target.ts";
import type { Dialer } from "../rpc/transport/transport.ts";
import { denoDialer } from "../adapter/deno/tcp.ts";

/** Receives one line of output. */
export type Out = (line: string) => void;

/** Options every command takes. */
export interface Globals {
  /** The registry nodes' client URLs, normalized (`--registry`). */
  registry: string[];
  /** Where `registry` came from, for error messages. */
  registrySource: string;
  /** The registry token (`--token`, else `RAFTER_TOKEN`), or undefined. */
  token: string | undefined;
  /** Where `token` came from: `--token`, `RAFTER_TOKEN` or `none`. */
  tokenSource: string;
  /**
   * The token for the servers `rafter call` calls (`--server-token`, else
   * `RAFTER_SERVER_TOKEN`), or undefined.
   */
  serverToken: string | undefined;
  /**
   * TLS files for `tls://` URLs (`--cacert`, `--cert`, `--key`, else
   * `RAFTER_CA`, `RAFTER_CERT`, `RAFTER_KEY`), or undefined.
   */
  tls: { caFile?: string; certFile?: string; keyFile?: string } | undefined;
  /** `--json`: JSON on stdout, errors as one JSON line on stderr. */
  json: boolean;
  /** `--timeout-ms`: how long to wait for the registry. */
  timeoutMs: number;
}

/** What a command's `run` gets. */
export interface Context {
  /** A cluster stub of the registry nodes given. */
  client: RafterClient;
  /** The global options. */
  globals: Globals;
  /** Prints a line on stdout. */
  out: Out;
  /** Prints a line on stderr. */
  err: Out;
  /** Aborting it stops a `watch` (else SIGINT does). */
  signal: AbortSignal | undefined;
  /** The command's name, e.g. `lookup` or `lease grant`. */
  command: string;
  /**
   * The cluster the command's `NAME@CLUSTER` reaches, set by the command
   * (`lookup`, `call`) once the local registry told its siblings: the
   * hints of its errors then name that cluster's registry, not the local
   * one. Unset for a name without `@CLUSTER`.
   */
  cluster?: ClusterTarget | null;
}

/** How `node:util`'s parseArgs reads one option. */
export type OptionType = { type: "string" | "boolean"; multiple?: boolean };

/** The parsed options of a command line, by name. */
export type Values = Record<string, string | boolean | string[] | undefined>;

/** One command of the CLI: what its help says, and what it does. */
export interface Command {
  /** Its name, e.g. `lookup` or `lease grant`. */
  name: string;
  /** The arguments after the command's name, e.g. `NAME URL [options]`. */
  args: string;
  /** One line for the command list. */
  summary: string;
  /** What the command does, for its `--help`. */
  about: string;
  /** Its own options, beside the global ones. */
  options?: Record<string, OptionType>;
  /** Help lines of its own options. */
  optionHelp?: string;
  /** How many positionals it takes: [least, most]. */
  positionals: [number, number];
  /** Runs the command; its exit code. */
  run(
    context: Context,
    positionals: string[],
    values: Values,
  ): Promise<number>;
}

/**
 * A command of two words (`lease grant`): the group's verbs.
 */
export interface Group {
  /** The verbs built, in the order the help lists them. */
  verbs: string[];
}

/**
 * The dialer of every connection a command opens: Deno's, with the TLS
 * files of `--cacert`, `--cert`, `--key` when given (else undefined: the
 * default dialer, whose `tls://` trusts the system's roots).
 */
export function cliDialer(globals: Globals): Dialer | undefined {
  return globals.tls === undefined ? undefined : denoDialer(globals.tls);
}
