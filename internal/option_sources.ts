/**
 * One rule for where a program's option values come from, shared by the
 * registry node (`registry/main.ts`) and the CLI (`rafter`): a flag on the
 * command line, else its environment variable, else a key of the JSON
 * config file, else the option's default.
 *
 * The variable of an option is derived from its name ({@link envName}:
 * `--metrics-listen` → `RAFTER_METRICS_LISTEN`), and the config file's keys
 * are the option names without `--`; both come from the option table a
 * program hands `node:util`'s `parseArgs`, so an option added to the table
 * has its variable and its key with no more code.
 *
 * @module
 */

/** How `node:util`'s parseArgs reads one option. */
export type OptionKind = { type: "string" | "boolean"; multiple?: boolean };

/** Option values by name, as parseArgs gives them. */
export type OptionValues = Record<
  string,
  string | boolean | string[] | undefined
>;

/** Reads an environment variable; undefined when it is not set. */
export type EnvReader = (name: string) => string | undefined;

/** The words a boolean variable may hold, true ones first. */
export const BOOLEAN_WORDS = {
  true: ["1", "true", "yes", "on"],
  false: ["0", "false", "no", "off"],
} as const;

/**
 * The environment variable of an option: `RAFTER_`, then `scope` (words
 * such as a CLI command's name, none for a program's own options) and the
 * option's name, upper case, with `-` and spaces as `_`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { envName } from "./option_sources.ts";
 * assert.equal(envName("metrics-listen"), "RAFTER_METRICS_LISTEN");
 * assert.equal(envName("client-url", "member add"), "RAFTER_MEMBER_ADD_CLIENT_URL");
 * ```
 */
export function envName(option: string, scope = ""): string {
  return `RAFTER_${scope === "" ? "" : `${scope} `}${option}`
    .toUpperCase()
    .replace(/[- ]+/g, "_");
}

/** A config file as read: where it is, and its keys. */
export interface ConfigFile {
  /** The path it was read from (as given), for messages. */
  path: string;
  /** Its top-level keys and their JSON values. */
  values: Record<string, unknown>;
}

