/**
 * Builds the npm package `@rafter/rpc` (ESM, with type declarations) for
 * Node 20 and later, edge runtimes and bundlers:
 *
 * - JavaScript: `deno bundle` (esbuild inside) with code splitting, one
 *   file per entry (`esm/mod.js`, the edge-safe core; its subpaths
 *   `client`, `distributors`, `transport`, `protocol`;
 *   `esm/adapter/node/mod.js`, the Node entry; `esm/adapter/node/package_root.js`,
 *   the core with Node's `connect` and `serve`, which `@rafter/rpc` is under
 *   Node; the Cloudflare entry; `esm/rpc/codec/cbor.js`, `@rafter/rpc/cbor`,
 *   which loads the CBOR codec, cbor-x bundled in) and the code they share in content-hashed
 *   chunks, so all entries use one copy of the default dialer and of every
 *   class (`instanceof RpcError` holds across them);
 * - declarations: the TypeScript compiler (`declaration`,
 *   `emitDeclarationOnly`), one `.d.ts` per source module under `types/`;
 *   any diagnostic fails the build;
 * - `package.json` with conditional exports, the README, the docs/ pages
 *   it links to and the LICENSE.
 *
 * The registry, Raft and the CLI stay out (they run under Deno). The
 * output folder is removed first; the same sources give the same bytes.
 *
 * ```sh
 * deno task build:npm                  # into dist/npm
 * deno run -A scripts/build_npm.ts --out /tmp/pkg
 * npm pack ./dist/npm                    # rafter-rpc-<version>.tgz
 * ```
 *
 * @module
 */

import ts from "typescript";
import { parseArgs } from "node:util";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root folder. */
const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The package's entries: subpath, source module, and what it is. */
const ENTRIES = {
  core: "mod.ts",
  client: "stub/mod.ts",
  distributors: "stub/distributors/mod.ts",
  transport: "rpc/transport/mod.ts",
  protocol: "protocol/mod.ts",
  node: "adapter/node/mod.ts",
  nodeRoot: "adapter/node/package_root.ts",
  cloudflare: "adapter/cloudflare/mod.ts",
  cbor: "rpc/codec/cbor.ts",
} as const;

/** Oldest Node the package runs on (`AbortSignal.any` came in 20.3). */
const NODE_ENGINES = ">=20.3.0";

/** What {@link buildNpm} made. */
export interface BuildResult {
  /** The package folder (absolute). */
  outDir: string;
  /** The package's name and version. */
  name: string;
  version: string;
  /** Every file written, relative to `outDir`, sorted. */
  files: string[];
}

/**
 * Builds the npm package into `outDir` (removed first).
 *
 * @param outDir the package folder, absolute or relative to the current
 * directory.
 * @param options `quiet` keeps `deno bundle`'s report off the terminal.
 * @throws {Error} when `deno bundle` fails, the compiler reports a
 * diagnostic, or an expected file is missing.
 *
 * @example
 * ```ts ignore
 * // not run: a full build (deno bundle, then the TypeScript compiler) takes
 * // up to a minute; tests/node_package_test.ts builds and installs it
 * import { buildNpm } from "./build_npm.ts";
 * const { outDir, version } = await buildNpm("dist/npm");
 * console.log(`built @rafter/rpc ${version} in ${outDir}`);
 * ```
 */
export async function buildNpm(
  outDir: string,
  options: { quiet?: boolean } = {},
): Promise<BuildResult> {
  const out = resolve(outDir);
  if (out === resolve(ROOT) || !relative(out, ROOT).startsWith("..")) {
    throw new Error(`refusing to build into ${out}: it holds the repository`);
  }
  const config = JSON.parse(
    await Deno.readTextFile(join(ROOT, "deno.json")),
  ) as { name: string; version: string; license: string };
  await Deno.remove(out, { recursive: true }).catch((error) => {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  });
  await Deno.mkdir(out, { recursive: true });

  await bundle(join(out, "esm"), options.quiet ?? false);
  emitDeclarations(join(out, "types"));
  await Deno.copyFile(join(ROOT, "LICENSE"), join(out, "LICENSE"));
  await Deno.copyFile(join(ROOT, "README.md"), join(out, "README.md"));
  // The README links to the docs/ pages: ship them, so the links work on npm.
  await Deno.mkdir(join(out, "docs"));
  for await (const entry of Deno.readDir(join(ROOT, "docs"))) {
    if (entry.isFile && entry.name.endsWith(".md")) {
      await Deno.copyFile(
        join(ROOT, "docs", entry.name),
        join(out, "docs", entry.name),
      );
    }
  }
  await Deno.writeTextFile(
    join(out, "package.json"),
    JSON.stringify(packageJson(config), null, 2) + "\n",
  );

  const files = await listFiles(out);
  const expected = Object.values(ENTRIES).flatMap((source) => [
    `esm/${source.replace(/\.ts$/, ".js")}`,
    `types/${source.replace(/\.ts$/, ".d.ts")}`,
  ]);
  const missing = expected.filter((file) => !files.includes(file));
  if (missing.length > 0) {
    throw new Error(`the build made no ${missing.join(", ")}`);
  }
  const stray = files.filter((file) =>
    /^(esm|types)\/(registry|raft|cli|examples|tests|bench)\//.test(file)
  );
  if (stray.length > 0) {
    throw new Error(`the package reaches Deno-only code: ${stray.join(", ")}`);
  }
  return { outDir: out, name: config.name, version: config.version, files };
}

