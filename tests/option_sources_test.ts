/**
 * Every option of the registry node and of every `rafter` command can also
 * be given by its environment variable (and a node's, or the CLI's global
 * ones, by a key of the config file), with one precedence: command-line
 * flag > environment variable > config file > default. The coverage tests
 * walk the option tables, so an option added later without a working
 * variable, or without its row in docs/operations.md, fails here.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  envName,
  layerOptions,
  OptionSourceError,
  readConfigFile,
} from "../internal/option_sources.ts";
import {
  parseRegistryArgs,
  REGISTRY_OPTIONS,
  USAGE,
} from "../registry/node/args.ts";
import {
  CONFIGURABLE_GLOBALS,
  GLOBAL_OPTIONS,
  optionEnvNames,
  parseCommandLine,
} from "../cli/args.ts";
import { COMMAND_LIST } from "../cli/command_list.ts";
import type { Command } from "../cli/context.ts";
import { UsageError } from "../cli/errors.ts";
import { GLOBAL_HELP } from "../cli/help.ts";
import { spawnRegistry } from "./_registry_process.ts";
import { waitFor, within } from "../testing/time.ts";

const OPERATIONS = await Deno.readTextFile(
  new URL("../docs/operations.md", import.meta.url),
);

type Env = Record<string, string>;
const envOf = (vars: Env) => (name: string) =>
  Object.hasOwn(vars, name) ? vars[name] : undefined;
/** A readTextFile that knows one file. */
const fileOf = (path: string, json: unknown) => (asked: string) => {
  if (asked !== path) throw new Deno.errors.NotFound(`no file ${asked}`);
  return JSON.stringify(json);
};
const NO_FILE = (path: string): string => {
  throw new Error(`the test reads no file, yet ${path} was read`);
};

Deno.test("envName: RAFTER_, the option's name in capitals, - as _; a scope's words before it", () => {
  assert.equal(envName("metrics-listen"), "RAFTER_METRICS_LISTEN");
  assert.equal(envName("cluster-secret-file"), "RAFTER_CLUSTER_SECRET_FILE");
  assert.equal(envName("ttl-ms", "bind"), "RAFTER_BIND_TTL_MS");
  assert.equal(envName("id", "lease keepalive"), "RAFTER_LEASE_KEEPALIVE_ID");
});

Deno.test("layerOptions: booleans take 1/0, true/false, yes/no, on/off in any case; another word names the variable and the words", () => {
  const auth = (text: string) =>
    layerOptions({
      options: { auth: { type: "boolean" } },
      given: {},
      env: envOf({ RAFTER_AUTH: text }),
      envNames: (option) => [envName(option)],
    }).values.auth;
  for (const word of ["1", "true", "TRUE", "yes", "on", " On "]) {
    assert.equal(auth(word), true, word);
  }
  for (const word of ["0", "false", "False", "no", "off"]) {
    assert.equal(auth(word), false, word);
  }
  assert.equal(auth(""), undefined, "an empty variable is unset");
  assert.throws(
    () => auth("maybe"),
    (error: Error) =>
      error instanceof OptionSourceError &&
      error.message ===
        'RAFTER_AUTH (--auth) must be one of 1, true, yes, on (on) or 0, false, no, off (off), not "maybe"',
  );
});

