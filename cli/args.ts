/**
 * The command line's shared parsing: the global options every command
 * takes (`--registry`, `--token`, `--json`, `--timeout-ms`, `--config`,
 * `--help`), with their variables and config file, reading one
 * command's arguments into {@link Globals}, positionals and option values,
 * and the checkers of names, URLs and integers that raise a
 * {@link UsageError} (exit 2) for a bad value.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { formatTcpUrl, parseTcpUrl } from "../rpc/transport/transport.ts";
import { DEFAULT_REGISTRY_URL, parseName } from "../protocol/registry.ts";
import { tokenIdOf } from "../protocol/auth.ts";
import type { Command, Globals, OptionType, Values } from "./context.ts";
import { UsageError } from "./errors.ts";
import {
  configFileOf,
  envName,
  type Layered,
  layerOptions,
  OptionSourceError,
} from "../internal/option_sources.ts";

/** Default of `--timeout-ms`: how long a command may wait for the registry. */
export const DEFAULT_TIMEOUT_MS = 5_000;

/** The options every command takes, beside its own. */
export const GLOBAL_OPTIONS: Record<string, OptionType> = {
  registry: { type: "string" },
  token: { type: "string" },
  cacert: { type: "string" },
  cert: { type: "string" },
  key: { type: "string" },
  json: { type: "boolean" },
  "timeout-ms": { type: "string" },
  config: { type: "string" },
  help: { type: "boolean" },
};

/**
 * The global options a variable or the config file may set: all but
 * `--config` and `--help`.
 */
export const CONFIGURABLE_GLOBALS: readonly string[] = Object.keys(
  GLOBAL_OPTIONS,
).filter((name) => name !== "config" && name !== "help");

/** Older variables still honoured, after the derived one, by option. */
const OLD_NAMES: Record<string, string[]> = {
  "--cacert": ["RAFTER_CA"],
  "call --server-token": ["RAFTER_SERVER_TOKEN"],
};

/**
 * The environment variables of an option of `command`, the derived one
 * first: `RAFTER_<OPTION>` for a global option (`--timeout-ms`:
 * `RAFTER_TIMEOUT_MS`), `RAFTER_<COMMAND>_<OPTION>` for a command's own
 * (`rafter member add --client-url`: `RAFTER_MEMBER_ADD_CLIENT_URL`), so
 * that a command's `--id` or `--force` is never set by a variable meant
 * for another command or a registry node. Then the older names still
 * honoured (`RAFTER_CA` for `--cacert`, `RAFTER_SERVER_TOKEN` for
 * `rafter call --server-token`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { optionEnvNames } from "./args.ts";
 * assert.deepEqual(optionEnvNames("bind", "ttl-ms"), ["RAFTER_BIND_TTL_MS"]);
 * assert.deepEqual(optionEnvNames("bind", "cacert"), ["RAFTER_CACERT", "RAFTER_CA"]);
 * ```
 */
export function optionEnvNames(command: string, option: string): string[] {
  const global = Object.hasOwn(GLOBAL_OPTIONS, option);
  return [
    global ? envName(option) : envName(option, command),
    ...(OLD_NAMES[global ? `--${option}` : `${command} --${option}`] ?? []),
  ];
}

/** The global options a command line may give before the command's name. */
const LEADING_GLOBALS: readonly string[] = Object.keys(GLOBAL_OPTIONS).filter(
  (name) => name !== "help",
);

/**
 * Splits the global options given before the command's name off `argv`
 * (`rafter --registry URL lookup x`, as etcdctl and kubectl take them):
 * the words of those options, and the command's name with what follows.
 * They mean what they mean after the command. Throws {@link UsageError}
 * for another option there, naming what to do; `--help`, `-h`,
 * `--version` and `-V` end the split (the caller answers them).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { splitLeadingGlobals } from "./args.ts";
 * assert.deepEqual(
 *   splitLeadingGlobals(["--registry", "tcp://h:7001", "--json", "ls"]),
 *   { leading: ["--registry", "tcp://h:7001", "--json"], rest: ["ls"] },
 * );
 * ```
 */
