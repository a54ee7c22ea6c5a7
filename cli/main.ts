/**
 * `rafter`, the command line of Rafter (`deno task rafter …`, or
 * `deno run -A cli/main.ts …`): run a registry node, look at the registry,
 * change it, and call services through a cluster stub, as etcdctl and
 * grpcurl do.
 *
 * Tables for people by default; `--json` prints JSON on stdout (one
 * document, or one line per event for `watch`) and errors as one JSON line
 * on stderr. The registry nodes come from `--registry URL,URL`, else the
 * `RAFTER_REGISTRY` environment variable, else the `"registry"` of the
 * `--config` file, else `tcp://127.0.0.1:7001`: every option is read from
 * the command line, else its variable (`RAFTER_<OPTION>`, or
 * `RAFTER_<COMMAND>_<OPTION>` for a command's own), else (a global option)
 * the config file, else its default.
 *
 * Access control: for a registry with auth on, every command presents the
 * token from `--token`, else `RAFTER_TOKEN` (prefer the variable: command
 * lines are visible to other users); `rafter call` presents the servers'
 * own token from `--server-token`, else `RAFTER_SERVER_TOKEN`, to servers
 * that check tokens. `rafter auth enable|disable|status`
 * turns it on and off, `rafter token create NAME --perm read:PREFIX
 * --perm bind:PREFIX` makes a token (printed once, on stdout alone),
 * `rafter token list` and `rafter token revoke TOKEN_ID` manage them.
 * `rafter snapshot save FILE` backs the registry up (admin),
 * `rafter snapshot status FILE` checks a backup, and `rafter snapshot
 * restore FILE --data DIR --id ID --peers LIST` seeds a member of a new
 * cluster from one.
 * `rafter cert ca|member|server|client` makes the cluster's CA and the
 * certificates it signs, as PEM files (keys mode 0600, nothing
 * overwritten without `--force`).
 *
 * Exit codes ({@link EXIT}): 0 done; 1 the registry or the service
 * answered with an error (for `status`: the cluster is degraded); 2 bad
 * usage; 3 no registry node (or no server) could be reached, or none
 * answered in time; 4 not found (a lookup with no endpoint, an unknown
 * lease or binding, nothing bound under the name called); 5 no valid
 * token (none given to a registry with auth on, or one refused); 6 the
 * token lacks the permission (the message names it); 130 interrupted.
 *
 * @module
 */

import { connect } from "../stub/client.ts";
import { cliDialer } from "./context.ts";
import {
  type CommandLine,
  parseCommandLine,
  relabel,
  splitLeadingGlobals,
} from "./args.ts";
import type { Command, Context, Group, Out } from "./context.ts";
import { EXIT, report, UsageError, usageFailure } from "./errors.ts";
import { versionLine } from "../internal/version.ts";
import { commandHelp, groupHelp, shortUsage, usage, verbList } from "./help.ts";
import { COMMAND_LIST } from "./command_list.ts";
import { registry, registryCommand } from "./commands/registry.ts";
import { LEASE_COMMANDS } from "./commands/lease.ts";
import { LEADER_COMMANDS } from "./commands/leader.ts";
import { MEMBER_COMMANDS } from "./commands/member.ts";
import { SNAPSHOT_COMMANDS } from "./commands/snapshot.ts";
import { AUTH_COMMANDS } from "./commands/auth.ts";
import { TOKEN_COMMANDS } from "./commands/token.ts";
import { CERT_COMMANDS } from "./commands/cert.ts";

export { EXIT } from "./errors.ts";
export { DEFAULT_TIMEOUT_MS } from "./args.ts";

/** Where {@link runCli} prints, and what stops a `watch`. */
export interface CliIo {
  /** Receives each line meant for stdout. @default console.log */
  out?: (line: string) => void;
  /** Receives each line meant for stderr. @default console.error */
  err?: (line: string) => void;
  /**
   * Aborting it stops a `watch` as Ctrl-C does (exit 130). Without it,
   * `watch` listens for SIGINT itself.
   */
  signal?: AbortSignal;
  /**
   * Reads an environment variable: an option's `RAFTER_*` variable
   * (`RAFTER_REGISTRY`, `RAFTER_TOKEN`, `RAFTER_SERVER_TOKEN`, ...) and
   * `RAFTER_CONFIG`. @default Deno.env.get
   */
  env?: (name: string) => string | undefined;
}

const COMMANDS: Record<string, Command> = Object.fromEntries(
  COMMAND_LIST.map((command) => [command.name, command]),
);

/** The verbs of a group's commands (`lease grant` → `grant`). */
function verbsOf(commands: readonly Command[]): Group {
  return { verbs: commands.map((command) => command.name.split(" ")[1]) };
}

/** Commands of two words (`lease grant`), by their first word. */
const GROUPS: Record<string, Group> = {
  lease: verbsOf(LEASE_COMMANDS),
  leader: verbsOf(LEADER_COMMANDS),
  member: verbsOf(MEMBER_COMMANDS),
  snapshot: verbsOf(SNAPSHOT_COMMANDS),
  auth: verbsOf(AUTH_COMMANDS),
  token: verbsOf(TOKEN_COMMANDS),
  cert: verbsOf(CERT_COMMANDS),
};

const USAGE = usage([registryCommand], COMMAND_LIST);

/** Printed after an unknown command: the usage line, and where the rest is. */
const SHORT_USAGE = `${
  USAGE.split("\n")[0]
}\n(rafter --help lists the commands)`;

/** The names of every command's own options, for a misplaced one. */
const COMMAND_OPTIONS: ReadonlySet<string> = new Set(
  COMMAND_LIST.flatMap((command) => Object.keys(command.options ?? {})),
);

