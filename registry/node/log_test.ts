import assert from "node:assert/strict";
import { formatLogLine, nodeLogger, parseLogFormat } from "./log.ts";

const ts = new Date("2026-12-02T13:50:01.123Z");

Deno.test("formatLogLine: text pads the level; json keeps ts, level, node and msg against fields of those names", () => {
  assert.equal(
    formatLogLine({ ts, level: "warn", node: "n2", msg: "n2: x" }, "text"),
    "2026-12-02T13:50:01.123Z warn  n2 n2: x",
  );
  assert.equal(
    formatLogLine({ ts, level: "error", node: "n2", msg: "boom" }, "text"),
    "2026-12-02T13:50:01.123Z error n2 boom",
  );
  assert.equal(
    formatLogLine({
      ts,
      level: "info",
      node: "n2",
      msg: "a\nb",
      fields: { msg: "other", level: "error", pid: 7, gone: undefined },
    }, "json"),
    '{"ts":"2026-12-02T13:50:01.123Z","level":"info","node":"n2","msg":"a\\nb","pid":7}',
  );
});

Deno.test("nodeLogger: error lines go to stderr, the others to stdout, info by default", () => {
  const out: string[] = [];
  const err: string[] = [];
  const logger = nodeLogger("n1", "text", {
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
    now: () => ts,
  });
  logger.line("plain");
  logger.line("careful", "warn");
  logger.log("bad", "error", { code: "EIO" });
  assert.deepEqual(out, [
    "2026-12-02T13:50:01.123Z info  n1 plain",
    "2026-12-02T13:50:01.123Z warn  n1 careful",
  ]);
  assert.deepEqual(err, ["2026-12-02T13:50:01.123Z error n1 bad"]);
});

Deno.test("parseLogFormat: text by default, json, and a bad value names the allowed ones", () => {
  assert.equal(parseLogFormat(undefined), "text");
  assert.equal(parseLogFormat("json"), "json");
  assert.throws(
    () => parseLogFormat("JSON"),
    { message: '--log-format must be one of text, json, got "JSON"' },
  );
});
