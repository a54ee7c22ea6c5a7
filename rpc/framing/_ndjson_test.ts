import assert from "node:assert/strict";
import fc from "fast-check";
import { encodeFrame, type Frame, NdjsonDecoder } from "./_ndjson.ts";

const encoder = new TextEncoder();
const bytes = (text: string) => encoder.encode(text);

function texts(frames: Frame[]): string[] {
  return frames.map((frame) => {
    assert.equal(frame.kind, "text");
    return (frame as { text: string }).text;
  });
}

/** Feeds `input` to a fresh decoder cut at the given offsets. */
function decodeCut(
  input: Uint8Array,
  cuts: number[],
  maxFrameBytes?: number,
): Frame[] {
  const decoder = new NdjsonDecoder({ maxFrameBytes });
  const frames: Frame[] = [];
  let start = 0;
  for (const cut of [...cuts, input.length]) {
    frames.push(...decoder.push(input.subarray(start, cut)));
    start = cut;
  }
  return frames;
}

Deno.test("NdjsonDecoder decodes several frames from one chunk", () => {
  const decoder = new NdjsonDecoder();
  assert.deepEqual(
    decoder.push(bytes('{"a":1}\n[2]\n"three"\n')),
    [
      { kind: "text", text: '{"a":1}' },
      { kind: "text", text: "[2]" },
      { kind: "text", text: '"three"' },
    ],
  );
  assert.deepEqual(decoder.push(bytes("")), []);
});

Deno.test("NdjsonDecoder joins a frame split at every byte offset", () => {
  const input = bytes('{"jsonrpc":"2.0","method":"x","id":1}\n{"b":2}\n');
  for (let cut = 0; cut <= input.length; cut++) {
    assert.deepEqual(
      texts(decodeCut(input, [cut])),
      ['{"jsonrpc":"2.0","method":"x","id":1}', '{"b":2}'],
      `cut at ${cut}`,
    );
  }
  // And one byte at a time.
  const oneByOne = Array.from({ length: input.length }, (_, i) => i);
  assert.equal(decodeCut(input, oneByOne).length, 2);
});

Deno.test("NdjsonDecoder keeps multi-byte UTF-8 characters split across chunks", () => {
  for (const char of ["🙂", "€"]) {
    const line = JSON.stringify({ s: `a${char}b` });
    const input = bytes(`${line}\n`);
    const start = input.indexOf(0x61) + 1; // first byte of the character
    const width = encoder.encode(char).length;
    assert.equal(width, char === "🙂" ? 4 : 3);
    for (let cut = start; cut <= start + width; cut++) {
      assert.deepEqual(texts(decodeCut(input, [cut])), [line], `cut at ${cut}`);
    }
    // Every byte of the character in its own chunk.
    const cuts = Array.from({ length: width + 1 }, (_, i) => start + i);
    assert.deepEqual(texts(decodeCut(input, cuts)), [line]);
  }
});

Deno.test("NdjsonDecoder strips \\r and skips empty and blank lines", () => {
  const decoder = new NdjsonDecoder();
  assert.deepEqual(
    texts(decoder.push(bytes('\n\r\n  \t \n{"a":1}\r\n \r\n[1] \r\n\n'))),
    ['{"a":1}', "[1] "],
  );
  // A \r split from its \n.
  assert.deepEqual(texts(decoder.push(bytes("[2]\r"))), []);
  assert.deepEqual(texts(decoder.push(bytes("\n"))), ["[2]"]);
});

