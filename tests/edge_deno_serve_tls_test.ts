/**
 * The `deno serve` example (examples/edge/deno/main.ts) against a backend
 * that takes only TLS with a token: a registry node with client TLS and
 * `--auth`, two hello servers serving TLS and bound with a bind token, all
 * certificates from a throw-away test CA. The example gets the registry
 * URL, a read token and the CA from `RAFTER_REGISTRY`, `RAFTER_TOKEN` and
 * `RAFTER_CA`, with the permissions its README gives: every request comes
 * back right and nothing is logged. Without the CA, or without the token,
 * it answers 502 with an error that says what is wrong (without the CA:
 * that the certificate is not trusted, with a hint naming `RAFTER_CA`).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  assertGreetsRight,
  assertTlsAndTokenEnforced,
  type Spawned,
  startDenoServe,
  startTlsBackend,
  type TlsBackend,
} from "./_edge_fixtures.ts";

const REQUESTS = 60;

/** One request to `origin`: its status and the JSON-RPC error in its body. */
async function failed(origin: string) {
  const response = await fetch(`${origin}/?name=Ada`, {
    signal: AbortSignal.timeout(15_000),
  });
  const body = await response.json();
  return { status: response.status, error: body.error };
}

Deno.test("deno serve example: a tls:// registry with auth and TLS hello servers, RAFTER_CA and RAFTER_TOKEN: every answer right, nothing logged; without the CA or the token, 502 saying why", async () => {
  const started = performance.now();
  let backend: TlsBackend | undefined;
  const serves: Spawned[] = [];
  try {
    backend = await startTlsBackend(["hello-1", "hello-2"]);
    const env = {
      RAFTER_REGISTRY: backend.registryUrl,
      RAFTER_TOKEN: backend.readToken,
      RAFTER_CA: backend.caFile,
    };
    const [right, noCa, noToken] = await Promise.all([
      startDenoServe(env, [backend.caFile]),
      startDenoServe({ ...env, RAFTER_CA: "" }),
      startDenoServe({ ...env, RAFTER_TOKEN: "" }, [backend.caFile]),
    ]);
    serves.push(right.serve, noCa.serve, noToken.serve);

    // Over TLS, with the read token: every answer right, from both.
    await assertGreetsRight(
      right.origin,
      REQUESTS,
      ["hello-1", "hello-2"],
      () => right.serve.output.join("\n"),
    );
    const logged = () =>
      right.serve.output.filter((line) =>
        !/^deno serve: Listening on http:\/\/127\.0\.0\.1:\d+\/$/.test(line)
      );
    assert.deepEqual(logged(), []);

    // SIGTERM: the example closes its client and deno serve exits 0,
    // having logged nothing but its listening line.
    right.serve.process.kill("SIGTERM");
    assert.equal(await right.serve.exited, 0, right.serve.output.join("\n"));
    assert.deepEqual(logged(), []);
    // The backend logged no TLS trouble (a refused handshake, sockets
    // closed without close_notify); plain TCP and a missing token get
    // nowhere, so the answers above came over TLS, with the read token.
    await assertTlsAndTokenEnforced(backend);
    // Without RAFTER_CA the registry's certificate is not trusted (the
    // system's roots do not hold the test CA); without RAFTER_TOKEN the
    // registry refuses the lookup.
    const [untrusted, anonymous] = await Promise.all([
      failed(noCa.origin),
      failed(noToken.origin),
    ]);
    assert.equal(untrusted.status, 502, JSON.stringify(untrusted));
    assert.match(untrusted.error.message, /certificate/i);
    // The cause is trust, not a missing registry, and the hint names the
    // example's variable.
    assert.match(
      untrusted.error.message,
      /The registry node is up, but its TLS certificate is not trusted here/,
    );
    assert.doesNotMatch(untrusted.error.message, /Start a registry/i);
    assert.match(
      untrusted.error.hint,
      /^the registry's \(or a server's\) TLS certificate is not trusted: set RAFTER_CA to the CA certificate file that signed it \(RAFTER_CA is not set/,
    );
    assert.equal(anonymous.error.hint, undefined);
    assert.equal(anonymous.status, 502, JSON.stringify(anonymous));
    assert.match(anonymous.error.message, /Unauthenticated/);
    console.log(
      `without the CA: ${untrusted.error.message}\nwithout the token: ${anonymous.error.message}`,
    );

    console.log(
      `measured: the test took ${(performance.now() - started).toFixed(0)} ms`,
    );
  } finally {
    await Promise.all(serves.map((serve) => serve.kill()));
    await backend?.stop();
  }
});
