import assert from "node:assert/strict";
import {
  alternate,
  formatCell,
  median,
  percentile,
  processCpuMs,
  processRssMiB,
  ratio,
  renderTable,
  selectedScenarios,
} from "./report.ts";

Deno.test("renderTable prints the header with units, the rows, and a skipped peer's reason", () => {
  const text = renderTable({
    scenario: "rtt",
    title: "echo",
    note: "medians of 3 rounds",
    columns: [
      { name: "p50", unit: "µs" },
      { name: "vs raw", unit: "×" },
      { name: "calls/s", unit: "/s" },
    ],
    rows: [
      { label: "raw TCP", cells: [74.4, 1, 167806.2] },
      { label: "Rafter", cells: [84, 84 / 74.4, null] },
      { label: "etcd", cells: [], skipped: "etcd not installed" },
    ],
  });
  assert.equal(
    text,
    [
      "### echo",
      "",
      "medians of 3 rounds",
      "",
      "| | p50 µs | vs raw | calls/s |",
      "|:---| ---: | ---: | ---: |",
      "| raw TCP | 74 | 1.00× | 167,806 |",
      "| Rafter | 84 | 1.13× | – |",
      "| etcd | skipped: etcd not installed |  |  |",
    ].join("\n"),
  );
});

Deno.test("formatCell: ms with two decimals below 10, a dash for NaN, text as is", () => {
  assert.equal(formatCell(3.456, "ms"), "3.46");
  assert.equal(formatCell(34.56, "ms"), "34.6");
  assert.equal(formatCell(NaN, "ms"), "–");
  assert.equal(formatCell("n/a", "%"), "n/a");
  assert.equal(formatCell(97.6, "%"), "98%");
});

Deno.test("selectedScenarios: all when absent, the named ones, an error naming the known ones", () => {
  const known = ["rtt", "throughput"] as const;
  assert.deepEqual([...selectedScenarios(undefined, known)], [
    "rtt",
    "throughput",
  ]);
  assert.deepEqual([...selectedScenarios("throughput", known)], [
    "throughput",
  ]);
  assert.throws(
    () => selectedScenarios("rtt,codec", known),
    /unknown scenario "codec": this script runs rtt, throughput/,
  );
});

Deno.test("median, percentile and ratio", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  assert.equal(median([NaN, 5]), 5);
  assert.ok(Number.isNaN(median([])));
  const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(sorted, 0.5), 50);
  assert.equal(percentile(sorted, 0.99), 99);
  assert.equal(ratio(3, 2), 1.5);
  assert.equal(ratio(3, 0), null);
  assert.equal(ratio(null, 2), null);
});

Deno.test("alternate runs the contenders in turn, round after round", async () => {
  const order: string[] = [];
  const results = await alternate(3, ["A", "B"], (c, round) => {
    order.push(`${c}${round}`);
    return Promise.resolve(`${c}:${round}`);
  });
  assert.deepEqual(order, ["A0", "B0", "A1", "B1", "A2", "B2"]);
  assert.deepEqual(results, [["A:0", "A:1", "A:2"], ["B:0", "B:1", "B:2"]]);
});

Deno.test({
  name: "processCpuMs and processRssMiB read this process from /proc",
  ignore: Deno.build.os !== "linux",
  fn() {
    const cpu = processCpuMs(Deno.pid);
    const rss = processRssMiB(Deno.pid);
    assert.ok(cpu !== null && cpu >= 0, `cpu ${cpu}`);
    assert.ok(rss !== null && rss > 1, `rss ${rss}`);
    assert.equal(processCpuMs(2 ** 30), null);
  },
});
