/**
 * A client process of `bench/rpc.ts`: one connection to an echo server,
 * driven by commands on stdin (`seq N`, `flood K MS`; see
 * `bench/_rpc_driver.ts`). Runs under Deno as it is and under Node once
 * bundled (`deno bundle --platform node`).
 *
 * - `raw URL`: a line echoed by a raw TCP echo server;
 * - `rafter URL [CA]`: `dial()` (`RpcConnection.call("echo", params)`),
 *   Deno's dialer under Deno, Node's (`node:net`) under Node; a `tls://`
 *   URL over TLS (`node:tls`) trusting the CA file `CA`;
 * - `rafter-connecttls URL CA` (Deno only): `dial()` over one
 *   `Deno.connectTls` stream, to compare it with `node:tls` on Deno;
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
import { denoDialer } from "../adapter/deno/tcp.ts";
import { nodeDialer } from "../adapter/node/tcp.ts";
import { streamOfConn } from "../rpc/transport/conn_stream.ts";
import { parseEndpointUrl } from "../rpc/transport/transport.ts";
import { readFileSync } from "node:fs";
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

const [kind, url, caFile] = scriptArgs();

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
      const tls = caFile === undefined ? {} : { caFile };
      const connection = await dial(url, {
        dialer: isDeno ? denoDialer(tls) : nodeDialer(tls),
      });
      return {
        call: async () => checkEcho(await connection.call("echo", PARAMS)),
        close: () => connection.close(),
      };
    }
    case "rafter-connecttls": {
      const deno = (globalThis as unknown as { Deno: typeof Deno }).Deno;
      const { hostname, port } = parseEndpointUrl(url);
      const conn = await deno.connectTls({
        hostname,
        port,
        caCerts: [readFileSync(caFile, "utf8")],
      });
      await conn.handshake();
      const stream = streamOfConn(conn, undefined);
      const connection = await dial(url, {
        dialer: () => Promise.resolve(stream),
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