Deno.test("readConfigFile and layerOptions refuse a file that cannot be read, no JSON object, an unknown key or a wrong type, naming the file and the key", () => {
  const options = {
    listen: { type: "string" },
    auth: { type: "boolean" },
    host: { type: "string", multiple: true },
  } as const;
  const layer = (json: unknown) =>
    layerOptions({
      options,
      given: {},
      env: envOf({}),
      envNames: (option) => [envName(option)],
      config: readConfigFile("n1.json", "--config", fileOf("n1.json", json)),
    });
  assert.throws(
    () => readConfigFile("gone.json", "RAFTER_CONFIG", fileOf("x", {})),
    /config file gone\.json \(RAFTER_CONFIG\) cannot be read: no file gone\.json; check the path$/,
  );
  assert.throws(
    () => readConfigFile("bad.json", "--config", () => "{listen:"),
    /config file bad\.json is not JSON: .*; write one object/,
  );
  assert.throws(
    () => layer([1]),
    /config file n1\.json must hold one JSON object/,
  );
  assert.throws(
    () => layer({ lissen: "127.0.0.1:1" }),
    /config file n1\.json: unknown key "lissen"; the keys are option names without "--": listen, auth, host\. Remove or rename it$/,
  );
  assert.throws(
    () => layer({ auth: "yes" }),
    /config file n1\.json: key "auth" must be true or false \(as --auth takes\), not "yes"; fix its value or remove the key$/,
  );
  assert.throws(
    () => layer({ listen: { host: "x" } }),
    /config file n1\.json: key "listen" must be a string \(or a number\)/,
  );
  assert.throws(
    () => layer({ host: [1, {}] }),
    /key "host" must be a string or an array of strings/,
  );
  assert.deepEqual(
    layer({ listen: 7001, auth: true, host: ["a", "b"] }).values,
    { listen: "7001", auth: true, host: ["a", "b"] },
  );
});

// --- the registry node ---

Deno.test("parseRegistryArgs: flag > environment variable > config file > default, for each of --listen and --tick-ms", () => {
  const file = fileOf("node.json", { listen: "127.0.0.1:7303", "tick-ms": 30 });
  const env = envOf({ RAFTER_LISTEN: "127.0.0.1:7202", RAFTER_TICK_MS: "20" });
  const parse = (argv: string[], vars: Env, config: boolean) =>
    parseRegistryArgs(
      config ? [...argv, "--config", "node.json"] : argv,
      envOf(vars),
      file,
    );
  const flags = ["--listen", "127.0.0.1:7101", "--tick-ms", "10"];
  const all = parseRegistryArgs(
    [...flags, "--config", "node.json"],
    env,
    file,
  );
  assert.deepEqual([all.listen.port, all.tickMs], [7101, 10], "flag wins");
  const vars = { RAFTER_LISTEN: "127.0.0.1:7202", RAFTER_TICK_MS: "20" };
  const noFlag = parse([], vars, true);
  assert.deepEqual([noFlag.listen.port, noFlag.tickMs], [7202, 20], "env next");
  const fileOnly = parse([], {}, true);
  assert.deepEqual([fileOnly.listen.port, fileOnly.tickMs], [7303, 30], "file");
  const none = parse([], {}, false);
  assert.deepEqual([none.listen.port, none.tickMs], [7001, 100], "default");
  // RAFTER_CONFIG names the file when --config does not; --config wins.
  const viaEnv = parseRegistryArgs(
    [],
    envOf({ RAFTER_CONFIG: "node.json" }),
    file,
  );
  assert.equal(viaEnv.tickMs, 30);
  assert.throws(
    () =>
      parseRegistryArgs(
        ["--config", "other.json"],
        envOf({ RAFTER_CONFIG: "node.json" }),
        file,
      ),
    /config file other\.json \(--config\) cannot be read/,
  );
});

Deno.test("parseRegistryArgs: a flag given is never overridden by its variable, booleans included; a bad value names its variable", () => {
  const args = parseRegistryArgs(
    ["--id", "n2", "--auth"],
    envOf({ RAFTER_ID: "n9", RAFTER_AUTH: "0", RAFTER_INSECURE: "yes" }),
    NO_FILE,
  );
  assert.equal(args.id, "n2");
  assert.equal(args.auth, true);
  assert.equal(args.insecure, true);
  assert.throws(
    () => parseRegistryArgs([], envOf({ RAFTER_TICK_MS: "fast" }), NO_FILE),
    /RAFTER_TICK_MS must be a positive integer, got "fast"$/,
  );
  assert.throws(
    () => parseRegistryArgs([], envOf({ RAFTER_WATCH_STDIN: "2" }), NO_FILE),
    /RAFTER_WATCH_STDIN \(--watch-stdin\) must be one of 1, true, yes, on/,
  );
  assert.throws(
    () =>
      parseRegistryArgs(
        ["--config", "n.json"],
        envOf({}),
        fileOf("n.json", { "metrics-listen": "nowhere" }),
      ),
    /"metrics-listen" in config file n\.json: /,
  );
  // The file may not name itself, nor --help.
  assert.throws(
    () =>
      parseRegistryArgs(
        ["--config", "n.json"],
        envOf({}),
        fileOf("n.json", { config: "x.json" }),
      ),
    /config file n\.json: unknown key "config"/,
  );
});

