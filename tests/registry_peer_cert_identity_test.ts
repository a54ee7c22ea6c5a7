/**
 * A registry node started with another member's peer certificate (or one
 * that names no member) is refused at start, exit 2, with one line naming
 * the member in the certificate and the file; with its own it starts.
 * Certificates from `makeTestPki` (`cli/pki.ts`, what `rafter cert member`
 * makes).
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeTestPki, type TestPki } from "../testing/certs.ts";
import { freePorts } from "../testing/ports.ts";
import { spawnRegistry } from "./_registry_process.ts";

/** `deno run registry/main.ts` as n1 with `cert` as its peer certificate. */
function startN1(dir: string, pki: TestPki, cert: string) {
  const [client, peer] = freePorts(2);
  return spawnRegistry(dir, [
    "--id",
    "n1",
    "--listen",
    `127.0.0.1:${client}`,
    "--peers",
    `n1=127.0.0.1:${peer}`,
    "--data",
    `${dir}/data-${cert}`,
    "--cluster-secret-file",
    `${dir}/secret-${cert}`,
    "--peer-tls-cert",
    pki.certs[cert].certFile,
    "--peer-tls-key",
    pki.certs[cert].keyFile,
    "--peer-tls-ca",
    pki.caFile,
  ]);
}

/**
 * The exit code of a node expected to refuse to start; one that started
 * anyway is killed after `ms` (the check failed: it did not refuse).
 */
async function refusal(
  node: ReturnType<typeof spawnRegistry>,
  ms = 30_000,
): Promise<number> {
  const timer = setTimeout(() => node.child.kill("SIGKILL"), ms);
  try {
    return await node.exit();
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("a node started with another member's peer certificate, or one naming no member, exits 2 naming the id in it and the file; its own starts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_peer_cert_id_" });
  try {
    const pki = await makeTestPki(dir, {
      members: ["n1", "n2"],
      others: ["client"],
    });

    const other = startN1(dir, pki, "n2");
    assert.equal(await refusal(other), 2, other.output);
    const lines = other.output.trim().split("\n");
    assert.equal(lines.length, 1, other.output);
    assert.match(
      lines[0],
      new RegExp(
        `registry n1: --peer-tls-cert ${
          pki.certs.n2.certFile.replaceAll(/[.*+?^${}()|[\]\\/]/g, "\\$&")
        } is member "n2"'s certificate \\(URI:rafter://member/n2\\), not this node's \\(--id n1\\): the other members would refuse it; give this node its own member certificate \\(rafter cert member n1 --ca DIR --host HOST\\)`,
      ),
    );
    // Refused before anything was written.
    await assert.rejects(Deno.stat(`${dir}/data-n2`), Deno.errors.NotFound);
    await assert.rejects(Deno.stat(`${dir}/secret-n2`), Deno.errors.NotFound);

    const none = startN1(dir, pki, "client");
    assert.equal(await refusal(none), 2, none.output);
    assert.match(
      none.output,
      /--peer-tls-cert \S+client\.pem names no member \(no URI:rafter:\/\/member\/<id> SAN\), so it is not this node's \(--id n1\)/,
    );

    const own = startN1(dir, pki, "n1");
    const deadline = Date.now() + 30_000;
    while (!/listening on/.test(own.output) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(own.output, /listening on/);
    own.child.kill("SIGTERM");
    assert.equal(await own.exit(), 0, own.output);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
