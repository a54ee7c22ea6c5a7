/**
 * Every program prints its usage for `--help` (exit 0) instead of a stack
 * trace, and refuses an unknown option with its usage (exit 2).
 */

import assert from "node:assert/strict";
import { runCli } from "../cli/main.ts";

const ROOT = new URL("../", import.meta.url);

const PROGRAMS = [
  "registry/main.ts",
  "cli/main.ts",
  "examples/hello/server.ts",
  "examples/hello/client.ts",
  "examples/demo/main.ts",
  "bench/main.ts",
  "bench/rpc.ts",
  "bench/rpc_idle.ts",
  "bench/codec.ts",
  "bench/stub.ts",
  "bench/registry_etcd.ts",
  "bench/scale.ts",
  "bench/engines.ts",
  "examples/replicated/replica.ts",
  "examples/whiteboard/replica.ts",
  "examples/whiteboard/cli.ts",
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

// --- copies of the help in the docs ---

const DOCS = new URL("docs/", ROOT);

/** Each fenced block of a page, with the prose paragraph before it. */
function fencedBlocks(text: string): { before: string; body: string }[] {
  const blocks: { before: string; body: string }[] = [];
  const fence = /^```[^\n]*\n([\s\S]*?)^```$/gm;
  for (const match of text.matchAll(fence)) {
    const prose = text.slice(0, match.index).trimEnd().split("\n\n");
    blocks.push({ before: prose[prose.length - 1], body: match[1] });
  }
  return blocks;
}

/** The words of a shell line of plain words and '…' quotes. */
function shellWords(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

/** What `rafter ARGS` prints, stdout and stderr, run in this process. */
async function rafterOutput(args: string[]): Promise<string> {
  const lines: string[] = [];
  await runCli(args, {
    out: (line) => lines.push(line),
    err: (line) => lines.push(line),
    env: () => undefined,
  });
  return lines.join("\n") + "\n";
}

Deno.test("every copy of rafter's help in docs/ is what rafter prints", async () => {
  let checked = 0;
  for await (const entry of Deno.readDir(DOCS)) {
    if (!entry.name.endsWith(".md")) continue;
    const page = await Deno.readTextFile(new URL(entry.name, DOCS));
    for (const { before, body } of fencedBlocks(page)) {
      // A block introduced by "`rafter … --help` lists/prints …".
      const introduced = /`rafter ((?:[^`]* )?--help)`[^`]*:$/.exec(before);
      if (introduced !== null && body.startsWith("usage: rafter")) {
        assert.equal(
          body,
          await rafterOutput(shellWords(introduced[1])),
          `docs/${entry.name}: the copy of rafter ${introduced[1]}`,
        );
        checked++;
        continue;
      }
      // A session of `$ rafter …   # exit 2` lines and what they print:
      // those that print a usage line are checked word for word.
      for (const part of body.split(/^\$ /m).slice(1)) {
        const [command, ...printed] = part.trimEnd().split("\n");
        const output = printed.join("\n") + "\n";
        if (!/^usage: rafter/m.test(output)) continue;
        const args = shellWords(command.replace(/\s+#.*$/, "")).slice(1);
        assert.equal(
          output,
          await rafterOutput(args),
          `docs/${entry.name}: $ ${command}`,
        );
        checked++;
      }
    }
  }
  // rafter --help and rafter lookup 'hello?' in docs/cli.md, at least.
  assert.ok(checked >= 2, `only ${checked} copies found`);
});