/** Flags a node option needs beside it to be accepted. */
const NODE_COMPANIONS: Record<string, string[]> = {
  peers: ["--id", "n7"],
  join: ["--id", "n7", "--cluster-secret-file", "./secret"],
  "tls-cert": ["--tls-key", "k.pem"],
  "tls-key": ["--tls-cert", "c.pem"],
  "tls-client-ca": ["--tls-cert", "c.pem", "--tls-key", "k.pem"],
  "peer-tls-cert": ["--peer-tls-key", "k.pem", "--peer-tls-ca", "ca.pem"],
  "peer-tls-key": ["--peer-tls-cert", "c.pem", "--peer-tls-ca", "ca.pem"],
  "peer-tls-ca": ["--peer-tls-cert", "c.pem", "--peer-tls-key", "k.pem"],
  engine: ["--etcd-endpoints", "http://127.0.0.1:2379"],
  "etcd-endpoints": ["--engine", "etcd"],
  domain: ["--cluster-name", "a"],
  "cluster-name": ["--domain", "acme"],
  siblings: ["--domain", "acme", "--cluster-name", "a"],
};
/** Values tried for a string option, until one is accepted and counts. */
const CANDIDATES = [
  "20",
  "65536",
  "127.0.0.1:7009",
  "n7=127.0.0.1:7107",
  "tcp://127.0.0.1:7001",
  "b=tcp://127.0.0.1:7011",
  "etcd",
  "http://127.0.0.1:2379",
  "json",
  "text",
];

Deno.test("every registry-node option is honoured from its RAFTER_ variable and its config key just as from its flag, and is in the usage and the docs' table", () => {
  const names = Object.keys(REGISTRY_OPTIONS);
  assert.ok(names.length >= 30, `only ${names.length} options`);
  for (const name of names) {
    const kind = REGISTRY_OPTIONS[name as keyof typeof REGISTRY_OPTIONS];
    const variable = envName(name);
    const base = NODE_COMPANIONS[name] ?? [];
    // The companions alone may be refused (--tls-key without --tls-cert).
    let without = "refused";
    try {
      without = JSON.stringify(parseRegistryArgs(base, envOf({}), NO_FILE));
    } catch { /* any parse that works differs */ }
    let value: string | undefined;
    let flagged;
    for (const candidate of kind.type === "boolean" ? [""] : CANDIDATES) {
      const argv = kind.type === "boolean"
        ? [...base, `--${name}`]
        : [...base, `--${name}`, candidate];
      try {
        flagged = parseRegistryArgs(argv, envOf({}), NO_FILE);
      } catch {
        continue;
      }
      if (JSON.stringify(flagged) === without) continue;
      value = candidate;
      break;
    }
    assert.ok(
      flagged !== undefined && value !== undefined,
      `--${name}: no value it takes changed the parse; add one to CANDIDATES or its companions to NODE_COMPANIONS`,
    );
    const envValue = kind.type === "boolean" ? "true" : value;
    assert.deepEqual(
      parseRegistryArgs(base, envOf({ [variable]: envValue }), NO_FILE),
      flagged,
      `${variable} is honoured as --${name} is`,
    );
    assert.deepEqual(
      parseRegistryArgs(
        [...base, "--config", "c.json"],
        envOf({}),
        fileOf("c.json", { [name]: kind.type === "boolean" ? true : value }),
      ),
      flagged,
      `the config key "${name}" is honoured as --${name} is`,
    );
    assert.ok(USAGE.includes(`--${name}`), `the usage names --${name}`);
    assert.ok(
      OPERATIONS.includes(`\`${variable}\``),
      `docs/operations.md lists ${variable}`,
    );
  }
  assert.match(
    USAGE,
    /Precedence: command-line flag > environment variable > config file > default\./,
  );
});

