/**
 * Smoke test of the side-by-side RPC benchmark (issue 9): `bench/rpc.ts
 * --quick` runs to the end, exits 0, and its JSON report (the contract of
 * `bench/main.ts`) has a table for `rtt` and two for `throughput` whose
 * Rafter rows have a finite number in every column, and whose other rows
 * have them too or say why they were skipped. It asserts nothing about
 * speed.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ReportJson } from "../bench/report.ts";

/** The benchmarks' npm packages are in the development config. */
const DEV_CONFIG = new URL("../deno.dev.json", import.meta.url).pathname;

Deno.test("bench/rpc.ts --quick gives every scenario a table with a number in every Rafter cell", async () => {
  const json = await Deno.makeTempFile({ prefix: "rafter-bench-smoke-" });
  try {
    const output = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        DEV_CONFIG,
        "-A",
        new URL("../bench/rpc.ts", import.meta.url).pathname,
        "--quick",
      ],
      env: { RAFTER_BENCH_JSON: json },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    const report = JSON.parse(await Deno.readTextFile(json)) as ReportJson;
    assert.deepEqual(report.tables.map((t) => t.scenario), [
      "rtt",
      "throughput",
      "throughput",
      // TLS beside plain: sequential p50 and 64 in flight, as ratios.
      "rtt",
    ]);
    for (const table of report.tables) {
      const rafter = table.rows.filter((r) => r.label.startsWith("Rafter"));
      assert.ok(rafter.length > 0, table.title);
      for (const row of table.rows) {
        if (row.skipped !== undefined && !row.label.startsWith("Rafter")) {
          assert.ok(row.skipped.length > 0, row.label);
          continue;
        }
        assert.equal(row.skipped, undefined, `${row.label}: ${row.skipped}`);
        assert.equal(row.cells.length, table.columns.length, row.label);
        for (const cell of row.cells) {
          assert.ok(
            typeof cell === "number" && Number.isFinite(cell) && cell >= 0,
            `${cell} in ${row.label} of ${table.title}`,
          );
        }
      }
    }
  } finally {
    await Deno.remove(json);
  }
});

Deno.test("bench/registry.ts --quick --only bind,tls binds on plain, TLS and TLS + auth clusters and gives every row a number", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      DEV_CONFIG,
      "-A",
      new URL("../bench/registry.ts", import.meta.url).pathname,
      "--quick",
      "--only",
      "bind,tls",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  assert.equal(
    output.code,
    0,
    `${text}\n${new TextDecoder().decode(output.stderr)}`,
  );
  const section =
    text.split("\n## registry.bind over TLS beside plain TCP\n")[1];
  assert.ok(section !== undefined, text);
  const rows = section.split("\n").filter((line) => /^\| [^:-]/.test(line))
    .slice(1) // the header
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
  // 3 links × the default client counts 1 and 64.
  assert.deepEqual(rows.map((r) => `${r[0]} ${r[1]}`), [
    "plain TCP 1",
    "TLS 1",
    "TLS + auth 1",
    "plain TCP 64",
    "TLS 64",
    "TLS + auth 64",
  ]);
  for (const row of rows) {
    const [binds, ratio, p50, p50Ratio, p99, p99Ratio] = row.slice(2, 8).map(
      (cell) => Number(cell.replaceAll(",", "")),
    );
    for (const value of [binds, ratio, p50, p50Ratio, p99, p99Ratio]) {
      assert.ok(Number.isFinite(value) && value > 0, row.join(" | "));
    }
    // Every bind over TLS, with and without auth, was answered.
    assert.equal(row[10], "0", `errors in ${row.join(" | ")}`);
  }
});
