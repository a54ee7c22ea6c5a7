/**
 * The Cloudflare example in a real workerd (from npm) against a backend
 * that takes only TLS with a token: a registry node with client TLS and
 * `--auth`, two hello servers serving TLS and bound with a bind token, all
 * certificates from a throw-away test CA. workerd trusts that CA through
 * its `internet` network's `tlsOptions` (config.tls.capnp.template), the
 * worker gets a read token from `RAFTER_TOKEN` (a `fromEnvironment`
 * binding), and every one of its requests must come back right.
 *
 * @module
 */

import assert from "node:assert/strict";
import { freePorts } from "../testing/ports.ts";
import {
  answers,
  assertGreetsRight,
  assertTlsAndTokenEnforced,
  bundleWorker,
  CLOUDFLARE_EXAMPLE,
  installWorkerd,
  type Spawned,
  spawnProcess,
  startTlsBackend,
  type TlsBackend,
} from "./_edge_fixtures.ts";

const REQUESTS = 60;

Deno.test({
  name:
    "Cloudflare example in workerd: a tls:// registry with auth and TLS hello servers, test CA in tlsOptions, read token from RAFTER_TOKEN: every answer right, no workerd error",
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const started = performance.now();
  const workerd = await installWorkerd();
  const dir = await Deno.makeTempDir({ prefix: "rafter_workerd_tls_" });
  let backend: TlsBackend | undefined;
  let worker: Spawned | undefined;
  let untrusting: Spawned | undefined;
  try {
    const [, startedBackend] = await Promise.all([
      bundleWorker(dir),
      startTlsBackend(["hello-1", "hello-2"]),
    ]);
    backend = startedBackend;

    const [port] = freePorts(1);
    await Deno.copyFile(backend.caFile, `${dir}/ca.pem`);
    const template = await Deno.readTextFile(
      `${CLOUDFLARE_EXAMPLE}/config.tls.capnp.template`,
    );
    await Deno.writeTextFile(
      `${dir}/config.capnp`,
      template.replaceAll("@PORT@", String(port))
        .replaceAll("@REGISTRY@", backend.registryUrl),
    );
    // --verbose: rejected or hanging background work shows as "uncaught
    // exception" info lines, which the end of the test rejects.
    worker = spawnProcess("workerd", workerd, [
      "serve",
      "--verbose",
      `${dir}/config.capnp`,
    ], { cwd: dir, env: { RAFTER_TOKEN: backend.readToken } });
    const origin = `http://127.0.0.1:${port}`;
    assert.ok(
      await answers(`${origin}/?name=ready`, 100),
      `workerd did not answer:\n${worker.output.join("\n")}`,
    );

    // Over TLS, with the read token: every answer right, from both.
    await assertGreetsRight(
      origin,
      REQUESTS,
      ["hello-1", "hello-2"],
      () => worker?.output.join("\n") ?? "",
    );

    // SIGTERM, and SIGKILL if it has not stopped within 5 s.
    worker.process.kill("SIGTERM");
    const grace = setTimeout(() => worker?.kill(), 5_000);
    await worker.exited;
    clearTimeout(grace);
    const status = await worker.process.status;
    assert.equal(status.signal, null, "workerd stopped on SIGTERM");
    const output = worker.output.filter((line) => line.trim() !== "");
    assert.deepEqual(
      output.filter((line) =>
        /error|warning|hung|hanging|canceled|uncaught|tls|certificate/i.test(
          line,
        )
      ),
      [],
      `workerd logged:\n${output.join("\n")}`,
    );
    // The backend logged no TLS trouble (a refused handshake, sockets
    // closed without close_notify); plain TCP and a missing token get
    // nowhere, so the answers above came over TLS, with the read token.
    await assertTlsAndTokenEnforced(backend);

    // A workerd that does not trust the test CA (the plain config, public
    // CAs only): 502 saying the registry accepted the connection and the
    // TLS handshake failed, not "start a registry" (workerd words a
    // refused connection and a failed handshake the same way; the dialer
    // tells them apart by opening TCP first).
    const [untrustedPort] = freePorts(1);
    const plain = await Deno.readTextFile(
      `${CLOUDFLARE_EXAMPLE}/config.capnp.template`,
    );
    await Deno.writeTextFile(
      `${dir}/untrusted.capnp`,
      plain.replaceAll("@PORT@", String(untrustedPort))
        .replaceAll("@REGISTRY@", backend.registryUrl),
    );
    untrusting = spawnProcess("workerd", workerd, [
      "serve",
      `${dir}/untrusted.capnp`,
    ], { cwd: dir });
    const untrustedOrigin = `http://127.0.0.1:${untrustedPort}`;
    assert.ok(
      await answers(`${untrustedOrigin}/?name=ready`, 100),
      `workerd did not answer:\n${untrusting.output.join("\n")}`,
    );
    const response = await fetch(`${untrustedOrigin}/?name=Ada`, {
      signal: AbortSignal.timeout(15_000),
    });
    const body = await response.json();
    assert.equal(response.status, 502, JSON.stringify(body));
    assert.match(
      body.error.message,
      /TLS handshake failed; workerd does not tell the worker why, its log does .*tlsOptions\.trustedCertificates.*\. The registry node accepted the connection, but the TLS handshake failed/,
    );
    assert.doesNotMatch(body.error.message, /Start a registry/i);
    console.log(`without the CA: ${body.error.message}`);
    console.log(
      `measured: the test took ${(performance.now() - started).toFixed(0)} ms`,
    );
  } finally {
    await worker?.kill();
    await untrusting?.kill();
    await backend?.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