export function splitLeadingGlobals(
  argv: readonly string[],
  commandOptions: ReadonlySet<string> = new Set(),
): { leading: string[]; rest: string[] } {
  let i = 0;
  while (i < argv.length && argv[i].startsWith("-")) {
    const word = argv[i];
    if (["--help", "-h", "--version", "-V"].includes(word)) break;
    if (word === "--") {
      throw new UsageError(
        `"--" before the command's name: write rafter <command> [arguments] [options]`,
      );
    }
    const name = word.replace(/^--?/, "").split("=")[0];
    if (!LEADING_GLOBALS.includes(name)) {
      const globals = LEADING_GLOBALS.map((option) => `--${option}`).join(
        ", ",
      );
      throw new UsageError(
        commandOptions.has(name)
          ? `--${name} is an option of a command, not a global one: give it after the command's name (only ${globals} may come before it)`
          : `unknown option ${
            word.split("=")[0]
          } before the command's name (only ${globals} may come before it)`,
      );
    }
    if (GLOBAL_OPTIONS[name].type === "string" && !word.includes("=")) {
      const value = argv[i + 1];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      i += 2;
    } else {
      i += 1;
    }
  }
  return { leading: argv.slice(0, i), rest: argv.slice(i) };
}

/** A command line read for `command`: the global options, and its own. */
export interface CommandLine {
  /** The global options. */
  globals: Globals;
  /** The arguments that are no option. */
  positionals: string[];
  /** Every option given, by name. */
  values: Values;
  /**
   * Where each option's value came from (`--from`, `RAFTER_WATCH_FROM`,
   * `"registry" in config file PATH`), by name, for {@link relabel}.
   */
  sources: Record<string, string>;
}

/**
 * A command's message about one of its options, told by where the value
 * came from: a checker names an option by its flag at the start
 * (`--from must be an integer …`), and when the value came from a
 * variable or the config file the flag becomes that
 * (`RAFTER_WATCH_FROM must be an integer …`), so every checker of every
 * command says where to fix the value without knowing it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { relabel } from "./args.ts";
 * assert.equal(
 *   relabel('--from must be an integer of at least 1, not "abc"', {
 *     from: "RAFTER_WATCH_FROM",
 *   }),
 *   'RAFTER_WATCH_FROM must be an integer of at least 1, not "abc"',
 * );
 * assert.equal(relabel("--count needs N", { count: "--count" }), "--count needs N");
 * ```
 */
export function relabel(
  message: string,
  sources: Readonly<Record<string, string>>,
): string {
  const option = /^--([a-z][a-z0-9-]*)(?![a-z0-9-])/.exec(message)?.[1];
  if (option === undefined || !Object.hasOwn(sources, option)) return message;
  const source = sources[option];
  return source === `--${option}`
    ? message
    : `${source}${message.slice(option.length + 2)}`;
}

/**
 * Reads `args` (the words after the command's name) for `command`. An
 * option not given is taken from its variable ({@link optionEnvNames},
 * read with `env`), else, for a global option, from the JSON config file
 * of `--config` (else `RAFTER_CONFIG`, read with `readTextFile`), else its
 * default: the registry URLs from `--registry`, else `RAFTER_REGISTRY`,
 * else the file's `"registry"`, else the default. Throws
 * {@link UsageError} for a bad line, variable or file.
 */
