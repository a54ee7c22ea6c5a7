/**
 * Clock faults on real registry processes (issue 17): one node of a
 * 3-node cluster runs under libfaketime (Debian's `faketime` package,
 * preloaded into the real deno binary) while the others keep real time.
 * Leases are kept alive both by a registry client here (every TTL / 3)
 * and by a real hello server (`bindServer`); an idle lease shows when
 * the leader's clock ends a TTL.
 *
 * What libfaketime does to Deno (measured on Deno 2.9.6, x86_64 Linux):
 * - `FAKETIME="+1h"` moves `Date.now()` (CLOCK_REALTIME); with the
 *   default settings it moves `performance.now()` and the timers
 *   (CLOCK_MONOTONIC, read by V8 and tokio) too.
 * - A rate (`FAKETIME="+0 x2"`, `"+0 x0.5"`) speeds up or slows down
 *   `Date.now()`, `performance.now()` and `setTimeout`/`setInterval`
 *   alike: a 1000 ms timer fires after 0.5 s (x2) or 2 s (x0.5) of real
 *   time. That is a node whose oscillator runs fast or slow.
 * - A jump mid-run (`FAKETIME_TIMESTAMP_FILE` rewritten, with
 *   `FAKETIME_NO_CACHE=1`) moves the monotonic clock too unless
 *   `FAKETIME_DONT_FAKE_MONOTONIC=1`; a monotonic clock stepping back an
 *   hour stalls every timer for an hour, which no real kernel does. With
 *   `FAKETIME_DONT_FAKE_MONOTONIC=1` only the wall clock jumps — what an
 *   operator's `date -s` or an NTP step does — and that is what the jump
 *   test runs.
 *
 * The bounds these tests rest on (`registry/lease_keeper.ts`, "Clocks"):
 * Rafter times
 * leases, elections, keep-alives and health checks by each node's
 * monotonic clock, never the wall clock, so a wall-clock jump changes
 * nothing; linearizable reads are confirmed by a ReadIndex quorum round
 * and depend on no clock at all. A leader whose clock runs fast by a
 * factor r sees every TTL end after TTL / r of real time, so a server
 * keeping alive every TTL / 3 keeps its lease while r stays below 3 less
 * its keep-alive latency and retries (Rafter assumes r < 2); a slow
 * leader (r < 1) ends leases late, never early.
 *
 * Skipped, with a message, when libfaketime is not installed
 * (`apt-get install -y faketime`).
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { ConnectionPool } from "../stub/connection_pool.ts";
import { RegistryClient } from "../stub/registry_client/registry_client.ts";
import { dial } from "../rpc/transport/dial.ts";
import { RpcError } from "../rpc/errors.ts";
import {
  LEASE_NOT_FOUND,
  type LookupResult,
  type RegistryStatus,
} from "../protocol/registry.ts";

const FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const TICK_MS = 50;
const ELECTION_TICKS = 10;

/** Why libfaketime cannot fake this deno's clock, or null when it can. */
async function faketimeProblem(): Promise<string | null> {
  try {
    await Deno.stat(FAKETIME_LIB);
  } catch {
    return `${FAKETIME_LIB} is missing`;
  }
  const { stdout, success } = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "console.log(Date.now())"],
    env: { LD_PRELOAD: FAKETIME_LIB, FAKETIME: "+1h" },
    stdout: "piped",
    stderr: "null",
  }).output();
  const ahead = Number(new TextDecoder().decode(stdout)) - Date.now();
  if (!success || !(ahead > 3_500_000 && ahead < 3_700_000)) {
    return `libfaketime did not move deno's Date.now() by +1h (${ahead} ms)`;
  }
  return null;
}

const problem = await faketimeProblem();
if (problem !== null) {
  console.warn(
    `skipping the clock fault tests: ${problem}; install it with apt-get install -y faketime`,
  );
}

