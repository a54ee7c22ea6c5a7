import assert from "node:assert/strict";
import { ConnectionError, RpcError } from "../rpc/errors.ts";
import { UNAVAILABLE } from "./registry.ts";
import { noRegistryError, noRegistryHint } from "./registry_failover.ts";

const URLS = ["tls://127.0.0.1:7001", "tls://127.0.0.1:7002"];

/** A dial failure as the stub's pool raises it, wrapping `cause`. */
function dialFailure(cause: Error): ConnectionError {
  return new ConnectionError(
    `cannot connect to ${URLS[1]}: ${cause.message}`,
    false,
    { cause },
  );
}

Deno.test("noRegistryError: an untrusted certificate says so and how to trust it, never 'start a registry'", () => {
  // What adapter/tls/client.ts raises for UnknownIssuer.
  const untrusted = Object.assign(
    new Error(
      `TLS to ${
        URLS[1]
      } failed: the server's certificate is not trusted by the system's roots: pass tls.caFile with the CA that signed the server's certificate (TLS_FAILED invalid peer certificate: UnknownIssuer)`,
    ),
    { code: "TLS_FAILED", tlsFailure: "untrusted" },
  );
  const error = noRegistryError(
    "registry.lookup",
    URLS,
    dialFailure(untrusted),
  );
  assert.ok(error instanceof RpcError);
  assert.equal(error.code, UNAVAILABLE);
  assert.match(
    error.message,
    /\. The registry node is up, but its TLS certificate is not trusted here: pass tls\.caFile \(or tls\.ca\) with the CA certificate that signed it$/,
  );
  assert.doesNotMatch(error.message, /Start a registry/i);
  assert.deepEqual(error.data, {
    retryAfterMs: 1000,
    tried: URLS,
    tlsFailure: "untrusted",
  });
});

Deno.test("noRegistryError: an untagged UnknownIssuer message counts as untrusted too", () => {
  const error = noRegistryError(
    "registry.lookup",
    URLS,
    dialFailure(new Error("invalid peer certificate: UnknownIssuer")),
  );
  assert.match(error.message, /TLS certificate is not trusted here/);
  assert.doesNotMatch(error.message, /Start a registry/i);
});

Deno.test("noRegistryError: a failed handshake whose reason is unknown (workerd) does not say 'start a registry'", () => {
  const handshake = Object.assign(new Error("TLS to … failed"), {
    tlsFailure: "handshake",
  });
  const error = noRegistryError(
    "registry.lookup",
    URLS,
    dialFailure(handshake),
  );
  assert.match(
    error.message,
    /The registry node accepted the connection, but the TLS handshake failed/,
  );
  assert.doesNotMatch(error.message, /Start a registry/i);
  assert.equal(
    (error.data as { tlsFailure?: string }).tlsFailure,
    "handshake",
  );
});

Deno.test("noRegistryError: a refused connection keeps the 'start a registry' hint", () => {
  const refused = Object.assign(
    new Error("Connection refused (os error 111)"),
    { code: "ECONNREFUSED" },
  );
  const error = noRegistryError("registry.lookup", URLS, dialFailure(refused));
  assert.match(
    error.message,
    /\. Start a registry \(deno task registry\) or check the registry URLs$/,
  );
  assert.deepEqual(error.data, { retryAfterMs: 1000, tried: URLS });
  assert.equal(
    noRegistryHint(undefined),
    "Start a registry (deno task registry) or check the registry URLs",
  );
});
