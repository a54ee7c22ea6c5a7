/**
 * A minimal newline-delimited client (private to `bench/`): sends a line,
 * gets one line back per line, in order. The raw TCP echo's client, and
 * the kept-open client of any NDJSON JSON-RPC server (jayson's, Rafter's).
 * On Deno it uses `Deno.connect`; on Node, `node:net`.
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
  let writing = Promise.resolve();
  const writeAll = async (bytes: Uint8Array) => {
    for (let sent = 0; sent < bytes.length;) {
      sent += await conn.write(bytes.subarray(sent));
    }
  };
  return {
    call(line) {
      const answer = lines.wait();
      const bytes = encoder.encode(line + "\n");
      writing = writing.then(() => writeAll(bytes));
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
      resolve({
        call(line) {
          const answer = lines.wait();
          socket.write(line + "\n");
          return answer;
        },
        close: () => socket.destroy(),
      });
    });
  });
}