/** A wall-clock offset one process reads from a file it re-reads on every call. */
async function jumpingClock(): Promise<{
  env: Record<string, string>;
  set(offset: string): Promise<void>;
}> {
  const file = await Deno.makeTempFile({ prefix: `rafter-clock-${Deno.pid}-` });
  await Deno.writeTextFile(file, "+0\n");
  return {
    env: {
      LD_PRELOAD: FAKETIME_LIB,
      FAKETIME_TIMESTAMP_FILE: file,
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    },
    // Written whole by a rename, so the child never reads half a line.
    set: async (offset) => {
      await Deno.writeTextFile(`${file}.new`, `${offset}\n`);
      await Deno.rename(`${file}.new`, file);
    },
  };
}

/** The environment of a process whose clocks (wall, monotonic, timers) run at `rate`. */
function skewedClock(rate: number): Record<string, string> {
  return { LD_PRELOAD: FAKETIME_LIB, FAKETIME: `+0 x${rate}` };
}

/** Asserts that the environment of process `pid` carries libfaketime. */
async function assertFaked(pid: number): Promise<void> {
  const environ = await Deno.readTextFile(`/proc/${pid}/environ`);
  assert.ok(
    environ.split("\0").includes(`LD_PRELOAD=${FAKETIME_LIB}`),
    `process ${pid} does not run under libfaketime`,
  );
}

/**
 * Keeps a lease alive every `intervalMs` (real time, this process) and
 * records each failure. (A keep-alive still under way when the next is
 * due delays that one.)
 */
class KeepAliver {
  readonly failures: string[] = [];
  okCount = 0;
  lastOkAt = 0;
  #stopped = false;
  readonly done: Promise<void>;

  constructor(registry: RegistryClient, id: string, intervalMs: number) {
    this.done = (async () => {
      // At a fixed rate: one keep-alive every interval, however long the
      // previous one took (a slow answer does not push the next one back).
      const started = performance.now();
      for (let round = 1; !this.#stopped; round++) {
        const wait = started + round * intervalMs - performance.now();
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, wait)));
        if (this.#stopped) return;
        try {
          await registry.keepAlive(id, undefined, {
            deadlineMs: intervalMs,
            attemptTimeoutMs: Math.max(100, intervalMs / 3),
          });
          this.okCount++;
          this.lastOkAt = performance.now();
        } catch (error) {
          const code = error instanceof RpcError ? error.code : "-";
          this.failures.push(
            `[${code}] ${
              Math.round(performance.now() - this.lastOkAt)
            } ms after the last success: ${(error as Error).message}`,
          );
        }
      }
    })();
  }

  stop(): Promise<void> {
    this.#stopped = true;
    return this.done;
  }
}

/** A keep-alive failure that means the lease is gone. */
function lostLease(failures: readonly string[]): string[] {
  return failures.filter((failure) => failure.includes(`${LEASE_NOT_FOUND}`));
}

/** Time from now until lease `id` is gone (LEASE_NOT_FOUND), ms. */
async function expiryOf(
  registry: RegistryClient,
  id: string,
  ceilingMs: number,
): Promise<number> {
  const started = performance.now();
  await waitFor(
    async () => {
      try {
        await registry.timeToLive(id, { deadlineMs: 1_000 });
        return false;
      } catch (error) {
        return error instanceof RpcError && error.code === LEASE_NOT_FOUND;
      }
    },
    `lease ${id} to expire`,
    ceilingMs,
    20,
  );
  return performance.now() - started;
}

/** The lease of the one hello server bound (a linearizable lookup). */
async function helloLeaseOf(registry: RegistryClient): Promise<string> {
  const { endpoints } = await registry.lookup("hello");
  assert.equal(endpoints.length, 1, "one hello server is bound");
  assert.ok(endpoints[0].leaseId !== null);
  return endpoints[0].leaseId;
}

