import assert from "node:assert/strict";
import { freePorts, waitFor, within } from "../raft/_test_util.ts";
import { connect } from "../stub/client.ts";
import { parseRegistryArgs } from "./main.ts";

Deno.test("parseRegistryArgs: no options is a single node n1 on 127.0.0.1:7001", () => {
  assert.deepEqual(parseRegistryArgs([]), {
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 7001 },
    peers: undefined,
    dataDir: "./data/n1",
    tickMs: 100,
    electionTicks: 10,
    watchStdin: false,
  });
});

Deno.test("parseRegistryArgs: every option", () => {
  assert.deepEqual(
    parseRegistryArgs([
      "--id",
      "n2",
      "--listen",
      "0.0.0.0:7102",
      "--peers",
      "n1=127.0.0.1:7101, n2=tcp://127.0.0.1:7102,n3=[::1]:7103,",
      "--data",
      "/var/lib/rafter",
      "--tick-ms",
      "20",
      "--election-ticks",
      "5",
      "--watch-stdin",
    ]),
    {
      id: "n2",
      listen: { hostname: "0.0.0.0", port: 7102 },
      peers: {
        n1: "tcp://127.0.0.1:7101",
        n2: "tcp://127.0.0.1:7102",
        n3: "tcp://[::1]:7103",
      },
      dataDir: "/var/lib/rafter",
      tickMs: 20,
      electionTicks: 5,
      watchStdin: true,
    },
  );
});

Deno.test("parseRegistryArgs: the listen address and data folder default from --id and --peers", () => {
  const args = parseRegistryArgs([
    "--id",
    "n3",
    "--peers",
    "n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003",
  ]);
  assert.deepEqual(args.listen, { hostname: "127.0.0.1", port: 7003 });
  assert.equal(args.dataDir, "./data/n3");
  // --id alone names the data folder of a single node.
  assert.equal(parseRegistryArgs(["--id", "east"]).dataDir, "./data/east");
  assert.deepEqual(
    parseRegistryArgs(["--listen", "tcp://127.0.0.1:0"]).listen,
    {
      hostname: "127.0.0.1",
      port: 0,
    },
  );
});

function refuses(argv: string[], message: string): void {
  assert.throws(() => parseRegistryArgs(argv), (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.equal(error.message, message);
    return true;
  }, JSON.stringify(argv));
}

Deno.test("parseRegistryArgs: --peers needs --id, well-formed items and this node", () => {
  refuses(
    ["--peers", "n1=127.0.0.1:7001"],
    "--id is required with --peers: which of the peers is this node?",
  );
  for (const item of ["n1", "=127.0.0.1:7001", "n1=", "n1=a=b"]) {
    refuses(
      ["--id", "n1", "--peers", `n1=127.0.0.1:7001,${item}`],
      `--peers item "${item}" is not of the form id=host:port`,
    );
  }
  refuses(
    ["--id", "n1", "--peers", "n1=127.0.0.1:7001,n2=localhost"],
    '--peers item "n2=localhost": invalid endpoint URL "localhost": expected tcp://host:port with a port in 1..65535',
  );
  refuses(
    ["--id", "n1", "--peers", "n1=127.0.0.1:0"],
    '--peers item "n1=127.0.0.1:0": invalid endpoint URL "127.0.0.1:0": expected tcp://host:port with a port in 1..65535',
  );
  refuses(
    ["--id", "n1", "--peers", "n1=http://127.0.0.1:7001"],
    '--peers item "n1=http://127.0.0.1:7001": invalid endpoint URL "http://127.0.0.1:7001": expected tcp://host:port with a port in 1..65535',
  );
  refuses(
    ["--id", "n1", "--peers", "n1=127.0.0.1:7001,n1=127.0.0.1:7002"],
    '--peers lists the id "n1" more than once',
  );
  refuses(
    ["--id", "n4", "--peers", "n1=127.0.0.1:7001,n2=127.0.0.1:7002"],
    '--peers does not list this node\'s id "n4"',
  );
  refuses(
    ["--id", "n1", "--peers", ""],
    '--peers does not list this node\'s id "n1"',
  );
  refuses(["--id", ""], "--id must not be empty");
  refuses(
    ["--id", "  ", "--peers", "n1=127.0.0.1:7001"],
    "--id must not be empty",
  );
});

Deno.test("parseRegistryArgs: bad addresses and numbers name their option", () => {
  refuses(
    ["--listen", "7001"],
    '--listen: invalid listen address "7001": expected host:port with a port in 0..65535',
  );
  refuses(
    ["--listen", "127.0.0.1:70000"],
    '--listen: invalid listen address "127.0.0.1:70000": expected host:port with a port in 0..65535',
  );
  for (const bad of ["0", "-5", "1.5", "abc", "", " ", "1e400"]) {
    refuses(
      [`--tick-ms=${bad}`],
      `--tick-ms must be a positive integer, got "${bad}"`,
    );
  }
  for (const bad of ["0", "1", "2.5", "ten", ""]) {
    refuses(
      [`--election-ticks=${bad}`],
      `--election-ticks must be an integer of at least 2, got "${bad}"`,
    );
  }
  assert.equal(parseRegistryArgs(["--election-ticks", "2"]).electionTicks, 2);
  assert.equal(parseRegistryArgs(["--tick-ms", "1"]).tickMs, 1);
});

