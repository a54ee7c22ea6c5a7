import assert from "node:assert/strict";
import { ConnectionError } from "../errors.ts";
import { dial } from "../transport/dial.ts";
import { serve } from "../../adapter/deno/serve.ts";
import { RawClient } from "../../testing/rpc.ts";
import { delay, within } from "../../testing/time.ts";

Deno.test("drain: a call under way is answered, the connection then closes, new calls are not sent", async () => {
  const release = Promise.withResolvers<void>();
  const server = serve({
    methods: {
      slow: async () => {
        await release.promise;
        return "done";
      },
    },
  });
  const connection = await dial(server.url);
  try {
    const slow = connection.call("slow");
    await delay(20);
    const draining = server.drain(5_000);
    await delay(50);
    // The client learnt that the server goes away: new calls fail unsent.
    assert.equal(connection.isClosed, true);
    await assert.rejects(
      connection.call("rpc.ping"),
      (error: unknown) =>
        error instanceof ConnectionError && error.written === false &&
        /going away/.test(error.message),
    );
    release.resolve();
    assert.equal(await slow, "done");
    // With its last call answered the client closes, and the drain ends.
    await within(connection.closed, 2_000, "client close");
    await within(draining, 2_000, "drain");
  } finally {
    connection.close();
    await server.close();
  }
});

Deno.test("drain: the listener stops at once; a client that ignores rpc.goaway is closed after the grace period", async () => {
  const server = serve({ methods: {} });
  const raw = await RawClient.connect(server.port);
  try {
    await raw.send('{"jsonrpc":"2.0","method":"rpc.ping","id":1}');
    assert.equal(await raw.line(), '{"jsonrpc":"2.0","result":"pong","id":1}');
    const started = Date.now();
    const draining = server.drain(300);
    assert.equal(await raw.line(), '{"jsonrpc":"2.0","method":"rpc.goaway"}');
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port: server.port }),
      Deno.errors.ConnectionRefused,
    );
    // It still answers what arrives during the grace period.
    await raw.send('{"jsonrpc":"2.0","method":"rpc.ping","id":2}');
    assert.equal(await raw.line(), '{"jsonrpc":"2.0","result":"pong","id":2}');
    await within(draining, 3_000, "drain");
    assert.ok(Date.now() - started >= 250, "closed before the grace period");
    assert.equal(await raw.rest(), "");
  } finally {
    raw.close();
    await server.close();
  }
});

Deno.test("drain ends at once when no connection is open, and close() during a drain closes at once", async () => {
  const idle = serve({ methods: {} });
  await within(idle.drain(10_000), 1_000, "drain of an idle server");

  const busy = serve({ methods: {} });
  const raw = await RawClient.connect(busy.port);
  try {
    await raw.send('{"jsonrpc":"2.0","method":"rpc.ping","id":1}');
    await raw.line();
    const draining = busy.drain(10_000);
    await raw.line(); // rpc.goaway
    await within(busy.close(), 1_000, "close during drain");
    await within(draining, 1_000, "drain after close");
  } finally {
    raw.close();
  }
});
