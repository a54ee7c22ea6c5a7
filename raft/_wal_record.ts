/**
 * Record framing of the write-ahead log (private to `raft/`): each record is
 * `[u32 big-endian payload length][u32 big-endian checksum(payload)][payload]`
 * with a UTF-8 JSON payload, and a streaming reader that walks a file's
 * records with a bounded buffer and tells a torn tail (what a crash during a
 * write leaves) from corruption (damage followed by more data).
 *
 * The segmented log uses CRC-32C; the old single-file `wal.log` used CRC-32
 * (IEEE), which the reader also accepts for the one-time import.
 *
 * @module
 */

/** Bytes of a record header: payload length then checksum, both u32 BE. */
export const HEADER_BYTES = 8;
/** The largest payload the 32-bit length field can describe. */
export const MAX_PAYLOAD_BYTES = 0xffffffff;
/** Default size of the read buffer (grown only to fit one larger record). */
export const DEFAULT_READ_BUFFER_BYTES = 64 * 1024;
/**
 * The most bytes after a record whose length runs past the end of the file
 * that the reader scans for a later valid record (to tell a cut-short last
 * record from a damaged length field). More than this is reported as
 * corruption: no single torn write is that large in practice.
 */
export const MAX_TORN_SCAN_BYTES = 16 * 1024 * 1024;

/** A CRC function with a continuation seed (`crc32` or `crc32c`). */
export type Checksum = (bytes: Uint8Array, seed?: number) => number;

const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Frames payloads as records into one buffer.
 *
 * @throws {TypeError} If a payload exceeds {@link MAX_PAYLOAD_BYTES}.
 */
export function frameRecords(
  payloads: readonly Uint8Array[],
  checksum: Checksum,
): Uint8Array {
  let total = 0;
  for (const p of payloads) {
    if (p.length > MAX_PAYLOAD_BYTES) {
      throw new TypeError(
        `Wal.append: a record of ${p.length} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
      );
    }
    total += HEADER_BYTES + p.length;
  }
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  let off = 0;
  for (const p of payloads) {
    view.setUint32(off, p.length);
    view.setUint32(off + 4, checksum(p));
    bytes.set(p, off + HEADER_BYTES);
    off += HEADER_BYTES + p.length;
  }
  return bytes;
}

const textEncoder = new TextEncoder();

/**
 * Frames text payloads (each written as UTF-8) as records into one buffer,
 * encoding each straight into place: one allocation for the whole batch
 * instead of an encoded copy and a framed copy of every record (the WAL's
 * hot path: an append of many small entries).
 *
 * @returns the buffer and, for each payload, where its record ends in it.
 * @throws {TypeError} If a payload exceeds {@link MAX_PAYLOAD_BYTES}.
 */
export function frameTextRecords(
  payloads: readonly string[],
  checksum: Checksum,
): { bytes: Uint8Array; ends: number[] } {
  // Exact for ASCII (JSON of ASCII data); grown below when a payload has
  // characters that take more than one byte.
  let size = 0;
  for (const p of payloads) size += HEADER_BYTES + p.length;
  let bytes = new Uint8Array(size);
  const ends: number[] = [];
  let off = 0;
  for (let i = 0; i < payloads.length; i++) {
    const text = payloads[i];
    let written = textEncoder.encodeInto(
      text,
      bytes.subarray(off + HEADER_BYTES),
    );
    if (written.read < text.length) {
      // At most 3 bytes per UTF-16 unit, for this payload and the rest.
      let rest = 0;
      for (let j = i + 1; j < payloads.length; j++) {
        rest += HEADER_BYTES + payloads[j].length * 3;
      }
      const grown = new Uint8Array(
        off + HEADER_BYTES + text.length * 3 + rest,
      );
      grown.set(bytes.subarray(0, off));
      bytes = grown;
      written = textEncoder.encodeInto(
        text,
        bytes.subarray(off + HEADER_BYTES),
      );
    }
    const length = written.written;
    if (length > MAX_PAYLOAD_BYTES) {
      throw new TypeError(
        `Wal.append: a record of ${length} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
      );
    }
    const start = off + HEADER_BYTES;
    const view = new DataView(
      bytes.buffer,
      bytes.byteOffset + off,
      HEADER_BYTES,
    );
    view.setUint32(0, length);
    view.setUint32(4, checksum(bytes.subarray(start, start + length)));
    off = start + length;
    ends.push(off);
  }
  return { bytes: off === bytes.length ? bytes : bytes.subarray(0, off), ends };
}

/** What {@link RecordReader.next} found at the reader's position. */
export type ReadResult =
  /** A record with a good checksum and JSON payload (shape unchecked). */
  | { kind: "record"; offset: number; end: number; record: unknown }
  /** The end of the file, exactly after the previous record. */
  | { kind: "end"; offset: number }
  /** Damage a crash during the last write explains; cut the file here. */
  | { kind: "torn"; offset: number; reason: string }
  /** Damage followed by more data: acknowledged data is lost or wrong. */
  | { kind: "corrupt"; offset: number; reason: string };

/**
 * Reads the records of an open file in order, from offset 0, holding at most
 * one buffer of `bufferBytes` (grown to fit one record larger than it).
 * After a result other than `"record"` the reader must not be used again.
 */
export class RecordReader {
  #file: Deno.FsFile;
  #size: number;
  #checksum: Checksum;
  #buf: Uint8Array;
  /** Window of unread data in `#buf`. */
  #start = 0;
  #end = 0;
  /** File offset of `#buf[#start]`. */
  #pos = 0;
  /** File offset up to which the file has been read into the buffer. */
  #readTo = 0;
  #peak: number;

