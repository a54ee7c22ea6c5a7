/**
 * The hello server's start, as a user meets it: a busy port is one line
 * and exit 1 (no stack trace), and the registry comes from `--registry`,
 * else `$RAFTER_REGISTRY`, else the default.
 */

import assert from "node:assert/strict";
import { startRegistryNode } from "../registry/main.ts";
import { waitFor } from "../testing/time.ts";
import { connect } from "../adapter/deno/mod.ts";

const SERVER = new URL("../examples/hello/server.ts", import.meta.url).pathname;

/** The hello server as a child process, its output gathered. */
function spawnHello(args: string[], env: Record<string, string> = {}) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SERVER, ...args, "--watch-stdin"],
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stdout = "";
  let stderr = "";
  const decoder = () => new TextDecoder();
  const drain = (
    stream: ReadableStream<Uint8Array>,
    add: (text: string) => void,
  ) => {
    const decode = decoder();
    return stream.pipeTo(
      new WritableStream({
        write: (chunk) => add(decode.decode(chunk, { stream: true })),
      }),
    );
  };
  const drained = Promise.all([
    drain(child.stdout, (text) => stdout += text),
    drain(child.stderr, (text) => stderr += text),
  ]);
  return {
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    /** Closes its stdin (it drains and stops); its exit code. */
    async stop(): Promise<number> {
      await child.stdin.close().catch(() => {});
      const [status] = await Promise.all([child.status, drained]);
      return status.code;
    },
  };
}

Deno.test("the hello server on a busy port prints one line (code, what, what to do) and exits 1", async () => {
  const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const hello = spawnHello([
      "--listen",
      `127.0.0.1:${busy.addr.port}`,
      "--registry",
      "tcp://127.0.0.1:1",
    ]);
    assert.equal(await hello.stop(), 1);
    assert.equal(
      hello.stderr,
      `hello server: cannot listen on 127.0.0.1:${busy.addr.port} (EADDRINUSE): another process listens there; stop it, or pass another --listen (127.0.0.1:0 picks a free port)\n`,
    );
    assert.equal(hello.stdout, "");
  } finally {
    busy.close();
  }
});

Deno.test("the hello server binds at $RAFTER_REGISTRY without --registry, and --registry wins over it", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "rafter_hello_env_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir,
  });
  // Nothing listens on port 1: a server that used it would never bind.
  const dead = "tcp://127.0.0.1:1";
  try {
    for (
      const [args, env] of [
        [["--id", "from-env"], { RAFTER_REGISTRY: node.url }],
        [["--id", "from-flag", "--registry", node.url], {
          RAFTER_REGISTRY: dead,
        }],
      ] as [string[], Record<string, string>][]
    ) {
      const hello = spawnHello(args, env);
      try {
        await waitFor(
          () => /serving on tcp:\/\/.* bound as "hello"/.test(hello.stdout),
          `${args[1]} to bind`,
          30_000,
        );
      } finally {
        assert.equal(await hello.stop(), 0, hello.stderr);
      }
      assert.match(hello.stdout, new RegExp(`^${args[1]} serving on `));
    }
  } finally {
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a second hello server with an id a live one holds (another port) prints one ID_IN_USE line and exits 1; the first stays listed", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "rafter_hello_id_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir,
  });
  const first = spawnHello(["--id", "s1", "--registry", node.url]);
  try {
    await waitFor(
      () => /^s1 serving on tcp:\/\/.* bound as "hello"/.test(first.stdout),
      "the first server to bind",
      30_000,
    );
    const firstUrl = first.stdout.match(/serving on (tcp:\/\/\S+),/)![1];
    const leaseId = first.stdout.match(/with lease (\S+) /)![1];
    const second = spawnHello(["--id", "s1", "--registry", node.url]);
    assert.equal(await second.stop(), 1, second.stdout);
    assert.equal(
      second.stderr,
      `hello server: cannot bind "hello": Id in use: endpoint "s1" of "hello" is held by another live server at ${firstUrl} (lease ${leaseId}); start this one with another id, stop the other server, or wait for its lease to expire (10 s after its last keep-alive)\n`,
    );
    assert.equal(second.stdout, "");
    const client = connect([node.url]);
    try {
      const { endpoints } = await client.lookup("hello");
      assert.deepEqual(
        endpoints.map((e) => [e.id, e.url, e.leaseId]),
        [["s1", firstUrl, leaseId]],
      );
    } finally {
      client.close();
    }
  } finally {
    assert.equal(await first.stop(), 0, first.stderr);
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