/** Makes `target` the leader (a leadership transfer when another leads). */
async function leadBy(
  cluster: LocalCluster,
  registry: RegistryClient,
  target: string,
): Promise<RegistryStatus> {
  if (await cluster.waitForLeader(20_000) !== target) {
    await registry.leaderTransfer({ to: target, timeoutMs: 5_000 });
  }
  return await waitFor(
    async () => {
      const status = await cluster.status(target);
      return status?.role === "leader" && await cluster.leader() === target
        ? status
        : null;
    },
    `${target} to lead`,
    20_000,
  );
}

/**
 * Runs `test` on a 3-node cluster (with a client of it) whose node n1 has
 * the environment `env`, n1 leading; stops whatever `test` leaves running.
 */
async function withFakedN1(
  env: Record<string, string>,
  test: (
    cluster: LocalCluster,
    registry: RegistryClient,
    keepers: KeepAliver[],
  ) => Promise<void>,
): Promise<void> {
  const cluster = new LocalCluster({
    tickMs: TICK_MS,
    electionTicks: ELECTION_TICKS,
    childEnv: (name) => name === "n1" ? env : undefined,
  });
  const pool = new ConnectionPool();
  let registry: RegistryClient | undefined;
  const keepers: KeepAliver[] = [];
  try {
    await cluster.startRegistry(3);
    await assertFaked(cluster.child("n1").pid);
    registry = new RegistryClient(cluster.registryUrls, pool);
    await test(cluster, registry, keepers);
  } finally {
    await Promise.all(keepers.map((keeper) => keeper.stop()));
    registry?.close();
    pool.close();
    await cluster.stop();
  }
}

