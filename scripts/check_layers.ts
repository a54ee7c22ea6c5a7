/**
 * The layers of the repository, checked over its real module graph
 * (`deno info --json`, so every specifier is resolved as Deno resolves it:
 * relative paths, the import map of `deno.json`). Three rules:
 *
 * 1. **Layers**: a file imports only files of its own layer and of the
 *    layers {@link MAY_IMPORT} gives it. A layer is a top-level folder, each
 *    `adapter/<runtime>/` is one of its own, and the root `mod.ts` (the
 *    package's root entry) is one too. Production code never imports
 *    `testing/`. A runtime's entry file may also import its adapter
 *    ({@link ENTRY_ADAPTERS}). Test files (`*_test.ts`, `_test_util.ts`)
 *    follow the rules of their folder, and may also import `testing/` and
 *    `adapter/deno/` (the runtime `deno test` runs them on), nothing more: a
 *    test of `stub/` that needs a registry node is an end-to-end test.
 * 2. **Cycles**: no two files reach each other. Every import counts:
 *    static, dynamic and type-only ones (a type-only import is still
 *    coupling: the two files cannot be read, moved or changed apart). Each
 *    strongly connected component of more than one file is reported once,
 *    as one of its shortest cycles plus all its files.
 * 3. **Privacy**: a file or folder whose name starts with `_` is private to
 *    its layer (as std keeps its shared internals in `@std/internal`);
 *    code shared across layers goes to `internal/`.
 *
 * `tests/layers_test.ts` runs it on every test run. By hand:
 *
 * ```sh
 * deno run -A scripts/check_layers.ts   # prints `from -> to (rule)` lines; exit 1 if any
 * ```
 *
 * @module
 */

