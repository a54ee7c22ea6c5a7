/**
 * A probe for `netns_e2e_test.ts`, run in one namespace of a chaos network
 * (`ip netns exec <ns> deno run -A _netns_probe.ts ADDRESS PORT`): it
 * listens on ADDRESS:PORT for TCP and for UDP, prints `{"ready":true}`,
 * then answers one JSON line per command read from stdin:
 * - `{"op":"connect","host":H,"port":P,"timeoutMs":T}` → `{"ok":bool}`
 *   (a TCP connection to H:P established within T ms);
 * - `{"op":"send","host":H,"port":P,"text":S}` → `{"sent":true}` (one
 *   UDP datagram);
 * - `{"op":"received"}` → `{"received":[S, …]}` (every datagram so far).
 *
 * It exits when stdin closes.
 *
 * @module
 */

import dgram from "node:dgram";

const [address, portText] = Deno.args;
const port = Number(portText);
const listener = Deno.listen({ hostname: address, port });
(async () => {
  for await (const conn of listener) conn.close();
})().catch(() => {});
const received: string[] = [];
const socket = dgram.createSocket("udp4");
socket.on("message", (message: Uint8Array) => {
  received.push(new TextDecoder().decode(message));
});
await new Promise<void>((resolve) => socket.bind(port, address, resolve));

const print = (value: unknown) => console.log(JSON.stringify(value));
print({ ready: true });

async function connect(host: string, port: number, timeoutMs: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const attempt = Deno.connect({ hostname: host, port });
  try {
    const conn = await Promise.race([
      attempt,
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), timeoutMs);
      }),
    ]);
    if (conn === null) {
      attempt.then((c) => c.close(), () => {});
      return false;
    }
    conn.close();
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

let rest = "";
for await (
  const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())
) {
  const lines = (rest + text).split("\n");
  rest = lines.pop()!;
  for (const line of lines) {
    if (line.trim() === "") continue;
    const command = JSON.parse(line);
    if (command.op === "connect") {
      print({
        ok: await connect(command.host, command.port, command.timeoutMs),
      });
    } else if (command.op === "send") {
      await new Promise<void>((resolve, reject) =>
        socket.send(
          command.text,
          command.port,
          command.host,
          (error: Error | null) => error ? reject(error) : resolve(),
        )
      );
      print({ sent: true });
    } else if (command.op === "received") {
      print({ received });
    } else {
      print({ error: `unknown op ${command.op}` });
    }
  }
}
socket.close();
listener.close();
Deno.exit(0);
