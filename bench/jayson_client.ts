/**
 * jayson's stock TCP client (`jayson.Client.tcp({ host, port })`, default
 * options) as a client process of `bench/rpc.ts`, driven by commands on
 * stdin (see `bench/_rpc_driver.ts`). Its default is one new TCP
 * connection per request, closed once the answer is in (jayson 5's
 * `ClientTcp._request` calls `net.connect` per request). Runs under Node
 * once bundled (`deno bundle --platform node`).
 *
 * ```sh
 * node /tmp/jayson_client.mjs tcp://127.0.0.1:7001
 * ```
 *
 * @module
 */

import jayson from "jayson";
import {
  driveCalls,
  echoThroughCallback,
  hostPort,
  PARAMS,
  scriptArgs,
} from "./_rpc_driver.ts";

const [url] = scriptArgs();

await driveCalls(() => {
  const client = jayson.Client.tcp(hostPort(url));
  return Promise.resolve({
    call: () =>
      echoThroughCallback((done) =>
        client.request(
          "echo",
          PARAMS,
          (error: unknown, response?: { result?: unknown }) =>
            done(error, response?.result),
        )
      ),
    close: () => {},
  });
});
