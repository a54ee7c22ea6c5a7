/**
 * An echo server of `bench/rpc.ts`, under Deno as it is and under Node
 * once bundled (`deno bundle --platform node`): `rafter` is Rafter's
 * `serve()` (the Deno adapter under Deno, the Node adapter under Node,
 * default options) with an `echo` method returning its params; `raw`
 * (Node only) echoes every byte back on `node:net`, the floor (Deno's raw
 * echo is `bench/echo_server.ts`). Prints `listening on
 * tcp://127.0.0.1:PORT`; exits when stdin closes.
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
import { serve as serveNode } from "../adapter/node/serve.ts";
import { isDeno, scriptArgs, serveUntilStdinCloses } from "./_rpc_driver.ts";

const methods = { echo: (value: unknown) => value };

const [kind] = scriptArgs();
if (kind === "raw" && !isDeno) {
  const server = createServer({ noDelay: true }, (socket) => {
    socket.on("data", (chunk) => socket.write(chunk));
    socket.on("error", () => socket.destroy());
  });
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { port: number };
    serveUntilStdinCloses(`tcp://127.0.0.1:${port}`, () => server.close());
  });
} else if (kind === "rafter") {
  const server = isDeno ? serveDeno({ methods }) : await serveNode({ methods });
  serveUntilStdinCloses(server.url, () => server.close());
} else {
  throw new Error(
    `usage: rpc_server.ts rafter, or raw under Node (got "${kind}")`,
  );
}