Deno.test("NdjsonDecoder refuses an oversize frame once, then resumes", () => {
  const big = `"${"x".repeat(100)}"`;
  const input = bytes(`[1]\n${big}\n[2]\n`);
  for (let cut = 0; cut <= input.length; cut++) {
    const frames = decodeCut(input, [cut], 50);
    assert.equal(frames.length, 3, `cut at ${cut}`);
    assert.deepEqual(frames[0], { kind: "text", text: "[1]" });
    assert.equal(frames[1].kind, "tooLarge");
    assert.ok((frames[1] as { bytes: number }).bytes > 50);
    assert.deepEqual(frames[2], { kind: "text", text: "[2]" });
  }
  // Streamed in small chunks: refused as soon as the limit is passed.
  const decoder = new NdjsonDecoder({ maxFrameBytes: 10 });
  assert.deepEqual(decoder.push(bytes("123456")), []);
  assert.deepEqual(decoder.push(bytes("7890a")), [{
    kind: "tooLarge",
    bytes: 11,
  }]);
  assert.deepEqual(decoder.push(bytes("bbbbbbbbbbbbbbbbbbbbbbbbbb")), []);
  assert.deepEqual(texts(decoder.push(bytes("ccc\n[3]\n"))), ["[3]"]);
  // Exactly the limit is fine.
  assert.deepEqual(texts(decoder.push(bytes("1234567890\n"))), ["1234567890"]);
});

Deno.test("NdjsonDecoder reports invalid UTF-8 and goes on", () => {
  const decoder = new NdjsonDecoder();
  const bad = new Uint8Array([0x22, 0xff, 0xfe, 0x22, 0x0a]);
  assert.deepEqual(decoder.push(bad), [{ kind: "badUtf8" }]);
  // A truncated multi-byte sequence at the end of a line is invalid too.
  const truncated = new Uint8Array([...bytes('"a'), 0xf0, 0x9f, 0x0a]);
  assert.deepEqual(decoder.push(truncated), [{ kind: "badUtf8" }]);
  assert.deepEqual(texts(decoder.push(bytes("[1]\n"))), ["[1]"]);
});

Deno.test("NdjsonDecoder.end returns an unterminated last line", () => {
  const decoder = new NdjsonDecoder();
  assert.deepEqual(texts(decoder.push(bytes("[1]\n[2"))), ["[1]"]);
  assert.deepEqual(texts(decoder.end()), ["[2"]);
  assert.deepEqual(decoder.end(), []);
});

Deno.test("NdjsonDecoder does not keep a reference to the caller's chunk", () => {
  const decoder = new NdjsonDecoder();
  const chunk = bytes('{"a":');
  assert.deepEqual(decoder.push(chunk), []);
  chunk.fill(0x20);
  assert.deepEqual(texts(decoder.push(bytes("1}\n"))), ['{"a":1}']);
});

Deno.test("NdjsonDecoder rejects a bad maxFrameBytes", () => {
  assert.throws(() => new NdjsonDecoder({ maxFrameBytes: 0 }), RangeError);
  assert.throws(() => new NdjsonDecoder({ maxFrameBytes: 1.5 }), RangeError);
});

Deno.test("encodeFrame writes one JSON line and refuses what JSON cannot hold", () => {
  const text = new TextDecoder().decode(encodeFrame({ s: "a\nb", n: [1] }));
  assert.equal(text, '{"s":"a\\nb","n":[1]}\n');
  assert.throws(() => encodeFrame(undefined), TypeError);
  assert.throws(() => encodeFrame(1n), TypeError);
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  assert.throws(() => encodeFrame(cycle), TypeError);
});

Deno.test("NdjsonDecoder property: encoded values cut anywhere decode back", () => {
  fc.assert(
    fc.property(
      fc.array(fc.jsonValue(), { maxLength: 20 }),
      fc.array(fc.nat(), { maxLength: 30 }),
      (values, rawCuts) => {
        const parts = values.map(encodeFrame);
        const input = new Uint8Array(
          parts.reduce((sum, part) => sum + part.length, 0),
        );
        let offset = 0;
        for (const part of parts) {
          input.set(part, offset);
          offset += part.length;
        }
        const cuts = rawCuts.map((n) => n % (input.length + 1))
          .sort((a, b) => a - b);
        const decoded = texts(decodeCut(input, cuts)).map((text) =>
          JSON.parse(text)
        );
        // JSON round trip (e.g. -0 becomes 0), as any JSON peer sees it.
        assert.deepEqual(
          decoded,
          values.map((value) => JSON.parse(JSON.stringify(value))),
        );
      },
    ),
    { numRuns: 300 },
  );
});

