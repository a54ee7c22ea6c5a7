/**
 * Smoke test of the side-by-side benchmarks (issue 9): `--quick` runs to
 * the end and every row has a number in every column. It asserts nothing
 * about speed.
 *
 * @module
 */

import assert from "node:assert/strict";

Deno.test("bench/rpc.ts --quick prints a number for every path and column", async () => {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../bench/rpc.ts", import.meta.url).pathname,
      "--quick",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const rows = text.split("\n").filter((line) =>
    line.startsWith("| ") && !line.startsWith("| path")
  );
  assert.deepEqual(rows.map((row) => row.split("|")[1].trim()), [
    "raw TCP line echo",
    "Rafter serve() + dial()",
    "Rafter's server, the same line client as jayson's",
    "jayson 5 TCP server, kept-open connection",
  ]);
  for (const row of rows) {
    const cells = row.split("|").slice(2, -1).map((cell) => cell.trim());
    assert.equal(cells.length, 5, row);
    for (const cell of cells) {
      assert.ok(Number.parseFloat(cell) > 0, `${cell} in ${row}`);
    }
  }
});