Deno.test({
  name:
    "the leader's wall clock jumping +1h, back, and -1h neither expires a kept-alive lease nor delays an idle one's expiry",
  ignore: problem !== null,
  fn: async () => {
    const clock = await jumpingClock();
    await withFakedN1(clock.env, async (cluster, registry, keepers) => {
      const before = await leadBy(cluster, registry, "n1");
      const ttlMs = 3_000;
      await cluster.startHello("hello-1", ["--ttl-ms", String(ttlMs)]);
      const helloLease = await helloLeaseOf(registry);
      const kept = await registry.grantLease(ttlMs);
      const idle = await registry.grantLease(ttlMs);
      const grantedAt = performance.now();
      const keeper = new KeepAliver(registry, kept.id, ttlMs / 3);
      keepers.push(keeper);

      // The idle lease must expire about on time through every jump: a
      // forward jump must not end it early, a backward one not hold it.
      const expiry = expiryOf(registry, idle.id, 20_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await clock.set("+1h");
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await clock.set("+0");
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await clock.set("-1h");
      const idleMs = await expiry;
      const sinceGrant = performance.now() - grantedAt;
      console.log(
        `measured: idle lease (TTL ${ttlMs} ms) gone ${
          Math.round(sinceGrant)
        } ms after its grant (polled for ${Math.round(idleMs)} ms)`,
      );
      assert.ok(sinceGrant >= ttlMs - 100, `expired early: ${sinceGrant} ms`);
      assert.ok(
        sinceGrant <= ttlMs + 3_000,
        `expired late: ${sinceGrant} ms`,
      );

      // Two more TTLs of keep-alives, the wall clock an hour behind.
      await new Promise((resolve) => setTimeout(resolve, 2 * ttlMs));
      await clock.set("+1h");
      await new Promise((resolve) => setTimeout(resolve, ttlMs));
      await keeper.stop();
      const info = await registry.timeToLive(kept.id);
      assert.ok(info.remainingMs > 0, "the kept-alive lease expired");
      assert.deepEqual(keeper.failures, []);
      assert.ok(keeper.okCount >= 10, `only ${keeper.okCount} keep-alives`);
      assert.equal(await helloLeaseOf(registry), helloLease);
      const after = await cluster.status("n1");
      assert.equal(after?.role, "leader", "n1 lost leadership");
      assert.equal(after?.term, before.term, "an election happened");
    });
  },
});

for (const rate of [2, 0.5]) {
  Deno.test({
    name:
      `a node whose clocks run x${rate}, as leader and then as follower, lets no kept-alive lease expire`,
    ignore: problem !== null,
    fn: async () => {
      await withFakedN1(
        skewedClock(rate),
        async (cluster, registry, keepers) => {
          await leadBy(cluster, registry, "n1");
          const ttlMs = 2_000;
          const kept = await registry.grantLease(ttlMs);
          const keeper = new KeepAliver(registry, kept.id, ttlMs / 3);
          keepers.push(keeper);
          // And a real server (bindServer, keep-alives every TTL / 3).
          await cluster.startHello("hello-1", ["--ttl-ms", String(ttlMs)]);
          const helloLease = await helloLeaseOf(registry);

          // n1 leads and times the leases by its skewed clock: an idle lease
          // ends after TTL / rate of real time, the kept one lives on.
          const phase = async (expected: number, who: string) => {
            const idle = await registry.grantLease(ttlMs);
            const [idleMs] = await Promise.all([
              expiryOf(registry, idle.id, 20_000),
              new Promise((resolve) => setTimeout(resolve, 2 * ttlMs)),
            ]);
            console.log(
              `measured: ${who}: idle lease of TTL ${ttlMs} ms gone after ${
                Math.round(idleMs)
              } ms (expected ${expected} ms)`,
            );
            assert.ok(idleMs >= expected - 150, `expired early: ${idleMs} ms`);
            assert.ok(idleMs <= expected + 3_000, `expired late: ${idleMs} ms`);
          };
          await phase(ttlMs / rate, `n1 at x${rate} leads`);
          await registry.leaderTransfer({ to: "n2", timeoutMs: 5_000 });
          await waitFor(
            async () => await cluster.leader() === "n2",
            "n2 to lead",
            20_000,
          );
          await phase(ttlMs, `n1 at x${rate} follows`);
          await keeper.stop();
          assert.deepEqual(lostLease(keeper.failures), []);
          const info = await registry.timeToLive(kept.id);
          assert.ok(info.remainingMs > 0, "the kept-alive lease expired");
          assert.ok(keeper.okCount >= 8, `only ${keeper.okCount} keep-alives`);
          assert.equal(
            await helloLeaseOf(registry),
            helloLease,
            "the hello server lost its lease and bound again",
          );
          if (keeper.failures.length > 0) {
            console.log(`keep-alive retries: ${keeper.failures.join("; ")}`);
          }
        },
      );
    },
  });
}

/** Whether process `pid` owns the 127.0.0.1 TCP socket of local port `port` (Linux /proc). */
async function ownsPort(pid: number, port: number): Promise<boolean> {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const line of (await Deno.readTextFile("/proc/net/tcp")).split("\n")) {
    const fields = line.trim().split(/\s+/);
    if (fields[1] === `0100007F:${hex}`) inodes.add(`socket:[${fields[9]}]`);
  }
  if (inodes.size === 0) return false;
  for await (const fd of Deno.readDir(`/proc/${pid}/fd`)) {
    const link = await Deno.readLink(`/proc/${pid}/fd/${fd.name}`).catch(() =>
      ""
    );
    if (inodes.has(link)) return true;
  }
  return false;
}

/**
 * One process cut off from the others: every peer connection to or from
 * it through the {@link PeerRelay}s is closed, and new ones are closed as
 * they arrive (the others see it as unreachable, and it sees them so).
 */
interface Partition {
  /** The process cut off, or null while the network is whole. */
  isolated: number | null;
}

/** A relayed connection: the dialled one and, once made, the onward one. */
interface Link {
  conns: Deno.Conn[];
  /** The isolated process, when it dialled; else null. */
  from: number | null;
}

/**
 * A TCP relay on 127.0.0.1 in front of one node's peer port, through which
 * every other node reaches it; it tells which process dialled from the
 * connection's source port, so it can cut one process's links only.
 */
