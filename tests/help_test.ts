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
    args: ["run", "-A", script, ...args],
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
    assert.match(bad.stderr, /usage: /);
    assert.doesNotMatch(bad.stderr, /\s+at .*\.ts:\d+/);
  });
}
