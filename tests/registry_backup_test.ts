/**
 * Backup and restore of a registry run as real processes: `rafter
 * snapshot save` from a live 3-node cluster, `rafter snapshot restore`
 * into the data folders of a new 3-node cluster on other ports, which
 * answers the same lookups at the same revision under its own cluster id,
 * and whose leases expire one TTL after its start unless kept alive;
 * `rafter snapshot status` on a good and a damaged file; and `save` under
 * auth needs an admin token.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import { EXIT, runCli } from "../cli/main.ts";
import type { LookupResult } from "../protocol/registry.ts";
import { dial } from "../rpc/transport/dial.ts";

/** Runs the CLI in-process; its exit code and what it printed. */
async function cli(
  argv: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, {
    env: (name) => env[name],
    out: (line) => out.push(line),
    err: (line) => err.push(line),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** The lookups both clusters must answer alike. */
const NAMES = [
  "billing?version=2",
  "billing?version=2&zone=eu",
  "billing",
  "search",
  "search?zone=us",
];
/** TTL of the test's leases, ms: long enough to outlive the save. */
const TTL_MS = 10_000;

async function lookups(client: RafterClient): Promise<LookupResult[]> {
  const answers: LookupResult[] = [];
  for (const name of NAMES) {
    answers.push(
      await client.registry.lookup(name, {
        rotate: false,
        consistency: "linearizable",
      }),
    );
  }
  return answers;
}

Deno.test("a snapshot saved from a live cluster seeds a new cluster that answers the same lookups at the same revision; its leases expire unless kept alive", async () => {
  const old = new LocalCluster();
  const fresh = new LocalCluster();
  const dir = await Deno.makeTempDir({ prefix: "rafter-backup-" });
  const file = `${dir}/registry.snap`;
  const clients: RafterClient[] = [];
  let keeping = true;
  let keeper: Promise<void> = Promise.resolve();
  try {
    await old.startRegistryWithLeader(3);
    const before = connect(old.registryUrls, { deadlineMs: 10_000 });
    clients.push(before);
    const registry = before.registry;
    // Without a lease; with attributes on the name and on the endpoint.
    await registry.bind("billing?version=2", {
      id: "b1",
      url: "tcp://10.0.0.1:9000",
      attrs: { zone: "eu" },
      weight: 5,
    });
    await registry.bind("billing?version=1", {
      id: "b0",
      url: "tcp://10.0.0.9:9000",
    });
    await registry.bind("search", {
      id: "s1",
      url: "tcp://10.0.1.1:9000",
      attrs: { zone: "us" },
    });
    // Two leases: one the test keeps alive on the new cluster, one not.
    const kept = await registry.grantLease(TTL_MS, { id: "kept-lease" });
    const dropped = await registry.grantLease(TTL_MS, { id: "dropped-lease" });
    await registry.bind("billing?version=2", {
      id: "b2",
      url: "tcp://10.0.0.2:9000",
      attrs: { zone: "us" },
    }, { leaseId: kept.id });
    await registry.bind("search", {
      id: "s2",
      url: "tcp://10.0.1.2:9000",
      attrs: { zone: "us" },
    }, { leaseId: dropped.id });
    await registry.bind("search", {
      id: "s3",
      url: "tcp://10.0.1.3:9000",
    }, { leaseId: kept.id });
    const expected = await lookups(before);
    const oldClusterId = (await registry.memberList()).clusterId;

    const saved = await cli([
      "snapshot",
      "save",
      file,
      "--registry",
      old.registryUrls.join(","),
      "--json",
    ]);
    assert.equal(saved.code, EXIT.ok, saved.err);
    const header = JSON.parse(saved.out);
    assert.equal(header.revision, expected[0].revision);
    assert.equal(header.clusterId, oldClusterId);
    assert.equal(header.names, 2); // billing and search (attributes are no names)
    assert.equal(header.bindings, 6);
    assert.equal(header.leases, 2);
    assert.ok(header.index >= 1 && header.term >= 1);
    await old.stop();

    fresh.planRegistry(3);
    const peers = [...fresh.peers]
      .map(([id, url]) => `${id}=${url.replace(/^tcp:\/\//, "")}`).join(",");
    for (const id of fresh.registry.keys()) {
      const restored = await cli([
        "snapshot",
        "restore",
        file,
        "--data",
        await fresh.dataDirOf(id),
        "--id",
        id,
        "--peers",
        peers,
        "--json",
      ]);
      assert.equal(restored.code, EXIT.ok, restored.err);
      assert.equal(JSON.parse(restored.out).revision, header.revision);
    }
    // A folder is never overwritten.
    const again = await cli([
      "snapshot",
      "restore",
      file,
      "--data",
      await fresh.dataDirOf("n1"),
      "--id",
      "n1",
      "--peers",
      peers,
    ]);
    assert.equal(again.code, EXIT.failed);
    assert.match(again.err, /is not empty/);

    await Promise.all(
      [...fresh.registry.keys()].map((id) => fresh.startNode(id)),
    );
    await fresh.waitForLeader(20_000);
    const after = connect(fresh.registryUrls, { deadlineMs: 10_000 });
    clients.push(after);
    keeper = (async () => {
      while (keeping) {
        await after.registry.keepAlive(kept.id).catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    const answers = await lookups(after);
    assert.deepEqual(answers, expected);
    const newClusterId = (await after.registry.memberList()).clusterId;
    assert.notEqual(newClusterId, oldClusterId);

    // The dropped lease expires one TTL after the new cluster's start:
    // its binding s2 goes, the kept lease's b2 and s3 stay.
    const started = performance.now();
    await waitFor(
      async () =>
        !(await after.registry.lookup("search", { rotate: false }))
          .endpoints.some((e) => e.id === "s2"),
      "the binding of the lease nobody keeps alive to expire",
      60_000,
      200,
    );
    const expiredAfterMs = performance.now() - started;
    console.log(
      `measured: the unkept lease's binding went ${
        Math.round(expiredAfterMs)
      } ms after the restored cluster elected a leader (TTL ${TTL_MS} ms)`,
    );
    const search = await after.registry.lookup("search", { rotate: false });
    assert.deepEqual(search.endpoints.map((e) => e.id), ["s1", "s3"]);
    const billing = await after.registry.lookup("billing?version=2", {
      rotate: false,
    });
    assert.deepEqual(billing.endpoints.map((e) => e.id), ["b1", "b2"]);
    const leases = await after.registry.leases();
    assert.deepEqual(leases.leases.map((l) => l.id), [kept.id]);
  } finally {
    keeping = false;
    await keeper;
    for (const client of clients) client.close();
    await old.stop();
    await fresh.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("snapshot status checks a file's checksum: OK for a good one, a clear error for a damaged or truncated one", async () => {
  const cluster = new LocalCluster();
  const dir = await Deno.makeTempDir({ prefix: "rafter-backup-" });
  const file = `${dir}/registry.snap`;
  try {
    await cluster.startRegistryWithLeader(1);
    const bound = connect(cluster.registryUrls, { deadlineMs: 10_000 });
    try {
      await bound.registry.bind("hello", { id: "h1", url: "tcp://10.0.0.1:1" });
    } finally {
      bound.close();
    }
    const saved = await cli([
      "snapshot",
      "save",
      file,
      "--registry",
      cluster.registryUrls.join(","),
    ]);
    assert.equal(saved.code, EXIT.ok, saved.err);
    assert.match(
      saved.out,
      /^saved a snapshot of cluster [0-9a-f]{16} at revision 1 /,
    );

    // A chunk of a snapshot the node does not hold, or beyond the last.
    const connection = await dial(cluster.registryUrls[0]);
    try {
      await assert.rejects(
        connection.call("registry.snapshotChunk", {
          snapshotId: "nope",
          n: 0,
        }),
        { code: -32602, message: /snapshot "nope" is not held by this node/ },
      );
      const taken = await connection.call("registry.snapshot", {}) as {
        snapshotId: string;
        chunks: number;
      };
      assert.equal(taken.chunks, 1);
      await assert.rejects(
        connection.call("registry.snapshotChunk", {
          snapshotId: taken.snapshotId,
          n: 1,
        }),
        {
          code: -32602,
          message: /"n" must be a chunk number in 0\.\.0, not 1/,
        },
      );
    } finally {
      connection.close();
    }

    const status = await cli(["snapshot", "status", file, "--json"]);
    assert.equal(status.code, EXIT.ok, status.err);
    const read = JSON.parse(status.out);
    assert.equal(read.checksum, "ok");
    assert.equal(read.revision, 1);
    assert.equal(read.bindings, 1);
    assert.equal(read.names, 1);
    assert.equal(read.leases, 0);
    assert.equal(read.fileBytes, (await Deno.stat(file)).size);
    const table = await cli(["snapshot", "status", file]);
    assert.match(table.out, /checksum +OK/);

    // One byte of the payload flipped.
    const bytes = await Deno.readFile(file);
    const damaged = bytes.slice();
    damaged[damaged.length - 3] ^= 0x01;
    await Deno.writeFile(`${dir}/damaged.snap`, damaged);
    const bad = await cli(["snapshot", "status", `${dir}/damaged.snap`]);
    assert.equal(bad.code, EXIT.failed);
    assert.match(
      bad.err,
      /damaged\.snap is not a usable rafter snapshot file: the payload's SHA-256 is [0-9a-f]{64}, the header says [0-9a-f]{64} \(the file is damaged\)/,
    );
    // Cut short.
    await Deno.writeFile(`${dir}/short.snap`, bytes.slice(0, -10));
    const short = await cli(["snapshot", "status", `${dir}/short.snap`]);
    assert.equal(short.code, EXIT.failed);
    assert.match(short.err, /truncated or appended to/);
    // Not a snapshot at all; and restore refuses a damaged file too.
    await Deno.writeTextFile(`${dir}/other.snap`, "hello\n");
    const other = await cli(["snapshot", "status", `${dir}/other.snap`]);
    assert.match(other.err, /its header line is not JSON/);
    const restore = await cli([
      "snapshot",
      "restore",
      `${dir}/damaged.snap`,
      "--data",
      `${dir}/n1`,
      "--id",
      "n1",
      "--peers",
      "n1=127.0.0.1:7101",
    ]);
    assert.equal(restore.code, EXIT.failed);
    assert.match(restore.err, /the file is damaged/);
    await assert.rejects(Deno.stat(`${dir}/n1`), Deno.errors.NotFound);
    // The old cluster's own members and token would give its id again.
    const same = await cli([
      "snapshot",
      "restore",
      file,
      "--data",
      `${dir}/n1`,
      "--id",
      "n1",
      "--peers",
      `n1=${cluster.peers.get("n1")!.replace(/^tcp:\/\//, "")}`,
    ]);
    assert.equal(same.code, EXIT.usage);
    assert.match(
      same.err,
      /give cluster id [0-9a-f]{16}, the id of the cluster the snapshot was taken from/,
    );
    await assert.rejects(Deno.stat(`${dir}/n1`), Deno.errors.NotFound);
  } finally {
    await cluster.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("snapshot save under auth needs an admin token", async () => {
  // TLS, and --auth on every node.
  const cluster = new LocalCluster({ secure: true });
  const dir = await Deno.makeTempDir({ prefix: "rafter-backup-" });
  const file = `${dir}/registry.snap`;
  try {
    await cluster.startRegistryWithLeader(1);
    const admin = await cluster.adminToken();
    const reader = (await cluster.createToken("reader", ["read:"])).token;
    const argv = [
      "snapshot",
      "save",
      file,
      "--registry",
      cluster.registryUrls.join(","),
      "--cacert",
      await cluster.caFile(),
    ];
    const none = await cli(argv);
    assert.equal(none.code, EXIT.unauthenticated, none.err);
    const denied = await cli(argv, { RAFTER_TOKEN: reader });
    assert.equal(denied.code, EXIT.permissionDenied, denied.err);
    assert.match(denied.err, /registry\.snapshot needs admin/);
    await assert.rejects(Deno.stat(file), Deno.errors.NotFound);
    const ok = await cli(argv, { RAFTER_TOKEN: admin });
    assert.equal(ok.code, EXIT.ok, ok.err);
    assert.equal(
      (await cli(["snapshot", "status", file])).code,
      EXIT.ok,
    );
  } finally {
    await cluster.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
