/**
 * Damaged write-ahead logs on real registry processes (3 nodes, fsync on):
 * a follower whose WAL's last record is cut mid-way (SIGKILLed, then a
 * half-written record appended, as a crash during a write leaves it)
 * restarts with every acknowledged bind; a follower with a flipped byte in an older record
 * refuses to start, naming the file and the byte offset, and exits 1.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster, waitForEndpoints } from "../testing/cluster.ts";
import { connect } from "../mod.ts";

/** Segment files of a node's WAL folder, oldest first. */
async function segments(dataDir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(`${dataDir}/wal`)) {
    if (entry.isFile && entry.name.endsWith(".wal")) names.push(entry.name);
  }
  return names.sort().map((name) => `${dataDir}/wal/${name}`);
}

/** Byte offsets of the records of a segment (`[u32 len][u32 crc][payload]`). */
function recordOffsets(bytes: Uint8Array): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const offsets: number[] = [];
  for (let at = 0; at + 8 <= bytes.length && offsets.length < 1_000_000;) {
    offsets.push(at);
    at += 8 + view.getUint32(at);
  }
  return offsets;
}

Deno.test("Raft paper Figure 2 on real processes: a WAL cut mid-way through its last record restarts with every acknowledged bind; a flipped byte in an older record refuses to start, naming the file and offset", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  let writer: ReturnType<typeof connect> | undefined;
  try {
    await cluster.startRegistry(3);
    writer = connect(cluster.registryUrls, { deadlineMs: 10_000 });
    const leader = await cluster.waitForLeader();
    const [cut, flipped] = [...cluster.registry.keys()].filter((id) =>
      id !== leader
    );
    const acknowledged: string[] = [];
    const bindSome = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const id = `e${acknowledged.length}`;
        await writer!.bind("damage", { id, url: `tcp://10.0.0.1:${1000 + i}` });
        acknowledged.push(id);
      }
    };
    await bindSome(150);

    // 1. A crash in the middle of writing a record: the last record of
    // `cut`'s WAL is cut mid-way (a copy of its last record, half written;
    // nothing in it was acknowledged).
    await cluster.kill(cut, "SIGKILL");
    const cutDir = await cluster.dataDirOf(cut);
    const last = (await segments(cutDir)).at(-1)!;
    const bytes = await Deno.readFile(last);
    const start = recordOffsets(bytes).at(-1)!;
    const record = bytes.subarray(start);
    const torn = record.subarray(0, 8 + Math.floor((record.length - 8) / 2));
    assert.ok(torn.length > 8 && torn.length < record.length);
    const file = await Deno.open(last, { append: true });
    try {
      await file.write(torn);
    } finally {
      file.close();
    }
    await bindSome(50); // written while it is down
    await cluster.startNode(cut);
    const url = cluster.registry.get(cut)!;
    const local = connect(url, { deadlineMs: 5_000 });
    try {
      await waitForEndpoints(
        local,
        "damage",
        acknowledged.length,
        `${cut} to serve all ${acknowledged.length} acknowledged binds`,
        20_000,
      );
      const found = await local.lookup("damage", {
        consistency: "serializable",
      });
      assert.deepEqual(
        found.endpoints.map((e) => e.id).sort(),
        [...acknowledged].sort(),
      );
    } finally {
      local.close();
    }

    // The torn record was cut off at the restart: the segment's records
    // end exactly at its end again.
    const repaired = await Deno.readFile(last);
    const view = new DataView(repaired.buffer);
    const ends = recordOffsets(repaired).map((at) =>
      at + 8 + view.getUint32(at)
    );
    assert.equal(ends.at(-1), repaired.length);

    // 2. Flip a byte in an older record of `flipped`: it refuses to start.
    await cluster.kill(flipped, "SIGKILL");
    const flippedDir = await cluster.dataDirOf(flipped);
    const first = (await segments(flippedDir))[0];
    const older = await Deno.readFile(first);
    const records = recordOffsets(older);
    assert.ok(records.length >= 10, `${records.length} records`);
    const victim = records[Math.floor(records.length / 2)];
    older[victim + 8] ^= 0x20; // the first payload byte of that record
    await Deno.writeFile(first, older);
    await assert.rejects(cluster.startNode(flipped), /exited with code 1/);
    const output = cluster.child(flipped).output.join("\n");
    assert.match(
      output,
      new RegExp(
        `write-ahead log ${
          first.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        } is corrupt at byte offset ${victim}: `,
      ),
    );
    assert.equal(await cluster.child(flipped).exited, 1);
    // The damaged file is left as it was, for the operator.
    assert.deepEqual(await Deno.readFile(first), older);
    // The cluster still takes writes with 2 of 3.
    await bindSome(5);
  } finally {
    writer?.close();
    await cluster.stop();
  }
});