// --- the CLI ---

const TOKEN = `rft_0123456789abcdef_${"A".repeat(43)}`;
const command = (name: string): Command =>
  COMMAND_LIST.find((c) => c.name === name)!;
/** A parsed line without where its registry and token came from. */
const sourceless = (line: ReturnType<typeof parseCommandLine>) => ({
  ...line,
  globals: { ...line.globals, registrySource: "", tokenSource: "" },
  sources: {},
});

Deno.test("parseCommandLine: flag > environment variable > config file > default, for --registry and --timeout-ms", () => {
  const ls = command("ls");
  const file = fileOf("rafter.json", {
    registry: "tcp://127.0.0.1:7303",
    "timeout-ms": 3000,
  });
  const env = {
    RAFTER_REGISTRY: "tcp://127.0.0.1:7202",
    RAFTER_TIMEOUT_MS: "2000",
  };
  const parse = (args: string[], vars: Env) =>
    parseCommandLine(ls, args, envOf(vars), file).globals;
  const flags = ["--registry", "tcp://127.0.0.1:7101", "--timeout-ms", "1000"];
  const all = parse([...flags, "--config", "rafter.json"], env);
  assert.deepEqual(
    [all.registry, all.timeoutMs, all.registrySource],
    [["tcp://127.0.0.1:7101"], 1000, "--registry"],
  );
  const noFlag = parse(["--config", "rafter.json"], env);
  assert.deepEqual(
    [noFlag.registry, noFlag.timeoutMs, noFlag.registrySource],
    [["tcp://127.0.0.1:7202"], 2000, "RAFTER_REGISTRY"],
  );
  const fileOnly = parse([], { RAFTER_CONFIG: "rafter.json" });
  assert.deepEqual(
    [fileOnly.registry, fileOnly.timeoutMs, fileOnly.registrySource],
    [
      ["tcp://127.0.0.1:7303"],
      3000,
      '"registry" in config file rafter.json',
    ],
  );
  const none = parse([], {});
  assert.deepEqual(
    [none.registry, none.timeoutMs, none.registrySource],
    [["tcp://127.0.0.1:7001"], 5000, "the default"],
  );
});

Deno.test("parseCommandLine: old variables keep their meaning; a command's own option has a variable scoped by the command; a flag is never overridden", () => {
  const call = command("call");
  const line = parseCommandLine(
    call,
    ["hello", "hello.greet"],
    envOf({
      RAFTER_CA: "ca.pem",
      RAFTER_TOKEN: TOKEN,
      RAFTER_SERVER_TOKEN: "srv",
      RAFTER_CALL_IDEMPOTENT: "1",
      RAFTER_IDEMPOTENT: "0",
    }),
    NO_FILE,
  );
  assert.deepEqual(line.globals.tls, {
    caFile: "ca.pem",
    certFile: undefined,
    keyFile: undefined,
  });
  assert.equal(line.globals.token, TOKEN);
  assert.equal(line.globals.tokenSource, "RAFTER_TOKEN");
  assert.equal(line.globals.serverToken, "srv");
  assert.equal(line.values.idempotent, true);
  // The derived name goes first; a flag beats both.
  const derived = parseCommandLine(
    call,
    ["hello", "hello.greet", "--server-token", "flag"],
    envOf({ RAFTER_CALL_SERVER_TOKEN: "new", RAFTER_SERVER_TOKEN: "old" }),
    NO_FILE,
  );
  assert.equal(derived.globals.serverToken, "flag");
  assert.equal(
    parseCommandLine(
      call,
      ["hello", "hello.greet"],
      envOf({ RAFTER_CALL_SERVER_TOKEN: "new", RAFTER_SERVER_TOKEN: "old" }),
      NO_FILE,
    ).globals.serverToken,
    "new",
  );
  // RAFTER_ID (a registry node's) does not reach bind --id.
  const bind = parseCommandLine(
    command("bind"),
    ["hello", "tcp://127.0.0.1:9"],
    envOf({ RAFTER_ID: "n1", RAFTER_BIND_ZONE: "eu-1" }),
    NO_FILE,
  );
  assert.equal(bind.values.id, undefined);
  assert.equal(bind.values.zone, "eu-1");
  assert.equal(
    parseCommandLine(
      command("ls"),
      ["--json"],
      envOf({ RAFTER_JSON: "false" }),
      NO_FILE,
    ).globals.json,
    true,
  );
});

