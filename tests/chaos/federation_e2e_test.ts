/**
 * Federation under a real network partition (network namespaces; needs
 * root, `ip` and `iptables`, skipped otherwise): two 3-node registry
 * clusters of one domain, `b` partitioned away from `a` and from the
 * client; see `_federation_run.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { chaosNetworkSupport, createChaosNetwork } from "./netns.ts";

const support = await chaosNetworkSupport();
if (!support.ok) {
  console.log(`federation_e2e_test.ts skipped: ${support.reason}`);
}
const RUNNER = new URL("./_federation_run.ts", import.meta.url);

Deno.test({
  name:
    "federation: cluster b partitioned away from a leaves a's lookups and writes alone, reports b's endpoints unreachable, and fails over to a; healed, b answers again",
  ignore: !support.ok,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const network = await createChaosNetwork({
      nodes: ["n1", "n2", "n3", "n4", "n5", "n6"],
    });
    try {
      const output = await network.clientCommand(RUNNER, [], {
        stdout: "piped",
        stderr: "piped",
        cwd: new URL("../../", import.meta.url).pathname,
      }).output();
      const text = new TextDecoder().decode(output.stdout) +
        new TextDecoder().decode(output.stderr);
      const line = text.split("\n").find((l) => l.startsWith("result "));
      assert.ok(line !== undefined, text.slice(-20_000));
      const steps = JSON.parse(line.slice("result ".length));
      console.log(`measured: ${JSON.stringify(steps)}`);
      assert.equal(output.code, 0, text.slice(-20_000));
      assert.equal(steps.named, "x1");
      assert.equal(steps.failover, "x1");
      assert.deepEqual(steps.localLookup, ["l1"]);
      assert.match(steps.named_cutOff, /^failed/);
      assert.doesNotMatch(steps.reported, /^serving/);
      assert.equal(steps.failover_cutOff, "a1");
      assert.equal(steps.named_healed, "x1");
    } finally {
      await network.destroy();
    }
  },
});
