import assert from "node:assert/strict";
import { main } from "../check.ts";
import { simulate } from "./_simulate.ts";

async function run(content: string): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: `check_test_${Deno.pid}_` });
  try {
    const file = `${dir}/history.json`;
    await Deno.writeTextFile(file, content);
    return await main([file]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("check.ts: exits 0 on a valid history, 1 on a violation, 2 on bad input", async () => {
  const history = simulate({ seed: 5, operations: 100 });
  const log = console.log;
  const error = console.error;
  const printed: string[] = [];
  console.log = (text: string) => printed.push(text);
  console.error = (text: string) => printed.push(text);
  try {
    assert.equal(await run(JSON.stringify(history)), 0);
    assert.match(printed.at(-1)!, /^VALID/);
    const lookup = history.operations.find((op) => op.output?.f === "lookup")!;
    if (lookup.output?.f === "lookup") {
      lookup.output.endpoints.push({
        id: "zz",
        url: "tcp://nobody",
        leaseId: null,
      });
    }
    assert.equal(await run(JSON.stringify(history)), 1);
    assert.match(printed.at(-1)!, /^INVALID/);
    assert.equal(await run("{"), 2);
    assert.match(printed.at(-1)!, /cannot read .* as JSON/);
    assert.equal(
      await run(JSON.stringify({ prefix: "chaos/", operations: [] })),
      2,
    );
    assert.match(
      printed.at(-1)!,
      /is not a chaos history[\s\S]*startRevision must be a number/,
    );
    assert.equal(await main([]), 2);
    assert.match(printed.at(-1)!, /^usage:/);
  } finally {
    console.log = log;
    console.error = error;
  }
});
