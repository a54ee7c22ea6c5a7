import assert from "node:assert/strict";
import { freePorts } from "../testing/ports.ts";
import { waitFor, within } from "../testing/time.ts";
import { connect } from "../stub/client.ts";
import { parseRegistryArgs } from "../registry/main.ts";
import { spawnRegistry } from "./_registry_process.ts";
import { escapeRegExp, logPrefix } from "./_log_prefix.ts";
import { VERSION } from "../internal/version.ts";

Deno.test("parseRegistryArgs: no options is a single node n1 on 127.0.0.1:7001, peer port 7101, secret in its data folder", () => {
  assert.deepEqual(parseRegistryArgs([]), {
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 7001 },
    peerListen: { hostname: "127.0.0.1", port: 7101 },
    advertise: undefined,
    peers: undefined,
    join: undefined,
    clusterSecretFile: "./data/n1/cluster_secret",
    clusterToken: "",
    dataDir: "./data/n1",
    tickMs: 100,
    electionTicks: 10,
    federation: undefined,
    engine: "raft",
    etcdEndpoints: [],
    historyEvents: 10_000,
    metricsListen: undefined,
    dashboardListen: undefined,
    snapshotEntries: 10_000,
    snapshotTrailing: undefined,
    walSegmentBytes: undefined,
    watchStdin: false,
    auth: false,
    adminTokenFile: "./data/n1/admin_token",
    maxWatchesPerConnection: 1_000,
    maxBindingsPerLease: 1_000,
    maxTokens: 5_000,
    tls: undefined,
    peerTls: undefined,
    tlsCaFile: undefined,
    insecure: false,
    logFormat: "text",
  });
});

Deno.test("parseRegistryArgs: every option", () => {
  assert.deepEqual(
    parseRegistryArgs([
      "--id",
      "n2",
      "--listen",
      "0.0.0.0:7002",
      "--peer-listen",
      "0.0.0.0:7102",
      "--advertise",
      "10.0.0.2",
      "--peers",
      "n1=127.0.0.1:7101, n2=tcp://127.0.0.1:7102,n3=[::1]:7103,",
      "--cluster-secret-file",
      "/etc/rafter/secret",
      "--cluster-token",
      "prod-eu",
      "--data",
      "/var/lib/rafter",
      "--tick-ms",
      "20",
      "--election-ticks",
      "5",
      "--history-events",
      "500",
      "--metrics-listen",
      "0.0.0.0:9464",
      "--snapshot-entries",
      "2000",
      "--snapshot-trailing",
      "0",
      "--wal-segment-bytes",
      "1048576",
      "--watch-stdin",
      "--auth",
      "--admin-token-file",
      "/etc/rafter/admin_token",
      "--max-watches-per-connection",
      "8",
      "--max-bindings-per-lease",
      "100",
      "--max-tokens",
      "50",
      "--tls-cert",
      "/etc/rafter/n2.pem",
      "--tls-key",
      "/etc/rafter/n2.key",
      "--tls-client-ca",
      "/etc/rafter/clients.pem",
      "--peer-tls-cert",
      "/etc/rafter/n2.pem",
      "--peer-tls-key",
      "/etc/rafter/n2.key",
      "--peer-tls-ca",
      "/etc/rafter/ca.pem",
      "--tls-ca",
      "/etc/rafter/servers.pem",
      "--insecure",
      "--log-format",
      "json",
      "--domain",
      "acme",
      "--cluster-name",
      "eu",
      "--siblings",
      "us=tcp://10.1.0.1:7001|tcp://10.1.0.2:7001;ap=tls://10.2.0.1:7001",
    ]),
    {
      id: "n2",
      listen: { hostname: "0.0.0.0", port: 7002 },
      peerListen: { hostname: "0.0.0.0", port: 7102 },
      advertise: "10.0.0.2",
      peers: {
        n1: "tcp://127.0.0.1:7101",
        n2: "tcp://127.0.0.1:7102",
        n3: "tcp://[::1]:7103",
      },
      join: undefined,
      clusterSecretFile: "/etc/rafter/secret",
      clusterToken: "prod-eu",
      dataDir: "/var/lib/rafter",
      tickMs: 20,
      electionTicks: 5,
      engine: "raft",
      etcdEndpoints: [],
      federation: {
        domain: "acme",
        cluster: "eu",
        siblings: {
          us: ["tcp://10.1.0.1:7001", "tcp://10.1.0.2:7001"],
          ap: ["tls://10.2.0.1:7001"],
        },
      },
      historyEvents: 500,
      metricsListen: { hostname: "0.0.0.0", port: 9464 },
      dashboardListen: undefined,
      snapshotEntries: 2000,
      snapshotTrailing: 0,
      walSegmentBytes: 1_048_576,
      watchStdin: true,
      auth: true,
      adminTokenFile: "/etc/rafter/admin_token",
      maxWatchesPerConnection: 8,
      maxBindingsPerLease: 100,
      maxTokens: 50,
      tls: {
        certFile: "/etc/rafter/n2.pem",
        keyFile: "/etc/rafter/n2.key",
        caFile: "/etc/rafter/clients.pem",
      },
      peerTls: {
        certFile: "/etc/rafter/n2.pem",
        keyFile: "/etc/rafter/n2.key",
        caFile: "/etc/rafter/ca.pem",
      },
      tlsCaFile: "/etc/rafter/servers.pem",
      insecure: true,
      logFormat: "json",
    },
  );
});

