/**
 * Deno adapters: the TCP server (`serve`) and the TCP dialer that the rest
 * of Rafter uses by default under Deno. Kept out of the edge-safe `mod.ts`,
 * as Hono keeps its runtime adapters at the edge of the code.
 *
 * @example Serve a method table and bind it in the registry
 * ```ts ignore
 * import { serve } from "@rafter/rpc/deno";
 * import { connect } from "@rafter/rpc";
 * const server = serve({ hostname: "127.0.0.1", port: 0, methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect("tcp://127.0.0.1:7001");
 * await client.bind("hello", { id: "hello-1", url: server.url });
 * ```
 *
 * @module
 */

export * from "./rpc/serve.ts";
export * from "./rpc/deno_tcp.ts";
