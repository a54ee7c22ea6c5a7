/**
 * The log lines of `registry/main.ts` as a real node process prints them:
 * each with a UTC timestamp, a level and the node id (`--log-format text`,
 * the default), or one JSON object per line (`--log-format json`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { freePorts } from "../testing/ports.ts";
import { waitFor, within } from "../testing/time.ts";
import { VERSION } from "../internal/version.ts";
import { spawnRegistry } from "./_registry_process.ts";

/** `TIMESTAMP LEVEL NODE MESSAGE`, the level padded to 5 characters. */
const TEXT_LINE = /^(\S+) (debug|info |warn |error) (\S+) (.*)$/;

/** The output's lines, without the empty one after the last newline. */
function linesOf(output: string): string[] {
  return output.split("\n").filter((line) => line !== "");
}

/** A text line's parts; fails when the line does not have the prefix. */
function textLine(line: string) {
  const match = TEXT_LINE.exec(line);
  assert.ok(match, `no timestamp, level and node id: ${line}`);
  const [, ts, level, node, msg] = match;
  const at = new Date(ts);
  assert.ok(!Number.isNaN(at.getTime()), `not a timestamp: ${ts}`);
  // ISO 8601 in UTC, as Date#toISOString writes it.
  assert.equal(at.toISOString(), ts);
  return { ts: at, level: level.trim(), node, msg };
}

