/**
 * Free TCP ports on 127.0.0.1 for the servers and processes a test starts.
 *
 * @module
 */

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
