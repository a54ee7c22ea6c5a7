/**
 * The CLI on a write whose outcome the registry cannot tell (issue 17):
 * it says whether the write may have been applied.
 */

import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { RpcError } from "../rpc/errors.ts";
import { UNAVAILABLE, type UnavailableData } from "../protocol/registry.ts";
import { EXIT, runCli } from "./main.ts";

async function grantAgainst(applied: false | "unknown") {
  const calls: string[] = [];
  const server = serve({
    methods: {
      "lease.grant": () => {
        calls.push("lease.grant");
        const data: UnavailableData = { retryAfterMs: 0, applied };
        throw new RpcError(UNAVAILABLE, "Unavailable: timed out", data);
      },
    },
  });
  const err: string[] = [];
  try {
    const code = await runCli([
      "lease",
      "grant",
      "5000",
      "--timeout-ms",
      "1000",
    ], {
      out: () => {},
      err: (line) => err.push(line),
      env: (name) => name === "RAFTER_REGISTRY" ? server.url : undefined,
    });
    return { code, text: err.join("\n"), calls };
  } finally {
    await server.close();
  }
}

Deno.test("rafter lease grant that may have been applied exits 3 at once, says so and what to check", async () => {
  const { code, text, calls } = await grantAgainst("unknown");
  assert.equal(code, EXIT.unavailable, text);
  assert.deepEqual(calls, ["lease.grant"], "not sent again");
  assert.match(text, /lease\.grant may have been applied/);
  assert.match(
    text,
    /The write may have been applied: check \(rafter lookup, rafter lease ls\) before running it again\./,
  );
});