export function parseCommandLine(
  command: Command,
  args: string[],
  env: (name: string) => string | undefined,
  readTextFile: (path: string) => string = (path) =>
    Deno.readTextFileSync(path),
): CommandLine {
  const parsed = parseOptions(command, args);
  const { positionals } = parsed;
  checkPositionals(command, positionals);
  const { values, sources } = layeredValues(
    command,
    parsed.values,
    env,
    readTextFile,
  );
  const { registry, registrySource } = registryUrls(values, sources);
  const { token, tokenSource } = registryToken(values, sources);
  const tls = tlsFiles(values);
  const serverToken = (values["server-token"] as string | undefined)?.trim() ||
    undefined;
  if (values.local === true && registry.length !== 1) {
    throw new UsageError(
      "--local works on one registry node: give exactly one --registry URL",
    );
  }
  return {
    globals: {
      registry,
      registrySource,
      token,
      tokenSource,
      serverToken,
      tls,
      json: values.json === true,
      timeoutMs: optionalInteger(
        values["timeout-ms"],
        sources["timeout-ms"] ?? "--timeout-ms",
        1,
      ) ??
        DEFAULT_TIMEOUT_MS,
    },
    positionals,
    values,
    sources,
  };
}

/**
 * The options of the command line, the ones it left out filled in from
 * their variables and the config file, with where each came from.
 */
function layeredValues(
  command: Command,
  given: Values,
  env: (name: string) => string | undefined,
  readTextFile: (path: string) => string,
): Layered {
  const globals = Object.fromEntries(
    CONFIGURABLE_GLOBALS.map((name) => [name, GLOBAL_OPTIONS[name]]),
  );
  try {
    const layered = layerOptions({
      options: { ...globals, ...command.options },
      given,
      env,
      envNames: (option) => optionEnvNames(command.name, option),
      config: configFileOf(
        given.config as string | undefined,
        env,
        readTextFile,
      ),
      configKeys: {
        allowed: new Set(CONFIGURABLE_GLOBALS),
        hint: `a rafter config file holds the global options ${
          CONFIGURABLE_GLOBALS.join(", ")
        }; give a command's own options on its command line (or in RAFTER_<COMMAND>_<OPTION>)`,
      },
    });
    // The words after the command's name are kept as given (--help).
    return {
      values: { ...given, ...layered.values },
      sources: layered.sources,
    };
  } catch (error) {
    if (error instanceof OptionSourceError) {
      throw new UsageError(error.message);
    }
    throw error;
  }
}

/** parseArgs with the command's options, its errors told as usage errors. */
function parseOptions(
  command: Command,
  args: string[],
): { values: Values; positionals: string[] } {
  try {
    const parsed = parseArgs({
      args,
      options: { ...GLOBAL_OPTIONS, ...command.options },
      strict: true,
      allowPositionals: true,
    });
    return { values: parsed.values as Values, positionals: parsed.positionals };
  } catch (error) {
    const code = (error as { code?: string }).code;
    const option = /'(-[^' ]+)/.exec((error as Error).message)?.[1];
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && option !== undefined) {
      throw new UsageError(`unknown option ${option}`);
    }
    if (
      code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && option !== undefined
    ) {
      throw new UsageError(
        /ambiguous/.test((error as Error).message)
          ? `${option} needs a value; write ${option}=VALUE for a value that starts with "-"`
          : `${option} needs a value`,
      );
    }
    throw new UsageError((error as Error).message);
  }
}

function checkPositionals(command: Command, positionals: string[]): void {
  const [least, most] = command.positionals;
  if (positionals.length < least || positionals.length > most) {
    const extra = positionals.length > most
      ? `; unexpected ${JSON.stringify(positionals[most])}`
      : "";
    throw new UsageError(
      command.args === ""
        ? `takes no arguments${extra}`
        : `takes ${command.args}${extra}`,
    );
  }
}

/** The registry URLs to use, normalized, and where they came from. */
function registryUrls(
  values: Values,
  sources: Record<string, string>,
): { registry: string[]; registrySource: string } {
  const given = values.registry as string | undefined;
  const registrySource = given === undefined
    ? "the default"
    : sources.registry ?? "--registry";
  const text = given ?? DEFAULT_REGISTRY_URL;
  const registry = text.split(",").map((u) => u.trim()).filter((u) => u !== "");
  if (registry.length === 0) {
    throw new UsageError(`${registrySource} names no registry URL`);
  }
  for (let i = 0; i < registry.length; i++) {
    try {
      registry[i] = formatTcpUrl(parseTcpUrl(registry[i]));
    } catch (error) {
      throw new UsageError(
        `${registrySource}: ${
          (error as Error).message
        } (a registry node's client port)`,
      );
    }
  }
  return { registry, registrySource };
}

