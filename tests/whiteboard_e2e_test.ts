/**
 * The whiteboard (examples/whiteboard/) in headless Chromium: three
 * replicas bound in a 3-node registry; strokes drawn with the mouse on one
 * replica's page show live on another's; the leader replica SIGKILLed,
 * strokes drawn after it, and no acknowledged stroke lost; the CLI lists
 * them all; a fourth replica joins through a snapshot and its page shows
 * the whole board.
 *
 * @module
 */

import assert from "node:assert/strict";
// Pinned here, as in dashboard_e2e_test.ts (not in deno.json).
// deno-lint-ignore no-import-prefix
import { chromium, type Page } from "npm:playwright-core@1.65.1";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { connect } from "../stub/client.ts";
import type { ReplicaStatus } from "../replicated/mod.ts";
import { chromiumPath } from "../testing/chromium.ts";

const executablePath = chromiumPath();
if (executablePath === null) {
  console.warn(
    "whiteboard_e2e_test: skipped: no chromium at /usr/bin/chromium; install it (apt-get install -y chromium) to run this test",
  );
}

const SECRET = "whiteboard-test-secret-0123456789abcdef";

/** Draws a stroke from (x, y) across the page's canvas with the mouse. */
async function drawStroke(page: Page, x: number, y: number): Promise<void> {
  const box = (await page.locator("#board").boundingBox())!;
  await page.mouse.move(box.x + x, box.y + y);
  await page.mouse.down();
  for (let i = 1; i <= 5; i++) {
    await page.mouse.move(box.x + x + i * 20, box.y + y + i * 8);
  }
  await page.mouse.up();
}

/** Waits until the page shows `count` strokes; their seqs. */
async function strokesShown(page: Page, count: number): Promise<string> {
  await page.waitForSelector(`body[data-strokes="${count}"]`, {
    timeout: 30_000,
  });
  return (await page.getAttribute("body", "data-seqs"))!;
}

Deno.test({
  name:
    "whiteboard: strokes drawn on one replica's page show on another's, survive the leader's SIGKILL, and reach a replica that joins through a snapshot",
  ignore: executablePath === null,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const cluster = new LocalCluster({
      tickMs: 50,
      electionTicks: 10,
      childEnv: (name) =>
        name.startsWith("w") ? { RAFTER_SERVICE_SECRET: SECRET } : undefined,
    });
    const [p1, p2, p3, p4, web1, web2, web3, web4] = freePorts(8);
    const peers = `w1=127.0.0.1:${p1},w2=127.0.0.1:${p2},w3=127.0.0.1:${p3}`;
    const webPorts: Record<string, number> = {
      w1: web1,
      w2: web2,
      w3: web3,
      w4: web4,
    };
    const dirs: string[] = [];
    const start = async (id: string, args: string[]) => {
      const dir = await Deno.makeTempDir();
      dirs.push(dir);
      const child = await cluster.spawn(id, "examples/whiteboard/replica.ts", [
        "--id",
        id,
        "--data",
        dir,
        "--web-port",
        String(webPorts[id]),
        "--registry",
        cluster.registryUrls.join(","),
        "--tick-ms",
        "50",
        "--snapshot-entries",
        "4",
        "--snapshot-trailing",
        "0",
        ...args,
      ], /ready on/);
      const line = child.output.find((l) => /ready on/.test(l))!;
      return /ready on (tcp:\/\/\S+)/.exec(line)![1];
    };
    let rafter: ReturnType<typeof connect> | undefined;
    const browser = await chromium.launch({
      executablePath: executablePath!,
      args: ["--no-sandbox"],
    });
    try {
      await cluster.startRegistryWithLeader(3);
      const rpcUrls = await Promise.all(
        ["w1", "w2", "w3"].map((id) => start(id, ["--peers", peers])),
      );
      rafter = connect(cluster.registryUrls);
      const status = rafter.stub<{ "replica.status"(): ReplicaStatus }>(
        "whiteboard",
        { idempotent: true },
      );
      let leaderId: string | null = null;
      for (let i = 0; i < 200 && leaderId === null; i++) {
        leaderId = (await status["replica.status"]().catch(() =>
          null
        ))?.leaderId ?? null;
        if (leaderId === null) await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(leaderId !== null, "a leader");
      const [a, b] = ["w1", "w2", "w3"].filter((id) => id !== leaderId);
      const pageA = await browser.newPage();
      const pageB = await browser.newPage();
      const pageL = await browser.newPage();
      await pageA.goto(`http://127.0.0.1:${webPorts[a]}/`);
      await pageB.goto(`http://127.0.0.1:${webPorts[b]}/`);
      await pageL.goto(`http://127.0.0.1:${webPorts[leaderId]}/`);

      // Three strokes on A's page (A is a follower: its server sends them
      // to the leader) show on B's and the leader's.
      for (let i = 0; i < 3; i++) await drawStroke(pageA, 40, 40 + i * 60);
      const before = await strokesShown(pageA, 3);
      assert.equal(await strokesShown(pageB, 3), before);
      assert.equal(await strokesShown(pageL, 3), before);

      // The leader dies; three more strokes on B's page.
      await cluster.kill(leaderId, "SIGKILL");
      const killedAt = performance.now();
      for (let i = 0; i < 3; i++) await drawStroke(pageB, 400, 40 + i * 60);
      const after = await strokesShown(pageB, 6);
      const afterMs = performance.now() - killedAt;
      assert.equal(await strokesShown(pageA, 6), after);
      assert.ok(after.startsWith(before), `${before} then ${after}`);

      // The CLI lists all six.
      const cli = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "examples/whiteboard/cli.ts",
          "--registry",
          cluster.registryUrls.join(","),
          "--json",
          "list",
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(cli.code, 0, new TextDecoder().decode(cli.stderr));
      const listed = JSON.parse(new TextDecoder().decode(cli.stdout)) as {
        seq: number;
      }[];
      assert.equal(listed.map((s) => s.seq).join(","), after);

      // A fourth replica joins (through a snapshot: one every 4 entries)
      // and its page shows the whole board.
      const survivor = rpcUrls[["w1", "w2", "w3"].indexOf(a)];
      await start("w4", ["--peers", `w4=127.0.0.1:${p4}`, "--join", survivor]);
      const pageD = await browser.newPage();
      await pageD.goto(`http://127.0.0.1:${webPorts.w4}/`);
      assert.equal(await strokesShown(pageD, 6), after);
      await drawStroke(pageD, 200, 300);
      const last = await strokesShown(pageA, 7);
      assert.equal(await strokesShown(pageD, 7), last);
      const joined = cluster.child("w4").output.join("\n");
      assert.match(joined, /restored the service's state from the snapshot/);
      console.log(
        `measured: leader ${leaderId} killed; 3 strokes drawn after it shown on both pages within ${
          afterMs.toFixed(0)
        } ms; seqs ${after}; w4 joined (${
          /installed a snapshot|snapshot/.test(joined)
            ? "through a snapshot"
            : "by the log"
        }) and shows ${last.split(",").length} strokes`,
      );
      const shot = `${await Deno.makeTempDir({
        prefix: "rafter_whiteboard_",
      })}/board.png`;
      await pageD.screenshot({ path: shot });
      console.log(`screenshot: ${shot}`);
    } finally {
      await browser.close();
      rafter?.close();
      await cluster.stop();
      for (const dir of dirs) {
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
    }
  },
});
