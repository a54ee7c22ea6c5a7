/**
 * Every code example in the documentation shows what it does by asserting it
 * (issue #15): `deno test --doc` runs the examples, and one that only prints
 * its result with the expected value in a comment can never fail.
 *
 * The check reads every `.ts`, `.mts`, `.js` and `.mjs` file of the
 * repository (outside `node_modules/`, `dist/` and `data*` folders) and every
 * `.md` file, and finds its code examples:
 *
 * - in a source file, each fenced block inside a JSDoc comment (`/** … *\/`)
 *   whose fence names a script language (`ts`, `typescript`, `js`, `tsx`, …)
 *   or names none (Deno then takes the file's own language);
 * - in a Markdown file, each fenced block whose fence names a script language
 *   (an unnamed fence is not run by Deno there).
 *
 * Blocks fenced as `sh`, `text`, `json` and the like are not code examples.
 *
 * A code example passes when it
 *
 * - asserts: it calls `assert(…)`, `assert.equal(…)` and the other methods
 *   of `node:assert` (imported as `import assert from "node:assert/strict";`,
 *   the convention), a std-style `assertEquals(…)` / `assertThrows(…)` /
 *   `assertRejects(…)`, or throws under a condition (`if (…) throw …`); or
 * - is not run, and says why: its fence is marked `ignore` (a fence line
 *   `ts ignore`) and its first line is the comment `// not run: <reason>`,
 *   e.g. `// not run: needs a registry cluster on 127.0.0.1:7001`; or
 * - in a Markdown file, says why it is not run (the `// not run:` first
 *   line) without `ignore`: it is then type-checked
 *   (`deno check --doc-only README.md` in `deno task check`) but not run.
 *
 * `deno task test` and `deno task test:all` leave README.md and the pages
 * of `docs/` out (`--ignore=README.md,docs/`: `deno test --doc` would run
 * their type-checked-but-not-run blocks, which need a cluster), so this file
 * runs their asserting examples itself, once: it copies each page's into a
 * Markdown file of the same name in a temporary folder of the repository
 * and runs `deno test --doc` on that folder. Every such example starts what
 * it needs on port 0, so none clashes with another on a port.
 *
 * Any other block fails the check, which lists every such block as
 * `file:line` (the line of its opening fence) with the reason.
 *
 * Prefer an example that runs: most can start what they need in-process
 * (a server on 127.0.0.1 port 0 with `serve`, a one-node registry with
 * `startRegistryNode` in a temporary folder), as the examples of `rpc/`,
 * `raft/` and `stub/` do.
 *
 * `deno run -A tests/doc_examples_test.ts [prefix…]` prints the counts
 * (blocks, asserting, ignored with a reason, neither) for the whole tree,
 * or for each path prefix given.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { repositoryFiles } from "../scripts/check_layers.ts";

/** The fence languages Deno runs as code (and the empty one in sources). */
const SCRIPT_LANGUAGES = new Set([
  "js",
  "javascript",
  "mjs",
  "cjs",
  "jsx",
  "ts",
  "typescript",
  "mts",
  "cts",
  "tsx",
]);

const SOURCE_FILE = /\.(ts|mts|js|mjs)$/;

/** What a code example does. */
export type Verdict =
  | "asserts"
  | "ignored with reason"
  | "type-checked, not run"
  | "neither";

/** One code example found. */
export interface CodeBlock {
  /** Path from the repository root, with `/`. */
  file: string;
  /** Line (1-based) of the opening fence. */
  line: number;
  /** The fence's words after the backticks, e.g. `["ts", "ignore"]`. */
  attributes: string[];
  /** The block's lines, without the JSDoc `*` prefix. */
  body: string[];
  verdict: Verdict;
}

const ASSERTION = new RegExp(
  [
    // assert(…), assert.equal(…), assert.rejects(…), …, not console.assert
    // (which only logs)
    String.raw`(?<![.\w])assert(\.\w+)?\s*\(`,
    // assertEquals(…), assertThrows(…), assertRejects(…), …
    String.raw`(?<![.\w])assert[A-Z]\w*\s*\(`,
    // if (…) throw …, if (…) { throw … }
    String.raw`\bif\s*\(.*\)\s*\{?\s*throw\b`,
  ].join("|"),
);
const NOT_RUN_REASON = /^\/\/ not run: \S/;

/**
 * Whether a block asserts, is ignored with a reason, is type-checked but
 * not run with a reason (Markdown only), or neither.
 */