Deno.test("parseRegistryArgs: --engine etcd takes --etcd-endpoints, checked", () => {
  const args = parseRegistryArgs([
    "--engine",
    "etcd",
    "--etcd-endpoints",
    "http://127.0.0.1:2379,http://10.0.0.2:2379",
  ]);
  assert.equal(args.engine, "etcd");
  assert.deepEqual(args.etcdEndpoints, [
    "http://127.0.0.1:2379",
    "http://10.0.0.2:2379",
  ]);
  refuses(["--engine", "zookeeper"], '--engine "zookeeper": use raft or etcd');
  refuses(
    ["--engine", "etcd"],
    "--engine etcd needs --etcd-endpoints: the etcd cluster's client URLs (http://host:2379,...)",
  );
  refuses(
    ["--etcd-endpoints", "http://h:2379"],
    "--etcd-endpoints needs --engine etcd",
  );
  refuses(
    ["--engine", "etcd", "--etcd-endpoints", "h:2379"],
    '--etcd-endpoints: "h:2379" is not http://host:port',
  );
});

Deno.test("parseRegistryArgs: the federation flags are checked, saying what is wrong", () => {
  refuses(
    ["--cluster-name", "eu"],
    "--cluster-name and --siblings need --domain: name the federation too",
  );
  refuses(
    ["--domain", "acme"],
    "--cluster-name is needed with --domain (1 to 64 letters, digits, _ . -): this cluster's name in acme",
  );
  refuses(
    ["--domain", "acme", "--cluster-name", "eu", "--siblings", "us"],
    '--siblings: "us" is not name=tcp://host:port|tcp://host:port',
  );
  refuses(
    ["--domain", "acme", "--cluster-name", "eu", "--siblings", "eu=tcp://h:1"],
    "--siblings lists eu, this cluster's own name",
  );
  refuses(
    ["--domain", "acme", "--cluster-name", "eu", "--siblings", "us=http://h:1"],
    '--siblings: "http://h:1" (of us) is not tcp://host:port',
  );
});

Deno.test("parseRegistryArgs: the TLS flags come in complete groups", () => {
  refuses(
    ["--tls-cert", "n1.pem"],
    "--tls-cert and --tls-key go together: the client port's certificate and its private key",
  );
  refuses(
    ["--tls-client-ca", "ca.pem"],
    "--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS",
  );
  for (
    const partial of [["--peer-tls-cert", "n1.pem"], [
      "--peer-tls-cert",
      "n1.pem",
      "--peer-tls-key",
      "n1.key",
    ], ["--peer-tls-ca", "ca.pem"]]
  ) {
    refuses(
      partial,
      "--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: this member's certificate, its key, and the CA of every member's certificate",
    );
  }
});

const PEERS = "n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103";
const SECRET = ["--cluster-secret-file", "./cluster_secret"];