class PeerRelay {
  readonly port: number;
  readonly #listener: Deno.TcpListener;
  readonly #links = new Set<Link>();
  readonly #partition: Partition;
  /** The process behind this relay, once started. */
  target: number | null = null;

  constructor(targetPort: number, partition: Partition) {
    this.#partition = partition;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = this.#listener.addr.port;
    this.#serve(targetPort);
  }

  async #serve(targetPort: number): Promise<void> {
    try {
      for await (const conn of this.#listener) this.#relay(conn, targetPort);
    } catch {
      // The listener closed.
    }
  }

  async #relay(conn: Deno.Conn, targetPort: number): Promise<void> {
    const isolated = this.#partition.isolated;
    const from = isolated !== null &&
        await ownsPort(isolated, (conn.remoteAddr as Deno.NetAddr).port)
      ? isolated
      : null;
    const link: Link = { conns: [conn], from };
    this.#links.add(link);
    if (this.#blocked(link)) return this.#close(link);
    try {
      link.conns.push(
        await Deno.connect({ hostname: "127.0.0.1", port: targetPort }),
      );
    } catch {
      return this.#close(link);
    }
    if (this.#blocked(link)) return this.#close(link);
    const [a, b] = link.conns;
    await Promise.allSettled([
      a.readable.pipeTo(b.writable),
      b.readable.pipeTo(a.writable),
    ]);
    this.#close(link);
  }

  #blocked(link: { from: number | null }): boolean {
    const isolated = this.#partition.isolated;
    return isolated !== null &&
      (this.target === isolated || link.from === isolated);
  }

