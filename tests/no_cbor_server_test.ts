/**
 * A CBOR client against a server whose process has no CBOR codec loaded
 * (CBOR is opt-in: `import "@rafter/rpc/cbor"`): the server answers the
 * CBOR preamble with one NDJSON error naming the cause and closes; the
 * client, reading JSON text where a frame length should be, fails with a
 * clear not-sent error instead of "a frame larger than maxFrameBytes".
 *
 * @module
 */

import assert from "node:assert/strict";
import "../rpc/codec/cbor.ts";
import { dial } from "../rpc/transport/dial.ts";
import { ConnectionError } from "../rpc/errors.ts";

/** Starts tests/_no_cbor_server.ts; resolves with its URL and a stop. */
async function startNoCborServer() {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("./_no_cbor_server.ts", import.meta.url).pathname,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let output = "";
  let url: string | undefined;
  while (url === undefined) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`the server exited: ${output}`);
    output += value;
    url = output.match(/ready on (tcp:\/\/\S+)/)?.[1];
  }
  return {
    url,
    async stop() {
      await child.stdin.close();
      await lines.cancel();
      await child.status;
    },
  };
}

Deno.test("a CBOR client against a server without the CBOR codec fails with a clear not-sent error naming the cure", async () => {
  const server = await startNoCborServer();
  try {
    const connection = await dial(server.url, { codec: "cbor" });
    const error = await connection.call("echo", [1]).then(
      () => assert.fail("the call succeeded"),
      (error) => error,
    );
    assert.ok(error instanceof ConnectionError, String(error));
    // The server read no request: it did not run, safe to send again.
    assert.equal(error.written, false);
    assert.equal(
      error.message,
      `connection to ${server.url} closed before "echo" was sent: the server at ${server.url} answered in NDJSON: it has no CBOR codec loaded (import "@rafter/rpc/cbor" in the server's process), or use codec: "json"`,
    );
    assert.doesNotMatch(error.message, /maxFrameBytes/);
    await connection.closed;
    // A later call says why the connection is closed.
    await assert.rejects(connection.call("echo", [2]), {
      name: "ConnectionError",
      message:
        `connection to ${server.url} is closed; "echo" was not sent: the server at ${server.url} answered in NDJSON: it has no CBOR codec loaded (import "@rafter/rpc/cbor" in the server's process), or use codec: "json"`,
    });
    // The same server still serves NDJSON.
    const json = await dial(server.url);
    assert.deepEqual(await json.call("echo", [{ n: 1 }]), { n: 1 });
    json.close();
  } finally {
    await server.stop();
  }
});

Deno.test("a server without the CBOR codec answers CBOR's preamble with one NDJSON error naming the cause, and closes", async () => {
  const server = await startNoCborServer();
  try {
    const { hostname, port } = new URL(server.url.replace("tcp:", "http:"));
    const conn = await Deno.connect({ hostname, port: Number(port) });
    // The preamble, then a 2-byte CBOR frame (an empty map): nothing after
    // the preamble is read.
    await conn.write(new Uint8Array([0xd9, 0xd9, 0xf7, 0, 0, 0, 2, 0xa0, 0]));
    let text = "";
    const decoder = new TextDecoder();
    // Read to the end: the server closes after its one answer.
    for await (const chunk of conn.readable) {
      text += decoder.decode(chunk, { stream: true });
    }
    const lines = text.split("\n").filter((line) => line !== "");
    assert.equal(lines.length, 1, text);
    assert.deepEqual(JSON.parse(lines[0]), {
      jsonrpc: "2.0",
      id: null,
      error: {
        code: -32700,
        message:
          `Parse error: this server has no CBOR codec loaded, and the client opened with CBOR's self-describe tag (d9 d9 f7): import "@rafter/rpc/cbor" in the server's process, or dial with codec: "json" (the connection is closed)`,
      },
    });
  } finally {
    await server.stop();
  }
});
