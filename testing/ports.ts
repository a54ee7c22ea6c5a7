/**
 * Free TCP ports on 127.0.0.1 for the servers and processes a test starts.
 *
 * @module
 */

/**
 * `count` distinct TCP ports on 127.0.0.1 that were free a moment ago: tried
 * from a random point of 20000..32000 (below the ephemeral range), all held
 * until every one is found, never the same port twice in one process, nor
 * (for 15 minutes) in two test processes or workers.
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
      if (handedOut.has(port) || !reserve(port)) continue;
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

/**
 * Claims `port` for this test run across processes and test workers (each
 * `deno test --parallel` worker has its own module state, and the test
 * processes their own): a file created exclusively in a shared folder.
 * Without it two test files could each find a port free, hand it out,
 * and one of their servers fail with AddrInUse. A claim older than
 * {@link CLAIM_MS} is stale (its run is over) and is taken over.
 */
function reserve(port: number): boolean {
  const path = `${CLAIMS_DIR}/${port}`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      Deno.mkdirSync(CLAIMS_DIR, { recursive: true });
      Deno.writeFileSync(path, new Uint8Array(), { createNew: true });
      return true;
    } catch (error) {
      if (!(error instanceof Deno.errors.AlreadyExists)) return true;
      try {
        const age = Date.now() - (Deno.statSync(path).mtime?.getTime() ?? 0);
        if (age < CLAIM_MS) return false;
        Deno.removeSync(path);
      } catch {
        return false; // another process took it over just now
      }
    }
  }
  return false;
}

/** Where {@link reserve} keeps its claims. */
const CLAIMS_DIR = `${Deno.env.get("TMPDIR") ?? "/tmp"}/rafter-test-ports-${
  (() => {
    try {
      return Deno.uid() ?? "user";
    } catch {
      return "user"; // no --allow-sys: one folder for every user
    }
  })()
}`;
/** How long a claim holds, ms: longer than any test file runs. */
const CLAIM_MS = 15 * 60_000;

const FREE_PORT_MIN = 20_000;
const FREE_PORT_MAX = 32_000;
/** Ports this process handed out already (never handed out twice). */
const handedOut = new Set<number>();
