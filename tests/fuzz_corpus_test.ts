/**
 * Replays the fuzz corpus (`tests/fuzz_corpus/<port>/*`, format in
 * `tests/_fuzz.ts`): every input that once crashed or hung a port, and a
 * few seeds, sent to a `serve()` server in this process and to a registry
 * node run as its own process (`deno run registry/main.ts`, a member of a
 * three-member cluster whose other two members never start, so it has no
 * leader and takes a member's messages as they come). After each file the
 * node must still be running and every port must answer a healthy client.
 *
 * A `peer-step` file is written after a legitimate handshake as member
 * `n3` to the node (`n1`), on the same connection.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { serve } from "../adapter/deno/serve.ts";
import { dial } from "../rpc/transport/dial.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import { freePorts } from "../testing/ports.ts";
import { delay, waitFor, within } from "../testing/time.ts";
import { spawnRegistry } from "./_registry_process.ts";
import {
  CORPUS_PORTS,
  rawPeerHandshake,
  readCorpus,
  readUntilClosed,
  sendRaw,
} from "./_fuzz.ts";

const SECRET = "fuzz-corpus-cluster-secret-".padEnd(40, "x");

Deno.test("every fuzz corpus input leaves its port up and answering", async () => {
  const root = await Deno.makeTempDir({ prefix: "rafter_fuzz_corpus_" });
  const secretFile = join(root, "cluster_secret");
  await Deno.writeTextFile(secretFile, `${SECRET}\n`, { mode: 0o600 });
  const [client, peer, n2, n3] = freePorts(4);
  const node = spawnRegistry(root, [
    "--id",
    "n1",
    "--listen",
    `127.0.0.1:${client}`,
    "--peers",
    `n1=127.0.0.1:${peer},n2=127.0.0.1:${n2},n3=127.0.0.1:${n3}`,
    "--cluster-secret-file",
    secretFile,
    "--data",
    join(root, "n1"),
    "--tick-ms",
    "50",
  ]);
  let exited: number | null = null;
  node.child.status.then((s) => exited = s.code);
  const server = serve({ methods: { greet: (name: string) => `hi ${name}` } });
  const rpc = await dial(server.url);
  try {
    await waitFor(
      () => {
        if (exited !== null) throw new Error(`n1 exited:\n${node.output}`);
        return /listening on/.test(node.output);
      },
      "n1 to listen",
      30_000,
      50,
    );
    const clusterId = (await readDataDirMeta(join(root, "n1")))!.clusterId;
    const key = await ClusterKey.fromSecret(SECRET);
    /** A legitimate handshake as member n3. */
    const handshake = () =>
      rawPeerHandshake(peer, {
        key,
        clusterId,
        from: "n3",
        to: "n1",
        clientUrl: null,
        peerUrl: null,
      });
    const healthy = async (what: string) => {
      try {
        await answers(what);
      } catch (error) {
        // Let a dying node finish writing why.
        await Promise.race([node.child.status, delay(3_000)]);
        throw new Error(`${error}; n1's output:\n${node.output}`);
      }
    };
    const answers = async (what: string) => {
      assert.equal(exited, null, `${what}: n1 exited`);
      assert.equal(
        await within(rpc.call("greet", ["Ada"]), 5_000, `${what}: serve()`),
        "hi Ada",
      );
      const connection = await dial(`tcp://127.0.0.1:${client}`);
      try {
        const status = await within(
          connection.call<{ id: string; term: number }>("registry.status"),
          5_000,
          `${what}: client port`,
        );
        assert.equal(status.id, "n1");
        // No input moved the term out of reach (MAX_TERM_STEP, raft/core.ts).
        assert.ok(status.term < 2 ** 24, `${what}: term ${status.term}`);
      } finally {
        connection.close();
      }
      // The peer port completes a handshake.
      const conn = await within(
        handshake(),
        5_000,
        `${what}: peer port`,
      );
      conn.close();
    };
    await healthy("at the start");
    let replayed = 0;
    for (const port of CORPUS_PORTS) {
      for (const { name, bytes } of readCorpus(port)) {
        if (port === "peer-step") {
          const conn = await handshake();
          try {
            await conn.write(bytes).catch(() => {});
            await readUntilClosed(conn, 500);
          } finally {
            conn.close();
          }
        } else {
          const target = { serve: server.port, client, peer }[port];
          await sendRaw(target, bytes, "halfClose", 2_000);
        }
        await healthy(`${port}/${name}`);
        replayed++;
      }
    }
    // The seeds: at least one file per port.
    assert.ok(replayed >= CORPUS_PORTS.length, `replayed ${replayed} files`);
    // No input reached a handler that was not ready for it: malformed
    // params are refused (-32602), never a TypeError (-32603).
    assert.deepEqual(
      node.output.split("\n").filter((line) => /failed: TypeError/.test(line)),
      [],
    );
  } finally {
    rpc.close();
    await server.close();
    try {
      node.child.kill("SIGTERM");
    } catch {
      // Exited already.
    }
    await node.exit();
    await Deno.remove(root, { recursive: true });
  }
});