import { join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** One import of one repository file by another (paths relative to the root, `/`-separated). */
export interface Edge {
  from: string;
  to: string;
  /** `import type` / `export type` only: no code is loaded. */
  typeOnly: boolean;
  /** `import()` with a literal specifier. */
  dynamic: boolean;
}

/** The repository's files and the imports between them. */
export interface Graph {
  files: string[];
  edges: Edge[];
}

/** One broken rule: printed as `from -> to (rule)`. */
export interface Violation {
  from: string;
  /** The imported file; for a cycle, the rest of the cycle (`b -> … -> from`). */
  to: string;
  rule: string;
}

/** Code that may be imported by anything (tools, tests, examples). */
const ANY = "anything";

/** What each adapter may use: the runtime-free core. */
const CORE = ["mod.ts", "rpc", "stub", "protocol", "internal"] as const;

/**
 * Layer → the other layers its files may import. A layer missing here (a
 * new top-level folder, a new root file) is reported until it is added.
 */
export const MAY_IMPORT: Readonly<
  Record<string, readonly string[] | typeof ANY>
> = {
  // The package's own version, read from `deno.json` (`internal/version.ts`).
  internal: ["deno.json"],
  "deno.json": [],
  // The registry's contract is JSON-RPC methods on TCP endpoints: its
  // params schemas use the Standard Schema contract of `rpc/server/` and
  // the TCP URL rules of `rpc/transport/`.
  protocol: ["rpc", "internal"],
  rpc: ["internal"],
  stub: ["rpc", "protocol", "internal"],
  raft: ["rpc", "internal"],
  registry: ["raft", "rpc", "protocol", "internal"],
  // A user's service as a Raft state machine: the Raft driver, served
  // over RPC, answering with the registry's error codes (`protocol/`).
  replicated: ["raft", "rpc", "protocol", "internal"],
  "mod.ts": ["rpc", "stub", "protocol", "internal"],
  // `adapter/deno` may get `raft`/`registry` if it ever serves them; today it needs neither.
  // Both serve and dial TLS with `adapter/tls` (`node:tls`, which Deno has
  // too: `Deno.listenTls` can neither ask for client certificates nor
  // swap its certificate, and a `Deno.connectTls` stream has no peer
  // certificate).
  "adapter/deno": [...CORE, "adapter/tls"],
  "adapter/node": [...CORE, "adapter/tls"],
  // TLS listeners and dialers on `node:tls`, and the `node:net` socket
  // stream they share with `adapter/node`: no runtime entry of its own.
  "adapter/tls": CORE,
  "adapter/cloudflare": CORE,
  // Files directly in `adapter/`: the checks that span the runtime entries
  // (`adapter/entries_test.ts`), so they may import each of them.
  adapter: [
    ...CORE,
    "adapter/deno",
    "adapter/node",
    "adapter/cloudflare",
    "adapter/tls",
  ],
  cli: ANY,
  tests: ANY,
  bench: ANY,
  examples: ANY,
  scripts: ANY,
  testing: ANY,
};

/**
 * Entry files of a runtime that may import that runtime's adapter although
 * their layer may not: they are what `deno run` / the `./raft/deno` export
 * start, so they wire the layer to its runtime. Add one only with the why.
 */
export const ENTRY_ADAPTERS: Readonly<Record<string, string>> = {
  // `deno task registry`: runs a registry node on Deno's TCP listener.
  "registry/main.ts": "adapter/deno",
  // `@rafter/rpc/raft/deno`: the Deno driver, its peer port on Deno's listener.
  "raft/deno.ts": "adapter/deno",
  // `@rafter/rpc/replicated`: a replica's ports on Deno's listener.
  "replicated/mod.ts": "adapter/deno",
};

/** Layers that are not published code, so they may use `testing/`. */
const NOT_PRODUCTION = new Set([
  "tests",
  "bench",
  "examples",
  "scripts",
  "testing",
]);

/** Layers a test file may import besides those of its folder. */
const TEST_EXTRAS = ["testing", "adapter/deno"];

/** The layer of a repository path: its top-level folder, `adapter/<runtime>`, or a root file's name. */
export function layerOf(path: string): string {
  const parts = path.split("/");
  if (parts.length === 1) return path;
  if (parts[0] === "adapter" && parts.length > 2) return `adapter/${parts[1]}`;
  return parts[0];
}

/** Whether `path` is test code: `*_test.ts` or `_test_util.ts`. */
export function isTestFile(path: string): boolean {
  const name = path.slice(path.lastIndexOf("/") + 1);
  return /_test\.[cm]?tsx?$/.test(name) || /^_test_util\.[cm]?tsx?$/.test(name);
}

/** Whether `path` is private to its layer: a segment below the layer starts with `_`. */
export function isPrivate(path: string): boolean {
  const layer = layerOf(path);
  const below = path === layer ? path : path.slice(layer.length + 1);
  return below.split("/").some((part) => part.startsWith("_"));
}

function layerRule(edge: Edge): Violation | null {
  const from = layerOf(edge.from);
  const to = layerOf(edge.to);
  if (from === to) return null;
  const may = MAY_IMPORT[from];
  if (may === undefined) {
    return {
      from: edge.from,
      to: edge.to,
      rule: `layer: ${from} is not in MAY_IMPORT`,
    };
  }
  const test = isTestFile(edge.from);
  if (to === "testing") {
    if (test || NOT_PRODUCTION.has(from)) return null;
    return {
      from: edge.from,
      to: edge.to,
      rule: "layer: production code may not import testing/",
    };
  }
  if (may === ANY) return null;
  if (may.includes(to)) return null;
  if (ENTRY_ADAPTERS[edge.from] === to) return null;
  if (test && TEST_EXTRAS.includes(to)) return null;
  const allowed = may.length === 0
    ? "nothing of ours"
    : `only ${may.join(", ")}`;
  return {
    from: edge.from,
    to: edge.to,
    rule: `layer: ${from}${test ? " (test)" : ""} may import ${allowed}`,
  };
}

function privacyRule(edge: Edge): Violation | null {
  if (!isPrivate(edge.to) || layerOf(edge.from) === layerOf(edge.to)) {
    return null;
  }
  return {
    from: edge.from,
    to: edge.to,
    rule: `private: a _ file of ${layerOf(edge.to)}/, imported from ${
      layerOf(edge.from)
    }`,
  };
}

/** The strongly connected components of more than one file (Tarjan), each sorted. */
export function cyclesOf(graph: Graph): string[][] {
  const next = new Map<string, string[]>();
  for (const file of graph.files) next.set(file, []);
  for (const { from, to } of graph.edges) {
    if (!next.has(from)) next.set(from, []);
    if (!next.has(to)) next.set(to, []);
    next.get(from)!.push(to);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file)!) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(file, Math.min(low.get(file)!, index.get(to)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let top: string;
    do {
      top = stack.pop()!;
      onStack.delete(top);
      component.push(top);
    } while (top !== file);
    if (component.length > 1) components.push(component.sort());
  };
  for (const file of [...next.keys()].sort()) if (!index.has(file)) visit(file);
  return components.sort((a, b) => a[0] < b[0] ? -1 : 1);
}

/** A shortest cycle through the component's first file, within the component. */
function shortestCycle(
  component: string[],
  next: Map<string, string[]>,
): string[] {
  const inside = new Set(component);
  const start = component[0];
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const to of next.get(queue[i])!) {
      if (!inside.has(to) || cameFrom.has(to)) continue;
      cameFrom.set(to, queue[i]);
      if (to === start) {
        const path: string[] = [];
        for (let at = queue[i]; at !== start; at = cameFrom.get(at)!) {
          path.unshift(at);
        }
        return [start, ...path, start];
      }
      queue.push(to);
    }
  }
  return component;
}

