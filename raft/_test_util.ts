/**
 * Helpers shared by the tests of `raft/`, `registry/` and `stub/` (not part
 * of the public API): free ports, bounded polling, temp folders.
 *
 * @module
 */

export { delay, within } from "../rpc/_test_util.ts";

/**
 * `count` distinct TCP ports on 127.0.0.1 that were free a moment ago (each
 * found by binding port 0; all are held until every one is found, so they
 * differ).
 */
export function freePorts(count: number): number[] {
  const listeners = Array.from(
    { length: count },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const listener of listeners) listener.close();
  return ports;
}

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
