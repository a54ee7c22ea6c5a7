import assert from "node:assert/strict";
import {
  directOf,
  MAX_READ_BYTES,
  MIN_READ_BYTES,
  nextReadBytes,
  streamOfConn,
} from "./conn_stream.ts";

Deno.test("the read buffer starts small, doubles while reads fill it, and shrinks after a short read", () => {
  assert.equal(nextReadBytes(MIN_READ_BYTES, MIN_READ_BYTES), 2048);
  assert.equal(nextReadBytes(32 * 1024, 32 * 1024), MAX_READ_BYTES);
  assert.equal(nextReadBytes(MAX_READ_BYTES, MAX_READ_BYTES), MAX_READ_BYTES);
  assert.equal(nextReadBytes(MAX_READ_BYTES, 100), MIN_READ_BYTES);
  assert.equal(nextReadBytes(MAX_READ_BYTES, 5000), 8192);
  assert.equal(nextReadBytes(4096, 1024), 2048);
});

Deno.test("streamOfConn reads into a buffer that grows with the input and returns private copies", async () => {
  const input = new Uint8Array(200 * 1024).map((_, i) => i % 251);
  let at = 0;
  const sizes: number[] = [];
  const stream = streamOfConn({
    read(buffer) {
      sizes.push(buffer.length);
      if (at === input.length) return Promise.resolve(null);
      const count = Math.min(buffer.length, input.length - at);
      buffer.set(input.subarray(at, at + count));
      at += count;
      return Promise.resolve(count);
    },
    write: (bytes) => Promise.resolve(bytes.length),
    close() {},
  }, undefined);
  const direct = directOf(stream)!;
  const chunks: Uint8Array[] = [];
  for (let chunk = await direct.read(); chunk; chunk = await direct.read()) {
    chunks.push(chunk);
  }
  assert.deepEqual(sizes.slice(0, 8), [
    1024,
    2048,
    4096,
    8192,
    16384,
    32768,
    65536,
    65536,
  ]);
  const joined = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  assert.deepEqual(joined, input);
  // Each chunk is its own copy, not a view of the reused buffer.
  assert.equal(new Set(chunks.map((c) => c.buffer)).size, chunks.length);
});