Deno.test("parseCommandLine: a bad boolean variable, a command option in the config file, or an unknown key is a usage error naming it", () => {
  const ls = command("ls");
  const usage = (message: RegExp) => (error: Error) =>
    error instanceof UsageError && message.test(error.message);
  assert.throws(
    () => parseCommandLine(ls, [], envOf({ RAFTER_JSON: "y" }), NO_FILE),
    usage(/^RAFTER_JSON \(--json\) must be one of 1, true, yes, on/),
  );
  assert.throws(
    () =>
      parseCommandLine(
        command("cert ca"),
        ["--config", "r.json"],
        envOf({}),
        fileOf("r.json", { force: true }),
      ),
    usage(
      /^config file r\.json: unknown key "force"; a rafter config file holds the global options registry, token, cacert, cert, key, json, timeout-ms; give a command's own options on its command line \(or in RAFTER_<COMMAND>_<OPTION>\)\. Remove or rename it$/,
    ),
  );
  assert.throws(
    () =>
      parseCommandLine(
        ls,
        [],
        envOf({ RAFTER_CONFIG: "r.json" }),
        fileOf("r.json", { json: "yes" }),
      ),
    usage(/config file r\.json: key "json" must be true or false/),
  );
  assert.throws(
    () =>
      parseCommandLine(
        ls,
        [],
        envOf({ RAFTER_TOKEN: "nope" }),
        NO_FILE,
      ),
    usage(/^RAFTER_TOKEN is not a Rafter token/),
  );
});

/** Values tried for a CLI option, until one is accepted. */
const CLI_CANDIDATES = ["7", "tcp://127.0.0.1:7009", TOKEN];
const CLI_COMPANIONS: Record<string, string[]> = {
  cert: ["--key", "k.pem"],
  key: ["--cert", "c.pem"],
};