/** The frames of `input` fed to a decoder in one chunk, or one byte at a time. */
function framesOf(input: Uint8Array, maxFrameBytes: number, bytewise: boolean) {
  const decoder = new NdjsonDecoder({ maxFrameBytes });
  const frames: Frame[] = [];
  if (bytewise) {
    for (let i = 0; i < input.length; i++) {
      frames.push(...decoder.push(input.subarray(i, i + 1)));
    }
  } else {
    frames.push(...decoder.push(input));
  }
  frames.push(...decoder.end());
  // How much of a too large line had arrived depends on the chunking.
  return frames.map((frame) =>
    frame.kind === "tooLarge" ? { kind: "tooLarge" } : frame
  );
}

Deno.test("NdjsonDecoder property: the lines of one chunk, decoded together, give what each line decoded alone gives", () => {
  const encoder = new TextEncoder();
  const piece = fc.oneof(
    fc.string({ unit: "binary", maxLength: 12 }).map((s) => encoder.encode(s)),
    fc.constantFrom(
      new Uint8Array([0x0a]), // newline
      new Uint8Array([0x0d, 0x0a]), // CRLF
      new Uint8Array([0xef, 0xbb, 0xbf]), // byte order mark
      new Uint8Array([0x20, 0x09]), // blank
      new Uint8Array([0xff]), // never UTF-8
      new Uint8Array([0xc3]), // a truncated character
      encoder.encode('{"id":1}'),
    ),
  );
  fc.assert(
    fc.property(
      fc.array(piece, { maxLength: 40 }),
      fc.integer({ min: 1, max: 40 }),
      (pieces, maxFrameBytes) => {
        const input = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
        let offset = 0;
        for (const p of pieces) {
          input.set(p, offset);
          offset += p.length;
        }
        assert.deepEqual(
          framesOf(input, maxFrameBytes, false),
          framesOf(input, maxFrameBytes, true),
        );
      },
    ),
    { numRuns: 2_000 },
  );
});

Deno.test("NdjsonDecoder: a bad line among many does not make the chunk's decoding quadratic", () => {
  const lines = '{"a":1}\n'.repeat(20_000);
  const input = new Uint8Array([
    ...new TextEncoder().encode(lines),
    0xff,
    0x0a,
  ]);
  const decoder = new NdjsonDecoder();
  const start = performance.now();
  const frames = decoder.push(input);
  const ms = performance.now() - start;
  assert.equal(frames.length, 20_001);
  assert.deepEqual(frames.at(-1), { kind: "badUtf8" });
  // Quadratic would be 20k scans of ~160 KB: seconds, not milliseconds.
  assert.ok(ms < 2_000, `${ms} ms`);
});

Deno.test("NdjsonDecoder says when a line has begun and is not whole", () => {
  const decoder = new NdjsonDecoder({ maxFrameBytes: 8 });
  const bytes = (text: string) => new TextEncoder().encode(text);
  assert.equal(decoder.partial, false);
  decoder.push(bytes('{"a"'));
  assert.equal(decoder.partial, true);
  decoder.push(bytes(":1}\n"));
  assert.equal(decoder.partial, false);
  decoder.push(bytes("[1,2,3,4,5,6]")); // too large: skipped to its newline
  assert.equal(decoder.partial, true);
  decoder.push(bytes("7]\n[]\n"));
  assert.equal(decoder.partial, false);
});

Deno.test("NdjsonDecoder makes its frames with the maker given", () => {
  const decoder = new NdjsonDecoder<string>({
    maxFrameBytes: 8,
    make: {
      text: (text) => `text ${text}`,
      tooLarge: (bytes) => `tooLarge ${bytes}`,
      badUtf8: () => "badUtf8",
    },
  });
  const bytes = new Uint8Array([
    ...new TextEncoder().encode('{"a":1}\n0123456789\n'),
    0xff,
    0x0a,
    ...new TextEncoder().encode("[2]"),
  ]);
  assert.deepEqual(decoder.push(bytes), [
    'text {"a":1}',
    "tooLarge 10",
    "badUtf8",
  ]);
  assert.deepEqual(decoder.end(), ["text [2]"]);
});
