/**
 * The rules docker applies to a `.dockerignore` file (here
 * `examples/deploy/Dockerfile.dockerignore`), enough to copy a build
 * context as `COPY . .` would see it, without docker:
 *
 * - one pattern a line; lines starting with `#` and blank lines are skipped;
 *   surrounding spaces are trimmed;
 * - `!pattern` re-includes what an earlier pattern excluded; the last
 *   pattern that matches a path decides;
 * - patterns are cleaned as paths (`./a/` is `a`, a leading `/` is dropped)
 *   and anchored at the context root: `data*` is `data1/` but not
 *   `raft/data_dir.ts` (unlike `.gitignore`);
 * - `*` is any run of characters but `/`, `?` one character but `/`,
 *   `[...]` a character class (`[^...]` negated), `**` any number of folders (also none),
 *   `\` escapes the next character;
 * - a pattern that matches a folder matches everything under it.
 *
 * @module
 */

/** One line of a `.dockerignore`. */
export interface IgnorePattern {
  /** The line as cleaned (without `!`). */
  pattern: string;
  /** `!pattern`: re-includes. */
  exception: boolean;
  regex: RegExp;
}

/** The patterns of a `.dockerignore` text, in order. */
export function parseDockerignore(text: string): IgnorePattern[] {
  const patterns: IgnorePattern[] = [];
  for (const raw of text.replace(/^\uFEFF/, "").split(/\r?\n/)) {
    if (raw.startsWith("#")) continue;
    let line = raw.trim();
    if (line === "") continue;
    const exception = line.startsWith("!");
    if (exception) line = line.slice(1).trim();
    if (line === "") continue;
    const pattern = cleanPath(line);
    patterns.push({ pattern, exception, regex: compile(pattern) });
  }
  return patterns;
}

/** `path` (relative to the context root, `/`-separated) is left out. */
export function isIgnored(patterns: IgnorePattern[], path: string): boolean {
  const parts = cleanPath(path).split("/");
  // The path itself and each folder above it.
  const candidates = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
  let ignored = false;
  for (const p of patterns) {
    if (candidates.some((c) => p.regex.test(c))) ignored = !p.exception;
  }
  return ignored;
}

/** Path cleaning as Go's `filepath.Clean`, then without a leading `/`. */
function cleanPath(path: string): string {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === ".." && out.length > 0 && out.at(-1) !== "..") out.pop();
    else if (part !== ".." || !path.startsWith("/")) out.push(part);
  }
  return out.length === 0 ? "." : out.join("/");
}

function compile(pattern: string): RegExp {
  let re = "^";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        i++;
        if (pattern[i + 1] === "/") {
          i++;
          re += "(?:.*/)?"; // `**/`: any folders, also none
        } else {
          re += ".*";
        }
      } else {
        re += "[^/]*";
      }
    } else if (ch === "?") {
      re += "[^/]";
    } else if (ch === "\\" && i + 1 < pattern.length) {
      i++;
      re += escapeRegex(pattern[i]);
    } else if (ch === "[") {
      const end = pattern.indexOf("]", i + 2);
      if (end < 0) throw new Error(`dockerignore: unclosed [ in ${pattern}`);
      // As Go's filepath.Match: `[^...]` negates.
      re += `[${pattern.slice(i + 1, end)}]`;
      i = end;
    } else {
      re += escapeRegex(ch);
    }
  }
  return new RegExp(re + "$");
}

function escapeRegex(ch: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(ch) ? `\\${ch}` : ch;
}

/**
 * Copies the build context `from` into `to` as `COPY . .` does with these
 * patterns: files, folders and symbolic links (as links), leaving out what
 * {@link isIgnored} says. Returns the relative paths copied.
 */
export async function copyContext(
  from: string,
  to: string,
  patterns: IgnorePattern[],
): Promise<string[]> {
  const copied: string[] = [];
  // A left-out folder is skipped whole unless a `!` pattern could bring
  // back something inside it.
  const prune = !patterns.some((p) => p.exception);
  async function walk(rel: string): Promise<void> {
    const dir = rel === "" ? from : `${from}/${rel}`;
    for await (const entry of Deno.readDir(dir)) {
      const path = rel === "" ? entry.name : `${rel}/${entry.name}`;
      const ignored = isIgnored(patterns, path);
      if (entry.isDirectory) {
        if (ignored && prune) continue;
        await Deno.mkdir(`${to}/${path}`, { recursive: true });
        await walk(path);
      } else if (!ignored) {
        if (entry.isSymlink) {
          await Deno.symlink(
            await Deno.readLink(`${from}/${path}`),
            `${to}/${path}`,
          );
        } else {
          await Deno.copyFile(`${from}/${path}`, `${to}/${path}`);
        }
        copied.push(path);
      }
    }
  }
  await Deno.mkdir(to, { recursive: true });
  await walk("");
  return copied;
}
