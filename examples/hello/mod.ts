/**
 * The hello service: `server.ts` serves `greet(name)` and binds itself in
 * the registry as `hello`; `client.ts` calls it through a cluster stub.
 *
 * ```sh
 * deno run -A examples/hello/server.ts --registry tcp://127.0.0.1:7001 --id hello-1
 * deno run -A examples/hello/client.ts --registry tcp://127.0.0.1:7001 --count 5
 * ```
 *
 * @module
 */

export { type Greeting, type Hello, helloMethods } from "./server.ts";
