/**
 * End-to-end tests that start real processes (`deno run` registry nodes and
 * hello servers on 127.0.0.1) and kill them: the demo's failover scenario,
 * the demo program itself (run to its end, and interrupted), and a 3-node
 * registry's redirects, durability across SIGKILL and handling of bad input,
 * and its peer port: forged Raft traffic refused, a node with another
 * cluster secret kept out, unreachable peers reported.
 * Unit tests sit beside their modules (`*_test.ts`).
 *
 * @module
 */

export {};
