/**
 * One registry scenario on both engines: a 3-node Rafter registry (Raft)
 * and a front over a 3-member etcd cluster (`--engine etcd`, Debian's
 * `etcd-server`; that half is skipped, saying why, without it). Through
 * the shipped client: bind with a granted lease, lookup, a watch that
 * sees every change in order with its reason, drain, ID_IN_USE, lease
 * revoke and expiry, and a stub calling a server bound with bindServer.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import { serve } from "../adapter/deno/serve.ts";
import type { WatchEvent } from "../protocol/registry.ts";
import { EtcdCluster, etcdFrontArgs, findEtcd } from "../testing/etcd.ts";
import { RpcError } from "../rpc/errors.ts";
import { dial } from "../rpc/transport/dial.ts";
import { runCli } from "../cli/main.ts";
import { makeTestPki } from "../testing/certs.ts";
import { withTempDir } from "../testing/temp.ts";
import { denoDialer } from "../adapter/deno/tcp.ts";

const etcd = await findEtcd(() => {});
if ("skipped" in etcd) {
  console.log(
    `registry_engines_test.ts: the etcd half skipped: ${etcd.skipped}`,
  );
}

/** Starts a front (`--engine etcd`) as a child process, its output collected. */
function spawnFront(endpoints: string[], listen: string, extra: string[] = []) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...etcdFrontArgs(endpoints, listen), ...extra],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const read = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      lines.push(chunk);
    }
  };
  const reading = Promise.all([read(child.stdout), read(child.stderr)]);
  return {
    child,
    lines,
    listening: () =>
      waitFor(
        () => /listening on/.test(lines.join("")),
        "the front to listen",
        30_000,
      ),
    /** SIGTERM, then its exit code once its output is read. */
    async stop(): Promise<number> {
      child.kill("SIGTERM");
      const { code } = await child.status;
      await reading;
      return code;
    },
  };
}

/** The scenario, on a registry at `urls`; what it saw, for the log. */
async function scenario(urls: string[]): Promise<string> {
  const client: RafterClient = connect(urls);
  const events: WatchEvent[] = [];
  // From the revision now: no change is missed while the watch starts.
  const start = (await client.lookup("svc/none")).revision;
  const watch = client.watch("svc/", { fromRevision: start + 1 }, (update) => {
    if (update.kind === "events") events.push(...update.events);
  });
  const hello = serve({ methods: { greet: (name: string) => `hi ${name}` } });
  try {
    const bound = await client.bind("svc/a", {
      id: "a1",
      url: "tcp://127.0.0.1:9101",
    }, {
      grant: { ttlMs: 3_000 },
    });
    assert.ok(bound.leaseId !== null);
    const found = await client.lookup("svc/a");
    assert.deepEqual(found.endpoints.map((e) => [e.id, e.url, e.state]), [
      ["a1", "tcp://127.0.0.1:9101", "serving"],
    ]);
    assert.ok(found.revision >= bound.revision);
    // Another live server cannot take the id.
    await assert.rejects(
      client.bind("svc/a", { id: "a1", url: "tcp://127.0.0.1:9102" }, {
        grant: { ttlMs: 3_000 },
      }),
      (e) => e instanceof RpcError && e.code === -32015,
    );
    await client.registry.setState("svc/a", "a1", "draining");
    assert.equal((await client.lookup("svc/a")).endpoints[0].state, "draining");
    await client.registry.keepAlive(bound.leaseId!);
    await client.registry.revokeLease(bound.leaseId!);
    assert.deepEqual((await client.lookup("svc/a")).endpoints, []);
    // A lease nobody keeps alive expires, and its binding goes.
    await client.bind("svc/b", { id: "b1", url: "tcp://127.0.0.1:9103" }, {
      grant: { ttlMs: 2_000 },
    });
    await client.bind("svc/c", { id: "c1", url: "tcp://127.0.0.1:9104" });
    await client.unbind("svc/c", "c1");
    await waitFor(
      () => events.some((e) => e.type === "delete" && e.name === "svc/b"),
      "svc/b's lease to expire",
      15_000,
    );
    // A server restarted at its URL takes its id over with a new lease:
    // a new instance (a new createRevision), so that clients forget the
    // old one's failures; bound again on the same lease, the same one.
    const before = await client.bind("svc/r", {
      id: "r1",
      url: "tcp://127.0.0.1:9105",
    }, { grant: { ttlMs: 3_000 } });
    const again = await client.bind("svc/r", {
      id: "r1",
      url: "tcp://127.0.0.1:9105",
    }, { leaseId: before.leaseId! });
    assert.equal(again.endpoint.createRevision, before.endpoint.createRevision);
    const restarted = await client.bind("svc/r", {
      id: "r1",
      url: "tcp://127.0.0.1:9105",
    }, { grant: { ttlMs: 3_000 } });
    assert.ok(
      restarted.endpoint.createRevision > before.endpoint.createRevision,
      JSON.stringify([before.endpoint, restarted.endpoint]),
    );
    const looked = (await client.lookup("svc/r")).endpoints[0];
    assert.equal(looked.createRevision, restarted.endpoint.createRevision);
    await client.registry.revokeLease(restarted.leaseId!);
    await client.registry.revokeLease(before.leaseId!);
    // A stub calls a server bound with bindServer.
    const binding = await client.bindServer("svc/hello", hello, {
      id: "h1",
      ttlMs: 3_000,
    });
    assert.equal(
      await client.stub<{ greet(n: string): string }>("svc/hello").greet("Ada"),
      "hi Ada",
    );
    await binding.close();
    await waitFor(
      () => events.some((e) => e.type === "delete" && e.name === "svc/hello"),
      "svc/hello's unbind",
      15_000,
    );
    const seen = events.map((e) =>
      `${e.type} ${e.name}/${e.endpoint.id}${
        e.type === "put" ? ` ${e.endpoint.state}` : ` (${e.reason})`
      }`
    );
    const revisions = events.map((e) => e.revision);
    assert.deepEqual(
      revisions,
      [...revisions].sort((x, y) => x - y),
      "revisions in order",
    );
    const expected = [
      "put svc/a/a1 serving",
      "put svc/a/a1 draining",
      "delete svc/a/a1 (leaseRevoked)",
      "put svc/b/b1 serving",
      "put svc/c/c1 serving",
      "delete svc/c/c1 (unbound)",
      "delete svc/b/b1 (leaseExpired)",
      "put svc/r/r1 serving",
      // (bound again on the same lease: nothing changed, no event)
      "put svc/r/r1 serving",
      "delete svc/r/r1 (leaseRevoked)",
      "put svc/hello/h1 serving",
      "put svc/hello/h1 draining",
      "delete svc/hello/h1 (leaseRevoked)",
    ];
    assert.deepEqual(seen, expected);
    return seen.join("; ");
  } finally {
    watch.close();
    client.close();
    await hello.close();
  }
}