/** Every broken rule of `graph`, layer and privacy ones by edge, then one per cycle. */
export function checkGraph(graph: Graph): Violation[] {
  const violations: Violation[] = [];
  const seen = new Set<string>();
  for (const edge of graph.edges) {
    for (const violation of [layerRule(edge), privacyRule(edge)]) {
      if (violation === null) continue;
      const key = format(violation);
      if (seen.has(key)) continue;
      seen.add(key);
      violations.push(violation);
    }
  }
  violations.sort((a, b) => format(a) < format(b) ? -1 : 1);
  const next = new Map<string, string[]>();
  for (const { from, to } of graph.edges) {
    next.set(from, [...(next.get(from) ?? []), to]);
  }
  for (const component of cyclesOf(graph)) {
    const cycle = shortestCycle(component, next);
    violations.push({
      from: cycle[0],
      to: cycle.slice(1).join(" -> "),
      rule: `cycle of ${component.length} files: ${component.join(", ")}`,
    });
  }
  return violations;
}

/** `from -> to (rule)`. */
export function format(violation: Violation): string {
  return `${violation.from} -> ${violation.to} (${violation.rule})`;
}

/** Folders never walked: dependencies, build output, data of local runs, VCS. */
const SKIPPED = /^(node_modules|dist|data.*|\..*)$/;

/** The TypeScript files under `root`, relative and `/`-separated, sorted. */
export function sourceFiles(root: string): Promise<string[]> {
  return repositoryFiles(
    root,
    (name) => /\.[cm]?tsx?$/.test(name) && !name.endsWith(".d.ts"),
  );
}

/**
 * The repository's files whose name `keep` accepts, as sorted paths from
 * `root` with `/`: outside `node_modules/`, `dist/`, `data*` folders and
 * dot-folders (the other repository checks walk the tree with it too).
 */
export async function repositoryFiles(
  root: string,
  keep: (name: string) => boolean,
  dir = "",
): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(join(root, dir))) {
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      if (!SKIPPED.test(entry.name)) {
        files.push(...await repositoryFiles(root, keep, path));
      }
    } else if (entry.isFile && keep(entry.name)) {
      files.push(path);
    }
  }
  return files.sort();
}

interface InfoDependency {
  code?: { specifier?: string };
  type?: { specifier?: string };
  isDynamic?: boolean;
}

interface InfoModule {
  specifier: string;
  error?: string;
  dependencies?: InfoDependency[];
  typesDependency?: { dependency?: { specifier?: string } };
}

/**
 * The module graph of every source file under `root`, from one
 * `deno info --json` call on a temporary module that imports them all
 * (`deno info` takes one root). Only imports between files under `root`
 * are kept; `npm:`, `node:` and remote modules are not ours.
 */
export async function moduleGraph(root: string): Promise<Graph> {
  const files = await sourceFiles(root);
  const dir = await Deno.makeTempDir({ prefix: "rafter-layers-" });
  try {
    const all = join(dir, "all.ts");
    await Deno.writeTextFile(
      all,
      files.map((file) =>
        `import ${JSON.stringify(pathToFileURL(join(root, file)).href)};\n`
      )
        .join(""),
    );
    // The development config where there is one: tests and benchmarks
    // import npm packages that deno.json leaves out.
    let config: string[] = ["--no-config"];
    for (const name of ["deno.json", "deno.dev.json"]) {
      try {
        await Deno.stat(join(root, name));
        config = ["--config", join(root, name)];
      } catch {
        // A folder without it (the checker's own negative control has none).
      }
    }
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", ...config, all],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!output.success) {
      throw new Error(
        `deno info failed: ${new TextDecoder().decode(output.stderr)}`,
      );
    }
    const info = JSON.parse(new TextDecoder().decode(output.stdout)) as {
      modules: InfoModule[];
    };
    const local = (specifier: string | undefined): string | null => {
      if (specifier === undefined || !specifier.startsWith("file:")) {
        return null;
      }
      const path = relative(root, fileURLToPath(specifier));
      const parts = path.split(sep);
      if (
        path === "" || parts.some((part) => part === ".." || SKIPPED.test(part))
      ) {
        return null;
      }
      return parts.join("/");
    };
    const edges: Edge[] = [];
    const broken: string[] = [];
    for (const module of info.modules) {
      const from = local(module.specifier);
      if (from === null) continue;
      if (module.error !== undefined) broken.push(`${from}: ${module.error}`);
      for (const dependency of module.dependencies ?? []) {
        const code = local(dependency.code?.specifier);
        const type = local(dependency.type?.specifier);
        const to = code ?? type;
        if (to === null) continue;
        edges.push({
          from,
          to,
          typeOnly: code === null,
          dynamic: dependency.isDynamic === true,
        });
      }
      const types = local(module.typesDependency?.dependency?.specifier);
      if (types !== null) {
        edges.push({ from, to: types, typeOnly: true, dynamic: false });
      }
    }
    if (broken.length > 0) {
      throw new Error(`unresolved modules:\n${broken.join("\n")}`);
    }
    return { files, edges };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  const root = fileURLToPath(new URL("../", import.meta.url));
  const violations = checkGraph(await moduleGraph(root));
  for (const violation of violations) console.log(format(violation));
  if (violations.length > 0) {
    console.error(`${violations.length} layer violation(s)`);
    Deno.exit(1);
  }
}