Deno.test("parseRegistryArgs: unknown options and arguments are refused", () => {
  refuses(["--port", "7001"], "Unknown option '--port'");
  refuses(
    ["n1"],
    "Unexpected argument 'n1'. This command does not take positional arguments",
  );
  refuses(["--id"], "Option '--id <value>' argument missing");
  assert.throws(() => parseRegistryArgs(["--help"]));
});

/** A `deno run registry/main.ts` child whose output the test can wait on. */
function spawnRegistry(cwd: string, args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("./main.ts", import.meta.url).pathname,
      ...args,
      // Safety net: the node exits when the test's end of stdin closes.
      "--watch-stdin",
    ],
    cwd,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const decoder = new TextDecoder();
  const drain = (stream: ReadableStream<Uint8Array>) =>
    stream.pipeTo(
      new WritableStream({
        write(chunk) {
          output += decoder.decode(chunk, { stream: true });
        },
      }),
    );
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  return {
    child,
    get output() {
      return output;
    },
    /** Exit code, once the process ended and its output was read. */
    async exit(): Promise<number> {
      const [status] = await Promise.all([child.status, drained]);
      await child.stdin.close().catch(() => {});
      return status.code;
    },
  };
}

Deno.test("registry/main.ts runs a node in ./data/n1 of its cwd, stops on SIGTERM, and keeps its bindings", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  try {
    for (const round of [1, 2]) {
      const node = spawnRegistry(cwd, ["--listen", `127.0.0.1:${port}`]);
      const client = connect(url, { deadlineMs: 10_000 });
      let code: number;
      try {
        await waitFor(
          () => node.output.includes(`listening on ${url}`),
          `registry round ${round} to listen`,
          10_000,
        );
        assert.match(
          node.output,
          new RegExp(
            `registry n1 listening on ${url} \\(cluster n1; data \\./data/n1\\)`,
          ),
        );
        if (round === 1) {
          assert.deepEqual(
            await client.bind("hello", {
              id: "h1",
              url: "tcp://127.0.0.1:9001",
            }),
            { revision: 1 },
          );
        } else {
          assert.deepEqual(await client.lookup("hello"), {
            name: "hello",
            endpoints: [{ id: "h1", url: "tcp://127.0.0.1:9001" }],
            revision: 1,
          });
        }
      } finally {
        client.close();
        node.child.kill("SIGTERM");
        code = await within(node.exit(), 10_000, "the registry to exit");
      }
      assert.equal(code, 0, node.output);
      assert.match(node.output, /registry n1 stopped/);
      const wal = await Deno.stat(`${cwd}/data/n1/wal.log`);
      assert.ok(wal.isFile);
      assert.ok(wal.size > 0);
    }
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts exits 1 with a one-line reason when its port is taken", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    const node = spawnRegistry(cwd, ["--listen", `127.0.0.1:${port}`]);
    const code = await within(node.exit(), 10_000, "the registry to exit");
    assert.equal(code, 1, node.output);
    assert.match(
      node.output,
      new RegExp(
        `^registry n1: cannot start on tcp://127\\.0\\.0\\.1:${port} with data \\./data/n1: .*in use.*\\n$`,
        "i",
      ),
    );
  } finally {
    taken.close();
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts prints its usage with exit 2 for a bad option", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  try {
    const node = spawnRegistry(cwd, ["--tick-ms", "0"]);
    const code = await within(node.exit(), 10_000, "the registry to exit");
    assert.equal(code, 2, node.output);
    assert.match(
      node.output,
      /^registry: --tick-ms must be a positive integer, got "0"\n\nusage: deno run -A registry\/main.ts/,
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts refuses a data folder another node is using", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const [first, second] = freePorts(2);
  const running = spawnRegistry(cwd, ["--listen", `127.0.0.1:${first}`]);
  try {
    await waitFor(
      () => running.output.includes("listening on"),
      "the first node to listen",
      10_000,
    );
    const intruder = spawnRegistry(cwd, ["--listen", `127.0.0.1:${second}`]);
    const code = await within(intruder.exit(), 10_000, "the second to exit");
    assert.equal(code, 1, intruder.output);
    assert.equal(
      intruder.output,
      `registry n1: cannot start on tcp://127.0.0.1:${second} with data ./data/n1: data folder ./data/n1 is in use by another registry node (pid ${running.child.pid}); stop that node first, or pass another --data folder\n`,
    );
  } finally {
    running.child.kill("SIGTERM");
    assert.equal(await within(running.exit(), 10_000, "the first to exit"), 0);
    await Deno.remove(cwd, { recursive: true });
  }
});
