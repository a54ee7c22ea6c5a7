/**
 * The log lines of a registry node: each carries a UTC timestamp
 * (ISO 8601), a level and the node id before the message, as text or as
 * one JSON object per line (`--log-format`).
 *
 * @module
 */

/** How much a log line matters. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/**
 * Receives one log line; `level` is `"info"` when not given (callers that
 * predate levels pass none).
 */
export type LogLine = (line: string, level?: LogLevel) => void;

/** The formats `--log-format` accepts. */
export const LOG_FORMATS = ["text", "json"] as const;

/** A log line format: `text` (one line per event) or `json` (one object per line). */
export type LogFormat = typeof LOG_FORMATS[number];

/** The keys every JSON line has; extra fields never replace them. */
const RESERVED = new Set(["ts", "level", "node", "msg"]);

/** One event to log. */
export interface LogEntry {
  ts: Date;
  level: LogLevel;
  node: string;
  msg: string;
  /** Extra fields, written to JSON lines only (the text has them in `msg`). */
  fields?: Record<string, unknown>;
}

/**
 * Formats one entry: `text` as `TIMESTAMP LEVEL NODE MESSAGE` (the level
 * padded to 5 characters so the columns line up), `json` as one JSON
 * object `{"ts","level","node","msg",...fields}`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatLogLine } from "./log.ts";
 * const entry = {
 *   ts: new Date("2026-12-02T13:50:01.123Z"),
 *   level: "info" as const,
 *   node: "n1",
 *   msg: "n1: leader of term 2",
 *   fields: { term: 2 },
 * };
 * assert.equal(
 *   formatLogLine(entry, "text"),
 *   "2026-12-02T13:50:01.123Z info  n1 n1: leader of term 2",
 * );
 * assert.deepEqual(JSON.parse(formatLogLine(entry, "json")), {
 *   ts: "2026-12-02T13:50:01.123Z",
 *   level: "info",
 *   node: "n1",
 *   msg: "n1: leader of term 2",
 *   term: 2,
 * });
 * ```
 */
export function formatLogLine(entry: LogEntry, format: LogFormat): string {
  const ts = entry.ts.toISOString();
  if (format === "text") {
    return `${ts} ${entry.level.padEnd(5)} ${entry.node} ${entry.msg}`;
  }
  const object: Record<string, unknown> = {
    ts,
    level: entry.level,
    node: entry.node,
    msg: entry.msg,
  };
  for (const [key, value] of Object.entries(entry.fields ?? {})) {
    if (!RESERVED.has(key) && value !== undefined) object[key] = value;
  }
  return JSON.stringify(object);
}

/** Writes a node's log lines, each with its timestamp, level and node id. */
export interface NodeLogger {
  /** Logs `msg` at `level` (default `info`) with extra JSON `fields`. */
  log(msg: string, level?: LogLevel, fields?: Record<string, unknown>): void;
  /** The `log` callback for `RegistryNodeOptions` and the join steps. */
  readonly line: LogLine;
}

/**
 * A logger for node `node` in `format`: `error` lines go to `stderr`, the
 * others to `stdout` (by default the console's).
 */
export function nodeLogger(
  node: string,
  format: LogFormat,
  sinks: {
    stdout?: (line: string) => void;
    stderr?: (line: string) => void;
    now?: () => Date;
  } = {},
): NodeLogger {
  const stdout = sinks.stdout ?? ((line: string) => console.log(line));
  const stderr = sinks.stderr ?? ((line: string) => console.error(line));
  const now = sinks.now ?? (() => new Date());
  const log = (
    msg: string,
    level: LogLevel = "info",
    fields?: Record<string, unknown>,
  ) => {
    const text = formatLogLine({ ts: now(), level, node, msg, fields }, format);
    (level === "error" ? stderr : stdout)(text);
  };
  return { log, line: (line, level) => log(line, level) };
}

/**
 * Parses a `--log-format` value.
 *
 * @throws {Error} naming the allowed values when `value` is none of them.
 */
export function parseLogFormat(value: string | undefined): LogFormat {
  if (value === undefined) return "text";
  if ((LOG_FORMATS as readonly string[]).includes(value)) {
    return value as LogFormat;
  }
  throw new Error(
    `--log-format must be one of ${LOG_FORMATS.join(", ")}, got "${value}"`,
  );
}
