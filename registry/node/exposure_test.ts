import assert from "node:assert/strict";
import {
  type Exposure,
  exposureProblems,
  insecureWarning,
  isLoopbackHost,
} from "./exposure.ts";

const loopback: Exposure = {
  listen: { hostname: "127.0.0.1", port: 7001 },
  peerListen: { hostname: "127.0.0.1", port: 7101 },
  clientTls: false,
  peerTls: false,
  auth: false,
  insecure: false,
};

Deno.test("loopback hosts are told apart from reachable ones", () => {
  for (
    const host of [
      "127.0.0.1",
      "127.255.0.9",
      "::1",
      "[::1]",
      "localhost",
      "::ffff:127.0.0.1",
    ]
  ) {
    assert.equal(isLoopbackHost(host), true, host);
  }
  for (
    const host of [
      "0.0.0.0",
      "::",
      "10.0.0.5",
      "128.0.0.1",
      "127.0.0.256",
      "example.com",
      "127.example.com",
    ]
  ) {
    assert.equal(isLoopbackHost(host), false, host);
  }
});

Deno.test("a loopback-only node needs no TLS and no auth", () => {
  assert.deepEqual(exposureProblems(loopback), []);
  assert.equal(insecureWarning({ ...loopback, insecure: true }), null);
});

Deno.test("an exposed client port needs TLS and auth, each named with its flag", () => {
  const open = { ...loopback, listen: { hostname: "0.0.0.0", port: 7001 } };
  const problems = exposureProblems(open);
  assert.equal(problems.length, 2);
  assert.match(problems[0], /--tls-cert and --tls-key/);
  assert.match(problems[1], /--auth/);
  assert.deepEqual(exposureProblems({ ...open, clientTls: true }).length, 1);
  assert.deepEqual(
    exposureProblems({ ...open, clientTls: true, auth: true }),
    [],
  );
});

Deno.test("an exposed peer port needs mutual TLS; auth does not replace it", () => {
  const open = {
    ...loopback,
    peerListen: { hostname: "10.0.0.5", port: 7101 },
    auth: true,
  };
  const problems = exposureProblems(open);
  assert.equal(problems.length, 1);
  assert.match(
    problems[0],
    /--peer-tls-cert, --peer-tls-key and --peer-tls-ca/,
  );
  assert.deepEqual(exposureProblems({ ...open, peerTls: true }), []);
});

Deno.test("--insecure starts anyway, with a warning that names what is open", () => {
  const open = {
    ...loopback,
    listen: { hostname: "0.0.0.0", port: 7001 },
    insecure: true,
  };
  assert.deepEqual(exposureProblems(open), []);
  const warning = insecureWarning(open);
  assert.match(
    warning ?? "",
    /^WARNING: started with --insecure: the client port listens on 0\.0\.0\.0/,
  );
  assert.doesNotMatch(warning ?? "", /pass --/);
});

Deno.test("startRegistryNode refuses an exposed node without TLS and auth before it touches a port or a file", async () => {
  const { startRegistryNode } = await import("../main.ts");
  const { InsecureStartError } = await import("./options.ts");
  const dataDir = `${await Deno.makeTempDir()}/never`;
  await assert.rejects(
    startRegistryNode({
      id: "n1",
      listen: { hostname: "0.0.0.0", port: 0 },
      advertise: "10.0.0.5",
      peerListen: { hostname: "127.0.0.1", port: 0 },
      dataDir,
    }),
    (error: unknown) =>
      error instanceof InsecureStartError && error.problems.length === 2 &&
      /pass --insecure$/.test(error.message),
  );
  await assert.rejects(Deno.stat(dataDir), Deno.errors.NotFound);
});
