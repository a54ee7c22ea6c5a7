/**
 * Where the tests find Debian's Chromium (for playwright-core).
 *
 * @module
 */

/**
 * The path of the `chromium` executable, or null when it is not installed
 * (the browser tests then skip, saying to `apt-get install -y chromium`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { chromiumPath } from "./chromium.ts";
 * const path = chromiumPath();
 * assert.ok(path === null || path.endsWith("chromium") || path.endsWith("chromium-browser"));
 * ```
 */
export function chromiumPath(): string | null {
  for (const path of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) {
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch { /* not there */ }
  }
  return null;
}
