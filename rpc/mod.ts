/**
 * The JSON-RPC 2.0 protocol layer of Rafter, shared by everything above it:
 *
 * - messages: request and response shapes, validation, error codes
 *   (`errors.ts`, `message.ts`);
 * - framing: newline-delimited JSON (`ndjson.ts`), length-prefixed CBOR (the
 *   `codec` option, `codec.ts`; a server hears both on one port) and a
 *   coalescing frame writer (`frame_writer.ts`);
 * - the client: {@link RpcConnection}, many concurrent calls multiplexed over
 *   one connection, opened with {@link dial};
 * - the server: a method table and its dispatch (`dispatcher.ts`), methods
 *   that get their call's deadline and cancellation ({@link withContext}) or
 *   validate their params with a Standard Schema ({@link method}), one
 *   connection served with {@link serveStream}, a TCP server with
 *   {@link serve};
 * - transports: the {@link ByteStream} abstraction, `tcp://` URLs, and the
 *   Deno TCP adapter ({@link denoTcpDialer}).
 *
 * Everything here is Web-standard (runs in edge workers) except the Deno
 * adapters `serve.ts` and `deno_tcp.ts`, which call `Deno.*` only when used.
 *
 * @example
 * ```ts ignore
 * import { dial, serve } from "./mod.ts";
 * const server = serve({ methods: { add: (a: number, b: number) => a + b } });
 * const connection = await dial(server.url);
 * console.log(await connection.call("add", [1, 2])); // 3
 * connection.close();
 * await server.close();
 * ```
 *
 * @module
 */

export * from "./errors.ts";
export * from "./message.ts";
export * from "./transport.ts";
export * from "./ndjson.ts";
export * from "./codec.ts";
export * from "./frame_writer.ts";
export * from "./dispatcher.ts";
export * from "./method.ts";
export * from "./standard_schema.ts";
export * from "./server_connection.ts";
export * from "./connection.ts";
export * from "./dial.ts";
export * from "./serve.ts";
export * from "./deno_tcp.ts";
