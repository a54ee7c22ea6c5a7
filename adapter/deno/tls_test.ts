import "../../rpc/codec/cbor.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { makeTestPki, type TestPki } from "../../testing/certs.ts";
import { dial } from "./mod.ts";
import { serve } from "./serve.ts";
import { denoDialer } from "./tcp.ts";
import type { RpcServer } from "../../rpc/server/server.ts";
import type { RpcSession } from "../../rpc/server/method.ts";
import type { TlsServerError } from "../../rpc/transport/tls.ts";
import { X509Certificate } from "node:crypto";
import { defaultDialer } from "../../rpc/transport/default_dialer.ts";

async function withPki<T>(
  run: (pki: TestPki, other: TestPki, dir: string) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "rafter-tls-" });
  try {
    await Deno.mkdir(join(dir, "a"));
    await Deno.mkdir(join(dir, "b"));
    const pki = await makeTestPki(join(dir, "a"), {
      members: ["n1"],
      others: ["client"],
    });
    const other = await makeTestPki(join(dir, "b"), {
      members: ["n1"],
      others: ["client"],
      caName: "Other CA",
    });
    return await run(pki, other, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

const whoami = (session: RpcSession) => ({
  whoami: () => ({
    secure: session.secure,
    altNames: session.peerCertificate?.altNames ?? null,
    commonName: session.peerCertificate?.commonName ?? null,
  }),
  echo: (value: unknown) => value,
  from: () => session.remoteAddress ?? null,
});

/** Resolves when `conn` is closed by the peer (read gives EOF or an error); the ms it took. */
async function closedWithin(conn: Deno.Conn, ceilingMs: number) {
  const started = performance.now();
  const buffer = new Uint8Array(1024);
  const timer = setTimeout(() => conn.close(), ceilingMs);
  try {
    while (true) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) break;
    }
  } finally {
    clearTimeout(timer);
  }
  const ms = performance.now() - started;
  try {
    conn.close();
  } catch {
    // Already closed.
  }
  return ms;
}

/** A TLS server with n1's certificate from `pki`. */
function serveN1(pki: TestPki): RpcServer {
  return serve({
    methods: whoami,
    tls: { certFile: pki.certs.n1.certFile, keyFile: pki.certs.n1.keyFile },
  });
}

