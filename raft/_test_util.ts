/**
 * Helpers shared by the tests of `raft/`, `registry/` and `stub/` (not part
 * of the public API): free ports, bounded polling, temp folders.
 *
 * @module
 */

export { delay, within } from "../rpc/_test_util.ts";

/**
 * `count` distinct TCP ports on 127.0.0.1 that were free a moment ago: tried
 * from a random point of 20000..32000 (below the ephemeral range), all held
 * until every one is found, never the same port twice in one process.
 *
 * @throws {Error} when the range has fewer than `count` free ports.
 */
export function freePorts(count: number): number[] {
  const listeners: Deno.Listener[] = [];
  try {
    // Below the kernel's ephemeral range (32768-60999 on Linux), which
    // port-0 servers and outgoing connections draw from: a port handed out
    // here is not taken by one of those before its user binds it.
    const span = FREE_PORT_MAX - FREE_PORT_MIN;
    let port = FREE_PORT_MIN + Math.floor(Math.random() * span);
    for (let tries = 0; listeners.length < count && tries < span; tries++) {
      port = port + 1 >= FREE_PORT_MAX ? FREE_PORT_MIN : port + 1;
      if (handedOut.has(port)) continue;
      try {
        listeners.push(Deno.listen({ hostname: "127.0.0.1", port }));
        handedOut.add(port);
      } catch {
        // In use: the next one.
      }
    }
    if (listeners.length < count) {
      throw new Error(
        `no ${count} free ports in ${FREE_PORT_MIN}..${FREE_PORT_MAX}`,
      );
    }
    return listeners.map((l) => (l.addr as Deno.NetAddr).port);
  } finally {
    for (const listener of listeners) listener.close();
  }
}

const FREE_PORT_MIN = 20_000;
const FREE_PORT_MAX = 32_000;
/** Ports this process handed out already (never handed out twice). */
const handedOut = new Set<number>();

/**
 * Polls `condition` every `intervalMs` until it returns a truthy value and
 * returns that value.
 *
 * @throws {Error} naming `what` when `timeoutMs` passes first.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  what: string,
  timeoutMs = 5_000,
  intervalMs = 10,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (let round = 0; round < 100_000; round++) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * Makes a temp folder, runs `fn` with it, and removes it afterwards.
 */
export async function withTempDir<T>(
  fn: (dir: string) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_test_" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A cluster secret for tests (32 characters or more). */
export const TEST_SECRET = "test-cluster-secret-0123456789abcdef";
