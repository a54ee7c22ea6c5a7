/**
 * A client process of `bench/rpc.ts`: one connection to an echo server,
 * driven by commands on stdin (`seq N`, `flood K MS`; see
 * `bench/_rpc_driver.ts`). Runs under Deno as it is and under Node once
 * bundled (`deno bundle --platform node`).
 *
 * - `raw URL`: a line echoed by a raw TCP echo server;
 * - `rafter URL`: `dial()` (`RpcConnection.call("echo", params)`), Deno's
 *   TCP dialer under Deno, Node's (`node:net`) under Node;
 * - `line URL`: JSON-RPC 2.0 `echo` over one kept-open NDJSON connection
 *   (jayson's or Rafter's server), the minimal client.
 *
 * ```sh
 * deno run -A bench/rpc_client.ts rafter tcp://127.0.0.1:7001
 * ```
 *
 * @module
 */

import { dial } from "../rpc/transport/dial.ts";
import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import { nodeTcpDialer } from "../adapter/node/tcp.ts";
import "../rpc/codec/cbor.ts";
import { openLineClient } from "./_line_client.ts";
import {
  type Call,
  checkEcho,
  driveCalls,
  isDeno,
  PARAMS,
  scriptArgs,
} from "./_rpc_driver.ts";

const [kind, url] = scriptArgs();

async function open(): Promise<{ call: Call; close(): void }> {
  switch (kind) {
    case "raw": {
      const client = await openLineClient(url);
      return {
        call: async (i) => {
          const line = JSON.stringify({ id: i, params: PARAMS });
          if (await client.call(line) !== line) throw new Error("bad echo");
        },
        close: () => client.close(),
      };
    }
    case "rafter": {
      const connection = await dial(url, {
        dialer: isDeno ? denoTcpDialer : nodeTcpDialer,
      });
      return {
        call: async () => checkEcho(await connection.call("echo", PARAMS)),
        close: () => connection.close(),
      };
    }
    case "line": {
      const client = await openLineClient(url);
      return {
        call: async (i) => {
          const answer = JSON.parse(
            await client.call(
              JSON.stringify({
                jsonrpc: "2.0",
                id: i,
                method: "echo",
                params: PARAMS,
              }),
            ),
          );
          if (answer.id !== i) throw new Error(`bad id in ${answer}`);
          checkEcho(answer.result);
        },
        close: () => client.close(),
      };
    }
    default:
      throw new Error(
        `usage: rpc_client.ts raw|rafter|line tcp://HOST:PORT (got "${kind}")`,
      );
  }
}

await driveCalls(open);
