/**
 * A grpc-js client (one channel, so one HTTP/2 connection) calling the
 * unary `Echo` of `bench/echo.proto`, as a client process of
 * `bench/rpc.ts` driven by commands on stdin (see `bench/_rpc_driver.ts`).
 * Runs under Node once bundled (`deno bundle --platform node`).
 *
 * ```sh
 * node /tmp/grpc_client.mjs /path/to/bench/echo.proto tcp://127.0.0.1:7001
 * ```
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import { echoService } from "./_grpc_echo.ts";
import {
  driveCalls,
  echoThroughCallback,
  hostPort,
  PARAMS,
  scriptArgs,
} from "./_rpc_driver.ts";

const [protoPath, url] = scriptArgs();

await driveCalls(async () => {
  const { host, port } = hostPort(url);
  const EchoService = echoService(protoPath);
  const client = new EchoService(
    `${host}:${port}`,
    grpc.credentials.createInsecure(),
  );
  await new Promise<void>((resolve, reject) =>
    client.waitForReady(
      Date.now() + 5_000,
      (error) => error ? reject(error) : resolve(),
    )
  );
  const echo = client.Echo.bind(client) as (
    request: unknown,
    callback: (error: unknown, reply: unknown) => void,
  ) => void;
  return {
    call: () => echoThroughCallback((done) => echo(PARAMS, done)),
    close: () => client.close(),
  };
});