Deno.test("every option of every rafter command is honoured from its RAFTER_ variable just as from its flag (a global one from the config file too), and is in the docs' table", () => {
  assert.ok(COMMAND_LIST.length >= 20, `only ${COMMAND_LIST.length} commands`);
  let checked = 0;
  for (const cmd of COMMAND_LIST) {
    const options = { ...GLOBAL_OPTIONS, ...cmd.options };
    const positionals = Array.from(
      { length: cmd.positionals[0] },
      (_, i) => i === 1 ? "tcp://127.0.0.1:9" : "hello",
    );
    for (const [name, kind] of Object.entries(options)) {
      if (name === "help" || name === "config") continue;
      const [variable] = optionEnvNames(cmd.name, name);
      const base = [...positionals, ...(CLI_COMPANIONS[name] ?? [])];
      let value: string | undefined;
      let flagged;
      for (const candidate of kind.type === "boolean" ? [""] : CLI_CANDIDATES) {
        const args = kind.type === "boolean"
          ? [...base, `--${name}`]
          : [...base, `--${name}`, candidate];
        try {
          flagged = parseCommandLine(cmd, args, envOf({}), NO_FILE);
        } catch {
          continue;
        }
        value = candidate;
        break;
      }
      assert.ok(
        flagged !== undefined && value !== undefined,
        `rafter ${cmd.name} --${name}: no value in CLI_CANDIDATES is accepted`,
      );
      const envValue = kind.type === "boolean" ? "1" : value;
      assert.deepEqual(
        sourceless(parseCommandLine(
          cmd,
          base,
          envOf({ [variable]: envValue }),
          NO_FILE,
        )),
        sourceless(flagged),
        `${variable} is honoured as rafter ${cmd.name} --${name} is`,
      );
      if (CONFIGURABLE_GLOBALS.includes(name)) {
        assert.deepEqual(
          sourceless(parseCommandLine(
            cmd,
            [...base, "--config", "r.json"],
            envOf({}),
            fileOf("r.json", {
              [name]: kind.type === "boolean" ? true : value,
            }),
          )),
          sourceless({
            ...flagged,
            values: { ...flagged.values, config: "r.json" },
          }),
          `the config key "${name}" is honoured as --${name} is`,
        );
      }
      assert.ok(
        OPERATIONS.includes(`\`${variable}\``),
        `docs/operations.md lists ${variable}`,
      );
      checked++;
    }
  }
  assert.ok(checked > 150, `only ${checked} options checked`);
  assert.match(
    GLOBAL_HELP,
    /Precedence: command-line flag > environment variable > config file > default\./,
  );
});

Deno.test("no two options of the node and the CLI share a variable (but a global CLI option's, the same for every command)", () => {
  const owner = new Map<string, string>();
  const claim = (variable: string, who: string) => {
    const before = owner.get(variable);
    assert.ok(
      before === undefined || before === who,
      `${variable} is both ${before}'s and ${who}'s`,
    );
    owner.set(variable, who);
  };
  for (const name of Object.keys(REGISTRY_OPTIONS)) {
    claim(envName(name), `registry --${name}`);
  }
  for (const cmd of COMMAND_LIST) {
    for (const name of Object.keys({ ...GLOBAL_OPTIONS, ...cmd.options })) {
      const global = Object.hasOwn(GLOBAL_OPTIONS, name);
      for (const variable of optionEnvNames(cmd.name, name)) {
        claim(
          variable,
          global ? `rafter --${name}` : `rafter ${cmd.name} --${name}`,
        );
      }
    }
  }
});

Deno.test("registry/main.ts started with only RAFTER_ variables listens, and keeps its data, where they say; a bad boolean variable exits 2 naming it", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_envcfg_" });
  try {
    const node = spawnRegistry(cwd, [], {
      RAFTER_ID: "e1",
      RAFTER_LISTEN: "127.0.0.1:0",
      RAFTER_DATA: `${cwd}/from-env`,
      RAFTER_TICK_MS: "50",
    });
    try {
      await waitFor(
        () =>
          /registry e1 listening on tcp:\/\/127\.0\.0\.1:\d+/.test(node.output),
        "the node's listening line",
        30_000,
      );
      assert.match(
        node.output,
        new RegExp(
          `registry e1 listening on tcp://127\\.0\\.0\\.1:\\d+, peers on tcp://127\\.0\\.0\\.1:\\d+ \\(cluster [0-9a-f]{16} of e1; data ${cwd}/from-env\\)`,
        ),
      );
      assert.ok((await Deno.stat(`${cwd}/from-env`)).isDirectory);
    } finally {
      await node.child.stdin.close();
      await within(node.exit(), 20_000, "the node to exit");
    }
    const bad = spawnRegistry(cwd, [], { RAFTER_AUTH: "sure" });
    assert.equal(await within(bad.exit(), 20_000, "the node to exit"), 2);
    assert.match(
      bad.output,
      /registry: RAFTER_AUTH \(--auth\) must be one of 1, true, yes, on \(on\) or 0, false, no, off \(off\), not "sure"/,
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});
