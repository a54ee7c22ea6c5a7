/**
 * A grpc-js (npm `@grpc/grpc-js`) server with a unary `Echo` loaded from
 * `bench/echo.proto` with `@grpc/proto-loader`: the gRPC peer of
 * `bench/rpc.ts`. Runs under Node once bundled (`deno bundle --platform
 * node`). Prints `listening on tcp://127.0.0.1:PORT`; exits when stdin
 * closes.
 *
 * ```sh
 * node /tmp/grpc_server.mjs /path/to/bench/echo.proto
 * ```
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import { scriptArgs, serveUntilStdinCloses } from "./_rpc_driver.ts";
import { echoService } from "./_grpc_echo.ts";

const [protoPath] = scriptArgs();
const server = new grpc.Server();
server.addService(echoService(protoPath).service, {
  Echo: (
    call: grpc.ServerUnaryCall<unknown, unknown>,
    callback: grpc.sendUnaryData<unknown>,
  ) => callback(null, call.request),
});
server.bindAsync(
  "127.0.0.1:0",
  grpc.ServerCredentials.createInsecure(),
  (error, port) => {
    if (error) throw error;
    serveUntilStdinCloses(
      `tcp://127.0.0.1:${port}`,
      () => server.forceShutdown(),
    );
  },
);