Deno.test("parseRegistryArgs: the ports and data folder default from --id and --peers (peer addresses)", () => {
  const args = parseRegistryArgs(["--id", "n3", "--peers", PEERS, ...SECRET]);
  // The peer port is the node's --peers entry; the client port is 100 below.
  assert.deepEqual(args.peerListen, { hostname: "127.0.0.1", port: 7103 });
  assert.deepEqual(args.listen, { hostname: "127.0.0.1", port: 7003 });
  assert.equal(args.dataDir, "./data/n3");
  assert.equal(args.clusterSecretFile, "./cluster_secret");
  // The admin token sits beside the secret the nodes share, so they share it.
  assert.equal(args.adminTokenFile, "./admin_token");
  assert.equal(
    parseRegistryArgs([
      "--id",
      "n1",
      "--peers",
      PEERS,
      "--cluster-secret-file",
      "/etc/rafter/secret",
    ]).adminTokenFile,
    "/etc/rafter/admin_token",
  );
  // --peer-listen moves the peer port (and so the default client port).
  const moved = parseRegistryArgs([
    "--id",
    "n3",
    "--peers",
    PEERS,
    ...SECRET,
    "--peer-listen",
    "127.0.0.2:8103",
  ]);
  assert.deepEqual(moved.peerListen, { hostname: "127.0.0.2", port: 8103 });
  assert.deepEqual(moved.listen, { hostname: "127.0.0.2", port: 8003 });
  // A single node: the peer port is the client port + 100, or free with it.
  assert.deepEqual(
    parseRegistryArgs(["--listen", "127.0.0.1:9000"]).peerListen,
    { hostname: "127.0.0.1", port: 9100 },
  );
  assert.deepEqual(
    parseRegistryArgs(["--listen", "127.0.0.1:0"]).peerListen,
    { hostname: "127.0.0.1", port: 0 },
  );
  assert.equal(
    parseRegistryArgs(["--data", "/srv/r"]).clusterSecretFile,
    "/srv/r/cluster_secret",
  );
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

Deno.test("parseRegistryArgs: --peers needs --id, well-formed items, this node and --cluster-secret-file", () => {
  refuses(
    ["--peers", "n1=127.0.0.1:7001"],
    "--id is required with --peers: which of the peers is this node?",
  );
  refuses(
    ["--id", "n1", "--peers", PEERS],
    "--cluster-secret-file is required with --peers: every node of a cluster proves the same secret to the others (a missing file is created with a new secret; copy it to every node)",
  );
  refuses(
    ["--id", "n1", "--peers", "n1=0.0.0.0:7101,n2=127.0.0.1:7102", ...SECRET],
    '--peers item "n1=0.0.0.0:7101": a wildcard address cannot be dialed; list the address the other nodes reach it at',
  );
  refuses(
    ["--id", "n1", "--peers", "n1=127.0.0.1:7101,n|2=127.0.0.1:7102"],
    '--peers item "n|2=127.0.0.1:7102": an id must not contain "|"',
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
    ["--peer-listen", "x"],
    '--peer-listen: invalid listen address "x": expected host:port with a port in 0..65535',
  );
  refuses(
    ["--listen", "0.0.0.0:7001"],
    "--listen 0.0.0.0:7001 is a wildcard address, which clients cannot dial: pass --advertise HOST[:PORT] with the address clients and peers reach this node at",
  );
  refuses(
    ["--listen", "[::]:7001"],
    "--listen [::]:7001 is a wildcard address, which clients cannot dial: pass --advertise HOST[:PORT] with the address clients and peers reach this node at",
  );
  refuses(
    ["--listen", "0.0.0.0:7001", "--advertise", "0.0.0.0"],
    '--advertise: invalid advertise address "0.0.0.0": a wildcard address cannot be dialed; advertise the host\'s reachable address',
  );
  refuses(
    ["--listen", "127.0.0.1:65500"],
    "--peer-listen is needed: the client port 65500 leaves no default peer port (client port + 100)",
  );
  refuses(
    ["--id", "n1", "--peers", "n1=127.0.0.1:80", ...SECRET],
    "--listen is needed: the peer port 80 leaves no default client port (peer port - 100)",
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

Deno.test("registry/main.ts runs a node in ./data/n1 of its cwd, stops on SIGTERM, and keeps its bindings and secret", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const [port, peerPort] = freePorts(2);
  const url = `tcp://127.0.0.1:${port}`;
  const secrets: string[] = [];
  try {
    for (const round of [1, 2]) {
      const node = spawnRegistry(cwd, [
        "--listen",
        `127.0.0.1:${port}`,
        "--peer-listen",
        `127.0.0.1:${peerPort}`,
      ]);
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
            `registry n1 listening on ${url}, peers on tcp://127\\.0\\.0\\.1:${peerPort} \\(cluster [0-9a-f]{16} of n1; data \\./data/n1\\)`,
          ),
        );
        // The pid to stop it by, and the versions, on the same line.
        assert.match(
          node.output,
          new RegExp(
            `listening on ${url}, .*\\) \\(pid ${node.child.pid}, rafter ${
              VERSION.replaceAll(".", "\\.")
            }, deno ${Deno.version.deno.replaceAll(".", "\\.")}\\)\\n`,
          ),
        );
        // The first start made the secret; the second read it.
        assert.equal(
          node.output.includes(
            "generated a new cluster secret in ./data/n1/cluster_secret; give this file to every other node",
          ),
          round === 1,
        );
        secrets.push(await Deno.readTextFile(`${cwd}/data/n1/cluster_secret`));
        if (round === 1) {
          const bound = await client.bind("hello", {
            id: "h1",
            url: "tcp://127.0.0.1:9001",
          });
          assert.equal(bound.revision, 1);
        } else {
          const found = await client.lookup("hello");
          assert.deepEqual(
            found.endpoints.map((e) => [e.id, e.url]),
            [["h1", "tcp://127.0.0.1:9001"]],
          );
          assert.equal(found.revision, 1);
        }
      } finally {
        client.close();
        node.child.kill("SIGTERM");
        code = await within(node.exit(), 10_000, "the registry to exit");
      }
      assert.equal(code, 0, node.output);
      assert.match(node.output, /registry n1 stopped/);
      const wal = await Deno.stat(
        `${cwd}/data/n1/wal/0000000000000001-0000000000000001.wal`,
      );
      assert.ok(wal.isFile);
      assert.ok(wal.size > 0);
    }
    assert.equal(secrets[0], secrets[1]);
    assert.equal(
      (await Deno.stat(`${cwd}/data/n1/cluster_secret`)).mode! & 0o777,
      0o600,
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts exits 1 with a one-line reason naming the port that is taken, and makes no data folder", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  const [free] = freePorts(1);
  try {
    for (
      const [args, which] of [
        [
          ["--listen", `127.0.0.1:${port}`, "--peer-listen", "127.0.0.1:0"],
          "client",
        ],
        [[
          "--listen",
          `127.0.0.1:${free}`,
          "--peer-listen",
          `127.0.0.1:${port}`,
        ], "peer"],
      ] as const
    ) {
      const node = spawnRegistry(cwd, [...args]);
      const code = await within(node.exit(), 10_000, "the registry to exit");
      assert.equal(code, 1, node.output);
      assert.match(
        node.output,
        new RegExp(
          `^${
            logPrefix("error", "n1")
          }registry n1: cannot start \\(client tcp://127\\.0\\.0\\.1:\\d+, peer tcp://127\\.0\\.0\\.1:\\d+, data \\./data/n1\\): the ${which} port tcp://127\\.0\\.0\\.1:${port} is in use .*; another process .* listens there.*\\n$`,
          "i",
        ),
      );
      // Bug: the node made ./data/n1 (its lock and a new cluster secret)
      // before it found the port taken.
      await assert.rejects(Deno.stat(`${cwd}/data`), Deno.errors.NotFound);
    }
  } finally {
    taken.close();
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts refuses a short secret file, and a multi-node start without one", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  try {
    await Deno.writeTextFile(`${cwd}/secret`, "too short\n");
    const node = spawnRegistry(cwd, [
      "--listen",
      "127.0.0.1:0",
      "--cluster-secret-file",
      "secret",
    ]);
    assert.equal(await within(node.exit(), 10_000, "the node to exit"), 1);
    assert.match(
      node.output,
      new RegExp(
        `^${logPrefix("error", "n1")}${
          /registry n1: cannot start \(.*\): the cluster secret in secret has 9 characters; it needs at least 32\. Make one with `openssl rand -base64 32 > secret`/
            .source
        }`,
      ),
    );
    const member = spawnRegistry(cwd, ["--id", "n1", "--peers", PEERS]);
    assert.equal(await within(member.exit(), 10_000, "the node to exit"), 2);
    assert.match(
      member.output,
      /^registry: --cluster-secret-file is required with --peers/,
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts prints the error and where the options are (not the whole usage) with exit 2 for a bad option", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  try {
    const node = spawnRegistry(cwd, ["--tick-ms", "0"]);
    const code = await within(node.exit(), 10_000, "the registry to exit");
    assert.equal(code, 2, node.output);
    assert.match(
      node.output,
      /^registry: --tick-ms must be a positive integer, got "0"\nrun with --help for the options\n/,
    );
    assert.doesNotMatch(node.output, /usage: /);
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts refuses a data folder another node is using", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const [first, second] = freePorts(2);
  // The running node keeps its secret elsewhere (as a cluster member
  // would): the intruder must not write one into its folder.
  const running = spawnRegistry(cwd, [
    "--listen",
    `127.0.0.1:${first}`,
    "--peer-listen",
    "127.0.0.1:0",
    "--cluster-secret-file",
    "./secret",
  ]);
  try {
    await waitFor(
      () => running.output.includes("listening on"),
      "the first node to listen",
      10_000,
    );
    const intruder = spawnRegistry(cwd, [
      "--listen",
      `127.0.0.1:${second}`,
      "--peer-listen",
      "127.0.0.1:0",
    ]);
    const code = await within(intruder.exit(), 10_000, "the second to exit");
    assert.equal(code, 1, intruder.output);
    assert.match(
      intruder.output,
      new RegExp(
        `^${logPrefix("error", "n1")}${
          escapeRegExp(
            `registry n1: cannot start (client tcp://127.0.0.1:${second}, peer tcp://127.0.0.1:0, data ./data/n1): data folder ./data/n1 is in use by another registry node (pid ${running.child.pid}); stop that node first, or pass another --data folder`,
          )
        }\n$`,
      ),
    );
    // Bug: the refused node wrote a new secret into the running node's folder.
    await assert.rejects(
      Deno.stat(`${cwd}/data/n1/cluster_secret`),
      Deno.errors.NotFound,
    );
  } finally {
    running.child.kill("SIGTERM");
    assert.equal(await within(running.exit(), 10_000, "the first to exit"), 0);
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts with bad flags exits 2 and makes no data folder", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  try {
    for (
      const args of [
        ["--tick-ms", "abc", "--data", "./d"],
        ["--id", "n1", "--peers", "n1=127.0.0.1:0,n2=x", "--data", "./d"],
        ["--listen", "0.0.0.0:0", "--data", "./d"],
      ]
    ) {
      const node = spawnRegistry(cwd, args);
      assert.equal(await within(node.exit(), 10_000, "the node to exit"), 2);
      assert.match(
        node.output,
        /^registry: --\S+.*\nrun with --help for the options\n$/,
      );
      await assert.rejects(Deno.stat(`${cwd}/d`), Deno.errors.NotFound);
    }
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("registry/main.ts refuses a single-node development folder reused by n1 of a new 3-node cluster, saying whose it is and what to do", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  const [client, peer, ...others] = freePorts(4);
  try {
    // A single-node development registry, run once.
    const dev = spawnRegistry(cwd, [
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
    ]);
    await waitFor(
      () => dev.output.includes(": leader of term"),
      "the development node to lead",
      10_000,
    );
    dev.child.kill("SIGTERM");
    assert.equal(await within(dev.exit(), 10_000, "it to stop"), 0);
    const devMeta = JSON.parse(
      await Deno.readTextFile(`${cwd}/data/n1/meta.json`),
    );
    assert.equal(devMeta.memberId, "n1");
    // The same folder, as n1 of a new cluster.
    const peers = `n1=127.0.0.1:${peer},n2=127.0.0.1:${
      others[0]
    },n3=127.0.0.1:${others[1]}`;
    const member = spawnRegistry(cwd, [
      "--id",
      "n1",
      "--listen",
      `127.0.0.1:${client}`,
      "--peers",
      peers,
      "--cluster-secret-file",
      "./data/n1/cluster_secret",
    ]);
    assert.equal(await within(member.exit(), 10_000, "n1 to exit"), 1);
    assert.match(
      member.output,
      new RegExp(
        `^${
          logPrefix("error", "n1")
        }registry n1: cannot start \\(.*\\): data folder \\./data/n1 belongs to another cluster \\(id ${devMeta.clusterId}\\): it holds the log of a cluster bootstrapped with a single node \\(n1=tcp://127\\.0\\.0\\.1:${peer}\\), but this node is started as a member of a cluster of n1=tcp://127\\.0\\.0\\.1:${peer}, n2=.*, n3=.* \\(cluster id [0-9a-f]{16}\\); its log would be merged silently with another cluster's\\. Give this node a new --data folder \\(or move this one aside\\), or start it with the --peers \\(and --cluster-token\\) its cluster was bootstrapped with\\n$`,
      ),
    );
    // The refused start left the folder as it was.
    assert.deepEqual(
      JSON.parse(await Deno.readTextFile(`${cwd}/data/n1/meta.json`)),
      devMeta,
    );
    // Another member id on it is refused too; without a secret file of its
    // own it would generate one, which the refusal takes away again.
    await Deno.rename(`${cwd}/data/n1/cluster_secret`, `${cwd}/dev_secret`);
    const other = spawnRegistry(cwd, [
      "--id",
      "n2",
      "--listen",
      `127.0.0.1:${client}`,
      "--peer-listen",
      `127.0.0.1:${peer}`,
      "--data",
      "./data/n1",
    ]);
    assert.equal(await within(other.exit(), 10_000, "n2 to exit"), 1);
    assert.match(
      other.output,
      /data folder \.\/data\/n1 belongs to member "n1", not "n2": start this node with --id n1, or give it its own --data folder\n$/,
    );
    assert.equal(
      await Deno.stat(`${cwd}/data/n1/cluster_secret`).then(
        () => true,
        () => false,
      ),
      false,
      "the refused start left no cluster secret in the other node's folder",
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("parseRegistryArgs: --join takes a member's client URL, needs --id and the secret file, and excludes --peers", () => {
  const args = parseRegistryArgs([
    "--id",
    "n4",
    "--join",
    "127.0.0.1:7001",
    "--listen",
    "127.0.0.1:7004",
    "--cluster-secret-file",
    "./secret",
  ]);
  assert.equal(args.join, "tcp://127.0.0.1:7001");
  assert.equal(args.peers, undefined);
  assert.deepEqual(args.peerListen, { hostname: "127.0.0.1", port: 7104 });
  assert.throws(
    () => parseRegistryArgs(["--join", "tcp://127.0.0.1:7001"]),
    /^Error: --id is required with --join/,
  );
  assert.throws(
    () => parseRegistryArgs(["--id", "n4", "--join", "tcp://127.0.0.1:7001"]),
    /--cluster-secret-file is required with --join/,
  );
  assert.throws(
    () =>
      parseRegistryArgs([
        "--id",
        "n4",
        "--join",
        "tcp://127.0.0.1:7001",
        "--peers",
        "n4=127.0.0.1:7104",
        "--cluster-secret-file",
        "./secret",
      ]),
    /--join and --peers exclude each other/,
  );
});

Deno.test("registry/main.ts refuses to listen where other hosts reach it without TLS and auth, before it writes anything", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_main_" });
  try {
    const [client, peer] = freePorts(2);
    const node = spawnRegistry(cwd, [
      "--listen",
      `0.0.0.0:${client}`,
      "--advertise",
      "10.0.0.5",
      "--peer-listen",
      `0.0.0.0:${peer}`,
    ]);
    const code = await within(node.exit(), 10_000, "the registry to exit");
    assert.equal(code, 2, node.output);
    assert.match(
      node.output,
      new RegExp(
        `^${logPrefix("error", "n1")}${
          /registry n1: refusing to start: the client port listens on 0\.0\.0\.0, which other hosts can reach, without TLS: pass --tls-cert and --tls-key .*; the client port listens on 0\.0\.0\.0 without auth: pass --auth .*; the peer port listens on 0\.0\.0\.0, which other hosts can reach, without mutual TLS: pass --peer-tls-cert, --peer-tls-key and --peer-tls-ca .*\. To run without them anyway \(a trusted network only\), pass --insecure\n$/
            .source
        }`,
      ),
    );
    await assert.rejects(Deno.stat(`${cwd}/data`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});