Deno.test("the registry scenario on Raft: bind, lookup, watch, drain, ID_IN_USE, revoke, expiry, a stub call", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  try {
    await cluster.startRegistryWithLeader(3);
    console.log(`raft: ${await scenario(cluster.registryUrls)}`);
  } finally {
    await cluster.stop();
  }
});

Deno.test({
  name: "the same scenario on a front over etcd (--engine etcd)",
  ignore: "skipped" in etcd,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const members = new EtcdCluster((etcd as { path: string }).path, {
      heartbeatMs: 100,
      electionMs: 1_000,
    });
    try {
      await members.start(3);
      const [port] = freePorts(1);
      const front = spawnFront(members.clientUrls, `127.0.0.1:${port}`);
      const url = `tcp://127.0.0.1:${port}`;
      try {
        await front.listening();
        assert.match(front.lines.join(""), /\(pid \d+, rafter /);
        console.log(`etcd: ${await scenario([url])}`);
        // rafter status on a front: its engine, no Raft members to judge.
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(["--registry", url, "status"], {
          out: (line) => out.push(line),
          err: (line) => err.push(line),
          env: () => undefined,
        });
        assert.equal(
          code,
          0,
          `out:\n${out.join("\n")}\nerr:\n${err.join("\n")}`,
        );
        console.log(`rafter status on a front:\n${out.join("\n")}`);
        assert.match(
          out.join("\n"),
          /^1 front over etcd at http:\/\/127\.0\.0\.1:\d+.* \(--engine etcd: .*; etcd answers every front; 1 of 1 fronts answered/m,
        );
        assert.match(
          out.join("\n"),
          /^n1 +tcp:\S+ +front +- +- +- +- +\d+ +-$/m,
        );
        // etcd gone: the front says so (UNAVAILABLE, naming etcd), and
        // logs it once, not a stack trace per call.
        for (const name of members.names) await members.kill(name);
        const connection = await dial(url);
        try {
          for (let i = 0; i < 3; i++) {
            await assert.rejects(
              connection.call("registry.lookup", { name: "svc/a" }, {
                timeoutMs: 15_000,
              }),
              (error: unknown) => {
                assert.ok(error instanceof RpcError, String(error));
                assert.equal(error.code, -32006, error.message);
                assert.match(
                  error.message,
                  /etcd did not serve this call \(.*\): check that a quorum of etcd's members at http:\/\/127\.0\.0\.1:\d+/,
                );
                return true;
              },
            );
          }
        } finally {
          connection.close();
        }
        // rafter status tells that etcd does not answer (exit 1).
        const downOut: string[] = [];
        const downCode = await runCli(["--registry", url, "status"], {
          out: (line) => downOut.push(line),
          err: (line) => downOut.push(line),
          env: () => undefined,
        });
        assert.equal(downCode, 1, downOut.join("\n"));
        assert.match(
          downOut.join("\n"),
          /etcd does not answer n1 \(.*\): check that a quorum of etcd's members runs/,
        );
        const logged = front.lines.join("");
        assert.equal(
          logged.match(/fails calls \(/g)?.length,
          1,
          logged,
        );
        assert.doesNotMatch(logged, / {4}at /, "no stack trace");
        // etcd back: the front says so, follows etcd again (its copy sees
        // a bind made after), and is still the same process.
        await Promise.all(members.names.map((name) => members.restart(name)));
        await waitFor(
          () => /etcd answers again/.test(front.lines.join("")),
          "the front to see etcd again",
          30_000,
        );
        const backAt = Date.now();
        const after = connect([url], { deadlineMs: 15_000 });
        try {
          await after.bind("svc/late", {
            id: "l1",
            url: "tcp://127.0.0.1:9110",
          });
          await waitFor(
            async () =>
              (await after.lookup("svc/late", { consistency: "serializable" }))
                .endpoints.length === 1,
            "the front's copy to follow etcd again",
            15_000,
          );
          console.log(
            `measured: etcd back: the front's copy showed a new bind ${
              Date.now() - backAt
            } ms after the front logged etcd answering again`,
          );
        } finally {
          after.close();
        }
        assert.equal(front.child.pid > 0, true);
        const exited = await Promise.race([
          front.child.status.then(() => true),
          new Promise((r) => setTimeout(() => r(false), 500)),
        ]);
        assert.equal(exited, false, front.lines.join(""));
      } finally {
        await front.stop();
      }
    } finally {
      await members.stop();
    }
  },
});

Deno.test("--engine etcd with an etcd that cannot be reached serves UNAVAILABLE, saying where it looked and what to check, and stops on SIGTERM", async () => {
  const [port, etcdPort] = freePorts(2);
  // A loopback port nobody listens on: refused at once.
  const front = spawnFront(
    [`http://127.0.0.1:${etcdPort}`],
    `127.0.0.1:${port}`,
  );
  const lines = front.lines;
  try {
    // As a Raft node serves before it has a leader, the front listens and
    // says why it cannot answer yet.
    await front.listening();
    assert.match(
      lines.join(""),
      new RegExp(
        `etcd at http://127\\.0\\.0\\.1:${etcdPort} cannot be reached .*check --etcd-endpoints and that etcd runs; answering UNAVAILABLE and trying again every 1 s`,
      ),
    );
    const client = connect([`tcp://127.0.0.1:${port}`], { deadlineMs: 1_500 });
    try {
      await assert.rejects(
        client.lookup("svc"),
        (error: unknown) => {
          assert.ok(error instanceof RpcError, String(error));
          assert.match(
            error.message,
            new RegExp(
              `has not reached etcd at http://127\\.0\\.0\\.1:${etcdPort} yet .*check --etcd-endpoints`,
            ),
          );
          return true;
        },
      );
    } finally {
      client.close();
    }
  } finally {
    assert.equal(await front.stop(), 0, lines.join(""));
  }
});

Deno.test("--engine etcd refuses the flags a front does not serve, and an exposed client port without TLS and client certificates", async () => {
  await withTempDir(async (dir) => {
    const pki = await makeTestPki(dir, { others: ["front"] });
    const { certFile, keyFile } = pki.certs.front;
    const [etcdPort] = freePorts(1);
    // Refused before etcd is dialed (nothing listens at etcdPort).
    const refused = async (listen: string, extra: string[]) => {
      const front = spawnFront([`http://127.0.0.1:${etcdPort}`], listen, [
        // (a wildcard listen address needs one; nothing dials it here)
        "--advertise",
        "127.0.0.1",
        ...extra,
      ]);
      const code = await front.child.status.then((s) => s.code);
      await front.stop().catch(() => {});
      return { code, text: front.lines.join("") };
    };
    const auth = await refused("127.0.0.1:0", ["--auth"]);
    assert.equal(auth.code, 2, auth.text);
    assert.match(
      auth.text,
      /--engine etcd does not serve --auth \(tokens are not served over etcd: use --tls-client-ca\).*drop them, or run a Raft registry/,
    );
    const open = await refused("0.0.0.0:0", []);
    assert.equal(open.code, 2, open.text);
    assert.match(
      open.text,
      /listens on 0\.0\.0\.0, which other hosts can reach, without TLS and without client certificates .*--tls-client-ca/,
    );
    const noClientCerts = await refused("0.0.0.0:0", [
      "--tls-cert",
      certFile,
      "--tls-key",
      keyFile,
    ]);
    assert.equal(noClientCerts.code, 2, noClientCerts.text);
    assert.match(
      noClientCerts.text,
      /with TLS but without client certificates.*could revoke any lease: pass --tls-client-ca/,
    );
  });
});

Deno.test({
  name:
    "a front with TLS and client certificates refuses plaintext and certificate-less clients, serves one with a certificate, and its dashboard and metrics show the bindings",
  ignore: "skipped" in etcd,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withTempDir(async (dir) => {
      const pki = await makeTestPki(dir, { others: ["front", "client"] });
      const members = new EtcdCluster((etcd as { path: string }).path, {
        heartbeatMs: 100,
        electionMs: 1_000,
      });
      try {
        await members.start(1);
        const [port, dashboardPort, metricsPort] = freePorts(3);
        const front = spawnFront(members.clientUrls, `127.0.0.1:${port}`, [
          "--tls-cert",
          pki.certs.front.certFile,
          "--tls-key",
          pki.certs.front.keyFile,
          "--tls-client-ca",
          pki.caFile,
          "--dashboard-listen",
          `127.0.0.1:${dashboardPort}`,
          "--metrics-listen",
          `127.0.0.1:${metricsPort}`,
        ]);
        try {
          await front.listening();
          const url = `tls://127.0.0.1:${port}`;
          assert.match(front.lines.join(""), new RegExp(`listening on ${url}`));
          const options = { deadlineMs: 3_000 };
          // A plaintext client, and a TLS client with no certificate.
          for (
            const client of [
              connect([`tcp://127.0.0.1:${port}`], options),
              connect([url], {
                ...options,
                dialer: denoDialer({ caFile: pki.caFile }),
              }),
            ]
          ) {
            try {
              await assert.rejects(client.lookup("svc"));
            } finally {
              client.close();
            }
          }
          const client = connect([url], {
            ...options,
            dialer: denoDialer({
              caFile: pki.caFile,
              certFile: pki.certs.client.certFile,
              keyFile: pki.certs.client.keyFile,
            }),
          });
          try {
            await client.bind("svc", { id: "s1", url: "tcp://127.0.0.1:9201" });
            assert.deepEqual(
              (await client.lookup("svc")).endpoints.map((e) => e.id),
              ["s1"],
            );
            // The dashboard's event stream: its first view has the binding.
            const response = await fetch(
              `http://127.0.0.1:${dashboardPort}/events`,
            );
            assert.equal(response.status, 200);
            const reader = response.body!.pipeThrough(new TextDecoderStream())
              .getReader();
            let text = "";
            const deadline = Date.now() + 10_000;
            while (!/\n\n/.test(text) && Date.now() < deadline) {
              const { value, done } = await reader.read();
              if (done) break;
              text += value;
            }
            await reader.cancel();
            const view = JSON.parse(
              text.split("\n").find((l) => l.startsWith("data: "))!.slice(6),
            );
            assert.deepEqual(
              view.names.map((
                n: { name: string; endpoints: { id: string }[] },
              ) => [n.name, n.endpoints.map((e) => e.id)]),
              [["svc", ["s1"]]],
            );
            console.log(
              `measured: dashboard view of the front: ${
                JSON.stringify(view.names)
              }`,
            );
            // The CLI: without a client certificate it says to pass one;
            // with one it works.
            const cli = async (...args: string[]) => {
              const lines: string[] = [];
              const code = await runCli(
                ["--registry", url, "--timeout-ms", "1500", ...args],
                {
                  out: (line) => lines.push(line),
                  err: (line) => lines.push(line),
                  env: () => undefined,
                },
              );
              return { code, text: lines.join("\n") };
            };
            const noCert = await cli("--cacert", pki.caFile, "lookup", "svc");
            assert.notEqual(noCert.code, 0, noCert.text);
            assert.match(
              noCert.text,
              /asks for client certificates \(--tls-client-ca.*pass --cert FILE and --key FILE/,
            );
            const withCert = await cli(
              "--cacert",
              pki.caFile,
              "--cert",
              pki.certs.client.certFile,
              "--key",
              pki.certs.client.keyFile,
              "lookup",
              "svc",
            );
            assert.equal(withCert.code, 0, withCert.text);
            assert.match(withCert.text, /s1/);
            // Prometheus metrics: the calls it served and what etcd holds.
            const metrics = await (await fetch(
              `http://127.0.0.1:${metricsPort}/metrics`,
            )).text();
            assert.match(metrics, /^rafter_etcd_reachable\{node="[^"]+"\} 1$/m);
            assert.match(
              metrics,
              /^rafter_registry_bindings\{node="[^"]+"\} 1$/m,
            );
            assert.match(
              metrics,
              /^rafter_rpc_calls_total\{[^}]*method="registry\.bind"[^}]*outcome="ok"[^}]*\} 1$/m,
            );
          } finally {
            client.close();
          }
        } finally {
          await front.stop();
        }
      } finally {
        await members.stop();
      }
    });
  },
});
