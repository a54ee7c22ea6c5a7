/**
 * Rafter: clustered JSON-RPC 2.0 over TCP. Servers bind under a service
 * name in a Raft-replicated registry; clients get the stubs list, keep a
 * local cluster map, and pick a server per call with a distributor.
 *
 * This module is edge-safe: the RPC layer (messages, framing, connections,
 * the server method table) and the cluster stubs, using Web-standard APIs
 * only (TCP through `Deno.connect` by default, or a dialer you pass).
 * Registry nodes come from `@rafter/rpc/registry`, the consensus library
 * from `@rafter/rpc/raft`.
 *
 * @example Call a service bound in the registry
 * ```ts ignore
 * import { connect } from "@rafter/rpc";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect(["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002", "tcp://127.0.0.1:7003"]);
 * const hello = client.stub<Hello>("hello");
 * console.log((await hello.greet("Ada")).greeting);
 * client.close();
 * ```
 *
 * @module
 */

export * from "./rpc/errors.ts";
export * from "./rpc/message.ts";
export * from "./rpc/transport.ts";
export * from "./rpc/ndjson.ts";
export * from "./rpc/codec.ts";
export * from "./rpc/dispatcher.ts";
export * from "./rpc/method.ts";
export * from "./rpc/standard_schema.ts";
export * from "./rpc/server_connection.ts";
export * from "./rpc/connection.ts";
export * from "./rpc/dial.ts";
export * from "./stub/mod.ts";
export * from "./registry/protocol.ts";
