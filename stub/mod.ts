/**
 * Cluster stubs: the client side of Rafter. `connect()` gives a client that
 * talks to the registry cluster (trying its URLs in turn, following leader
 * hints), keeps a cluster map per service name, and hands out typed stubs
 * whose calls go to a server chosen by a distributor, failing over when a
 * server dies. Web-standard only, so it runs in edge workers given a dialer.
 *
 * @example
 * ```ts ignore
 * import { connect, roundRobin } from "./mod.ts";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect(["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"]);
 * const hello = client.stub<Hello>("hello", { distributor: roundRobin() });
 * console.log(await hello.greet("Ada"));
 * client.close();
 * ```
 *
 * @module
 */

export * from "./client.ts";
export * from "./cluster_map/cluster_map.ts";
export * from "./call/cluster_stub.ts";
export * from "./connection_pool.ts";
export * from "./distributors/distributor.ts";
export * from "./registry_client/registry_client.ts";
export * from "./distributors/mod.ts";
export * from "./registry_client/watch.ts";
export * from "./binding/bind_server.ts";
export * from "./cluster_map/endpoint_health.ts";
export * from "./call/retry_budget.ts";
export * from "./call/call_errors.ts";
