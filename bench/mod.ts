/**
 * Benchmarks, each a script that prints a table comparing paths side by side
 * in one run (the machine is noisy, so ratios matter more than absolutes):
 *
 * - `ping.ts` (`deno task bench`): 10,000 sequential `rpc.ping` round trips
 *   over raw TCP, a plain connection and a cluster stub; average, p50, p99.
 * - `echo_server.ts`: the raw TCP line echo server `ping.ts` measures as the
 *   floor.
 *
 * @module
 */

export {};
