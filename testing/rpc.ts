/**
 * Raw peers for the RPC tests: TCP clients that write and read bytes as
 * they are (line-oriented, and length-prefixed for CBOR), a raw server,
 * frame builders and an in-memory byte stream.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Decoder } from "cbor-x/decode";
import { Encoder } from "cbor-x/encode";
import {
  type RpcServer,
  serve,
  type ServeOptions,
} from "../adapter/deno/serve.ts";
import type { ByteStream } from "../rpc/transport/transport.ts";

import { within } from "./time.ts";

/**
 * The next bytes read from `conn`, or null at end of stream (or a reset).
 * @throws {Error} when nothing arrives within `timeoutMs`, after calling
 * `close` (which ends the pending read).
 */
async function readSome(
  conn: Deno.TcpConn,
  timeoutMs: number,
  close: () => void,
): Promise<Uint8Array | null> {
  const buffer = new Uint8Array(64 * 1024);
  try {
    const count = await within(conn.read(buffer), timeoutMs, "a read");
    return count === null ? null : buffer.subarray(0, count);
  } catch (error) {
    if (error instanceof Deno.errors.ConnectionReset) return null;
    close();
    throw error;
  }
}

/** A TCP connection to 127.0.0.1 that writes bytes exactly as given. */
class RawConnection {
  protected readonly conn: Deno.TcpConn;
  readonly #encoder = new TextEncoder();
  #closed = false;

  protected constructor(conn: Deno.TcpConn) {
    this.conn = conn;
  }

  /** Opens a connection to 127.0.0.1:`port`, Nagle's algorithm off. */
  protected static async open(port: number): Promise<Deno.TcpConn> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    conn.setNoDelay(true);
    return conn;
  }

  /** Writes `data` (a string is UTF-8 encoded) exactly as given. */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? this.#encoder.encode(data) : data;
    let offset = 0;
    while (offset < bytes.length) {
      offset += await this.conn.write(bytes.subarray(offset));
    }
  }

  /** Shuts down the writing side (TCP half-close). */
  closeWrite(): Promise<void> {
    return this.conn.closeWrite();
  }

  /** Closes the connection; safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.conn.close();
    } catch {
      // Already closed.
    }
  }
}

/**
 * A raw TCP client that writes bytes as given and reads newline-terminated
 * lines, for checking exact wire text.
 */
export class RawClient extends RawConnection {
  readonly #utf8 = new TextDecoder();
  #text = "";
  #ended = false;

  /** Connects to 127.0.0.1:`port`. */
  static async connect(port: number): Promise<RawClient> {
    return new RawClient(await RawConnection.open(port));
  }

  /** Writes `text` followed by `\n`. */
  send(text: string): Promise<void> {
    return this.write(text + "\n");
  }

  /**
   * The next line (without its `\n`), or null at end of stream.
   * @throws {Error} when nothing arrives within `timeoutMs` (connection closed).
   */
  async line(timeoutMs = 5_000): Promise<string | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const newline = this.#text.indexOf("\n");
      if (newline !== -1) {
        const line = this.#text.slice(0, newline);
        this.#text = this.#text.slice(newline + 1);
        return line;
      }
      if (this.#ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("timed out waiting for a line");
      await this.#fill(left);
    }
  }

  /** Reads until the server closes the connection; returns what was left. */
  async rest(timeoutMs = 5_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("timed out waiting for end of stream");
      await this.#fill(left);
    }
    const rest = this.#text;
    this.#text = "";
    return rest;
  }

  async #fill(timeoutMs: number): Promise<void> {
    const bytes = await readSome(this.conn, timeoutMs, () => this.close());
    if (bytes === null) {
      this.#ended = true;
      this.#text += this.#utf8.decode();
    } else {
      this.#text += this.#utf8.decode(bytes, { stream: true });
    }
  }
}

/**
 * Runs `fn` with a server (no methods unless `options` has some) and a raw
 * client connected to it; closes both after.
 */
export async function withRawServer(
  options: Partial<ServeOptions>,
  fn: (server: RpcServer, client: RawClient) => Promise<void>,
): Promise<void> {
  const server = serve({ methods: {}, ...options });
  const client = await RawClient.connect(server.port);
  try {
    await fn(server, client);
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
}

/** Sends one line and checks the exact text of the one line that comes back. */
export async function exchange(
  client: RawClient,
  request: string,
  expected: string,
): Promise<void> {
  await client.send(request);
  assert.equal(await client.line(), expected);
}

/** The bytes a CBOR client opens its connection with: the self-describe tag. */
export const CBOR_PREAMBLE: Uint8Array = new Uint8Array([0xd9, 0xd9, 0xf7]);

const cborEncoder = new Encoder({ useRecords: false, variableMapSize: true });
const cborDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });

/** Bytes from a hex text such as `"a1 62 69 64 01"` (spaces ignored). */
export function hex(text: string): Uint8Array {
  const digits = text.replace(/\s+/g, "");
  return Uint8Array.from(
    { length: digits.length / 2 },
    (_, i) => parseInt(digits.slice(2 * i, 2 * i + 2), 16),
  );
}

/** `payload` behind its 4-byte big-endian length: one CBOR-codec frame. */
export function lengthPrefixed(payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(4 + payload.length);
  new DataView(frame.buffer).setUint32(0, payload.length);
  frame.set(payload, 4);
  return frame;
}

/** One CBOR-codec frame holding `value`, encoded by cbor-x. */
export function cborFrame(value: unknown): Uint8Array {
  return lengthPrefixed(cborEncoder.encode(value));
}

