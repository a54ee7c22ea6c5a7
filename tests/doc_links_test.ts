/**
 * Every relative link in the README, the docs/ pages and the examples'
 * READMEs leads somewhere: the file exists, and an anchor (`#heading`) names
 * a heading of that file, as GitHub spells heading anchors. The README was
 * split into pages (issue #18), and a moved section leaves links behind.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
export function anchorOf(heading: string): string {
  return heading.trim().toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a Markdown text's headings (outside code fences). */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const match = /^#{1,6} (.+)$/.exec(line);
    if (match === null) continue;
    const base = anchorOf(match[1]);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** The relative link targets of a Markdown text (outside code), with their lines. */
export function linksOf(text: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  let fenced = false;
  text.split("\n").forEach((line, i) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) return;
    const bare = line.replace(/`[^`]*`/g, "");
    for (const match of bare.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1];
      if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
      links.push({ target, line: i + 1 });
    }
  });
  return links;
}

async function pages(): Promise<string[]> {
  const found = ["README.md"];
  for await (const entry of Deno.readDir(join(ROOT, "docs"))) {
    if (entry.name.endsWith(".md")) found.push(`docs/${entry.name}`);
  }
  const walk = async (dir: string): Promise<void> => {
    for await (const entry of Deno.readDir(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory && entry.name !== "node_modules") await walk(path);
      else if (entry.name === "README.md") found.push(path);
    }
  };
  await walk("examples");
  return found.sort();
}

Deno.test("anchorOf spells anchors as GitHub does", () => {
  assert.equal(
    anchorOf("Configuration: flags, environment, config file"),
    "configuration-flags-environment-config-file",
  );
  assert.equal(anchorOf("The `rafter` command"), "the-rafter-command");
  assert.deepEqual(
    [...anchorsOf("# A\n## B\n```\n# not\n```\n## B\n")],
    ["a", "b", "b-1"],
  );
  assert.deepEqual(linksOf("[x](a.md#b) `[y](no.md)` [z](https://e)"), [
    { target: "a.md#b", line: 1 },
  ]);
});

Deno.test("every relative link of the README, docs/ and the examples' READMEs resolves", async () => {
  const broken: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const list = await pages();
  assert.ok(list.includes("docs/operations.md"), list.join(", "));
  let checked = 0;
  for (const page of list) {
    const text = await Deno.readTextFile(join(ROOT, page));
    for (const { target, line } of linksOf(text)) {
      checked++;
      const [path, anchor] = target.split("#", 2);
      const file = path === ""
        ? join(ROOT, page)
        : normalize(join(ROOT, dirname(page), decodeURIComponent(path)));
      const where = `${page}:${line} (${target})`;
      const info = await Deno.stat(file).catch(() => null);
      if (info === null) {
        broken.push(`${where}: no ${relative(ROOT, file)}`);
        continue;
      }
      if (anchor === undefined || !file.endsWith(".md")) continue;
      let anchors = anchorCache.get(file);
      if (anchors === undefined) {
        anchors = anchorsOf(await Deno.readTextFile(file));
        anchorCache.set(file, anchors);
      }
      if (!anchors.has(anchor)) {
        broken.push(
          `${where}: no heading #${anchor} in ${relative(ROOT, file)}`,
        );
      }
    }
  }
  assert.ok(checked > 50, `only ${checked} links found`);
  assert.deepEqual(broken, [], `broken links:\n${broken.join("\n")}`);
});
