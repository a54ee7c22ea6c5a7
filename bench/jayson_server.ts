/**
 * A jayson (npm `jayson`) JSON-RPC 2.0 TCP server whose `echo` returns its
 * params: the peer `bench/rpc.ts` compares Rafter's server with. Runs
 * under Node once bundled (`deno bundle --platform node`; under Deno too).
 * Prints `listening on tcp://127.0.0.1:PORT`; exits when stdin closes.
 *
 * @module
 */

import jayson from "jayson";
import { serveUntilStdinCloses } from "./_rpc_driver.ts";

const server = new jayson.Server({
  echo: (
    params: unknown,
    callback: (error: unknown, result?: unknown) => void,
  ) => callback(null, params),
});
const tcp = server.tcp();
tcp.listen(0, "127.0.0.1", () => {
  const { port } = tcp.address() as { port: number };
  serveUntilStdinCloses(`tcp://127.0.0.1:${port}`, () => tcp.close());
});
