/**
 * The `.dockerignore` rules of `tests/_dockerignore.ts`, which
 * `tests/deploy_try_e2e_test.ts` copies the image's build context with.
 *
 * @module
 */

import assert from "node:assert/strict";
import { copyContext, isIgnored, parseDockerignore } from "./_dockerignore.ts";
import { withTempDir } from "../testing/temp.ts";

const ignored = (file: string, path: string) =>
  isIgnored(parseDockerignore(file), path);

Deno.test("dockerignore: comments, blank lines, spaces and cleaning", () => {
  const patterns = parseDockerignore(
    "\uFEFF# a comment\n\n  .git  \n./dist/\n/node_modules\r\n!\n",
  );
  assert.deepEqual(patterns.map((p) => p.pattern), [
    ".git",
    "dist",
    "node_modules",
  ]);
  assert.ok(!ignored("# a comment", "# a comment"));
  assert.ok(ignored("./dist/", "dist"));
  assert.ok(ignored("/node_modules", "node_modules/x/index.js"));
});

Deno.test("dockerignore: patterns are anchored at the context root", () => {
  assert.ok(ignored("data*", "data"));
  assert.ok(ignored("data*", "data1/wal/0001"));
  assert.ok(!ignored("data*", "raft/data_dir.ts"));
  assert.ok(!ignored("node_modules", "examples/node_modules/x"));
  assert.ok(ignored("*/node_modules", "examples/node_modules/x"));
  assert.ok(!ignored("*/node_modules", "a/b/node_modules"));
});

Deno.test("dockerignore: * ? [] ** and escapes", () => {
  assert.ok(ignored("*.md", "README.md"));
  assert.ok(!ignored("*.md", "docs/a.md"), "* does not cross /");
  assert.ok(ignored("**/*.md", "docs/a.md"));
  assert.ok(ignored("**/*.md", "README.md"), "**/ is also no folder");
  assert.ok(ignored("docs/**", "docs/a/b.md"));
  assert.ok(ignored("a/**/b", "a/b"));
  assert.ok(ignored("a/**/b", "a/x/y/b"));
  assert.ok(ignored("data?", "data1"));
  assert.ok(!ignored("data?", "data12"));
  assert.ok(ignored("data[0-9]", "data7"));
  assert.ok(!ignored("data[^0-9]", "data7"));
  assert.ok(ignored("data[^0-9]", "datax"));
  assert.ok(ignored("a\\*b", "a*b"));
  assert.ok(!ignored("a\\*b", "axb"));
  assert.ok(!ignored("a.b", "axb"), ". is a plain character");
  assert.throws(
    () => parseDockerignore("data[0-9"),
    /unclosed \[ in data\[0-9/,
  );
});

Deno.test("dockerignore: the last matching pattern decides; ! re-includes", () => {
  const file = "docs\n!docs/keep.md\n*.md\n!README.md";
  assert.ok(ignored(file, "docs/other.md"));
  assert.ok(!ignored(file, "docs/keep.md"));
  assert.ok(ignored(file, "CHANGELOG.md"));
  assert.ok(!ignored(file, "README.md"));
  assert.ok(!ignored(file, "mod.ts"));
});

Deno.test("dockerignore: copyContext copies what is kept, links as links", async () => {
  await withTempDir(async (dir) => {
    const from = `${dir}/ctx`;
    for (const path of ["a/b", "data1/wal", "node_modules/x", "raft"]) {
      await Deno.mkdir(`${from}/${path}`, { recursive: true });
    }
    for (
      const path of [
        "a/b/c.ts",
        "data1/wal/1",
        "node_modules/x/i.js",
        "raft/data_dir.ts",
        "keep.md",
        "drop.md",
      ]
    ) {
      await Deno.writeTextFile(`${from}/${path}`, path);
    }
    await Deno.symlink("a/b/c.ts", `${from}/link.ts`);
    const patterns = parseDockerignore("data*\nnode_modules\n*.md\n!keep.md");
    const copied = await copyContext(from, `${dir}/app`, patterns);
    assert.deepEqual(copied.sort(), [
      "a/b/c.ts",
      "keep.md",
      "link.ts",
      "raft/data_dir.ts",
    ]);
    assert.equal(await Deno.readLink(`${dir}/app/link.ts`), "a/b/c.ts");
    assert.equal(
      await Deno.readTextFile(`${dir}/app/raft/data_dir.ts`),
      "raft/data_dir.ts",
    );
  });
});
