import assert from "node:assert/strict";
import { type RpcServer, serve } from "../rpc/serve.ts";
import { delay, freePorts, waitFor } from "./_test_util.ts";
import { PeerTransport, STEP_METHOD } from "./peer_transport.ts";
import type { Message } from "./types.ts";

/** A peer that records the `raft.step` frames it receives. */
function peer(port = 0) {
  const frames: Message[][] = [];
  const server: RpcServer = serve({
    hostname: "127.0.0.1",
    port,
    methods: {
      [STEP_METHOD]: (messages: Message[]) => void frames.push(messages),
    },
  });
  return {
    server,
    frames,
    messages: () => frames.flat(),
  };
}

const vote = (to: string, term: number): Message => ({
  type: "voteResponse",
  from: "n1",
  to,
  term,
  granted: true,
});

Deno.test("messages go to the peer named by `to`, in order, queued while connecting", async () => {
  const n2 = peer();
  const n3 = peer();
  const transport = new PeerTransport({
    peers: { n1: "tcp://127.0.0.1:1", n2: n2.server.url, n3: n3.server.url },
  });
  try {
    // Sent before any connection is open.
    transport.send([
      vote("n2", 1),
      vote("n3", 1),
      vote("n2", 2),
      vote("n9", 1),
    ]);
    transport.send([vote("n3", 2)]);
    await waitFor(
      () => n2.messages().length === 2 && n3.messages().length === 2,
      "both peers to receive their messages",
    );
    assert.deepEqual(n2.messages(), [vote("n2", 1), vote("n2", 2)]);
    assert.deepEqual(n3.messages(), [vote("n3", 1), vote("n3", 2)]);
    // Once connected, sends go straight out.
    transport.send([vote("n2", 3)]);
    await waitFor(() => n2.messages().length === 3, "the third message");
    assert.deepEqual(n2.messages().at(-1), vote("n2", 3));
  } finally {
    transport.close();
    await n2.server.close();
    await n3.server.close();
  }
});

Deno.test("large batches are split into frames of maxMessagesPerFrame", async () => {
  const n2 = peer();
  const transport = new PeerTransport({
    peers: { n2: n2.server.url },
    maxMessagesPerFrame: 4,
  });
  try {
    const batch = Array.from({ length: 10 }, (_, i) => vote("n2", i + 1));
    transport.send([vote("n2", 0)]);
    await waitFor(() => n2.messages().length === 1, "the first message");
    transport.send(batch);
    await waitFor(() => n2.messages().length === 11, "the batch");
    assert.deepEqual(n2.frames.slice(1).map((f) => f.length), [4, 4, 2]);
    assert.deepEqual(n2.messages().slice(1), batch);
  } finally {
    transport.close();
    await n2.server.close();
  }
});

Deno.test("an unreachable peer drops messages without throwing, and is reached once it starts", async () => {
  const [port] = freePorts(1);
  const transport = new PeerTransport({
    peers: { n2: `tcp://127.0.0.1:${port}` },
    minBackoffMs: 10,
    maxBackoffMs: 20,
  });
  let n2: ReturnType<typeof peer> | undefined;
  try {
    transport.send([vote("n2", 1)]);
    await delay(50);
    n2 = peer(port);
    // Raft resends (heartbeats); so does this loop, until one gets through.
    const started = Date.now();
    for (let term = 2; n2.messages().length === 0; term++) {
      assert.ok(Date.now() - started < 5_000, "never delivered");
      transport.send([vote("n2", term)]);
      await delay(10);
    }
    assert.ok(
      !n2.messages().some((m) => m.term === 1),
      "the first was dropped",
    );
  } finally {
    transport.close();
    await n2?.server.close();
  }
});

Deno.test("after a peer restarts, later messages reach it on a new connection", async () => {
  let n2 = peer();
  const port = n2.server.port;
  const transport = new PeerTransport({
    peers: { n2: n2.server.url },
    minBackoffMs: 10,
    maxBackoffMs: 20,
  });
  try {
    transport.send([vote("n2", 1)]);
    await waitFor(() => n2.messages().length === 1, "the first message");
    await n2.server.close();
    n2 = peer(port);
    const started = Date.now();
    for (let term = 2; n2.messages().length === 0; term++) {
      assert.ok(Date.now() - started < 5_000, "never delivered after restart");
      transport.send([vote("n2", term)]);
      await delay(10);
    }
  } finally {
    transport.close();
    await n2.server.close();
  }
});

Deno.test("after close, sends are dropped", async () => {
  const n2 = peer();
  const transport = new PeerTransport({ peers: { n2: n2.server.url } });
  try {
    transport.send([vote("n2", 1)]);
    await waitFor(() => n2.messages().length === 1, "the first message");
    transport.close();
    transport.send([vote("n2", 2)]);
    await delay(50);
    assert.deepEqual(n2.messages(), [vote("n2", 1)]);
  } finally {
    transport.close();
    await n2.server.close();
  }
});

Deno.test("close while a connection is opening leaves nothing open", async () => {
  const n2 = peer();
  const transport = new PeerTransport({ peers: { n2: n2.server.url } });
  try {
    transport.send([vote("n2", 1)]);
    transport.close();
    // The server may see the connection open and close again; nothing is
    // delivered, and the test's sanitizers find no open resource.
    await delay(50);
    assert.deepEqual(n2.messages(), []);
  } finally {
    await n2.server.close();
  }
});