/**
 * The registry token: `--token`, else `RAFTER_TOKEN`, else the config
 * file's, else none; and where it came from. Throws {@link UsageError}
 * for one that is no `rft_…` token (without printing it).
 */
function registryToken(
  values: Values,
  sources: Record<string, string>,
): { token: string | undefined; tokenSource: string } {
  const token = (values.token as string | undefined)?.trim();
  const tokenSource = token === undefined ? "none" : sources.token ?? "--token";
  if (token !== undefined && tokenIdOf(token) === null) {
    throw new UsageError(
      `${tokenSource} is not a Rafter token: expected rft_<16 hex digits>_<43 characters>, as rafter token create prints`,
    );
  }
  return { token, tokenSource };
}

/**
 * The TLS files for `tls://` URLs: `--cacert`, `--cert`, `--key` (else
 * `RAFTER_CACERT` or `RAFTER_CA`, `RAFTER_CERT`, `RAFTER_KEY`, else the
 * config file's); undefined when none is given (the system's roots, no
 * client certificate). Throws {@link UsageError} for a certificate
 * without its key or the reverse.
 */
function tlsFiles(values: Values): Globals["tls"] {
  const pick = (option: string) =>
    (values[option] as string | undefined)?.trim() || undefined;
  const caFile = pick("cacert");
  const certFile = pick("cert");
  const keyFile = pick("key");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new UsageError(
      "--cert and --key go together (or RAFTER_CERT and RAFTER_KEY): a client certificate needs its private key",
    );
  }
  if (caFile === undefined && certFile === undefined) return undefined;
  return { caFile, certFile, keyFile };
}

/** `--lease ID` and `--local`: which binding `unbind` and `drain` touch. */
export const TARGET_OPTIONS: Record<string, OptionType> = {
  lease: { type: "string" },
  local: { type: "boolean" },
};

/** Help lines of {@link TARGET_OPTIONS}. */
export const TARGET_OPTION_HELP =
  `  --lease ID        only if still attached to this lease
  --local           in the local area of the one --registry node given`;

/**
 * The binding {@link TARGET_OPTIONS} name: its lease, and with `--local`
 * the local area of the one registry node given.
 */
export function bindingTarget(
  values: Values,
  globals: Globals,
): { leaseId?: string; scope?: "local"; node?: string } {
  const local = values.local === true;
  return {
    leaseId: values.lease as string | undefined,
    scope: local ? "local" : undefined,
    node: local ? globals.registry[0] : undefined,
  };
}

/** `name` if it is a valid registry name (`NAME[?key=value&...]`). */
export function checkName(name: string): string {
  try {
    parseName(name);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return name;
}

/** `text` as a normalized `tcp://host:port` URL; `what` names it in errors. */
export function checkUrl(text: string, what: string): string {
  try {
    return formatTcpUrl(parseTcpUrl(text));
  } catch (error) {
    throw new UsageError(
      `${what} must be tcp://host:port or tls://host:port, not "${text}" (${
        (error as Error).message
      })`,
    );
  }
}

/** `text` as an integer of at least `min`; `what` names it in errors. */
export function integer(text: string, what: string, min: number): number {
  const value = Number(text);
  if (text.trim() === "" || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(
      `${what} must be an integer of at least ${min}, not "${text}"`,
    );
  }
  return value;
}

/** An option's value as an {@link integer}, or undefined when not given. */
export function optionalInteger(
  value: Values[string],
  what: string,
  min: number,
): number | undefined {
  return typeof value === "string" ? integer(value, what, min) : undefined;
}