  /**
   * @param file An open file positioned at offset 0.
   * @param size The file's size in bytes.
   * @param checksum The record checksum.
   * @param bufferBytes Initial read buffer size.
   */
  constructor(
    file: Deno.FsFile,
    size: number,
    checksum: Checksum,
    bufferBytes: number = DEFAULT_READ_BUFFER_BYTES,
  ) {
    this.#file = file;
    this.#size = size;
    this.#checksum = checksum;
    this.#buf = new Uint8Array(Math.max(bufferBytes, HEADER_BYTES));
    this.#peak = this.#buf.length;
  }

  /** The largest read buffer used so far, in bytes. */
  get peakBufferBytes(): number {
    return this.#peak;
  }

  /**
   * Makes at least `n` bytes from `#pos` available in the buffer, or all
   * that remain; returns how many are available.
   */
  async #ensure(n: number): Promise<number> {
    if (this.#end - this.#start >= n) return this.#end - this.#start;
    if (this.#buf.length - this.#start < n) {
      // Move the unread window to the front, growing the buffer if needed.
      const target = this.#buf.length >= n
        ? this.#buf
        : new Uint8Array(Math.max(n, this.#buf.length * 2));
      if (target === this.#buf) {
        target.copyWithin(0, this.#start, this.#end);
      } else target.set(this.#buf.subarray(this.#start, this.#end));
      this.#end -= this.#start;
      this.#start = 0;
      this.#buf = target;
      this.#peak = Math.max(this.#peak, target.length);
    }
    while (this.#end - this.#start < n && this.#readTo < this.#size) {
      const got = await this.#file.read(this.#buf.subarray(this.#end));
      if (got === null) break;
      this.#end += got;
      this.#readTo += got;
    }
    return this.#end - this.#start;
  }

  /** Reads and classifies the next record. */
  async next(): Promise<ReadResult> {
    const offset = this.#pos;
    const avail = await this.#ensure(HEADER_BYTES);
    if (avail === 0) return { kind: "end", offset };
    if (avail < HEADER_BYTES) {
      return { kind: "torn", offset, reason: "a cut record header" };
    }
    const view = new DataView(
      this.#buf.buffer,
      this.#buf.byteOffset + this.#start,
      HEADER_BYTES,
    );
    const len = view.getUint32(0);
    const crc = view.getUint32(4);
    if (len === 0) {
      if (await this.#zeroFrom(offset)) {
        return {
          kind: "torn",
          offset,
          reason: "zero bytes where the file grew but its data never landed",
        };
      }
      return {
        kind: "corrupt",
        offset,
        reason: "a zero-length record followed by more data",
      };
    }
    const end = offset + HEADER_BYTES + len;
    if (end > this.#size) {
      const reason =
        `the record length ${len} runs past the end of the file (${this.#size} bytes)`;
      if (await this.#validRecordAfter(offset + 1)) {
        return {
          kind: "corrupt",
          offset,
          reason: `${reason} but valid records follow it`,
        };
      }
      return { kind: "torn", offset, reason };
    }
    await this.#ensure(HEADER_BYTES + len);
    const payload = this.#buf.subarray(
      this.#start + HEADER_BYTES,
      this.#start + HEADER_BYTES + len,
    );
    const record = checkPayload(payload, crc, this.#checksum);
    if (typeof record === "string") {
      if (end === this.#size || await this.#zeroFrom(end)) {
        return { kind: "torn", offset, reason: `${record} in the last record` };
      }
      return {
        kind: "corrupt",
        offset,
        reason: `${record} in a record followed by more data`,
      };
    }
    this.#start += HEADER_BYTES + len;
    this.#pos = end;
    return { kind: "record", offset, end, record: record.value };
  }

  /** True if every byte from `from` to the end of the file is 0. */
  async #zeroFrom(from: number): Promise<boolean> {
    await this.#file.seek(from, Deno.SeekMode.Start);
    const chunk = this.#buf.length >= 4096
      ? this.#buf
      : new Uint8Array(DEFAULT_READ_BUFFER_BYTES);
    let at = from;
    while (at < this.#size) {
      const got = await this.#file.read(chunk);
      if (got === null) break;
      for (let i = 0; i < got; i++) if (chunk[i] !== 0) return false;
      at += got;
    }
    return true;
  }

  /**
   * True if a complete record (good checksum and JSON) starts at or after
   * `from`; also true (corruption) if the rest is too large to scan.
   */
  async #validRecordAfter(from: number): Promise<boolean> {
    const rest = this.#size - from;
    if (rest > MAX_TORN_SCAN_BYTES) return true;
    const bytes = new Uint8Array(rest);
    await this.#file.seek(from, Deno.SeekMode.Start);
    let got = 0;
    while (got < rest) {
      const n = await this.#file.read(bytes.subarray(got));
      if (n === null) break;
      got += n;
    }
    const view = new DataView(bytes.buffer);
    for (let p = 0; p + HEADER_BYTES < got; p++) {
      const len = view.getUint32(p);
      if (len === 0 || p + HEADER_BYTES + len > got) continue;
      const payload = bytes.subarray(p + HEADER_BYTES, p + HEADER_BYTES + len);
      if (
        typeof checkPayload(payload, view.getUint32(p + 4), this.#checksum) !==
          "string"
      ) {
        return true;
      }
    }
    return false;
  }
}

/** The decoded JSON of a payload, or what is wrong with it. */
function checkPayload(
  payload: Uint8Array,
  crc: number,
  checksum: Checksum,
): { value: unknown } | string {
  if (checksum(payload) !== crc) return "CRC mismatch";
  try {
    return { value: JSON.parse(decoder.decode(payload)) };
  } catch {
    return "the payload is not UTF-8 JSON";
  }
}