/** A bad environment variable or config file: the message says which and what to do. */
export class OptionSourceError extends Error {
  /** @param message what was wrong and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "OptionSourceError";
  }
}

/**
 * Reads a JSON config file: one object whose keys are option names.
 *
 * @param how names the option that gave the path (`--config` or
 * `RAFTER_CONFIG`), for messages.
 * @throws {OptionSourceError} when it cannot be read, is no JSON, or no
 * object.
 */
export function readConfigFile(
  path: string,
  how: string,
  readTextFile: (path: string) => string,
): ConfigFile {
  let text: string;
  try {
    text = readTextFile(path);
  } catch (error) {
    throw new OptionSourceError(
      `config file ${path} (${how}) cannot be read: ${
        (error as Error).message
      }; check the path`,
    );
  }
  let values: unknown;
  try {
    values = JSON.parse(text);
  } catch (error) {
    throw new OptionSourceError(
      `config file ${path} is not JSON: ${
        (error as Error).message
      }; write one object such as {"listen": "127.0.0.1:7001"}`,
    );
  }
  if (typeof values !== "object" || values === null || Array.isArray(values)) {
    throw new OptionSourceError(
      `config file ${path} must hold one JSON object whose keys are option names without "--", such as {"listen": "127.0.0.1:7001"}`,
    );
  }
  return { path, values: values as Record<string, unknown> };
}

/** The variable that names a config file when `--config` is not given. */
export const CONFIG_ENV = "RAFTER_CONFIG";

/**
 * The config file of a program's command line: the one `--config`
 * (`given`) names, else the one {@link CONFIG_ENV} names, read with
 * {@link readConfigFile}; undefined when neither names one.
 *
 * @throws {OptionSourceError} as {@link readConfigFile} does.
 */
export function configFileOf(
  given: string | undefined,
  env: EnvReader,
  readTextFile: (path: string) => string,
): ConfigFile | undefined {
  const path = given ?? (env(CONFIG_ENV)?.trim() || undefined);
  return path === undefined ? undefined : readConfigFile(
    path,
    given !== undefined ? "--config" : CONFIG_ENV,
    readTextFile,
  );
}

/** What {@link layerOptions} layers. */
export interface LayerSpec {
  /** The options to fill in (not `--help`, `--config`), by name. */
  options: Record<string, OptionKind>;
  /** The values given on the command line. */
  given: OptionValues;
  /** Reads the environment. */
  env: EnvReader;
  /**
   * The variables of an option, the one {@link envName} derives first;
   * later ones are older names still honoured.
   */
  envNames(option: string): string[];
  /** The config file, if one was given. */
  config?: ConfigFile;
  /**
   * The options a config file may set (default all of `options`), and
   * what to tell the user about a key outside them.
   */
  configKeys?: { allowed: ReadonlySet<string>; hint: string };
}

/** The layered values, and where each came from. */
export interface Layered {
  /** Each option's value: flag, else variable, else config key; or undefined. */
  values: OptionValues;
  /**
   * Where an option's value came from, for messages: `--name`,
   * `RAFTER_NAME`, or `"name" in config file PATH`.
   */
  sources: Record<string, string>;
}

/**
 * Fills in the options the command line left out: from their variables,
 * then from the config file. An empty (or blank) variable counts as
 * unset.
 *
 * @throws {OptionSourceError} for a boolean variable that is no boolean
 * word ({@link BOOLEAN_WORDS}), and for a config key that is unknown or of
 * the wrong type.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { envName, layerOptions } from "./option_sources.ts";
 * const { values, sources } = layerOptions({
 *   options: { listen: { type: "string" }, auth: { type: "boolean" } },
 *   given: { listen: "127.0.0.1:7001" },
 *   env: (name) => ({ RAFTER_LISTEN: "0.0.0.0:7001", RAFTER_AUTH: "1" })[name],
 *   envNames: (option) => [envName(option)],
 * });
 * assert.deepEqual(values, { listen: "127.0.0.1:7001", auth: true });
 * assert.equal(sources.auth, "RAFTER_AUTH");
 * ```
 */
export function layerOptions(spec: LayerSpec): Layered {
  const { options, given, env, config } = spec;
  const values: OptionValues = {};
  const sources: Record<string, string> = {};
  if (config !== undefined) checkConfigKeys(spec, config);
  for (const [name, kind] of Object.entries(options)) {
    if (given[name] !== undefined) {
      values[name] = given[name];
      sources[name] = `--${name}`;
      continue;
    }
    const fromEnv = envValue(name, kind, spec.envNames(name), env);
    if (fromEnv !== undefined) {
      values[name] = fromEnv.value;
      sources[name] = fromEnv.variable;
      continue;
    }
    if (config !== undefined && Object.hasOwn(config.values, name)) {
      values[name] = configValue(config, name, kind);
      sources[name] = `"${name}" in config file ${config.path}`;
    }
  }
  return { values, sources };
}

function envValue(
  name: string,
  kind: OptionKind,
  variables: string[],
  env: EnvReader,
): { variable: string; value: string | boolean | string[] } | undefined {
  for (const variable of variables) {
    const text = env(variable)?.trim();
    if (text === undefined || text === "") continue;
    if (kind.type === "boolean") {
      const word = text.toLowerCase();
      if ((BOOLEAN_WORDS.true as readonly string[]).includes(word)) {
        return { variable, value: true };
      }
      if ((BOOLEAN_WORDS.false as readonly string[]).includes(word)) {
        return { variable, value: false };
      }
      throw new OptionSourceError(
        `${variable} (--${name}) must be one of ${
          BOOLEAN_WORDS.true.join(", ")
        } (on) or ${BOOLEAN_WORDS.false.join(", ")} (off), not "${text}"`,
      );
    }
    if (kind.multiple === true) {
      const items = text.split(",").map((item) => item.trim()).filter((
        item,
      ) => item !== "");
      return { variable, value: items };
    }
    return { variable, value: text };
  }
  return undefined;
}

function checkConfigKeys(spec: LayerSpec, config: ConfigFile): void {
  const allowed = spec.configKeys?.allowed ??
    new Set(Object.keys(spec.options));
  for (const key of Object.keys(config.values)) {
    if (!allowed.has(key) || !Object.hasOwn(spec.options, key)) {
      throw new OptionSourceError(
        `config file ${config.path}: unknown key "${key}"; ${
          spec.configKeys?.hint ??
            `the keys are option names without "--": ${[...allowed].join(", ")}`
        }. Remove or rename it`,
      );
    }
  }
}

function configValue(
  config: ConfigFile,
  name: string,
  kind: OptionKind,
): string | boolean | string[] {
  const value = config.values[name];
  const wrong = (expected: string): never => {
    throw new OptionSourceError(
      `config file ${config.path}: key "${name}" must be ${expected} (as --${name} takes), not ${
        JSON.stringify(value)
      }; fix its value or remove the key`,
    );
  };
  if (kind.type === "boolean") {
    return typeof value === "boolean" ? value : wrong("true or false");
  }
  const scalar = (item: unknown): string | undefined =>
    typeof item === "string"
      ? item
      : typeof item === "number" && Number.isFinite(item)
      ? String(item)
      : undefined;
  if (kind.multiple === true) {
    if (Array.isArray(value)) {
      const items = value.map(scalar);
      return items.every((item) => item !== undefined)
        ? items as string[]
        : wrong("a string or an array of strings");
    }
    const one = scalar(value);
    return one === undefined ? wrong("a string or an array of strings") : [one];
  }
  return scalar(value) ?? wrong("a string (or a number)");
}
