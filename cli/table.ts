/**
 * Plain-text tables for the CLI: columns padded to their widest cell,
 * two spaces apart, headers first.
 *
 * @module
 */

/**
 * Formats rows under headers; a table with no rows prints only the headers
 * and "(none)".
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatTable } from "./table.ts";
 * assert.equal(
 *   formatTable(["NAME", "ENDPOINTS"], [["hello", "2"]]),
 *   "NAME   ENDPOINTS\nhello  2",
 * );
 * assert.equal(formatTable(["NAME"], []), "NAME\n(none)");
 * ```
 */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, i) =>
    Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length))
  );
  const line = (cells: string[]) =>
    cells.map((cell, i) =>
      i === cells.length - 1 ? cell : cell.padEnd(widths[i])
    )
      .join("  ").trimEnd();
  const lines = [line(headers), ...rows.map(line)];
  if (rows.length === 0) lines.push("(none)");
  return lines.join("\n");
}
