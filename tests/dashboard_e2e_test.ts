/**
 * The dashboard of a real 3-node cluster in headless Chromium: both
 * services and the leader are shown; a SIGKILLed lease-bound server
 * disappears from the page, and a killed leader's successor appears on a
 * surviving node's page, pushed over server-sent events.
 *
 * @module
 */

import assert from "node:assert/strict";
// Pinned here (and in whiteboard_e2e_test.ts), not in deno.json.
// deno-lint-ignore no-import-prefix
import { chromium } from "npm:playwright-core@1.65.1";
import { withLocalCluster } from "../testing/cluster.ts";
import { chromiumPath } from "../testing/chromium.ts";

const executablePath = chromiumPath();
if (executablePath === null) {
  console.warn(
    "dashboard_e2e_test: skipped: no chromium at /usr/bin/chromium; install it (apt-get install -y chromium) to run this test",
  );
}

Deno.test({
  name:
    "dashboard: services, leader, a killed server and a new leader show in Chromium",
  ignore: executablePath === null,
  async fn() {
    await withLocalCluster({
      nodeArgs: ["--metrics-listen", "127.0.0.1:0"],
    }, async (cluster) => {
      const leader = await cluster.startRegistryWithLeader(3, 20_000);
      const ids = [...cluster.registry.keys()];
      const survivor = ids.find((id) => id !== leader)!;
      const line = await cluster.waitForLine(
        survivor,
        /dashboard on http:\/\//,
        20_000,
      );
      const url = /dashboard on (http:\/\/\S+)/.exec(line)![1];
      await cluster.startHello("h1");
      await cluster.startExecServer("x1", 2000);
      const browser = await chromium.launch({
        executablePath: executablePath!,
        args: ["--no-sandbox"],
      });
      try {
        const page = await browser.newPage();
        await page.goto(url);
        await page.waitForSelector(
          'section[data-name="hello"] tr[data-endpoint="h1"]',
          { timeout: 20_000 },
        );
        await page.waitForSelector(
          'section[data-name="exec"] tr[data-endpoint="x1"]',
          { timeout: 20_000 },
        );
        assert.equal(await page.textContent("#leader"), leader);
        await cluster.kill("x1", "SIGKILL");
        await page.waitForSelector('section[data-name="exec"]', {
          state: "detached",
          timeout: 30_000,
        });
        await cluster.kill(leader, "SIGKILL");
        await page.waitForSelector(
          `tr[data-role="leader"]:not([data-member="${leader}"])`,
          { timeout: 30_000 },
        );
        const next = await page.textContent("#leader");
        assert.notEqual(next, leader);
        const dir = await Deno.makeTempDir({ prefix: "rafter_dashboard_" });
        const shot = `${dir}/dashboard.png`;
        await page.screenshot({ path: shot, fullPage: true });
        const bytes = await Deno.readFile(shot);
        assert.ok(bytes.length > 100);
        assert.deepEqual([...bytes.slice(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
        console.log(`screenshot: ${shot} (${bytes.length} bytes)`);
      } finally {
        await browser.close();
      }
    });
  },
});
