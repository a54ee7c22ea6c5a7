import assert from "node:assert/strict";
import fc from "fast-check";
import {
  EARLY_WRITE_FRAMES,
  FrameWriter,
  utf8Length,
} from "./_frame_writer.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function recordingStream(
  options: { slow?: () => Promise<void>; fail?: number } = {},
) {
  const writes: string[] = [];
  const writable = new WritableStream<Uint8Array>({
    async write(chunk) {
      if (options.fail !== undefined && writes.length === options.fail) {
        throw new Error("broken pipe");
      }
      writes.push(decoder.decode(chunk));
      await options.slow?.();
    },
  });
  return { writable, writes };
}

Deno.test("FrameWriter joins the frames of one tick into one write", async () => {
  const { writable, writes } = recordingStream();
  const writer = new FrameWriter(writable);
  await Promise.all(
    ["a\n", "b\n", "c\n"].map((s) => writer.write(encoder.encode(s))),
  );
  await writer.write(encoder.encode("d\n"));
  assert.deepEqual(writes, ["a\nb\nc\n", "d\n"]);
});

Deno.test("FrameWriter hands the first EARLY_WRITE_FRAMES frames of a long turn to the stream at once; the rest of the turn follows in one write, in order", async () => {
  const { writable, writes } = recordingStream();
  const writer = new FrameWriter(writable);
  const count = EARLY_WRITE_FRAMES * 2 + 8;
  const lines = Array.from({ length: count }, (_, i) => `${i}`);
  const written = lines.map((line, i) => {
    const promise = writer.write(line);
    // The early write started within the turn, before any microtask ran.
    if (i === EARLY_WRITE_FRAMES - 1) assert.equal(writes.length, 0);
    return promise;
  });
  await Promise.all(written);
  await writer.idle();
  assert.deepEqual(writes, [
    lines.slice(0, EARLY_WRITE_FRAMES).map((l) => `${l}\n`).join(""),
    lines.slice(EARLY_WRITE_FRAMES).map((l) => `${l}\n`).join(""),
  ]);
  assert.equal(writer.queuedBytes, 0);
  // A short turn afterwards is still one write at the end of the turn.
  await Promise.all(["x", "y"].map((l) => writer.write(l)));
  assert.deepEqual(writes.slice(2), ["x\ny\n"]);
});

Deno.test("FrameWriter joins what is queued while a write is in progress", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  const { writable, writes } = recordingStream({ slow: () => gate });
  const writer = new FrameWriter(writable);
  const first = writer.write(encoder.encode("1\n"));
  await new Promise((resolve) => setTimeout(resolve, 0));
  const later = [2, 3, 4].map((n) => writer.write(encoder.encode(`${n}\n`)));
  await new Promise((resolve) => setTimeout(resolve, 0));
  release();
  await Promise.all([first, ...later]);
  assert.deepEqual(writes, ["1\n", "2\n3\n4\n"]);
  await writer.idle();
});

Deno.test("FrameWriter splits batches at maxBatchBytes, keeping order", async () => {
  const { writable, writes } = recordingStream();
  const writer = new FrameWriter(writable, { maxBatchBytes: 4 });
  await Promise.all(
    ["ab\n", "c\n", "defgh\n", "i\n"].map((s) =>
      writer.write(encoder.encode(s))
    ),
  );
  assert.deepEqual(writes, ["ab\n", "c\n", "defgh\n", "i\n"]);
});

Deno.test("FrameWriter fails for good after a write error and reports it once", async () => {
  const { writable, writes } = recordingStream({ fail: 1 });
  const errors: unknown[] = [];
  const writer = new FrameWriter(writable, { onError: (e) => errors.push(e) });
  await writer.write(encoder.encode("ok\n"));
  const failing = writer.write(encoder.encode("lost\n"));
  await assert.rejects(failing, /broken pipe/);
  assert.ok(writer.failed);
  await assert.rejects(writer.write(encoder.encode("after\n")), /broken pipe/);
  // An ignored rejection is not reported as unhandled.
  writer.write(encoder.encode("ignored\n"));
  await writer.idle();
  assert.deepEqual(writes, ["ok\n"]);
  assert.equal(errors.length, 1);
});

Deno.test("queuedBytes counts frames until the stream takes them", async () => {
  const release = Promise.withResolvers<void>();
  const writer = new FrameWriter(
    new WritableStream({ write: () => release.promise }),
  );
  const encoder = new TextEncoder();
  const first = writer.write(encoder.encode("abc\n"));
  await Promise.resolve();
  writer.write(encoder.encode("de\n"));
  assert.equal(writer.queuedBytes, 7);
  release.resolve();
  await first;
  await writer.idle();
  assert.equal(writer.queuedBytes, 0);
});

Deno.test("FrameWriter writes text lines as UTF-8 with their newline, joined with byte frames in order", async () => {
  const { writable, writes } = recordingStream();
  const writer = new FrameWriter(writable);
  await Promise.all([
    writer.write('{"a":1}'),
    writer.write("é 😀"),
    writer.write(encoder.encode("bytes\n")),
    writer.write("last"),
  ]);
  await writer.write("x");
  await writer.write("y");
  assert.deepEqual(writes, ['{"a":1}\né 😀\nbytes\nlast\n', "x\n", "y\n"]);
});

Deno.test("FrameWriter counts a text line's UTF-8 bytes in queuedBytes, exactly", async () => {
  const { writable } = recordingStream();
  const writer = new FrameWriter(writable);
  const lines = ["abc", "é", "😀", "\ud800", "a\u20acb"];
  const done = lines.map((line) => writer.write(line));
  const expected = lines.reduce(
    (sum, line) => sum + encoder.encode(line + "\n").length,
    0,
  );
  assert.equal(writer.queuedBytes, expected);
  await Promise.all(done);
  assert.equal(writer.queuedBytes, 0);
});

Deno.test("utf8Length agrees with TextEncoder for any string", () => {
  fc.assert(
    fc.property(fc.string({ unit: "binary" }), (text) => {
      assert.equal(utf8Length(text), encoder.encode(text).length);
    }),
    { numRuns: 2_000 },
  );
});

Deno.test("a writer counting text in UTF-16 units still writes a batch of bytes and non-ASCII lines whole", async () => {
  const chunks: Uint8Array[] = [];
  const writer = new FrameWriter(
    (chunk) => {
      chunks.push(chunk.slice());
      return Promise.resolve();
    },
    { exactTextBytes: false },
  );
  const lines = ["é😀\u2028", "ascii"];
  await Promise.all([
    writer.write(encoder.encode("bytes\n")),
    writer.write(lines[0]),
    writer.write(lines[1]),
  ]);
  assert.equal(chunks.length, 1);
  assert.equal(decoder.decode(chunks[0]), `bytes\n${lines.join("\n")}\n`);
  // Counted as UTF-16 units while queued: never more than the bytes.
  writer.write(lines[0]);
  assert.equal(writer.queuedBytes, lines[0].length + 1);
  await writer.idle();
  assert.equal(writer.queuedBytes, 0);
});
