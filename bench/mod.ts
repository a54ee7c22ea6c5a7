/**
 * Benchmarks, each a script that prints a table comparing paths side by side
 * in one run (the machine is noisy, so ratios matter more than absolutes):
 *
 * - `main.ts` (`deno task bench [scenario…] [--quick] [--out FILE]`): the
 *   suite's one entry point. It runs issue 9's nine scenarios (`rtt`,
 *   `throughput`, `codec`, `stub`, `writes`, `reads`, `leases`, `failover`,
 *   `scale`), each script in its own process, prints their tables, and
 *   exits 1 when a scenario produced no number; `--quick` is CI's smoke
 *   test. `_report.ts` is what the scripts share: tables as Markdown and
 *   JSON, medians of alternating rounds, CPU and RSS of processes.
 * - `echo_server.ts`: the raw TCP echo server `rpc.ts` measures as the floor.
 * - `rpc.ts` (`deno task bench:rpc`, `--quick`, `--scenarios rtt,throughput`):
 *   issue 9's `rtt` and `throughput`: an echo through raw TCP and Rafter
 *   under Deno and under Node, jayson (stock client and kept-open) and
 *   grpc-js, sequential p50/p99 and 64 in flight on 1 and 4 connections,
 *   every client and server its own process (`rpc_server.ts`,
 *   `rpc_client.ts`, `jayson_server.ts`, `jayson_client.ts`,
 *   `grpc_server.ts`, `grpc_client.ts`, `echo.proto`; the Node ones run
 *   bundled with `deno bundle --platform node`).
 * - `registry.ts` (`deno task bench:registry`, `--quick` for a short run): a
 *   3-node registry under 1 and 64 concurrent clients: `registry.bind`,
 *   `lease.keepAlive`, linearizable and serializable `registry.lookup`,
 *   bind with `grant` (ops/s, p50, p99, p99.9, errors, CPU of the bench and
 *   of each node), watch fan-out: the time until 1,000 (and 64)
 *   watchers have seen one bind, and binds over TLS (mutual TLS between
 *   members) and TLS + `--auth` beside plain, as ratios.
 * - `raft_commit.ts` (`deno task bench:raft`, `--quick` for a short run): a
 *   3-node `RaftNode` cluster in one process, fsync on, 1 and 64 concurrent
 *   proposers, the WAL's group commit on and off (commits/s, p50, p99,
 *   fdatasyncs per commit), and the WAL alone.
 * - `stub.ts` (`deno task bench:stub`, `--quick` for a short run): the
 *   cluster stub's overhead over a plain connection with each built-in
 *   distributor, sequential and with concurrent callers, and every
 *   distributor under one slow server of 3 (calls/s, p50, p99, p99.9, the
 *   slow server's share).
 * - `codec.ts` (`deno task bench:codec`): JSON vs CBOR, 1 KiB and 64 KiB
 *   params: calls/s and bytes on the wire.
 * - `registry_etcd.ts` (`deno task bench:etcd`): Rafter's registry side by
 *   side with a 3-member etcd (Debian's `etcd-server`, installed by the
 *   bench when missing; native gRPC through `etcd3` and the JSON gateway):
 *   writes, reads, leases and fail-over, both with fsync on and equal
 *   heartbeat and election timeouts.
 * - `scale.ts` (`deno task bench:scale`, `--quick` for a short run): a
 *   3-node registry filled to 1, 1k and 10k endpoints under one name and
 *   100k names: RSS of each node, lookup p50/p99 and bytes per answer;
 *   client RSS with a 10k-endpoint cluster map; watch fan-out to 1,000
 *   watchers.
 *
 * @module
 */

export {};
