/**
 * The public API, name by name: every name each entry of `deno.json`'s
 * `exports` offers, with its kind (`deno doc --json`) and whether it is a
 * value at run time (`import()`) or a type only, compared with
 * `tests/exports.golden.txt`. A new, renamed or dropped export fails this
 * test until the golden file is rewritten, so changing the API is a
 * deliberate step that shows in review:
 *
 * ```sh
 * deno test -A tests/exports_test.ts               # compare
 * deno test -A tests/exports_test.ts -- --update   # rewrite the golden file
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const GOLDEN = new URL("./exports.golden.txt", import.meta.url);

/** `deno.json`'s `exports`: subpath → module, in the order written there. */
async function entries(): Promise<[string, string][]> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    exports: Record<string, string>;
  };
  return Object.entries(config.exports);
}

/** One symbol of `deno doc --json`. */
interface DocSymbol {
  name: string;
  declarations: { kind: string }[];
}

/** Each module's exported names and their kinds, from one `deno doc --json` run. */
async function documented(
  modules: string[],
): Promise<Map<string, Map<string, string>>> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", ...modules],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(
    output.code,
    0,
    `deno doc --json failed: ${new TextDecoder().decode(output.stderr)}`,
  );
  const doc = JSON.parse(new TextDecoder().decode(output.stdout)) as {
    nodes: Record<string, { symbols: DocSymbol[] }>;
  };
  const byModule = new Map<string, Map<string, string>>();
  for (const [specifier, { symbols }] of Object.entries(doc.nodes)) {
    const kinds = new Map<string, string>();
    for (const symbol of symbols) {
      const kind = [...new Set(symbol.declarations.map((d) => d.kind))]
        .sort().join("+");
      kinds.set(symbol.name, kind);
    }
    byModule.set(fileURLToPath(specifier), kinds);
  }
  // One run documents each declaration once: a name that a second entry
  // re-exports is a "reference" there, and which entry gets the
  // declaration depends on the others. Name the declared kind instead, so
  // that an entry's lines change only when its own exports do.
  const declared = new Map<string, string>();
  for (const kinds of byModule.values()) {
    for (const [name, kind] of kinds) {
      if (kind !== "reference") declared.set(name, kind);
    }
  }
  for (const kinds of byModule.values()) {
    for (const [name, kind] of kinds) {
      if (kind === "reference" && declared.has(name)) {
        kinds.set(name, declared.get(name)!);
      }
    }
  }
  return byModule;
}

/**
 * The listing: one line per entry and name, `<subpath> <name> <kind>`,
 * where a name that is no value at run time (an interface, a type alias, a
 * class exported with `export type`) has its kind followed by `(type)`.
 */
async function listing(): Promise<string> {
  const all = await entries();
  const docs = await documented(all.map(([, module]) => module));
  const lines: string[] = [];
  for (const [subpath, module] of all) {
    const path = fileURLToPath(new URL(module, `file://${ROOT}`));
    const kinds = docs.get(path);
    assert.ok(kinds !== undefined, `deno doc said nothing of ${module}`);
    const values = new Set(
      Object.keys(await import(`../${module.replace(/^\.\//, "")}`)),
    );
    for (const name of values) {
      assert.ok(kinds.has(name), `${subpath}: ${name} has no documentation`);
    }
    const names = [...kinds.keys()].sort();
    for (const name of names) {
      const kind = kinds.get(name)!;
      lines.push(
        `${subpath} ${name} ${kind}${values.has(name) ? "" : " (type)"}`,
      );
    }
  }
  return lines.join("\n") + "\n";
}

Deno.test("every entry exports exactly the names in tests/exports.golden.txt (rewrite it with `deno test -A tests/exports_test.ts -- --update`)", async () => {
  const actual = await listing();
  if (Deno.args.includes("--update")) {
    await Deno.writeTextFile(GOLDEN, actual);
    return;
  }
  const expected = await Deno.readTextFile(GOLDEN).catch(() => "");
  const want = new Set(expected.split("\n").filter((line) => line !== ""));
  const have = new Set(actual.split("\n").filter((line) => line !== ""));
  const added = [...have].filter((line) => !want.has(line));
  const removed = [...want].filter((line) => !have.has(line));
  assert.deepEqual(
    { added, removed },
    { added: [], removed: [] },
    "the public API changed: if that is meant, run `deno test -A tests/exports_test.ts -- --update` and commit tests/exports.golden.txt",
  );
});
