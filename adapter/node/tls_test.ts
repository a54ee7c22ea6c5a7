import assert from "node:assert/strict";
import { join } from "node:path";
import { makeTestPki } from "../../testing/certs.ts";
import { runTlsChecks, type TlsCheckFiles } from "./_tls_checks.ts";

async function withFiles(
  run: (files: TlsCheckFiles, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rafter-node-tls-" });
  try {
    await Deno.mkdir(join(dir, "a"));
    await Deno.mkdir(join(dir, "b"));
    const a = await makeTestPki(join(dir, "a"), {
      members: ["n1"],
      others: ["client"],
    });
    const b = await makeTestPki(join(dir, "b"), { others: ["client"] });
    await run({
      caFile: a.caFile,
      otherCaFile: b.caFile,
      server: a.certs.n1,
      client: a.certs.client,
      otherClient: b.certs.client,
    }, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The checks' result, as `runTlsChecks` gives it under either runtime. */
function assertChecks(result: Awaited<ReturnType<typeof runTlsChecks>>) {
  assert.match(result.url, /^tls:\/\/127\.0\.0\.1:\d+$/);
  const me = {
    secure: true,
    altNames: ["DNS:localhost", "IP Address:127.0.0.1"],
    fromLoopback: true,
  };
  assert.deepEqual(result.json, me);
  assert.deepEqual(result.cbor, me);
  assert.equal(result.serverCommonName, "n1");
  assert.equal(result.secure, true);
  assert.equal(result.noCertRefused, true);
  assert.equal(result.otherCaRefused, true);
  assert.match(
    result.untrusted,
    /pass tls\.caFile with the CA that signed the server's certificate/,
  );
}

Deno.test("node adapter tls: mutual TLS serve and dial under Deno's node:tls", async () => {
  await withFiles(async (files) => {
    assertChecks(await runTlsChecks(files));
  });
});

Deno.test("node adapter tls: mutual TLS serve and dial under Node itself", async (t) => {
  const node = await new Deno.Command("node", { args: ["--version"] }).output()
    .catch(() => null);
  if (node === null || !node.success) {
    t.step({ name: "skipped: node not on PATH", ignore: true, fn() {} });
    return;
  }
  await withFiles(async (files, dir) => {
    const bundle = join(dir, "tls_checks.mjs");
    const built = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--platform",
        "node",
        "--format",
        "esm",
        "-o",
        bundle,
        new URL("./_tls_checks.ts", import.meta.url).pathname,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(built.success, new TextDecoder().decode(built.stderr));
    const run = await new Deno.Command("node", {
      args: [bundle, JSON.stringify(files)],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    const out = new TextDecoder().decode(run.stdout).trim();
    assert.ok(run.success, new TextDecoder().decode(run.stderr) + out);
    assertChecks(JSON.parse(out.split("\n").at(-1)!));
  });
});