/**
 * Runs one command line and returns its exit code ({@link EXIT}).
 *
 * @param argv the arguments after the program name, e.g.
 * `["lookup", "hello?version=1", "--json"]`.
 * @param io where to print, and what stops a `watch` (default: the
 * console and SIGINT).
 * @returns the exit code; for `registry`, that of `runRegistry`
 * (registry/main.ts) once the node stops.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { EXIT, runCli } from "./main.ts";
 * // No registry listens on port 1: the command says so and exits 3.
 * const err: string[] = [];
 * const code = await runCli(["ls", "--json", "--timeout-ms", "2000"], {
 *   env: (name) => name === "RAFTER_REGISTRY" ? "tcp://127.0.0.1:1" : undefined,
 *   out: () => {},
 *   err: (line) => err.push(line),
 * });
 * assert.equal(code, EXIT.unavailable);
 * assert.deepEqual(JSON.parse(err[0]).error.data.tried, ["tcp://127.0.0.1:1"]);
 * ```
 */
export async function runCli(argv: string[], io: CliIo = {}): Promise<number> {
  const out = io.out ?? ((line: string) => console.log(line));
  const err = io.err ?? ((line: string) => console.error(line));
  const env = io.env ?? ((name: string) => Deno.env.get(name));
  if (argv.length === 0) {
    err(USAGE);
    return EXIT.usage;
  }
  // Global options may come before the command's name, as after it.
  let leading: string[];
  let words: string[];
  try {
    ({ leading, rest: words } = splitLeadingGlobals(argv, COMMAND_OPTIONS));
  } catch (error) {
    if (error instanceof UsageError) {
      return usageFailure(error.message, SHORT_USAGE, argv, err);
    }
    throw error;
  }
  const [first, ...rest] = words;
  if (first === undefined) {
    return usageFailure(
      "global options but no command",
      SHORT_USAGE,
      argv,
      err,
    );
  }
  if (first === "--help" || first === "-h" || first === "help") {
    out(USAGE);
    return EXIT.ok;
  }
  if (first === "--version" || first === "-V" || first === "version") {
    out(versionLine());
    return EXIT.ok;
  }
  if (first === registryCommand.name) {
    return await registry([...leading, ...rest], env);
  }
  const found = findCommand(words, argv, out, err);
  if (typeof found === "number") return found;
  const command = found.command;
  // Those before the name first: one given again after it wins.
  const args = [...leading, ...found.args];
  if (args.includes("--help") || args.includes("-h")) {
    out(commandHelp(command));
    return EXIT.ok;
  }
  if (args.includes("--version") || args.includes("-V")) {
    out(versionLine());
    return EXIT.ok;
  }
  let line: CommandLine;
  try {
    line = parseCommandLine(command, args, env);
  } catch (error) {
    if (error instanceof UsageError) {
      return commandUsageFailure(error, command, argv, err);
    }
    throw error;
  }
  return await execute(command, line, io.signal, argv, out, err);
}

/**
 * The command `argv` names (one word, or a group's two) and the words
 * after its name; or, when it names none, the exit code of saying so.
 */
function findCommand(
  words: string[],
  argv: string[],
  out: Out,
  err: Out,
): { command: Command; args: string[] } | number {
  const [first, ...rest] = words;
  let name = first;
  let args = rest;
  const group = Object.hasOwn(GROUPS, first) ? GROUPS[first] : undefined;
  if (group !== undefined) {
    const help = groupHelp(first, group, COMMANDS);
    const verb = rest[0];
    if (verb === undefined || verb.startsWith("-")) {
      if (rest.includes("--help") || rest.includes("-h")) {
        out(help);
        return EXIT.ok;
      }
      return usageFailure(
        `${first} needs a verb: ${verbList(group.verbs)}`,
        help,
        argv,
        err,
      );
    }
    if (!group.verbs.includes(verb)) {
      return usageFailure(
        `unknown ${first} verb ${JSON.stringify(verb)}: use ${
          verbList(group.verbs)
        }`,
        help,
        argv,
        err,
      );
    }
    name = `${first} ${verb}`;
    args = rest.slice(1);
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    return usageFailure(
      `unknown command ${JSON.stringify(first)}`,
      SHORT_USAGE,
      argv,
      err,
    );
  }
  return { command, args };
}

/** Runs `command` on a cluster stub of the registry; its exit code. */
async function execute(
  command: Command,
  { globals, positionals, values, sources }: CommandLine,
  signal: AbortSignal | undefined,
  argv: string[],
  out: Out,
  err: Out,
): Promise<number> {
  const client = connect(globals.registry, {
    dialer: cliDialer(globals),
    token: globals.token,
    serverToken: globals.serverToken,
    deadlineMs: globals.timeoutMs,
    attemptTimeoutMs: Math.min(globals.timeoutMs, 4_000),
    connectTimeoutMs: Math.min(globals.timeoutMs, 2_000),
    // One-shot commands need no watch to keep a cluster map current.
    watch: false,
  });
  const context: Context = {
    client,
    globals,
    out,
    err,
    signal,
    command: command.name,
  };
  try {
    return await command.run(context, positionals, values);
  } catch (error) {
    if (error instanceof UsageError) {
      // A value from a variable is told by the variable, not its flag.
      return commandUsageFailure(
        new UsageError(relabel(error.message, sources)),
        command,
        argv,
        err,
      );
    }
    return report(error, context);
  } finally {
    client.close();
  }
}

function commandUsageFailure(
  error: UsageError,
  command: Command,
  argv: string[],
  err: Out,
): number {
  return usageFailure(
    error.message,
    shortUsage(command),
    argv,
    err,
    command.name,
  );
}

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
