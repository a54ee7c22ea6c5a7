import assert from "node:assert/strict";
import { CANCELLED } from "../rpc/errors.ts";
import { serveListener, type StreamListener } from "../rpc/server/server.ts";
import { fromDenoConn } from "../adapter/deno/tcp.ts";
import { delay, waitFor } from "../testing/time.ts";
import { startTestRegistry } from "../testing/cluster.ts";
import { AmbiguousError, NotSentError } from "./call/call_errors.ts";
import { connect } from "./client.ts";

/** A Rafter server on 127.0.0.1 that counts the connections it accepts. */
function countingServer(id: string, calls: string[]) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const streams: StreamListener = {
    address: listener.addr as Deno.NetAddr,
    async accept() {
      try {
        const conn = await listener.accept();
        accepted++;
        return fromDenoConn(conn);
      } catch {
        return null;
      }
    },
    close: () => {
      try {
        listener.close();
      } catch { /* closed */ }
    },
  };
  const server = serveListener(streams, {
    methods: {
      who: () => (calls.push(`who ${id}`), id),
      delayed: async (ms: number) => {
        calls.push(`delayed ${id}`);
        await delay(ms);
        return id;
      },
    },
  });
  return { server, accepted: () => accepted };
}

interface Who {
  who(): string;
  delayed(ms: number): string;
}

Deno.test("client.close() ends its stubs: a call under way rejects with CANCELLED and is not retried elsewhere, a later call is not sent, and no connection is opened after it", async () => {
  const { registry, dir } = await startTestRegistry("rafter_close_");
  const admin = connect(registry.url);
  const calls: string[] = [];
  const s1 = countingServer("s1", calls);
  const s2 = countingServer("s2", calls);
  try {
    await waitFor(() => registry.raft.status.role === "leader", "n1 to lead");
    await admin.bind("svc", { id: "s1", url: s1.server.url });
    await admin.bind("svc", { id: "s2", url: s2.server.url });
    const client = connect(registry.url, { watch: false });
    // Idempotent, so a call whose connection breaks would be retried.
    const stub = client.stub<Who>("svc", {
      idempotent: true,
      distributor: { choose: (candidates) => candidates[0] },
    });
    assert.equal(await stub.who(), "s1");
    const underWay = stub.delayed(300);
    await delay(50);
    client.close();
    await assert.rejects(underWay, (error: unknown) => {
      assert.ok(error instanceof AmbiguousError, String(error));
      assert.equal(error.code, CANCELLED, error.message);
      assert.equal(error.endpoint, s1.server.url);
      return true;
    });
    await assert.rejects(stub.who(), (error: unknown) => {
      assert.ok(error instanceof NotSentError, String(error));
      assert.equal(error.code, CANCELLED, error.message);
      return true;
    });
    await delay(50);
    assert.deepEqual(calls, ["who s1", "delayed s1"]);
    assert.equal(s1.accepted(), 1, "s1 was dialed again after close()");
    assert.equal(s2.accepted(), 0, "s2 was dialed after close()");
  } finally {
    admin.close();
    await s1.server.close();
    await s2.server.close();
    await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
