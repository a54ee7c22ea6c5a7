/**
 * What a user's run installs. `deno task demo`, `deno run -A
 * registry/main.ts`, the CLI and the hello example resolve through
 * `deno.json` and `deno.lock`, and Deno installs every package of that
 * lockfile (and of `deno.json`'s imports) on the first run: so both hold
 * only the packages Rafter runs on. The tests', benchmarks' and build's
 * packages (fast-check, zod, grpc-js, typescript…) are in `deno.dev.json`
 * and `deno.dev.lock`, which the test, bench and check tasks pass with
 * `--config`. And `@rafter/rpc/deno` and `@rafter/rpc/node` reach no npm
 * package: CBOR (cbor-x, and its native helper cbor-extract) is the
 * opt-in entry `@rafter/rpc/cbor`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** `deno.json`'s imports: the packages Rafter's own code runs on. */
const RUNTIME_IMPORTS = ["@peculiar/x509", "cbor-x", "reflect-metadata"];

/**
 * Every package `deno.lock` may hold: the runtime imports and what they
 * depend on (cbor-x's optional native helper, x509's ASN.1 stack).
 */
const ALLOWED_PACKAGES = [
  /^@cbor-extract\/cbor-extract-[a-z0-9-]+$/,
  /^@peculiar\/(x509|utils|asn1-[a-z0-9-]+)$/,
  /^(asn1js|cbor-extract|cbor-x|detect-libc|node-gyp-build-optional-packages)$/,
  /^(pvtsutils|pvutils|reflect-metadata|tslib|tsyringe)$/,
];

/** The programs a user runs from a checkout, and the entries a project imports. */
const USER_PROGRAMS = [
  "examples/demo/main.ts",
  "registry/main.ts",
  "cli/main.ts",
  "examples/hello/server.ts",
  "examples/hello/client.ts",
];

interface Lockfile {
  specifiers?: Record<string, string>;
  npm?: Record<string, unknown>;
}

async function readJson<T>(name: string): Promise<T> {
  return JSON.parse(await Deno.readTextFile(join(ROOT, name))) as T;
}

/** `@scope/name@1.2.3_peer@4` → `@scope/name`. */
function packageName(key: string): string {
  return key.slice(0, key.indexOf("@", 1));
}

async function deno(
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env: { NO_COLOR: "1" },
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

/** The npm packages (name@version) and `jsr:`/remote modules `entry` reaches. */
async function reachedPackages(entry: string): Promise<string[]> {
  // --frozen-lockfile: fails if resolving the graph would change deno.lock.
  const info = await deno(["info", "--json", "--frozen-lockfile", entry]);
  assert.equal(info.code, 0, `deno info ${entry}: ${info.stderr}`);
  const graph = JSON.parse(info.stdout) as {
    modules: { specifier: string; npmPackage?: string }[];
  };
  assert.ok(
    graph.modules.some((module) => module.specifier.endsWith(entry)),
    `the graph of ${entry} does not hold it`,
  );
  return graph.modules
    .filter((module) =>
      !module.specifier.startsWith("file:") &&
      !module.specifier.startsWith("node:")
    )
    .map((module) => module.npmPackage ?? module.specifier)
    .sort();
}

Deno.test("deno.json imports only the packages Rafter runs on; the development ones are in deno.dev.json", async () => {
  const config = await readJson<{ imports: Record<string, string> }>(
    "deno.json",
  );
  assert.deepEqual(Object.keys(config.imports).sort(), RUNTIME_IMPORTS);
  const dev = await readJson<{ imports: Record<string, string> }>(
    "deno.dev.json",
  );
  for (const name of RUNTIME_IMPORTS) {
    assert.equal(dev.imports[name], config.imports[name], name);
  }
  for (const name of ["fast-check", "zod", "valibot", "typescript", "jayson"]) {
    assert.ok(name in dev.imports, `deno.dev.json has no ${name}`);
  }
});

Deno.test("deno.dev.json names the same package, version and exports as deno.json", async () => {
  type Config = { name: string; version: string; exports: unknown };
  const config = await readJson<Config>("deno.json");
  const dev = await readJson<Config & { lock: string }>("deno.dev.json");
  assert.deepEqual(
    { name: dev.name, version: dev.version, exports: dev.exports },
    { name: config.name, version: config.version, exports: config.exports },
  );
  assert.equal(dev.lock, "deno.dev.lock");
});

Deno.test("deno.lock, which deno task demo and deno run -A registry/main.ts install, holds no development package", async () => {
  const lock = await readJson<Lockfile>("deno.lock");
  const packages = Object.keys(lock.npm ?? {});
  assert.ok(packages.some((key) => key.startsWith("cbor-x@")), "no cbor-x");
  const stray = packages.filter((key) =>
    !ALLOWED_PACKAGES.some((allowed) => allowed.test(packageName(key)))
  );
  assert.deepEqual(
    stray,
    [],
    "deno.lock holds packages a user of the demo or the registry does not need " +
      "(a development run without --config deno.dev.json added them? " +
      "git checkout deno.lock, and pass --config deno.dev.json)",
  );
  const specifiers = Object.keys(lock.specifiers ?? {})
    .map((specifier) => packageName(specifier.replace(/^npm:/, "")))
    .sort();
  assert.deepEqual(specifiers, RUNTIME_IMPORTS);
});

for (const entry of USER_PROGRAMS) {
  Deno.test(`${entry} resolves within deno.lock (no package beyond it, the lockfile unchanged)`, async () => {
    const before = await Deno.readTextFile(join(ROOT, "deno.lock"));
    const reached = await reachedPackages(entry);
    const lock = await readJson<Lockfile>("deno.lock");
    for (const key of reached) {
      assert.ok(key in (lock.npm ?? {}), `${entry} reaches ${key}`);
    }
    assert.equal(await Deno.readTextFile(join(ROOT, "deno.lock")), before);
  });
}

Deno.test("a module that needs a package outside deno.lock is refused by that check", async () => {
  const folder = await Deno.makeTempDir({ dir: ROOT, prefix: ".deps_" });
  try {
    const entry = join(folder, "zod_user.ts");
    await Deno.writeTextFile(entry, 'import "npm:zod@4.6.7";\n');
    const before = await Deno.readTextFile(join(ROOT, "deno.lock"));
    const info = await deno(["info", "--json", "--frozen-lockfile", entry]);
    assert.notEqual(info.code, 0, info.stdout);
    assert.match(info.stderr, /lockfile is out of date/i);
    assert.equal(await Deno.readTextFile(join(ROOT, "deno.lock")), before);
  } finally {
    await Deno.remove(folder, { recursive: true });
  }
});

Deno.test("@rafter/rpc/deno and @rafter/rpc/node reach no npm package (no cbor-x, no cbor-extract); @rafter/rpc/cbor and the registry bring cbor-x", async () => {
  assert.deepEqual(await reachedPackages("adapter/deno/mod.ts"), []);
  assert.deepEqual(await reachedPackages("adapter/node/mod.ts"), []);
  assert.deepEqual(await reachedPackages("rpc/codec/cbor.ts"), [
    "cbor-x@1.6.8",
  ]);
  // Registry nodes answer CBOR clients without the user's opt-in.
  assert.deepEqual(await reachedPackages("registry/mod.ts"), [
    "cbor-x@1.6.8",
  ]);
});