Deno.test("registry/main.ts: every text line starts with a UTC timestamp, its level and the node id, before the message", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_log_" });
  try {
    const [client, peer] = freePorts(2);
    const before = Date.now();
    const node = spawnRegistry(cwd, [
      "--id",
      "n7",
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
    ]);
    await waitFor(
      () => node.output.includes(": leader of term"),
      "n7 to lead",
      20_000,
    );
    node.child.kill("SIGTERM");
    assert.equal(await within(node.exit(), 10_000, "n7 to exit"), 0);
    const after = Date.now();
    const lines = linesOf(node.output).map(textLine);
    assert.ok(lines.length >= 4, node.output);
    for (const line of lines) {
      assert.equal(line.node, "n7");
      assert.ok(
        line.ts.getTime() >= before - 1000 && line.ts.getTime() <= after + 1000,
        `${line.ts.toISOString()} is not the time of this run`,
      );
    }
    // Their order is the order they were written in.
    const times = lines.map((line) => line.ts.getTime());
    assert.deepEqual(times, [...times].sort((a, b) => a - b));
    // The message after the prefix is the one it always was.
    const listening = lines.find((line) =>
      line.msg.startsWith("registry n7 listening on ")
    );
    assert.ok(listening, node.output);
    assert.equal(listening.level, "info");
    assert.match(
      listening.msg,
      new RegExp(
        `^registry n7 listening on tcp://127\\.0\\.0\\.1:${client}, peers on tcp://127\\.0\\.0\\.1:${peer} \\(cluster [0-9a-f]{16} of n7; data \\./data/n7\\) \\(pid ${node.child.pid}, rafter ${
          VERSION.replaceAll(".", "\\.")
        }, deno ${Deno.version.deno.replaceAll(".", "\\.")}\\)$`,
      ),
    );
    assert.deepEqual(
      lines.filter((line) => /^n7: leader of term \d+$/.test(line.msg))
        .map((line) => line.level),
      ["info"],
    );
    assert.deepEqual(lines.at(-1), {
      ...lines.at(-1)!,
      level: "info",
      msg: "registry n7 stopped",
    });
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts --log-format json: one JSON object per line with ts, level, node and msg; the first names pid, versions and URLs", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_log_" });
  try {
    const [client, peer] = freePorts(2);
    const node = spawnRegistry(cwd, [
      "--log-format",
      "json",
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
    ]);
    await waitFor(
      () => node.output.includes(": leader of term"),
      "n1 to lead",
      20_000,
    );
    node.child.kill("SIGTERM");
    assert.equal(await within(node.exit(), 10_000, "n1 to exit"), 0);
    const lines = linesOf(node.output).map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
    assert.ok(lines.length >= 4, node.output);
    for (const line of lines) {
      assert.equal(typeof line.ts, "string");
      assert.equal(new Date(line.ts as string).toISOString(), line.ts);
      assert.ok(
        ["debug", "info", "warn", "error"].includes(line.level as string),
        JSON.stringify(line),
      );
      assert.equal(line.node, "n1");
      assert.equal(typeof line.msg, "string");
    }
    const listening = lines.find((line) =>
      (line.msg as string).startsWith("registry n1 listening on ")
    );
    assert.ok(listening, node.output);
    const { ts: _, msg, clusterId, ...fields } = listening;
    assert.match(clusterId as string, /^[0-9a-f]{16}$/);
    assert.deepEqual(fields, {
      level: "info",
      node: "n1",
      url: `tcp://127.0.0.1:${client}`,
      peerUrl: `tcp://127.0.0.1:${peer}`,
      members: ["n1"],
      dataDir: "./data/n1",
      pid: node.child.pid,
      version: VERSION,
      deno: Deno.version.deno,
    });
    // The same message as the text line.
    assert.match(
      msg as string,
      new RegExp(
        `\\(cluster ${clusterId} of n1; data \\./data/n1\\) \\(pid ${node.child.pid}, rafter `,
      ),
    );
    assert.deepEqual(
      lines.filter((line) =>
        /^n1: leader of term \d+$/.test(line.msg as string)
      )
        .map((line) => line.level),
      ["info"],
    );
    assert.equal(lines.at(-1)!.msg, "registry n1 stopped");
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts: a non-loopback metrics address is logged at warn, and the start that then fails at error", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_log_" });
  try {
    const [client, peer] = freePorts(2);
    // 192.0.2.1 (TEST-NET-1) is on no interface: the warning comes before
    // the bind, which fails, so nothing listens beyond 127.0.0.1.
    const args = [
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
      "--metrics-listen",
      "192.0.2.1:9100",
    ];
    const text = spawnRegistry(cwd, args);
    assert.equal(await within(text.exit(), 20_000, "n1 to exit"), 1);
    const lines = linesOf(text.output).map(textLine);
    const warning = lines.find((line) =>
      line.msg.startsWith(
        "n1: WARNING: --metrics-listen 192.0.2.1:9100 is not a loopback address",
      )
    );
    assert.equal(warning?.level, "warn", text.output);
    const failed = lines.find((line) =>
      line.msg.startsWith("registry n1: cannot start ")
    );
    assert.equal(failed?.level, "error", text.output);
    assert.match(failed!.msg, /cannot serve metrics on 192\.0\.2\.1:9100/);
    // Only those two are not info.
    assert.deepEqual(
      lines.filter((line) => line.level !== "info").map((line) => line.level),
      ["warn", "error"],
    );

    const json = spawnRegistry(cwd, [...args, "--log-format", "json"]);
    assert.equal(await within(json.exit(), 20_000, "n1 to exit"), 1);
    const objects = linesOf(json.output).map((line) => JSON.parse(line));
    assert.deepEqual(
      objects.filter((o) => o.level !== "info").map((o) => [
        o.level,
        o.node,
        (o.msg as string).slice(0, 24),
      ]),
      [
        ["warn", "n1", "n1: WARNING: --metrics-l"],
        ["error", "n1", "registry n1: cannot star"],
      ],
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts: a non-loopback dashboard address is logged at warn too", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_log_" });
  try {
    const [client, peer] = freePorts(2);
    // As above: 192.0.2.1 is on no interface, so the bind after the
    // warning fails.
    const node = spawnRegistry(cwd, [
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
      "--dashboard-listen",
      "192.0.2.1:9101",
    ]);
    assert.equal(await within(node.exit(), 20_000, "n1 to exit"), 1);
    const warning = linesOf(node.output).map(textLine).find((line) =>
      line.msg.startsWith("n1: WARNING: --dashboard-listen 192.0.2.1:9101")
    );
    assert.equal(warning?.level, "warn", node.output);
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts refuses an unknown --log-format with exit 2, naming the allowed values", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_log_" });
  try {
    const node = spawnRegistry(cwd, ["--log-format", "xml"]);
    assert.equal(await within(node.exit(), 10_000, "the node to exit"), 2);
    assert.match(
      node.output,
      /^registry: --log-format must be one of text, json, got "xml"\nrun with --help for the options\n/,
    );
    await assert.rejects(Deno.stat(`${cwd}/data`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});
