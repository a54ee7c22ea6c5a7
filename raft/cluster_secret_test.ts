import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { ClusterSecretError, loadClusterSecret } from "./cluster_secret.ts";

Deno.test("loadClusterSecret generates a 43-character secret in a new 0600 file and logs it once", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/cluster_secret`;
    const logs: string[] = [];
    const secret = await loadClusterSecret(path, { log: (l) => logs.push(l) });
    assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(await Deno.readTextFile(path), `${secret}\n`);
    if (Deno.build.os !== "windows") {
      assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
    }
    assert.deepEqual(logs, [
      `generated a new cluster secret in ${path}; give this file to every other node`,
    ]);
    // Read back, not generated again; no temporary file left behind.
    assert.equal(
      await loadClusterSecret(path, { log: (l) => logs.push(l) }),
      secret,
    );
    assert.equal(logs.length, 1);
    const names = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    assert.deepEqual(names, ["cluster_secret"]);
  });
});

Deno.test("loadClusterSecret: concurrent starters agree on one secret", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/cluster_secret`;
    const logs: string[] = [];
    const secrets = await Promise.all(
      Array.from(
        { length: 8 },
        () => loadClusterSecret(path, { log: (l) => logs.push(l) }),
      ),
    );
    assert.equal(new Set(secrets).size, 1);
    assert.equal(logs.length, 1, logs.join("\n"));
    assert.equal((await Deno.readTextFile(path)).trim(), secrets[0]);
  });
});

Deno.test("loadClusterSecret trims an existing secret and refuses one under 32 characters, saying how to make one", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/secret`;
    const good = "x".repeat(32);
    await Deno.writeTextFile(path, `  ${good}\n\n`, { mode: 0o600 });
    assert.equal(await loadClusterSecret(path), good);
    await Deno.writeTextFile(path, "short\n");
    await assert.rejects(loadClusterSecret(path), (error: unknown) => {
      assert.ok(error instanceof ClusterSecretError);
      assert.equal(
        error.message,
        `the cluster secret in ${path} has 5 characters; it needs at least 32. Make one with \`openssl rand -base64 32 > ${path}\` (then chmod 600 it), or remove the file so a node generates one, and give the same file to every node`,
      );
      return true;
    });
  });
});

Deno.test("loadClusterSecret warns about a file other users can read, and names the path it cannot create", async () => {
  await withTempDir(async (dir) => {
    if (Deno.build.os !== "windows") {
      const path = `${dir}/open`;
      await Deno.writeTextFile(path, "y".repeat(40));
      await Deno.chmod(path, 0o644);
      const logs: string[] = [];
      await loadClusterSecret(path, { log: (l) => logs.push(l) });
      assert.deepEqual(logs, [
        `warning: the cluster secret file ${path} is readable by other users (mode 0644); chmod 600 it`,
      ]);
    }
    const missing = `${dir}/no/such/folder/secret`;
    await assert.rejects(loadClusterSecret(missing), (error: unknown) => {
      assert.ok(error instanceof ClusterSecretError);
      assert.match(
        error.message,
        new RegExp(`^cannot create the cluster secret file ${missing}: `),
      );
      return true;
    });
  });
});
