/**
 * Every program prints its usage for `--help` (exit 0) instead of a stack
 * trace, and refuses an unknown option with its usage (exit 2).
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

const PROGRAMS = [
  "registry/main.ts",
  "cli/main.ts",
  "examples/hello/server.ts",
  "examples/hello/client.ts",
  "examples/demo/main.ts",
  "bench/main.ts",
  "bench/rpc.ts",
  "bench/codec.ts",
  "bench/stub.ts",
  "bench/registry_etcd.ts",
  "bench/scale.ts",
];

async function run(script: string, args: string[]) {
  const output = await new Deno.Command(Deno.execPath(), {
    // The benchmarks' npm packages are in the development config; the
    // other programs run with deno.json, as a user runs them.
    args: [
      "run",
      ...(script.startsWith("bench/") ? ["--config", "deno.dev.json"] : []),
      "-A",
      script,
      ...args,
    ],
    cwd: ROOT.pathname,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return {
    code: output.code,
    stdout: decode(output.stdout),
    stderr: decode(output.stderr),
  };
}

for (const script of PROGRAMS) {
  Deno.test(`${script} --help prints its usage and exits 0; an unknown option exits 2 with the usage`, async () => {
    const help = await run(script, ["--help"]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^usage: /m);
    assert.doesNotMatch(help.stderr + help.stdout, /\s+at .*\.ts:\d+/);
    const bad = await run(script, ["--no-such-option"]);
    assert.equal(bad.code, 2, bad.stdout + bad.stderr);
    // The usage, or (a registry node) one line saying where it is.
    assert.match(bad.stderr, /usage: |run with --help/);
    assert.doesNotMatch(bad.stderr, /\s+at .*\.ts:\d+/);
  });
}

/** The programs a user runs, each with `--version` (and `-V`). */
const VERSIONED: [string, string[]][] = [
  ["registry/main.ts", ["--version"]],
  ["registry/main.ts", ["-V"]],
  ["cli/main.ts", ["--version"]],
  ["cli/main.ts", ["-V"]],
  ["cli/main.ts", ["registry", "--version"]],
  ["cli/main.ts", ["lookup", "hello", "--version"]],
  ["cli/main.ts", ["lease", "grant", "-V"]],
  ["examples/hello/server.ts", ["--version"]],
  ["examples/hello/client.ts", ["-V"]],
  ["examples/demo/main.ts", ["--version"]],
];

const config = JSON.parse(
  await Deno.readTextFile(new URL("deno.json", ROOT)),
) as { version: string };

for (const [script, args] of VERSIONED) {
  Deno.test(`${script} ${args.join(" ")} prints Rafter's and the runtime's versions and exits 0`, async () => {
    const result = await run(script, args);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      result.stdout,
      `rafter ${config.version} (deno ${Deno.version.deno}, v8 ${Deno.version.v8}, typescript ${Deno.version.typescript})\n`,
    );
    assert.equal(result.stderr, "");
  });
}