/** The JavaScript: all entries in one `deno bundle` run, split into chunks. */
async function bundle(esmDir: string, quiet: boolean): Promise<void> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "node",
      "--format",
      "esm",
      "--code-splitting",
      "--outdir",
      esmDir,
      ...Object.values(ENTRIES),
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const report = new TextDecoder().decode(stdout) +
    new TextDecoder().decode(stderr);
  if (code !== 0) {
    throw new Error(`deno bundle failed (exit ${code}):\n${report}`);
  }
  if (!quiet && report.trim() !== "") console.error(report.trimEnd());
}

/** The declarations, one per module the entries reach; fails on any diagnostic. */
function emitDeclarations(typesDir: string): void {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    // Deno's source imports name their `.ts` files; declarations keep them
    // (TypeScript resolves `./x.ts` in a `.d.ts` to `./x.d.ts`).
    allowImportingTsExtensions: true,
    rewriteRelativeImportExtensions: true,
    declaration: true,
    emitDeclarationOnly: true,
    strict: true,
    lib: ["lib.es2022.d.ts", "lib.esnext.d.ts", "lib.dom.d.ts"],
    types: ["node"],
    typeRoots: [join(ROOT, "node_modules", "@types")],
    rootDir: ROOT,
    outDir: typesDir,
    newLine: ts.NewLineKind.LineFeed,
  };
  const roots = Object.values(ENTRIES).map((source) => join(ROOT, source));
  const program = ts.createProgram(roots, options);
  const emitted = program.emit();
  const diagnostics = [
    ...ts.getPreEmitDiagnostics(program),
    ...emitted.diagnostics,
  ];
  if (diagnostics.length > 0 || emitted.emitSkipped) {
    throw new Error(
      `declarations failed:\n${
        ts.formatDiagnostics(diagnostics, {
          getCanonicalFileName: (name) => name,
          getCurrentDirectory: () => ROOT,
          getNewLine: () => "\n",
        })
      }`,
    );
  }
}

/** The package's manifest. */
function packageJson(
  config: { name: string; version: string; license: string },
): Record<string, unknown> {
  const entry = (source: string) => ({
    types: `./types/${source.replace(/\.ts$/, ".d.ts")}`,
    default: `./esm/${source.replace(/\.ts$/, ".js")}`,
  });
  const core = entry(ENTRIES.core);
  return {
    name: config.name,
    version: config.version,
    description:
      "Clustered JSON-RPC 2.0 over TCP: servers bind in a Raft-replicated registry, clients call them through cluster stubs with a distributor per call",
    license: config.license,
    type: "module",
    engines: { node: NODE_ENGINES },
    // Edge runtimes and browsers get the core (no node:*), Node the core
    // with Node's connect() and serve() (on node:net); edge conditions come
    // first because some edge bundlers also set "node".
    exports: {
      ".": {
        workerd: core,
        worker: core,
        browser: core,
        node: entry(ENTRIES.nodeRoot),
        default: core,
      },
      "./client": entry(ENTRIES.client),
      "./distributors": entry(ENTRIES.distributors),
      "./transport": entry(ENTRIES.transport),
      "./protocol": entry(ENTRIES.protocol),
      "./node": entry(ENTRIES.node),
      "./cloudflare": entry(ENTRIES.cloudflare),
      "./cbor": entry(ENTRIES.cbor),
      "./core": core,
      "./package.json": "./package.json",
    },
    main: "./esm/mod.js",
    types: "./types/mod.d.ts",
    files: ["esm/", "types/", "README.md", "docs/", "LICENSE"],
    keywords: ["json-rpc", "rpc", "raft", "service-discovery", "tcp"],
  };
}

/** Every file under `dir`, relative to it, sorted. */
async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(join(dir, prefix))) {
    const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory) files.push(...await listFiles(dir, path));
    else files.push(path);
  }
  return files.sort();
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      out: { type: "string", default: join(ROOT, "dist", "npm") },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      "usage: deno run -A scripts/build_npm.ts [--out DIR] [--quiet]\n\n" +
        "Builds the npm package @rafter/rpc into DIR (default dist/npm), removing it first.",
    );
    return 0;
  }
  const started = performance.now();
  const result = await buildNpm(values.out, { quiet: values.quiet });
  console.log(
    `built ${result.name}@${result.version} in ${
      relative(Deno.cwd(), result.outDir) || "."
    } (${result.files.length} files, ${
      Math.round(performance.now() - started)
    } ms); npm pack ${
      packPath(relative(Deno.cwd(), result.outDir))
    } makes the tarball`,
  );
  return 0;
}

if (import.meta.main) Deno.exit(await main());

/**
 * `path` as npm pack needs it: a bare `dist/npm` is read as a GitHub
 * repository (user/repo), so a relative folder gets a leading `./`.
 */
function packPath(path: string): string {
  return path.startsWith(".") || path.startsWith("/") ? path : `./${path}`;
}
