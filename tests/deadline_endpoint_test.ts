/**
 * A call to a server that accepts and never answers (as one stopped by
 * SIGSTOP, issue 18): its deadline error names the endpoint (id and URL)
 * and the cause, not the registry; `rafter call` says the same and hints
 * at the server.
 */

import assert from "node:assert/strict";
import { startRegistryNode } from "../registry/main.ts";
import { connect } from "../adapter/deno/mod.ts";
import { DEADLINE_EXCEEDED } from "../rpc/errors.ts";
import { EXIT, runCli } from "../cli/main.ts";
import { AmbiguousError } from "../stub/call/call_errors.ts";

/** A listener on 127.0.0.1 that accepts, reads, and never replies. */
function silentServer() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      conn.readable.pipeTo(new WritableStream()).catch(() => {});
    }
  })().catch(() => {});
  return {
    url: `tcp://127.0.0.1:${listener.addr.port}`,
    async close() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch { /* closed by the peer */ }
      }
      await accepting;
    },
  };
}

Deno.test("a call to a server that never answers ends with a deadline error naming the endpoint's id and URL and the cause, not the registry", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "rafter_deadline_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir,
    tickMs: 10,
  });
  const silent = silentServer();
  const client = connect([node.url]);
  try {
    await client.registry.bind("mute", { id: "s1", url: silent.url });
    const expected =
      `, waiting for endpoint s1 at ${silent.url} (sent, no answer: the server may be stopped or overloaded); it may have run there`;
    for (const idempotent of [false, true]) {
      await assert.rejects(
        client.call("mute", "ping", [], { deadlineMs: 300, idempotent }),
        (error: unknown) => {
          assert.ok(error instanceof AmbiguousError, String(error));
          assert.equal(error.code, DEADLINE_EXCEEDED);
          assert.equal(
            error.message,
            `Deadline exceeded: "mute.ping" did not get an answer within 300 ms${expected}`,
          );
          assert.doesNotMatch(error.message, /registry/);
          assert.deepEqual(error.data, {
            waitingFor: "endpoint",
            endpoints: [{ id: "s1", url: silent.url }],
            written: true,
            endpoint: silent.url,
          });
          return true;
        },
      );
    }
    // rafter call: the same line, and a hint about the server, not the registry.
    const err: string[] = [];
    const code = await runCli(["call", "mute", "ping", "--timeout-ms", "300"], {
      out: () => {},
      err: (line) => err.push(line),
      env: (name) => name === "RAFTER_REGISTRY" ? node.url : undefined,
    });
    assert.equal(code, EXIT.unavailable);
    const text = err.join("\n");
    assert.equal(
      text,
      `rafter: Deadline exceeded: "mute.ping" did not get an answer within 300 ms${expected}\n` +
        `Endpoint s1 at ${silent.url} did not answer in time: check that its server runs and is not stopped (SIGSTOP) or overloaded; --timeout-ms N allows more time (now 300 ms).`,
    );
  } finally {
    client.close();
    await silent.close();
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
