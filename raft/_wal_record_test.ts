import assert from "node:assert/strict";
import { crc32c } from "./_crc32.ts";
import { frameRecords, frameTextRecords } from "./_wal_record.ts";

const encoder = new TextEncoder();

Deno.test("frameTextRecords frames text payloads exactly as frameRecords frames their UTF-8, multi-byte characters anywhere included", () => {
  for (
    const payloads of [
      [],
      ['{"t":"e","index":1}'],
      ['{"a":1}', '{"b":"two"}', ""],
      ['{"d":"é"}', "plain"],
      ["plain", "ünïcødé ✓ 𝄞", "after"],
      ["a", "b", "€€€€€€€€"],
      ["𝄞".repeat(1000)],
    ]
  ) {
    const { bytes, ends } = frameTextRecords(payloads, crc32c);
    const expected = frameRecords(
      payloads.map((p) => encoder.encode(p)),
      crc32c,
    );
    assert.deepEqual(bytes, expected, JSON.stringify(payloads));
    // Each record ends where its frame ends.
    let end = 0;
    assert.deepEqual(
      ends,
      payloads.map((p) => (end += 8 + encoder.encode(p).length)),
    );
  }
});