Deno.test("deno tls: serve and dial over TLS, NDJSON and CBOR, with the server's certificate on the stream", async () => {
  await withPki(async (pki) => {
    const server = serveN1(pki);
    try {
      assert.match(server.url, /^tls:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(typeof server.reloadTls, "function");
      for (const codec of ["json", "cbor"] as const) {
        const connection = await dial(server.url, {
          codec,
          tls: { caFile: pki.caFile },
        });
        try {
          assert.deepEqual(await connection.call("whoami"), {
            secure: true,
            altNames: null,
            commonName: null,
          });
          // The peer's address survives node:tls on Deno's own listener.
          assert.match(
            await connection.call("from") as string,
            /^127\.0\.0\.1:\d+$/,
          );
          const big = "x".repeat(300 * 1024);
          assert.equal(await connection.call("echo", [big]), big);
          const answers = await Promise.all(
            Array.from({ length: 64 }, (_, i) => connection.call("echo", [i])),
          );
          assert.deepEqual(answers, Array.from({ length: 64 }, (_, i) => i));
        } finally {
          connection.close();
        }
      }
      const stream = await denoDialer({ caFile: pki.caFile })(server.url);
      try {
        assert.equal(stream.secure, true);
        assert.equal(stream.peerCertificate?.commonName, "n1");
        assert.ok(
          stream.peerCertificate?.altNames.includes("URI:rafter://member/n1"),
        );
        assert.ok(stream.peerCertificate?.altNames.includes("DNS:localhost"));
        assert.equal(
          stream.peerCertificate?.fingerprint256,
          fingerprintOf(pki.certs.n1.pem.cert),
        );
        assert.ok(Date.parse(stream.peerCertificate!.validTo) > Date.now());
      } finally {
        stream.close();
      }
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: a plain tcp:// server still works and has no TLS", async () => {
  const server = serve({ methods: whoami });
  try {
    assert.match(server.url, /^tcp:\/\//);
    assert.equal(server.reloadTls, undefined);
    const connection = await dial(server.url, { tls: {} });
    assert.deepEqual(await connection.call("whoami"), {
      secure: false,
      altNames: null,
      commonName: null,
    });
    connection.close();
  } finally {
    await server.close();
  }
});

Deno.test("deno tls: mutual TLS accepts a client certificate from the CA and refuses others", async () => {
  await withPki(async (pki, other) => {
    const errors: TlsServerError[] = [];
    const server = serve({
      methods: whoami,
      tls: {
        certFile: pki.certs.n1.certFile,
        keyFile: pki.certs.n1.keyFile,
        caFile: pki.caFile,
        clientCert: "require",
        onError: (error) => errors.push(error),
      },
    });
    try {
      const good = await dial(server.url, {
        tls: {
          caFile: pki.caFile,
          certFile: pki.certs.client.certFile,
          keyFile: pki.certs.client.keyFile,
        },
      });
      assert.deepEqual(await good.call("whoami"), {
        secure: true,
        altNames: ["DNS:localhost", "IP Address:127.0.0.1"],
        commonName: "client",
      });
      good.close();
      // A member certificate carries its member URI.
      const member = await dial(server.url, {
        tls: {
          caFile: pki.caFile,
          certFile: pki.certs.n1.certFile,
          keyFile: pki.certs.n1.keyFile,
        },
      });
      assert.ok(
        ((await member.call("whoami")) as { altNames: string[] }).altNames
          .includes("URI:rafter://member/n1"),
      );
      member.close();
      for (
        const tls of [
          { caFile: pki.caFile }, // no client certificate
          {
            caFile: pki.caFile,
            certFile: other.certs.client.certFile,
            keyFile: other.certs.client.keyFile,
          },
        ]
      ) {
        // TLS 1.3: the client may finish its half of the handshake before
        // the server refuses; the call then fails instead of the dial.
        await assert.rejects(async () => {
          const refused = await dial(server.url, { tls, timeoutMs: 5_000 });
          try {
            await refused.call("whoami", [], { timeoutMs: 5_000 });
          } finally {
            refused.close();
          }
        });
      }
      assert.ok(errors.length >= 1, "the refusals are reported");
      assert.ok(errors.every((e) => e.code === "TLS_HANDSHAKE_FAILED"));
      // One report per remote address per minute, however many refusals.
      assert.equal(errors.length, 1);
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: clientCert request accepts a client without a certificate, refuses one from another CA", async () => {
  await withPki(async (pki, other) => {
    const server = serve({
      methods: whoami,
      tls: {
        cert: pki.certs.n1.pem.cert,
        key: pki.certs.n1.pem.key,
        ca: pki.ca.cert,
        clientCert: "request",
        onError: () => {},
      },
    });
    try {
      const anonymous = await dial(server.url, { tls: { ca: pki.ca.cert } });
      assert.deepEqual(await anonymous.call("whoami"), {
        secure: true,
        altNames: null,
        commonName: null,
      });
      anonymous.close();
      await assert.rejects(async () => {
        const refused = await dial(server.url, {
          tls: {
            ca: pki.ca.cert,
            cert: other.certs.client.pem.cert,
            key: other.certs.client.pem.key,
          },
        });
        try {
          await refused.call("whoami", [], { timeoutMs: 5_000 });
        } finally {
          refused.close();
        }
      });
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: a plain-text client is refused at once, a silent one after the handshake deadline", async () => {
  await withPki(async (pki) => {
    const errors: TlsServerError[] = [];
    const server = serve({
      methods: whoami,
      tls: {
        certFile: pki.certs.n1.certFile,
        keyFile: pki.certs.n1.keyFile,
        handshakeTimeoutMs: 300,
        onError: (error) => errors.push(error),
      },
    });
    try {
      const port = server.port;
      const plain = await Deno.connect({ hostname: "127.0.0.1", port });
      await plain.write(
        new TextEncoder().encode(
          '{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\n',
        ),
      );
      const plainMs = await closedWithin(plain, 5_000);
      console.log(`plain-text client closed after ${plainMs.toFixed(0)} ms`);
      assert.ok(plainMs < 2_000, `closed after ${plainMs} ms`);

      const silent = await Deno.connect({ hostname: "127.0.0.1", port });
      const silentMs = await closedWithin(silent, 10_000);
      console.log(`silent client closed after ${silentMs.toFixed(0)} ms`);
      assert.ok(silentMs >= 250, `closed after ${silentMs} ms, too early`);
      assert.ok(silentMs < 5_000, `closed after ${silentMs} ms`);
      assert.ok(errors.length >= 1);
      assert.match(errors[0].message, /TLS handshake with 127\.0\.0\.1/);
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: handshakes under way are capped per address; the slots free up as they end", async () => {
  await withPki(async (pki) => {
    const errors: TlsServerError[] = [];
    const server = serve({
      methods: whoami,
      tls: {
        certFile: pki.certs.n1.certFile,
        keyFile: pki.certs.n1.keyFile,
        handshakeTimeoutMs: 60_000,
        maxPendingHandshakesPerAddress: 3,
        onError: (error) => errors.push(error),
      },
    });
    const silent: Deno.Conn[] = [];
    try {
      const port = server.port;
      // Three connections that never start a handshake hold the slots.
      for (let i = 0; i < 3; i++) {
        silent.push(await Deno.connect({ hostname: "127.0.0.1", port }));
      }
      const fourth = await Deno.connect({ hostname: "127.0.0.1", port });
      const fourthMs = await closedWithin(fourth, 5_000);
      assert.ok(fourthMs < 2_000, `the fourth closed after ${fourthMs} ms`);
      assert.ok(
        errors.some((e) =>
          /tls\.maxPendingHandshakesPerAddress 3/.test(e.message)
        ),
        errors.map((e) => e.message).join("\n"),
      );
      // Once they go, a real client gets through.
      for (const conn of silent.splice(0)) conn.close();
      const connection = await waitForDial(server.url, pki.caFile);
      assert.equal(await connection.call("rpc.ping"), "pong");
      connection.close();
    } finally {
      for (const conn of silent) conn.close();
      await server.close();
    }
  });
});

/** Dials until the server takes the connection (its slots free up on close). */
async function waitForDial(url: string, caFile: string) {
  let last: unknown;
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      return await dial(url, { tls: { caFile } });
    } catch (error) {
      last = error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw last;
}

async function fingerprintVia(server: RpcServer, caFile: string) {
  const stream = await denoDialer({ caFile })(server.url);
  stream.close();
  return stream.peerCertificate?.fingerprint256;
}

Deno.test("deno tls: reload swaps the certificate for new connections; a bad reload keeps the old one", async () => {
  await withPki(async (pki, other, dir) => {
    const certFile = join(dir, "server.pem");
    const keyFile = join(dir, "server.key");
    await Deno.writeTextFile(certFile, pki.certs.n1.pem.cert);
    await Deno.writeTextFile(keyFile, pki.certs.n1.pem.key);
    const errors: TlsServerError[] = [];
    const server = serve({
      methods: whoami,
      tls: {
        certFile,
        keyFile,
        watchIntervalMs: 100,
        onError: (error) => errors.push(error),
      },
    });
    try {
      const oldPrint = fingerprintOf(pki.certs.n1.pem.cert);
      const newPrint = fingerprintOf(other.certs.n1.pem.cert);
      assert.equal(await fingerprintVia(server, pki.caFile), oldPrint);
      const open = await dial(server.url, { tls: { caFile: pki.caFile } });

      // A key that does not belong to the certificate: refused, old kept.
      await Deno.writeTextFile(certFile, other.certs.n1.pem.cert);
      await assert.rejects(server.reloadTls!(), /cannot be used/);
      assert.equal(await fingerprintVia(server, pki.caFile), oldPrint);
      // An unreadable file: refused, old kept.
      await Deno.remove(keyFile);
      await assert.rejects(server.reloadTls!(), /cannot be read/);
      assert.equal(await fingerprintVia(server, pki.caFile), oldPrint);

      await Deno.writeTextFile(keyFile, other.certs.n1.pem.key);
      await server.reloadTls!();
      assert.equal(await fingerprintVia(server, other.caFile), newPrint);
      await assert.rejects(fingerprintVia(server, pki.caFile), /tls\.caFile/);
      // The connection opened before the reload goes on.
      assert.deepEqual(await open.call("echo", ["still here"]), "still here");
      open.close();

      // A change of the files is picked up by the watcher.
      await Deno.writeTextFile(certFile, pki.certs.n1.pem.cert);
      await Deno.writeTextFile(keyFile, pki.certs.n1.pem.key);
      const deadline = Date.now() + 10_000;
      while (
        await fingerprintVia(server, pki.caFile).catch(() => null) !== oldPrint
      ) {
        assert.ok(Date.now() < deadline, "the file change was not picked up");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: SIGHUP reloads the certificate files", {
  ignore: Deno.build.os === "windows",
}, async () => {
  await withPki(async (pki, other, dir) => {
    const certFile = join(dir, "server.pem");
    const keyFile = join(dir, "server.key");
    await Deno.writeTextFile(certFile, pki.certs.n1.pem.cert);
    await Deno.writeTextFile(keyFile, pki.certs.n1.pem.key);
    const server = serve({
      methods: whoami,
      tls: { certFile, keyFile, watchFiles: false },
    });
    try {
      await Deno.writeTextFile(certFile, other.certs.n1.pem.cert);
      await Deno.writeTextFile(keyFile, other.certs.n1.pem.key);
      const newPrint = fingerprintOf(other.certs.n1.pem.cert);
      // Safe: the server's listener is installed, so the signal is handled.
      Deno.kill(Deno.pid, "SIGHUP");
      const deadline = Date.now() + 10_000;
      while (
        await fingerprintVia(server, other.caFile).catch(() => null) !==
          newPrint
      ) {
        assert.ok(Date.now() < deadline, "SIGHUP did not reload");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: dial errors say what to do", async () => {
  await withPki(async (pki, other, dir) => {
    const server = serveN1(pki);
    try {
      await assert.rejects(
        dial(server.url, { tls: { caFile: other.caFile } }),
        (error: Error) => {
          assert.match(error.message, new RegExp(server.url));
          assert.match(
            error.message,
            /pass tls\.caFile with the CA that signed the server's certificate/,
          );
          return true;
        },
      );
      await assert.rejects(
        dial(server.url, {
          tls: { caFile: pki.caFile, serverName: "example.com" },
        }),
        /not valid for the name dialed/,
      );
      const missing = join(dir, "nope.pem");
      await assert.rejects(
        dial(server.url, { tls: { caFile: missing } }),
        (error: Error) => {
          assert.match(error.message, /tls\.caFile/);
          assert.ok(error.message.includes(missing));
          return true;
        },
      );
      assert.throws(
        () =>
          serve({ methods: {}, tls: { certFile: missing, keyFile: missing } }),
        /tls\.certFile ".*nope\.pem" cannot be read/,
      );
      assert.throws(
        () =>
          serve({
            methods: {},
            tls: {
              certFile: pki.certs.n1.certFile,
              keyFile: pki.certs.n1.keyFile,
              clientCert: "require",
            },
          }),
        /needs the CA that signs client certificates/,
      );
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: openssl s_client completes a handshake with the CA", async () => {
  await withPki(async (pki) => {
    const server = serveN1(pki);
    try {
      const output = await new Deno.Command("openssl", {
        args: [
          "s_client",
          "-connect",
          `127.0.0.1:${server.port}`,
          "-CAfile",
          pki.caFile,
          "-verify_ip",
          "127.0.0.1",
        ],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(15_000),
      }).output();
      const text = new TextDecoder().decode(output.stdout);
      assert.match(text, /Verify return code: 0 \(ok\)/);
    } finally {
      await server.close();
    }
  });
});

Deno.test("deno tls: the default dialer opens tls:// with Deno.connectTls and the system's roots", async () => {
  await withPki(async (pki) => {
    const server = serveN1(pki);
    try {
      // The test CA is not a system root: the error says what to pass.
      await assert.rejects(
        defaultDialer()(server.url),
        /the default dialer trusts only the system's roots: for a private CA pass dialer: denoDialer\(\{ caFile \}\)/,
      );
      // DENO_CERT adds a root for a whole Deno process: then it works.
      const script = `
        import { defaultDialer } from ${
        JSON.stringify(
          new URL("../../rpc/transport/default_dialer.ts", import.meta.url)
            .href,
        )
      };
        const stream = await defaultDialer()(${JSON.stringify(server.url)});
        const w = stream.writable.getWriter();
        await w.write(new TextEncoder().encode('{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\\n'));
        const { value } = await stream.readable.getReader().read();
        console.log(JSON.stringify({ secure: stream.secure, answer: JSON.parse(new TextDecoder().decode(value)) }));
        stream.close();
      `;
      const output = await new Deno.Command(Deno.execPath(), {
        args: ["eval", "--no-config", script],
        env: { DENO_CERT: pki.caFile, NO_COLOR: "1" },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(60_000),
      }).output();
      const text = new TextDecoder().decode(output.stdout).trim();
      assert.ok(output.success, new TextDecoder().decode(output.stderr));
      assert.deepEqual(JSON.parse(text.split("\n").at(-1)!), {
        secure: true,
        answer: { jsonrpc: "2.0", id: 1, result: "pong" },
      });
    } finally {
      await server.close();
    }
  });
});
