/**
 * An echo server of `bench/rpc.ts`, under Deno as it is and under Node
 * once bundled (`deno bundle --platform node`): `rafter` is Rafter's
 * `serve()` (the Deno adapter under Deno, the Node adapter under Node,
 * default options) with an `echo` method returning its params; `raw`
 * (Node only) echoes every byte back on `node:net`, the floor (Deno's raw
 * echo is `bench/echo_server.ts`); `rafter-tls CERT KEY` is `rafter` with
 * TLS (`serve({ tls: { certFile, keyFile } })`). Prints `listening on
 * tcp://127.0.0.1:PORT` (`tls://` for TLS); exits when stdin closes.
 *
 * ```sh
 * deno run -A bench/rpc_server.ts rafter
 * node /tmp/rpc_server.mjs raw
 * ```
 *
 * @module
 */

import { createServer } from "node:net";
import { serve as serveDeno } from "../adapter/deno/serve.ts";
// The CBOR codec, as in rpc_client.ts, so both bundles carry the same code.
import "../rpc/codec/cbor.ts";
import { serve as serveNode } from "../adapter/node/serve.ts";
import { isDeno, scriptArgs, serveUntilStdinCloses } from "./_rpc_driver.ts";

const methods = { echo: (value: unknown) => value };

const [kind, certFile, keyFile] = scriptArgs();
if (kind === "raw" && !isDeno) {
  const server = createServer({ noDelay: true }, (socket) => {
    socket.on("data", (chunk) => socket.write(chunk));
    socket.on("error", () => socket.destroy());
  });
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { port: number };
    serveUntilStdinCloses(`tcp://127.0.0.1:${port}`, () => server.close());
  });
} else if (kind === "rafter" || kind === "rafter-tls") {
  const options = kind === "rafter"
    ? { methods }
    : { methods, tls: { certFile, keyFile } };
  const server = isDeno ? serveDeno(options) : await serveNode(options);
  serveUntilStdinCloses(server.url, () => server.close());
} else {
  throw new Error(
    `usage: rpc_server.ts rafter, rafter-tls CERT KEY, or raw under Node (got "${kind}")`,
  );
}