export function verdictOf(
  attributes: string[],
  body: string[],
  markdown = false,
): Verdict {
  const first = body.find((line) => line.trim() !== "")?.trim() ?? "";
  const reason = NOT_RUN_REASON.test(first);
  if (attributes.includes("ignore")) {
    return reason ? "ignored with reason" : "neither";
  }
  if (markdown && reason) return "type-checked, not run";
  const code = body.join("\n");
  return ASSERTION.test(code) ? "asserts" : "neither";
}

/**
 * The code examples of one file's text: JSDoc fenced blocks of a source
 * file, script-language fenced blocks of a Markdown file.
 */
export function codeBlocksOf(file: string, text: string): CodeBlock[] {
  const markdown = file.endsWith(".md");
  const lines = text.split("\n");
  const blocks: CodeBlock[] = [];
  let inComment = markdown;
  let fence: { ticks: number; line: number; attributes: string[] } | null =
    null;
  let body: string[] = [];
  for (let index = 0; index < lines.length; index++) {
    let line = lines[index];
    if (!markdown) {
      if (!inComment) {
        if (!line.trimStart().startsWith("/**")) continue;
        inComment = true;
        line = line.trimStart().slice(3);
      }
      const end = line.indexOf("*/");
      if (end >= 0) {
        inComment = false;
        line = line.slice(0, end);
        // A block still open when the comment ends is dropped, as Deno does.
        if (fence !== null && line.trim() !== "") body.push(line);
        fence = null;
        continue;
      }
      line = line.replace(/^\s*\* ?/, "");
    }
    const match = /^\s*(`{3,})(.*)$/.exec(line);
    if (fence === null) {
      if (match === null) continue;
      fence = {
        ticks: match[1].length,
        line: index + 1,
        attributes: match[2].trim().split(/\s+/).filter((word) => word !== ""),
      };
      body = [];
      continue;
    }
    if (
      match !== null && match[1].length >= fence.ticks && match[2].trim() === ""
    ) {
      const language = fence.attributes[0] ?? "";
      const isCode = language === ""
        ? !markdown
        : SCRIPT_LANGUAGES.has(language);
      if (isCode) {
        blocks.push({
          file,
          line: fence.line,
          attributes: fence.attributes,
          body,
          verdict: verdictOf(fence.attributes, body, markdown),
        });
      }
      fence = null;
      continue;
    }
    body.push(line);
  }
  return blocks;
}

/** The repository's files that can hold code examples, sorted. */
export function documentedFiles(root: string): Promise<string[]> {
  return repositoryFiles(
    root,
    (name) => SOURCE_FILE.test(name) || name.endsWith(".md"),
  );
}

/** Every code example of the repository at `root`. */
export async function allCodeBlocks(root: string): Promise<CodeBlock[]> {
  const blocks: CodeBlock[] = [];
  for (const file of await documentedFiles(root)) {
    const text = await Deno.readTextFile(join(root, file));
    blocks.push(...codeBlocksOf(file, text));
  }
  return blocks;
}

function describe(block: CodeBlock): string {
  const why = block.attributes.includes("ignore")
    ? "marked ignore but its first line is not `// not run: <reason>`"
    : "asserts nothing";
  return `${block.file}:${block.line}: ${why}`;
}

/** What to do about a failing block, said once under the list. */
const HOW_TO_FIX =
  'Make each one assert what it shows (import assert from "node:assert/strict"; ' +
  "assert.equal(…)), or, if it cannot run, fence it ```ts ignore and make its " +
  "first line `// not run: <why>` (in Markdown the reason line alone keeps it " +
  "type-checked but not run).";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

Deno.test("every doc example asserts, or says why it is not run", async () => {
  const blocks = await allCodeBlocks(ROOT);
  assert.ok(blocks.length > 0, "found no code examples at all");
  const offending = blocks.filter((block) => block.verdict === "neither");
  if (offending.length > 0) {
    assert.fail(
      `${offending.length} doc example(s) neither assert nor say why they are not run:\n` +
        offending.map(describe).join("\n") + "\n" + HOW_TO_FIX,
    );
  }
});

/** README.md and every page of `docs/`, from the repository root. */
async function docPages(root: string): Promise<string[]> {
  const pages = ["README.md"];
  for await (const entry of Deno.readDir(join(root, "docs"))) {
    if (entry.isFile && entry.name.endsWith(".md")) {
      pages.push(`docs/${entry.name}`);
    }
  }
  return pages.sort();
}

Deno.test("the README's and docs/ pages' asserting examples pass", async () => {
  const pages = await docPages(ROOT);
  assert.ok(pages.includes("docs/client-api.md"), pages.join(", "));
  // In the repository, so that its deno.json resolves "@rafter/rpc…".
  const folder = await Deno.makeTempDir({ dir: ROOT, prefix: ".readme_" });
  let total = 0;
  try {
    await Deno.mkdir(join(folder, "docs"));
    for (const page of pages) {
      const text = await Deno.readTextFile(join(ROOT, page));
      const runnable = codeBlocksOf(page, text)
        .filter((block) => block.verdict === "asserts");
      if (runnable.length === 0) continue;
      total += runnable.length;
      const markdown = runnable.map((block) =>
        [
          `${page} line ${block.line}:`,
          "",
          "```" + block.attributes.join(" "),
          ...block.body,
          "```",
          "",
        ].join("\n")
      ).join("\n");
      await Deno.writeTextFile(join(folder, page), markdown);
    }
    assert.ok(total > 0, "the README and docs/ have no asserting example");
    const output = await new Deno.Command(Deno.execPath(), {
      // The development config: the README's examples import zod.
      args: [
        "test",
        "--config",
        join(ROOT, "deno.dev.json"),
        "-A",
        "--doc",
        folder,
      ],
      cwd: ROOT,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const said = new TextDecoder().decode(output.stdout) +
      new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 0, said);
    assert.match(said, new RegExp(`ok \\| ${total} passed`), said);
  } finally {
    await Deno.remove(folder, { recursive: true });
  }
});

Deno.test("the test tasks leave the pages to this file, and check type-checks them", async () => {
  const { tasks } = JSON.parse(
    await Deno.readTextFile(join(ROOT, "deno.json")),
  ) as { tasks: Record<string, string> };
  // Run once: here (in deno task check), not again by the test tasks.
  for (const name of ["test", "test:all"]) {
    const ignore = /--ignore=(\S+)/.exec(tasks[name])?.[1].split(",") ?? [];
    assert.ok(
      ignore.includes("README.md") && ignore.includes("docs/"),
      `deno task ${name} must ignore README.md and docs/ (doc_examples_test.ts runs their examples): ${
        tasks[name]
      }`,
    );
  }
  assert.match(
    tasks.check,
    /deno check (--config deno\.dev\.json )?--doc-only README\.md docs\/\*\.md /,
  );
  assert.match(tasks.check, /tests\/doc_examples_test\.ts/);
});

Deno.test("the check tells the kinds of block apart", () => {
  const source = [
    "/**",
    " * ```ts",
    ' * import assert from "node:assert/strict";',
    " * assert.equal(1 + 1, 2);",
    " * ```",
    " *",
    " * ```ts ignore",
    " * // not run: needs a registry cluster",
    " * await connect();",
    " * ```",
    " *",
    " * ```ts ignore",
    " * await connect();",
    " * ```",
    " *",
    " * ```",
    " * console.log(2); // 2",
    " * ```",
    " *",
    " * ```sh",
    " * deno task test",
    " * ```",
    " */",
    "const text = '```ts';",
    "// ```ts",
  ].join("\n");
  assert.deepEqual(
    codeBlocksOf("x.ts", source).map(({ line, verdict }) => [line, verdict]),
    [
      [2, "asserts"],
      [7, "ignored with reason"],
      [12, "neither"],
      [16, "neither"],
    ],
  );
  const markdown = "```\nno language\n```\n\n```js\nif (x) throw 1;\n```\n" +
    "\n```ts\n// not run: needs the user's cluster\nawait connect();\n```\n" +
    "\n```ts\nawait connect();\n```\n";
  assert.deepEqual(
    codeBlocksOf("README.md", markdown).map(({ line, verdict }) => [
      line,
      verdict,
    ]),
    [[5, "asserts"], [9, "type-checked, not run"], [14, "neither"]],
  );
  // Outside Markdown, a block without `ignore` runs: the reason alone is
  // not enough.
  assert.equal(
    verdictOf(["ts"], ["// not run: needs a cluster", "await connect();"]),
    "neither",
  );
});

/** `deno run -A tests/doc_examples_test.ts [path…]`: the counts. */
if (import.meta.main) {
  const blocks = await allCodeBlocks(ROOT);
  const prefixes = Deno.args.length > 0 ? Deno.args : [""];
  for (const prefix of prefixes) {
    const chosen = blocks.filter((block) => block.file.startsWith(prefix));
    const count = (verdict: Verdict) =>
      chosen.filter((block) => block.verdict === verdict).length;
    console.log(
      `${prefix || "(all)"}: ${chosen.length} blocks, ${
        count("asserts")
      } assert, ${count("ignored with reason")} ignored with reason, ${
        count("type-checked, not run")
      } type-checked but not run, ${count("neither")} neither`,
    );
  }
}