  #close(link: Link): void {
    this.#links.delete(link);
    for (const conn of link.conns) {
      try {
        conn.close();
      } catch {
        // Closed already (a pipe closes its ends).
      }
    }
  }

  /**
   * Applies the partition to the links open now. Links made before it
   * cannot be told apart by dialler (their source is known only when the
   * partition is set), so every one is closed and the nodes redial: the
   * new links of the isolated process are refused.
   */
  apply(): void {
    for (const link of [...this.#links]) this.#close(link);
  }

  /** Closes every link and stops listening. */
  close(): void {
    this.apply();
    this.#listener.close();
  }
}

Deno.test({
  name:
    "a leader whose clock runs slow, cut off while the majority elects and writes, serves no stale linearizable lookup",
  ignore: problem !== null,
  fn: async () => {
    // n1's clocks run at a fifth of real speed: by its own timers it leads
    // five times longer after it last heard a quorum (check-quorum counts
    // its ticks), so while the others have elected a new leader and
    // written, n1 still believes it leads. A read served on that belief
    // alone would be stale; a ReadIndex round cannot be confirmed.
    const rate = 0.2;
    const electionTicks = 20;
    const cluster = new LocalCluster({
      tickMs: TICK_MS,
      electionTicks,
      childEnv: (name) => name === "n1" ? skewedClock(rate) : undefined,
    });
    const relays: PeerRelay[] = [];
    const partition: Partition = { isolated: null };
    const pool = new ConnectionPool();
    let registry: RegistryClient | undefined;
    try {
      cluster.planRegistry(3);
      const ids = ["n1", "n2", "n3"];
      const port = (url: string) => Number(new URL(url).port);
      const at = (p: number) => `127.0.0.1:${p}`;
      // Every node reaches every other only through relays (the same
      // --peers everywhere, as the cluster id requires; each listens on
      // its own port with --peer-listen).
      for (const id of ids) {
        relays.push(new PeerRelay(port(cluster.peers.get(id)!), partition));
      }
      const peers = ids.map((id, i) => `${id}=${at(relays[i].port)}`).join(
        ",",
      );
      const secretFile = await cluster.secretFile();
      await Promise.all(
        ids.map(async (id, i) => {
          const child = await cluster.spawn(id, "registry/main.ts", [
            "--id",
            id,
            "--listen",
            at(port(cluster.registry.get(id)!)),
            "--peers",
            peers,
            "--peer-listen",
            at(port(cluster.peers.get(id)!)),
            "--cluster-secret-file",
            secretFile,
            "--data",
            await cluster.dataDirOf(id),
            "--tick-ms",
            String(TICK_MS),
            "--election-ticks",
            String(electionTicks),
          ], /listening on/);
          relays[i].target = child.pid;
        }),
      );
      await assertFaked(cluster.child("n1").pid);
      registry = new RegistryClient(cluster.registryUrls, pool);
      const before = await leadBy(cluster, registry, "n1");
      await registry.bind("before", { id: "b1", url: "tcp://127.0.0.1:9" });
      // A lease the majority revokes once n1 is cut off: n1 must not
      // renew it as if it still led (a keep-alive answered from its own
      // state alone would be stale, as a read would).
      await registry.grantLease(60_000, { id: "revoked-behind" });

      partition.isolated = cluster.child("n1").pid;
      for (const relay of relays) relay.apply();
      const cutAt = performance.now();
      const majority = new RegistryClient(
        [cluster.registry.get("n2")!, cluster.registry.get("n3")!],
        pool,
      );
      try {
        const elected = await waitFor(
          async () => {
            for (const id of ["n2", "n3"]) {
              const status = await cluster.status(id);
              if (status?.role === "leader" && status.term > before.term) {
                return status;
              }
            }
            return null;
          },
          "n2 or n3 to lead a new term",
          20_000,
        );
        const electedMs = performance.now() - cutAt;
        const written = await majority.bind("fresh", {
          id: "f1",
          url: "tcp://127.0.0.1:9",
        }, { deadlineMs: 20_000 });
        const wroteMs = performance.now() - cutAt;
        await majority.revokeLease("revoked-behind", { deadlineMs: 20_000 });
        const view = await cluster.status("n1");
        assert.equal(
          view?.role,
          "leader",
          `n1 no longer believes it leads ${
            Math.round(wroteMs)
          } ms after the cut; the test shows nothing`,
        );
        assert.equal(view?.term, before.term);

        const connection = await dial(cluster.registry.get("n1")!);
        try {
          // The control: n1's own state lacks the write.
          const local = await connection.call<LookupResult>(
            "registry.lookup",
            { name: "fresh", consistency: "serializable" },
            { timeoutMs: 2_000 },
          );
          assert.deepEqual(local.endpoints, []);
          const readAt = performance.now();
          const settle = <T>(call: Promise<T>) =>
            call.then(
              (result) => ({ result }),
              (error) => ({ error: error as Error }),
            );
          const [read, renewed] = await Promise.all([
            settle(connection.call<LookupResult>(
              "registry.lookup",
              { name: "fresh", consistency: "linearizable" },
              { timeoutMs: 20_000 },
            )),
            settle(connection.call(
              "lease.keepAlive",
              { id: "revoked-behind" },
              { timeoutMs: 20_000 },
            )),
          ]);
          const readMs = performance.now() - readAt;
          console.log(
            `measured: ${elected.id} elected ${
              Math.round(electedMs)
            } ms and the write on the majority done ${
              Math.round(wroteMs)
            } ms after the cut (revision ${written.revision}); n1 (x${rate}) answered the linearizable lookup in ${
              Math.round(readMs)
            } ms: ${
              "error" in read
                ? `error ${read.error.message}`
                : JSON.stringify(read.result)
            }`,
          );
          assert.ok(
            "error" in read,
            `n1 served a linearizable lookup without the majority's write: ${
              JSON.stringify("result" in read ? read.result : null)
            }`,
          );
          assert.ok(
            "error" in renewed,
            `n1 renewed a lease the majority had revoked: ${
              JSON.stringify("result" in renewed ? renewed.result : null)
            }`,
          );
        } finally {
          connection.close();
        }
      } finally {
        majority.close();
      }
    } finally {
      registry?.close();
      pool.close();
      for (const relay of relays) relay.close();
      await cluster.stop();
    }
  },
});
