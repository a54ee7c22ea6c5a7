/**
 * The CLI's help texts: the command list (`rafter --help`), one command's
 * help (`rafter lookup --help`), a group's verbs (`rafter lease --help`),
 * and the usage line printed with a bad command line.
 *
 * @module
 */

import { DEFAULT_REGISTRY_URL } from "../protocol/registry.ts";
import { DEFAULT_TIMEOUT_MS } from "./args.ts";
import type { Command, Group } from "./context.ts";

/** Help of the options every command takes. */
export const GLOBAL_HELP = `global options:
  --registry URLS   registry client ports, comma-separated (default
                    $RAFTER_REGISTRY, else ${DEFAULT_REGISTRY_URL})
  --token TOKEN     the registry token, for a registry with access control
                    (default $RAFTER_TOKEN; prefer it: the environment is
                    not shown to other users as arguments are)
  --cacert FILE     CA certificate that signed the registry's (and servers')
                    TLS certificates, for tls:// URLs (default $RAFTER_CA,
                    else the system's roots)
  --cert FILE, --key FILE
                    a client certificate and its key, for ports that want
                    mutual TLS (default $RAFTER_CERT, $RAFTER_KEY)
  --json            JSON on stdout; errors as one JSON line on stderr
  --timeout-ms N    give up waiting after N ms (default ${DEFAULT_TIMEOUT_MS})
  --config FILE     a JSON file of global options, keyed by their names
                    without "--": {"registry": "tcp://...", "cacert": "..."}
                    (default $RAFTER_CONFIG)
  --help, -h        show help
  --version, -V     print Rafter's and the runtime's versions

Every option has a variable: RAFTER_<OPTION> for a global one (--timeout-ms:
RAFTER_TIMEOUT_MS), RAFTER_<COMMAND>_<OPTION> for a command's own (watch
--from: RAFTER_WATCH_FROM); on/off as 1/0, true/false or yes/no.
Precedence: command-line flag > environment variable > config file > default.
A bad value's error names where it came from (RAFTER_WATCH_FROM must be ...).
The global options may also come before the command's name, meaning the
same: rafter --registry tcp://host:7001 lookup NAME.`;

/** One paragraph on the exit codes. */
export const EXIT_HELP =
  `exit codes: 0 done, 1 error answer, 2 bad usage, 3 registry (or server)
unreachable or no answer in time, 4 not found, 5 no valid token, 6 the
token lacks a permission, 130 interrupted (Ctrl-C)`;

/** One line of a command list: `  NAME ARGS` padded, then the summary. */
function listLine(nameAndArgs: string, summary: string): string {
  return `  ${nameAndArgs.padEnd(32)}${summary}`;
}

/**
 * `rafter --help`: every command of `commands`, after the lines of
 * `first` (commands outside the table, such as `registry`).
 */
export function usage(
  first: readonly { name: string; args: string; summary: string }[],
  commands: readonly Command[],
): string {
  return `usage: rafter <command> [arguments] [options]

commands:
${
    [...first, ...commands].map((command) =>
      listLine(`${command.name} ${command.args}`, command.summary)
    ).join("\n")
  }

${GLOBAL_HELP}

${EXIT_HELP}

rafter <command> --help shows a command's options.`;
}

/** `usage: rafter NAME ARGS [options]`. */
export function usageLine(command: Command): string {
  return `usage: rafter ${command.name}${
    command.args === "" ? "" : ` ${command.args}`
  }${command.options === undefined ? "" : " [options]"}`;
}

/** The usage printed after a bad command line for `command`. */
export function shortUsage(command: Command): string {
  return `${
    usageLine(command)
  }\n(rafter ${command.name} --help shows its options)`;
}

/** `rafter NAME --help`. */
export function commandHelp(command: Command): string {
  return [
    usageLine(command),
    "",
    command.about,
    ...(command.optionHelp === undefined
      ? []
      : ["", "options:", command.optionHelp]),
    "",
    GLOBAL_HELP,
    "",
    EXIT_HELP,
  ].join("\n");
}

/** `rafter GROUP --help`: the group's verbs, from `commands` by name. */
export function groupHelp(
  name: string,
  group: Group,
  commands: Readonly<Record<string, Command>>,
): string {
  const { verbs } = group;
  return `usage: rafter ${name} <${verbs.join("|")}> [arguments]

${
    verbs.map((verb) => {
      const command = commands[`${name} ${verb}`];
      return listLine(`${name} ${verb} ${command.args}`, command.summary);
    }).join("\n")
  }

rafter ${name} <verb> --help shows its options.`;
}

/** `a`, `a or b`, `a, b or c`. */
export function verbList(verbs: readonly string[]): string {
  return verbs.length === 1
    ? verbs[0]
    : `${verbs.slice(0, -1).join(", ")} or ${verbs[verbs.length - 1]}`;
}
