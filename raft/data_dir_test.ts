import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import {
  bootstrapClusterId,
  DATA_DIR_FORMAT,
  DataDir,
  DataDirMismatchError,
  readDataDirMeta,
} from "./data_dir.ts";
import { DataDirInUseError } from "./dir_lock.ts";

const THREE = {
  n1: "tcp://127.0.0.1:7101",
  n2: "tcp://127.0.0.1:7102",
  n3: "tcp://127.0.0.1:7103",
};
const SINGLE = { n1: "tcp://127.0.0.1:7101" };

/** Runs `fn` with a path `data` inside a fresh temp folder (not made yet). */
const withDir = (fn: (path: string) => Promise<void>) =>
  withTempDir((root) => fn(`${root}/data`), "rafter_data_dir_");

async function openOnce(
  path: string,
  options: Parameters<typeof DataDir.open>[1],
): Promise<DataDir> {
  const dir = await DataDir.open(path, options);
  dir.release();
  return dir;
}

Deno.test("bootstrapClusterId: the same for every member whatever the order, different for other URLs or another token", async () => {
  const id = await bootstrapClusterId(THREE);
  assert.match(id, /^[0-9a-f]{16}$/);
  assert.equal(
    await bootstrapClusterId({ n3: THREE.n3, n1: THREE.n1, n2: THREE.n2 }),
    id,
  );
  assert.notEqual(
    await bootstrapClusterId({ ...THREE, n3: "tcp://127.0.0.1:8103" }),
    id,
  );
  assert.notEqual(await bootstrapClusterId(THREE, "prod-eu"), id);
  assert.notEqual(await bootstrapClusterId(SINGLE), id);
  await assert.rejects(bootstrapClusterId({}), RangeError);
});

Deno.test("a first open creates the folder and meta.json (format 2, cluster id, member id); a reopen reads it", async () => {
  await withDir(async (path) => {
    const first = await openOnce(path, { memberId: "n1", members: THREE });
    assert.equal(first.created, true);
    assert.equal(first.clusterId, await bootstrapClusterId(THREE));
    assert.equal(first.walDir, `${path}/wal`);
    assert.equal(first.legacyWalFile, `${path}/wal.log`);
    assert.equal(first.snapDir, `${path}/snap`);
    const onDisk = JSON.parse(await Deno.readTextFile(`${path}/meta.json`));
    assert.deepEqual(onDisk, {
      format: DATA_DIR_FORMAT,
      clusterId: first.clusterId,
      memberId: "n1",
      bootstrapMembers: THREE,
    });
    // Only the lock and the meta: the WAL and snapshot folders are their
    // owners' to create.
    const names = [];
    for await (const entry of Deno.readDir(path)) names.push(entry.name);
    assert.deepEqual(names.sort(), ["LOCK", "meta.json"]);
    const again = await openOnce(path, { memberId: "n1", members: THREE });
    assert.equal(again.created, false);
    assert.equal(again.clusterId, first.clusterId);
    assert.deepEqual(await readDataDirMeta(path), onDisk);
    assert.equal(await readDataDirMeta(`${path}/missing`), null);
  });
});

Deno.test("a folder of another member id is refused, naming both ids", async () => {
  await withDir(async (path) => {
    await openOnce(path, { memberId: "n1", members: THREE });
    await assert.rejects(
      DataDir.open(path, { memberId: "n2", members: THREE }),
      (error: unknown) => {
        assert(error instanceof DataDirMismatchError);
        assert.equal(error.kind, "member");
        assert.equal(error.found, "n1");
        assert.equal(error.expected, "n2");
        assert.equal(
          error.message,
          `data folder ${path} belongs to member "n1", not "n2": start this node with --id n1, or give it its own --data folder`,
        );
        return true;
      },
    );
  });
});

Deno.test("a single-node folder reused by n1 of a 3-node cluster is refused as another cluster's", async () => {
  await withDir(async (path) => {
    const single = await openOnce(path, { memberId: "n1", members: SINGLE });
    const three = await bootstrapClusterId(THREE);
    await assert.rejects(
      DataDir.open(path, { memberId: "n1", members: THREE }),
      (error: unknown) => {
        assert(error instanceof DataDirMismatchError);
        assert.equal(error.kind, "cluster");
        assert.equal(error.found, single.clusterId);
        assert.equal(error.expected, three);
        assert.equal(
          error.message,
          `data folder ${path} belongs to another cluster (id ${single.clusterId}): it holds the log of a cluster bootstrapped with a single node (n1=tcp://127.0.0.1:7101), but this node is started as a member of a cluster of n1=tcp://127.0.0.1:7101, n2=tcp://127.0.0.1:7102, n3=tcp://127.0.0.1:7103 (cluster id ${three}); its log would be merged silently with another cluster's. Give this node a new --data folder (or move this one aside), or start it with the --peers (and --cluster-token) its cluster was bootstrapped with`,
        );
        return true;
      },
    );
    // The refusal changed nothing.
    assert.equal((await readDataDirMeta(path))?.clusterId, single.clusterId);
  });
});

