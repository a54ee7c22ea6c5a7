/**
 * A hello server: serves `greet(name)` and binds itself in the registry as
 * `hello`. On SIGINT/SIGTERM it unbinds, then drains: calls under way are
 * answered and clients move to other servers, so no call is lost.
 *
 * ```sh
 * deno run -A examples/hello/server.ts --registry tcp://127.0.0.1:7001 --id hello-1
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  connect,
  INVALID_PARAMS,
  parseListenAddress,
  RpcError,
} from "../../mod.ts";
import { serve } from "../../deno.ts";

/** What `greet` returns: the greeting, and which server made it. */
export interface Greeting {
  greeting: string;
  server: string;
}

/** The hello service's method table, as a stub sees it. */
export interface Hello {
  greet(name: string): Greeting;
}

/**
 * The hello methods of server `id`.
 *
 * @example
 * ```ts
 * import { helloMethods } from "./server.ts";
 * console.log(helloMethods("hello-1").greet("Ada")); // { greeting: "Hello, Ada!", server: "hello-1" }
 * ```
 */
export function helloMethods(id: string): Hello {
  return {
    greet(name: unknown): Greeting {
      if (typeof name !== "string") {
        throw new RpcError(
          INVALID_PARAMS,
          "Invalid params: greet takes one string, the name to greet",
        );
      }
      return { greeting: `Hello, ${name}!`, server: id };
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      registry: { type: "string", default: "tcp://127.0.0.1:7001" },
      listen: { type: "string", default: "127.0.0.1:0" },
      id: { type: "string" },
      name: { type: "string", default: "hello" },
      "watch-stdin": { type: "boolean", default: false },
    },
  });
  const id = values.id ?? `hello-${Deno.pid}`;
  const served = serve({
    ...parseListenAddress(values.listen),
    methods: { ...helloMethods(id) },
  });
  const client = connect(values.registry.split(","));
  await client.bind(values.name, { id, url: served.url });
  console.log(`${id} serving on ${served.url}, bound as "${values.name}"`);

  const stopped = Promise.withResolvers<void>();
  Deno.addSignalListener("SIGINT", () => stopped.resolve());
  Deno.addSignalListener("SIGTERM", () => stopped.resolve());
  if (values["watch-stdin"]) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* until EOF */ }
      stopped.resolve();
    })();
  }
  await stopped.promise;
  await client.unbind(values.name, id, { deadlineMs: 3000 }).catch((error) =>
    console.error(`${id}: unbind failed: ${error.message}`)
  );
  client.close();
  await served.drain(5_000);
  console.log(`${id} stopped`);
  Deno.exit(0);
}

if (import.meta.main) await main();
