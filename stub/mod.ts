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
export * from "./cluster_map.ts";
export * from "./cluster_stub.ts";
export * from "./connection_pool.ts";
export * from "./distributor.ts";
export * from "./registry_client.ts";
export * from "./distributors/mod.ts";
export * from "./watch.ts";
export * from "./bind_server.ts";
export * from "./endpoint_health.ts";
export * from "./retry_budget.ts";
export * from "./call_errors.ts";