Deno.test("a folder of a cluster with another --cluster-token is refused", async () => {
  await withDir(async (path) => {
    await openOnce(path, { memberId: "n1", members: THREE, clusterToken: "a" });
    await assert.rejects(
      DataDir.open(path, { memberId: "n1", members: THREE, clusterToken: "b" }),
      (error: unknown) =>
        error instanceof DataDirMismatchError && error.kind === "cluster" &&
        error.message.includes("and a --cluster-token"),
    );
    await assert.rejects(
      DataDir.open(path, { memberId: "n1", members: THREE }),
      DataDirMismatchError,
    );
  });
});

Deno.test("the same members and token at other peer URLs (members moved) open the folder and keep its cluster id", async () => {
  await withDir(async (path) => {
    const first = await openOnce(path, { memberId: "n1", members: THREE });
    const moved = { ...THREE, n2: "tcp://127.0.0.1:9102" };
    const again = await openOnce(path, { memberId: "n1", members: moved });
    assert.equal(again.clusterId, first.clusterId);
    assert.deepEqual(again.movedPeers, { n2: [THREE.n2, moved.n2] });
    // The bootstrap record stays, so the next start checks against it too.
    assert.deepEqual((await readDataDirMeta(path))?.bootstrapMembers, THREE);
  });
});

Deno.test("a format-1 folder ({id, members}) opens when the member ids match and is rewritten with the cluster id; other members are refused", async () => {
  await withDir(async (path) => {
    await Deno.mkdir(path);
    await Deno.writeTextFile(
      `${path}/meta.json`,
      JSON.stringify({ id: "n2", members: ["n1", "n2", "n3"] }) + "\n",
    );
    assert.deepEqual(await readDataDirMeta(path), {
      format: 1,
      clusterId: "",
      memberId: "n2",
    });
    await assert.rejects(
      DataDir.open(path, { memberId: "n2", members: { n2: THREE.n2 } }),
      (error: unknown) =>
        error instanceof DataDirMismatchError && error.kind === "cluster" &&
        error.message.includes(
          "it holds the log of a cluster of n1, n2, n3, but this node is started as a member of a cluster of a single node (n2)",
        ),
    );
    const dir = await openOnce(path, { memberId: "n2", members: THREE });
    assert.equal(dir.migrated, true);
    assert.deepEqual(await readDataDirMeta(path), {
      format: DATA_DIR_FORMAT,
      clusterId: await bootstrapClusterId(THREE),
      memberId: "n2",
      bootstrapMembers: THREE,
    });
    // {id} alone (before folders recorded members) takes the members given.
    await Deno.writeTextFile(`${path}/meta.json`, '{"id":"n2"}\n');
    assert.equal(
      (await openOnce(path, { memberId: "n2", members: SINGLE_N2 })).migrated,
      true,
    );
  });
});
const SINGLE_N2 = { n2: "tcp://127.0.0.1:7102" };

Deno.test("a joining member's folder takes the cluster id it is told, and refuses another", async () => {
  await withDir(async (path) => {
    const clusterId = await bootstrapClusterId(THREE);
    const joined = await openOnce(path, { memberId: "n4", clusterId });
    assert.equal(joined.clusterId, clusterId);
    assert.equal(joined.meta.bootstrapMembers, undefined);
    await assert.rejects(
      DataDir.open(path, { memberId: "n4", clusterId: "0123456789abcdef" }),
      (error: unknown) =>
        error instanceof DataDirMismatchError &&
        error.message.includes(
          "it holds the log of a cluster it joined, but this node is started as a member of the cluster it is joining",
        ),
    );
    await assert.rejects(
      DataDir.open(path, { memberId: "n4", clusterId: "not-hex" }),
      { message: 'cluster id "not-hex" is not 16 lowercase hex digits' },
    );
    await assert.rejects(DataDir.open(path, { memberId: "n4" }), {
      message:
        "opening a data folder needs the bootstrap members or the id of the cluster joined",
    });
  });
});

Deno.test("a damaged or newer meta.json stops the open with a message naming the file", async () => {
  await withDir(async (path) => {
    await Deno.mkdir(path);
    const file = `${path}/meta.json`;
    for (
      const [text, why] of [
        ["{not json", "is not valid JSON"],
        ["[1]", "is not a JSON object"],
        ['{"format":2,"memberId":"n1"}', "lacks a string clusterId"],
        ['{"members":["n1"]}', "is neither"],
      ]
    ) {
      await Deno.writeTextFile(file, text);
      await assert.rejects(
        DataDir.open(path, { memberId: "n1", members: SINGLE }),
        (error: Error) =>
          error.message.startsWith(`${file} ${why}`) &&
          error.message.includes("move the data folder aside"),
      );
    }
    await Deno.writeTextFile(
      file,
      '{"format":3,"clusterId":"x","memberId":"n1"}',
    );
    await assert.rejects(
      DataDir.open(path, { memberId: "n1", members: SINGLE }),
      {
        message:
          `${file} has format 3, newer than this program's 2: run a newer version of it on this folder`,
      },
    );
  });
});

Deno.test("an open data folder is locked: a second open is refused until it is released", async () => {
  await withDir(async (path) => {
    const dir = await DataDir.open(path, { memberId: "n1", members: SINGLE });
    await assert.rejects(
      DataDir.open(path, { memberId: "n1", members: SINGLE }),
      DataDirInUseError,
    );
    dir.release();
    dir.release();
    (await DataDir.open(path, { memberId: "n1", members: SINGLE })).release();
  });
});
