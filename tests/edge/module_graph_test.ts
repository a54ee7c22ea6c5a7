/**
 * The edge-safe entries stay edge-safe: `mod.ts` (and each entry meant for
 * edge workers) reaches no runtime-specific module, no registry server and
 * no Raft, and type-checks with the DOM and ESNext libs alone.
 *
 * @module
 */

import assert from "node:assert/strict";
import { relative } from "node:path";
import { fileURLToPath as fromFileUrl } from "node:url";

const ROOT = fromFileUrl(new URL("../../", import.meta.url));

/** Entries that must run in an edge worker. */
const EDGE_ENTRIES = [
  "mod.ts",
  "stub/mod.ts",
  "stub/distributors/mod.ts",
  "rpc/transport/mod.ts",
  "protocol/mod.ts",
  "adapter/cloudflare/mod.ts",
];

/** What `deno info --json` says `entry` reaches: local paths and other specifiers. */
async function moduleGraph(
  entry: string,
): Promise<{ local: string[]; other: string[] }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(
    output.code,
    0,
    `deno info ${entry} failed: ${new TextDecoder().decode(output.stderr)}`,
  );
  const graph = JSON.parse(new TextDecoder().decode(output.stdout)) as {
    modules: { specifier: string }[];
  };
  const local: string[] = [];
  const other: string[] = [];
  for (const { specifier } of graph.modules) {
    if (specifier.startsWith("file://")) {
      local.push(relative(ROOT, fromFileUrl(specifier)));
    } else {
      other.push(specifier);
    }
  }
  return { local, other };
}

/** Code lines (comments dropped) that use the `Deno` namespace directly. */
async function denoUses(path: string): Promise<string[]> {
  const text = await Deno.readTextFile(`${ROOT}/${path}`);
  return text.split("\n")
    .filter((line) => !/^\s*(\*|\/\/|\/\*\*)/.test(line))
    .filter((line) => /(^|[^.\w])Deno\.[A-Za-z]/.test(line));
}

for (const entry of EDGE_ENTRIES) {
  Deno.test(`${entry} reaches no Deno.*, node:*, registry/, raft/ or adapter/ module`, async () => {
    const { local, other } = await moduleGraph(entry);
    // The graph was read: every entry reaches more than a handful of
    // modules, but the wire contract (types and constants) only its own.
    const least = entry === "protocol/mod.ts" ? 1 : 10;
    assert.ok(local.includes(entry) && local.length > least, local.join(", "));
    assert.deepEqual(other, [], "only local modules: no node:, npm:, jsr:");
    // Only the entry's own adapter folder, if it is one.
    const own = entry.startsWith("adapter/")
      ? entry.slice(0, entry.lastIndexOf("/") + 1)
      : null;
    const forbidden = local.filter((path) =>
      /^(registry|raft|cli|examples|tests|bench)\//.test(path) ||
      (path.startsWith("adapter/") &&
        (own === null || !path.startsWith(own)))
    );
    assert.deepEqual(forbidden, []);
    const uses: string[] = [];
    for (const path of local) {
      for (const line of await denoUses(path)) uses.push(`${path}: ${line}`);
    }
    assert.deepEqual(uses, []);
  });
}

Deno.test("mod.ts, its subpath entries and the Cloudflare entry type-check with the DOM and ESNext libs alone (no Deno types)", async () => {
  const check = (entry: string) =>
    new Deno.Command(Deno.execPath(), {
      args: ["check", "--config", "tests/edge/dom_only.json", entry],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
  for (const entry of EDGE_ENTRIES) {
    const result = await check(entry);
    assert.equal(result.code, 0, new TextDecoder().decode(result.stderr));
  }
  // The check can fail: the Deno entry does not pass it.
  const deno = await check("adapter/deno/mod.ts");
  assert.notEqual(deno.code, 0);
  assert.match(
    new TextDecoder().decode(deno.stderr),
    /Cannot find name 'Deno'/,
  );
});

Deno.test("the module-graph check sees what it forbids: the Deno entry reaches adapter/ and uses Deno.*", async () => {
  const { local } = await moduleGraph("adapter/deno/mod.ts");
  assert.ok(local.includes("adapter/deno/tcp.ts"));
  assert.ok((await denoUses("adapter/deno/tcp.ts")).length > 0);
  const registry = await moduleGraph("registry/mod.ts");
  assert.ok(registry.local.some((path) => path.startsWith("raft/")));
});
