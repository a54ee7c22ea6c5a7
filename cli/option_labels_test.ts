/**
 * Where a bad value came from is what a usage error names: a command's
 * own option set by its variable is told by the variable
 * (`RAFTER_WATCH_FROM must be …`), for every option of every command; and
 * the global options may come before the command's name.
 */

import assert from "node:assert/strict";
import { runCli } from "./main.ts";
import { optionEnvNames } from "./args.ts";
import { COMMAND_LIST } from "./command_list.ts";

/** Nothing listens on port 1: a command that gets past its checks exits 3. */
const NOWHERE = "tcp://127.0.0.1:1";

async function run(
  argv: string[],
  vars: Record<string, string> = {},
): Promise<{ code: number; err: string; out: string }> {
  const err: string[] = [];
  const out: string[] = [];
  const env = { RAFTER_REGISTRY: NOWHERE, RAFTER_TIMEOUT_MS: "300", ...vars };
  const code = await runCli(argv, {
    env: (name) => (env as Record<string, string>)[name],
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    signal: AbortSignal.abort(),
  });
  return { code, err: err.join("\n"), out: out.join("\n") };
}

/** Positionals that get a command past its own checks. */
function positionalsOf(name: string, least: number): string[] {
  const known: Record<string, string[]> = {
    bind: ["svc", "tcp://127.0.0.1:9"],
    call: ["svc", "svc.m"],
    "member add": ["n9", "tcp://127.0.0.1:9"],
    "lease grant": ["1000"],
  };
  return known[name] ?? Array.from({ length: least }, () => "x");
}

Deno.test("rafter watch: a bad RAFTER_WATCH_FROM is named by the variable, not --from", async () => {
  const bad = await run(["watch", "x"], { RAFTER_WATCH_FROM: "abc" });
  assert.equal(bad.code, 2, bad.err);
  assert.match(
    bad.err,
    /^rafter watch: RAFTER_WATCH_FROM must be an integer of at least 1, not "abc"\n/,
  );
  const flag = await run(["watch", "x", "--from", "abc"]);
  assert.match(
    flag.err,
    /^rafter watch: --from must be an integer of at least 1, not "abc"\n/,
  );
});

Deno.test("rafter: every command option's checker names the variable when the value came from one", async () => {
  // The cert and snapshot commands write and read files: left out here.
  const commands = COMMAND_LIST.filter((command) =>
    !/^(cert|snapshot) /.test(command.name)
  );
  let checked = 0;
  for (const command of commands) {
    for (const [option, kind] of Object.entries(command.options ?? {})) {
      if (kind.type !== "string") continue;
      const [variable] = optionEnvNames(command.name, option);
      const words = [
        ...command.name.split(" "),
        ...positionalsOf(command.name, command.positionals[0]),
      ];
      for (const value of ["abc", "0", "a=b=c,", "nowhere:port"]) {
        const flag = await run([...words, `--${option}=${value}`]);
        const prefix = `rafter ${command.name}: --${option}`;
        if (flag.code !== 2 || !flag.err.startsWith(prefix)) continue;
        const fromEnv = await run(words, { [variable]: value });
        const where = `${command.name} ${variable}=${value}`;
        assert.equal(fromEnv.code, 2, where);
        assert.equal(
          fromEnv.err.split("\n")[0],
          `rafter ${command.name}: ${variable}${
            flag.err.split("\n")[0].slice(prefix.length)
          }`,
          where,
        );
        checked++;
      }
    }
  }
  // watch --from and --count, lookup --limit, bind --ttl-ms, --weight,
  // --check, member add --client-url, and more: not none.
  assert.ok(checked >= 6, `only ${checked} checked`);
});

Deno.test("rafter: the global options may come before the command's name, meaning the same", async () => {
  const before = await run([
    "--registry",
    "tcp://127.0.0.1:2",
    "--json",
    "--timeout-ms=300",
    "ls",
  ]);
  assert.equal(before.code, 3, before.err);
  assert.deepEqual(JSON.parse(before.err).error.data.tried, [
    "tcp://127.0.0.1:2",
  ]);
  // One given again after the name wins, as a repeated option does.
  const both = await run([
    "--registry",
    "tcp://127.0.0.1:2",
    "lookup",
    "x",
    "--registry",
    "tcp://127.0.0.1:3",
    "--json",
  ]);
  assert.deepEqual(JSON.parse(both.err).error.data.tried, [
    "tcp://127.0.0.1:3",
  ]);
  const help = await run(["--json", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.out, /^usage: rafter <command>/);
  const own = await run(["--registry", NOWHERE, "watch", "--help"]);
  assert.equal(own.code, 0);
  assert.match(own.out, /^usage: rafter watch PREFIX/);
});

Deno.test("rafter: a command's option, or an unknown one, before the command's name is a usage error saying what to do", async () => {
  const own = await run(["--from", "3", "watch", "x"]);
  assert.equal(own.code, 2);
  assert.match(
    own.err,
    /^rafter: --from is an option of a command, not a global one: give it after the command's name \(only --registry, --token, --cacert, --cert, --key, --json, --timeout-ms, --config may come before it\)\n/,
  );
  const unknown = await run(["--bogus", "ls"]);
  assert.equal(unknown.code, 2);
  assert.match(
    unknown.err,
    /^rafter: unknown option --bogus before the command's name/,
  );
  const noValue = await run(["--registry"]);
  assert.equal(noValue.code, 2);
  assert.match(noValue.err, /^rafter: --registry needs a value\n/);
  const noCommand = await run(["--json"]);
  assert.equal(noCommand.code, 2);
  assert.match(JSON.parse(noCommand.err).error.message, /no command/);
});

Deno.test("rafter: an unknown command prints the error and two lines, not the whole command list", async () => {
  const bad = await run(["bogus"]);
  assert.equal(bad.code, 2);
  assert.equal(
    bad.err,
    'rafter: unknown command "bogus"\nusage: rafter <command> [arguments] [options]\n(rafter --help lists the commands)',
  );
});
