import "../rpc/codec/cbor.ts";
import assert from "node:assert/strict";
import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import { serve } from "../adapter/deno/serve.ts";
import type { ByteStream, Dialer } from "../rpc/transport/transport.ts";
import { freePorts } from "../testing/ports.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { startRegistryNode } from "../testing/registry.ts";
import { connect } from "./client.ts";

/** The Deno dialer, recording the first bytes each stream it opens writes. */
function recordingDialer(first: Map<string, string>[]): Dialer {
  return async (url, options) => {
    const stream = await denoTcpDialer(url, options);
    const opened = new Map<string, string>();
    first.push(opened);
    const writer = stream.writable.getWriter();
    const writable = new WritableStream<Uint8Array>({
      async write(chunk) {
        if (!opened.has(url)) {
          opened.set(
            url,
            [...chunk.subarray(0, 3)].map((b) => b.toString(16)).join(" "),
          );
        }
        await writer.write(chunk);
      },
      close: () => writer.close(),
      abort: (reason) => writer.abort(reason),
    });
    const spied: ByteStream = {
      readable: stream.readable,
      writable,
      close: () => stream.close(),
      remoteAddress: stream.remoteAddress,
    };
    return spied;
  };
}

Deno.test('connect({ codec: "cbor" }): the registry client, its watch and the stubs\' pool speak CBOR, beside JSON clients of the same registry', async () => {
  const root = await Deno.makeTempDir({ prefix: "rafter_codec_" });
  const [clientPort, peerPort] = freePorts(2);
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: clientPort },
    peers: { n1: `tcp://127.0.0.1:${peerPort}` },
    clusterSecret: TEST_SECRET,
    dataDir: `${root}/n1`,
    tickMs: 20,
    electionTicks: 10,
  });
  const hello = serve({
    methods: { greet: (name: string) => `Hello, ${name}!` },
  });
  const registryUrl = `tcp://127.0.0.1:${clientPort}`;
  const streams: Map<string, string>[] = [];
  const cbor = connect(registryUrl, {
    codec: "cbor",
    dialer: recordingDialer(streams),
  });
  const json = connect(registryUrl);
  try {
    await waitFor(() => node.raft.status.role === "leader", "a leader");
    await cbor.bind("hello", { id: "h1", url: hello.url });
    const stub = cbor.stub<{ greet(name: string): string }>("hello");
    assert.equal(await stub.greet("Ada"), "Hello, Ada!");
    assert.deepEqual(
      (await json.lookup("hello")).endpoints.map((e) => e.id),
      ["h1"],
    );
    assert.equal(
      await json.call("hello", "greet", ["Grace"]),
      "Hello, Grace!",
    );
    // The stub's cluster map watches the name: a third CBOR connection.
    await waitFor(() => streams.length >= 3, "the watch connection");
    const opened = streams.map((stream) => [...stream.entries()][0]);
    assert.deepEqual(
      opened.map(([, bytes]) => bytes),
      opened.map(() => "d9 d9 f7"),
    );
    assert.deepEqual(
      [...new Set(opened.map(([url]) => url))].sort(),
      [registryUrl, hello.url].sort(),
    );
  } finally {
    cbor.close();
    json.close();
    await hello.close();
    await node.stop();
    await Deno.remove(root, { recursive: true });
  }
});
