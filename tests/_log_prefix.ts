/**
 * The prefix `registry/main.ts` puts before each text log line
 * (`--log-format text`), as a regular expression source, for tests that
 * anchor a node's line with `^`.
 *
 * @module
 */

import type { LogLevel } from "../registry/node/log.ts";

/**
 * `TIMESTAMP LEVEL NODE ` as a regular expression source: any level and
 * node unless given.
 */
export function logPrefix(level?: LogLevel, node?: string): string {
  const levels = level === undefined
    ? "(?:debug|info |warn |error)"
    : level.padEnd(5);
  const id = node === undefined ? "\\S+" : escapeRegExp(node);
  return `\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z ${levels} ${id} `;
}

/** `text` with the characters special in a regular expression escaped. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
