/**
 * Helpers shared by the tests of this folder (not part of the public API):
 * a raw line-oriented TCP client and small timing utilities.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type RpcServer,
  serve,
  type ServeOptions,
} from "../adapter/deno/serve.ts";
import type { ByteStream } from "./transport.ts";

/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Races `promise` against a timer so a broken test fails instead of hanging.
 *
 * @throws {Error} naming `what` when `ms` milliseconds pass first.
 */
export async function within<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${ms} ms: ${what}`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A raw TCP client that writes bytes as given and reads newline-terminated
 * lines, for checking exact wire text.
 */
export class RawClient {
  readonly #conn: Deno.TcpConn;
  readonly #utf8 = new TextDecoder();
  readonly #encoder = new TextEncoder();
  #text = "";
  #ended = false;
  #closed = false;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  /** Connects to 127.0.0.1:`port`. */
  static async connect(port: number): Promise<RawClient> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    conn.setNoDelay(true);
    return new RawClient(conn);
  }

  /** Writes `data` (a string is UTF-8 encoded) exactly as given. */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? this.#encoder.encode(data) : data;
    let offset = 0;
    while (offset < bytes.length) {
      offset += await this.#conn.write(bytes.subarray(offset));
    }
  }

  /** Writes `text` followed by `\n`. */
  send(text: string): Promise<void> {
    return this.write(text + "\n");
  }

  /** Shuts down the writing side (TCP half-close). */
  closeWrite(): Promise<void> {
    return this.#conn.closeWrite();
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
    const buffer = new Uint8Array(64 * 1024);
    let count: number | null;
    try {
      count = await within(this.#conn.read(buffer), timeoutMs, "a read");
    } catch (error) {
      if (error instanceof Deno.errors.ConnectionReset) {
        count = null;
      } else {
        this.close(); // ends the pending read
        throw error;
      }
    }
    if (count === null) {
      this.#ended = true;
      this.#text += this.#utf8.decode();
    } else {
      this.#text += this.#utf8.decode(buffer.subarray(0, count), {
        stream: true,
      });
    }
  }

  /** Closes the connection; safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // Already closed.
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
  /** Ends the peer's side (end of stream). */
  end(): void;
  /** Whether `stream.close()` was called. */
  readonly closed: boolean;
}

/** Makes a {@link FakeStream}. */
export function fakeStream(): FakeStream {
  const chunks: Uint8Array[] = [];
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let ended = false;
  const endReadable = () => {
    if (ended) return;
    ended = true;
    try {
      controller.close();
    } catch {
      // Cancelled already.
    }
  };
  const readable = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel() {
      ended = true;
    },
  });
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
    push: (text) => controller.enqueue(encoder.encode(text)),
    end: endReadable,
    get closed() {
      return closed;
    },
  };
}