/** The value of a CBOR item, decoded by cbor-x (bigints for 8-byte integers). */
export function decodeCbor(payload: Uint8Array): unknown {
  return cborDecoder.decode(payload);
}

/** Joins byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const joined = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}

/**
 * A raw TCP client that writes bytes as given and reads length-prefixed
 * frames (the CBOR codec's framing), for checking exact wire bytes.
 */
export class RawFrameClient extends RawConnection {
  #buffer: Uint8Array = new Uint8Array(0);
  #ended = false;

  /** Connects to 127.0.0.1:`port`; `preamble` writes the CBOR preamble first. */
  static async connect(port: number, preamble = true): Promise<RawFrameClient> {
    const client = new RawFrameClient(await RawConnection.open(port));
    if (preamble) await client.write(CBOR_PREAMBLE);
    return client;
  }

  /** Writes one frame holding `value` (encoded by cbor-x). */
  send(value: unknown): Promise<void> {
    return this.write(cborFrame(value));
  }

  /**
   * The payload of the next frame, or null at end of stream.
   * @throws {Error} when no whole frame arrives within `timeoutMs`.
   */
  async frame(timeoutMs = 5_000): Promise<Uint8Array | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.#buffer.length >= 4) {
        const length = new DataView(
          this.#buffer.buffer,
          this.#buffer.byteOffset,
        ).getUint32(0);
        if (this.#buffer.length >= 4 + length) {
          const payload = this.#buffer.slice(4, 4 + length);
          this.#buffer = this.#buffer.slice(4 + length);
          return payload;
        }
      }
      if (this.#ended) {
        assert.equal(this.#buffer.length, 0, "the stream ended inside a frame");
        return null;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("timed out waiting for a frame");
      await this.#fill(left);
    }
  }

  /** The next frame's value, decoded by cbor-x; null at end of stream. */
  async message(timeoutMs = 5_000): Promise<unknown> {
    const payload = await this.frame(timeoutMs);
    return payload === null ? null : decodeCbor(payload);
  }

  async #fill(timeoutMs: number): Promise<void> {
    const bytes = await readSome(this.conn, timeoutMs, () => this.close());
    if (bytes === null) this.#ended = true;
    else this.#buffer = concat(this.#buffer, bytes);
  }
}

/** An in-memory {@link ByteStream} whose peer is driven by the test. */
export interface FakeStream {
  /** The stream to hand to the code under test. */
  stream: ByteStream;
  /** Every chunk written to the stream, in order. */
  chunks: Uint8Array[];
  /** The written bytes as text. */
  written(): string;
  /** Delivers `text` as bytes from the peer. */
  push(text: string): void;
  /** Delivers `bytes` from the peer. */
  pushBytes(bytes: Uint8Array): void;
  /** Ends the peer's side (end of stream). */
  end(): void;
  /** Whether `stream.close()` was called. */
  readonly closed: boolean;
}

/**
 * A readable stream the test feeds: `enqueue` delivers bytes, `end` ends
 * it (idempotent, and quiet once the reader cancelled).
 */
export function fedReadable(): {
  readable: ReadableStream<Uint8Array>;
  enqueue(chunk: Uint8Array): void;
  end(): void;
  readonly ended: boolean;
} {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;
  const readable = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      ended = true;
    },
  });
  return {
    readable,
    enqueue: (chunk) => controller.enqueue(chunk),
    end() {
      if (ended) return;
      ended = true;
      try {
        controller.close();
      } catch {
        // Cancelled already.
      }
    },
    get ended() {
      return ended;
    },
  };
}

/** Makes a {@link FakeStream}. */
export function fakeStream(): FakeStream {
  const chunks: Uint8Array[] = [];
  let closed = false;
  const fed = fedReadable();
  const { readable } = fed;
  const endReadable = () => fed.end();
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      if (closed) throw new Error("stream closed");
      chunks.push(chunk.slice());
    },
  });
  const encoder = new TextEncoder();
  return {
    stream: {
      readable,
      writable,
      close() {
        closed = true;
        endReadable();
      },
    },
    chunks,
    written: () =>
      chunks.map((chunk) => new TextDecoder().decode(chunk)).join(""),
    push: (text) => fed.enqueue(encoder.encode(text)),
    pushBytes: (bytes) => fed.enqueue(bytes.slice()),
    end: endReadable,
    get closed() {
      return closed;
    },
  };
}

/** A listener that accepts and then never reads; see {@linkcode silentServer}. */
export interface SilentServer {
  /** Its `tcp://127.0.0.1:port` URL. */
  url: string;
  /** How many connections it accepted so far. */
  accepted(): number;
  /** Stops listening and closes every accepted connection. */
  close(): Promise<void>;
}

/**
 * A TCP server on 127.0.0.1 that accepts connections and then never reads
 * or answers, as a stopped (SIGSTOPped) process does: calls and pings sent
 * to it just wait.
 */
export function silentServer(): SilentServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const done = (async () => {
    for await (const conn of listener) conns.push(conn);
  })();
  return {
    url: `tcp://127.0.0.1:${listener.addr.port}`,
    accepted: () => conns.length,
    close: () => closeListening(listener, conns, done),
  };
}

/**
 * Stops a test server: closes `listener` and every connection in `conns`
 * (those already closed are skipped), then waits for its accept loop
 * (`done`) to end.
 */
export async function closeListening(
  listener: Deno.Listener,
  conns: Iterable<Deno.Conn>,
  done: Promise<unknown>,
): Promise<void> {
  listener.close();
  for (const conn of conns) {
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  }
  await done;
}
