/**
 * A minimal newline-delimited client (private to `bench/`): sends a line,
 * gets one line back per line, in order. The raw TCP echo's client, and
 * the kept-open client of any NDJSON JSON-RPC server (jayson's, Rafter's).
 * On Deno it uses `Deno.connect`; on Node, `node:net`. Lines sent in the
 * same turn of the event loop (or while a write is under way) go out in
 * one write, as Rafter's own writer does, so that with many calls in
 * flight the raw TCP row stays a ceiling and not a client's syscall count.
 *
 * @module
 */

import { connect } from "node:net";
import { hostPort, isDeno } from "./_rpc_driver.ts";

/** One kept-open connection carrying lines. */
export interface LineClient {
  /** Sends `line` (without its newline); resolves with the answer line. */
  call(line: string): Promise<string>;
  close(): void;
}

/** Opens a {@linkcode LineClient} to `tcp://host:port`, Nagle off. */
export function openLineClient(url: string): Promise<LineClient> {
  return isDeno ? openDeno(url) : openNode(url);
}

/**
 * Lines to send, joined into one write per microtask turn (and while the
 * previous write is under way): `write` gets the joined text.
 */
class Outbox {
  #pending: string[] = [];
  #scheduled = false;
  readonly #write: (text: string) => Promise<void> | void;

  constructor(write: (text: string) => Promise<void> | void) {
    this.#write = write;
  }

  add(line: string): void {
    this.#pending.push(line, "\n");
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => this.#flush());
  }

  async #flush(): Promise<void> {
    try {
      for (let i = 0; i < 1_000_000 && this.#pending.length > 0; i++) {
        const text = this.#pending.join("");
        this.#pending = [];
        await this.#write(text);
      }
    } catch {
      // Closed: the reads end, the calls stay unanswered.
    } finally {
      this.#scheduled = false;
    }
  }
}

/** Answers waiting for lines, and the text of a line not yet complete. */
class Lines {
  #buffer = "";
  readonly #waiting: ((line: string) => void)[] = [];

  wait(): Promise<string> {
    return new Promise<string>((resolve) => this.#waiting.push(resolve));
  }

  push(text: string): void {
    this.#buffer += text;
    let end: number;
    while ((end = this.#buffer.indexOf("\n")) !== -1) {
      const line = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 1);
      this.#waiting.shift()?.(line);
    }
  }
}

async function openDeno(url: string): Promise<LineClient> {
  const { host, port } = hostPort(url);
  const conn = await Deno.connect({ hostname: host, port });
  conn.setNoDelay(true);
  const lines = new Lines();
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  (async () => {
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await conn.read(chunk);
        if (n === null) return;
        lines.push(decoder.decode(chunk.subarray(0, n), { stream: true }));
      }
    } catch {
      // Closed.
    }
  })();
  const outbox = new Outbox(async (text) => {
    const bytes = encoder.encode(text);
    for (let sent = 0; sent < bytes.length;) {
      sent += await conn.write(bytes.subarray(sent));
    }
  });
  return {
    call(line) {
      const answer = lines.wait();
      outbox.add(line);
      return answer;
    },
    close: () => conn.close(),
  };
}

function openNode(url: string): Promise<LineClient> {
  const { host, port } = hostPort(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    socket.setEncoding("utf8");
    const lines = new Lines();
    socket.on("data", (text: string) => lines.push(text));
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.off("error", reject);
      socket.on("error", () => {/* the reads end */});
      const outbox = new Outbox((text) => {
        socket.write(text);
      });
      resolve({
        call(line) {
          const answer = lines.wait();
          outbox.add(line);
          return answer;
        },
        close: () => socket.destroy(),
      });
    });
  });
}
