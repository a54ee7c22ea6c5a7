/**
 * Tests of the `rafter` CLI: formatTable, and `deno run -A cli/main.ts …`
 * run as a child process against nothing, against a silent listener, and
 * against a 3-node LocalCluster with a bound hello server (every command,
 * exit codes and the exact shape of the output).
 */

import assert from "node:assert/strict";
import { formatTable } from "./table.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import type {
  BindResult,
  LeaderTransferResult,
  LeaseGrantResult,
  ListResult,
  LookupResult,
  MemberListResult,
  RegistryStatus,
  WatchEvent,
} from "../protocol/registry.ts";

const CLI = new URL("./main.ts", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `deno run -A cli/main.ts ...args` to its end. */
async function rafter(
  args: string[],
  env: Record<string, string> = {},
): Promise<Run> {
  const started = Date.now();
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return {
    code: output.code,
    stdout: text.decode(output.stdout),
    stderr: text.decode(output.stderr),
    ms: Date.now() - started,
  };
}

/** Asserts the exit code, showing the output when it differs. */
function expectCode(run: Run, code: number): void {
  assert.equal(
    run.code,
    code,
    `exit ${run.code}, wanted ${code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`,
  );
}

/** The revision of a `revision N` line that ends the output. */
function revisionOf(run: Run): number {
  const match = run.stdout.match(/\nrevision (\d+)(, [^\n]*)?\n$/);
  assert.ok(match !== null, `no revision line in:\n${run.stdout}`);
  return Number(match[1]);
}

/** The cells of a table line (columns are 2+ spaces apart). */
function cells(line: string): string[] {
  return line.split(/ {2,}/);
}

/** A `rafter` child process read while it runs (for `watch`). */
class Running {
  readonly process: Deno.ChildProcess;
  stdout = "";
  stderr = "";
  readonly done: Promise<number>;

  constructor(args: string[], env: Record<string, string>) {
    this.process = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", CLI, ...args],
      cwd: ROOT,
      env: { NO_COLOR: "1", ...env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const read = async (
      stream: ReadableStream<Uint8Array>,
      add: (text: string) => void,
    ) => {
      for await (const text of stream.pipeThrough(new TextDecoderStream())) {
        add(text);
      }
    };
    this.done = Promise.all([
      this.process.status,
      read(this.process.stdout, (t) => this.stdout += t),
      read(this.process.stderr, (t) => this.stderr += t),
    ]).then(([status]) => status.code);
  }

  /** Waits until stderr matches `pattern`; @throws after `timeoutMs`. */
  async waitForStderr(pattern: RegExp, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.stderr)) {
      if (Date.now() > deadline) {
        throw new Error(
          `no ${pattern} on stderr within ${timeoutMs} ms: ${this.stderr}`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Its exit code; kills it (by its own PID) after `timeoutMs`. */
  async exit(timeoutMs = 10_000): Promise<number> {
    const timer = setTimeout(() => {
      try {
        this.process.kill("SIGKILL");
      } catch { /* gone */ }
    }, timeoutMs);
    try {
      return await this.done;
    } finally {
      clearTimeout(timer);
    }
  }
}

// --- formatTable ---------------------------------------------------------------

Deno.test("formatTable pads every column but the last to its widest cell, two spaces apart", () => {
  assert.equal(
    formatTable(["NAME", "ENDPOINTS", "NOTE"], [
      ["hello", "2", "a long last cell is not padded"],
      ["services/db", "10", "-"],
    ]),
    [
      "NAME         ENDPOINTS  NOTE",
      "hello        2          a long last cell is not padded",
      "services/db  10         -",
    ].join("\n"),
  );
  // A missing cell counts as empty; no line ends in spaces.
  assert.equal(
    formatTable(["A", "B"], [["x"], ["yyy", ""]]),
    ["A    B", "x", "yyy"].join("\n"),
  );
});

Deno.test("formatTable with no rows prints the headers and (none)", () => {
  assert.equal(formatTable(["LEASE", "TTL_MS"], []), "LEASE  TTL_MS\n(none)");
});

// --- without a registry --------------------------------------------------------

Deno.test("rafter: bad usage exits 2 with the usage, --help exits 0 on every command, no registry exits 3 at once", async () => {
  const none = await rafter([]);
  expectCode(none, 2);
  assert.match(none.stderr, /^usage: rafter <command>/);
  assert.equal(none.stdout, "");

  const help = await rafter(["--help"]);
  expectCode(help, 0);
  for (
    const command of [
      "status",
      "ls",
      "lookup",
      "watch",
      "bind",
      "unbind",
      "drain",
      "lease grant",
      "lease revoke",
      "lease ttl",
      "lease ls",
      "lease keepalive",
      "leader transfer",
      "member list",
      "member add",
      "member promote",
      "member remove",
      "call",
      "auth status",
      "auth enable",
      "auth disable",
      "token create",
      "token list",
      "token revoke",
      "cert ca",
      "cert member",
      "cert server",
      "cert client",
    ]
  ) {
    assert.match(help.stdout, new RegExp(`^  ${command} `, "m"));
    const own = await rafter([...command.split(" "), "--help"]);
    expectCode(own, 0);
    assert.match(own.stdout, new RegExp(`^usage: rafter ${command}\\b`));
    assert.match(own.stdout, /--registry URLS/);
  }
  const lease = await rafter(["lease", "--help"]);
  expectCode(lease, 0);
  assert.match(lease.stdout, /^usage: rafter lease <grant\|revoke/);
  const member = await rafter(["member", "--help"]);
  expectCode(member, 0);
  assert.match(
    member.stdout,
    /^usage: rafter member <list\|add\|promote\|remove>/,
  );
  assert.doesNotMatch(member.stdout, /not available yet/);

  const bad: Array<[string[], RegExp]> = [
    [["bogus"], /^rafter: unknown command "bogus"\nusage: rafter <command>/],
    // Names of Object.prototype's properties are no commands either (they
    // crashed with "undefined is not iterable").
    [
      ["toString"],
      /^rafter: unknown command "toString"\nusage: rafter <command>/,
    ],
    [
      ["constructor"],
      /^rafter: unknown command "constructor"\nusage: rafter <command>/,
    ],
    [
      ["lookup"],
      /^rafter lookup: takes NAME\[\?key=value&\.\.\.\]\nusage: rafter lookup NAME/,
    ],
    [
      ["lookup", "hello?"],
      /^rafter lookup: "name" ends with "\?" but has no attributes/,
    ],
    [["ls", "a", "b"], /^rafter ls: takes \[PREFIX\]; unexpected "b"\n/],
    [["ls", "--count", "3"], /^rafter ls: unknown option --count\n/],
    [["ls", "--registry"], /^rafter ls: --registry needs a value\n/],
    [
      ["ls", "--registry", "nowhere"],
      /^rafter ls: --registry: invalid endpoint URL "nowhere"/,
    ],
    [
      ["status", "--timeout-ms", "0"],
      /^rafter status: --timeout-ms must be an integer of at least 1, not "0"/,
    ],
    [["watch", "x", "--count", "-1"], /^rafter watch: /],
    [["bind", "svc", "not a url"], /^rafter bind: invalid endpoint URL/],
    [
      ["bind", "svc", "tcp://127.0.0.1:1", "--attr", "novalue"],
      /^rafter bind: --attr novalue: write --attr key=value/,
    ],
    [
      ["bind", "svc", "tcp://127.0.0.1:1", "--lease", "l", "--ttl-ms", "900"],
      /^rafter bind: give --lease ID or --ttl-ms N, not both/,
    ],
    [
      ["bind", "svc", "tcp://127.0.0.1:1", "--check", "http"],
      /^rafter bind: --check must be tcp or ping/,
    ],
    [[
      "unbind",
      "svc",
      "a",
      "--local",
      "--registry",
      "tcp://127.0.0.1:1,tcp://127.0.0.1:2",
    ], /^rafter unbind: --local works on one registry node/],
    [["lease"], /^rafter: lease needs a verb/],
    [["lease", "renew", "x"], /^rafter: unknown lease verb "renew"/],
    [["leader"], /^rafter: leader needs a verb: transfer\n/],
    [
      ["leader", "elect"],
      /^rafter: unknown leader verb "elect": use transfer\n/,
    ],
    [
      ["leader", "transfer", "n2"],
      /^rafter leader transfer: takes no arguments; unexpected "n2"\n/,
    ],
    [
      ["member", "add", "n4", "nowhere:port"],
      /^rafter member add: PEER_URL must be tcp:\/\/host:port or tls:\/\/host:port, not "nowhere:port"/,
    ],
    [["member", "promote"], /^rafter member promote: takes ID/],
    [
      ["member", "ls"],
      /^rafter: unknown member verb "ls": use list, add, promote or remove\n/,
    ],
    [
      ["lease", "grant", "soon"],
      /^rafter lease grant: TTL_MS must be an integer of at least 1, not "soon"/,
    ],
    [["call", "hello"], /^rafter call: takes NAME METHOD \[PARAMS-JSON\]/],
    [
      ["call", "hello", "greet", "Ada"],
      /^rafter call: PARAMS-JSON must be a JSON array or object \(/,
    ],
    [
      ["call", "hello", "greet", "5"],
      /^rafter call: PARAMS-JSON must be a JSON array or object, not 5; e\.g\. '\[5\]'/,
    ],
  ];
  for (const [args, pattern] of bad) {
    const run = await rafter(args);
    expectCode(run, 2);
    assert.match(run.stderr, pattern, args.join(" "));
    assert.match(run.stderr, /usage: rafter /, args.join(" "));
    assert.equal(run.stdout, "", args.join(" "));
  }
  // --json: the usage error as one JSON line on stderr.
  const json = await rafter(["lookup", "--json"]);
  expectCode(json, 2);
  assert.deepEqual(JSON.parse(json.stderr), {
    error: {
      message: "takes NAME[?key=value&...]",
      usage: "usage: rafter lookup NAME[?key=value&...] [options]",
    },
  });

  // Nothing listening: exit 3 at once, naming the URLs and deno task registry.
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  for (
    const args of [
      ["ls"],
      ["lookup", "hello"],
      ["watch", "hello"],
      ["bind", "svc", "tcp://127.0.0.1:9"],
      ["lease", "ls"],
      ["call", "hello", "greet", '["Ada"]'],
    ]
  ) {
    const run = await rafter([...args, "--registry", url]);
    expectCode(run, 3);
    assert.ok(run.ms < 5_000, `${args.join(" ")} took ${run.ms} ms`);
    assert.match(
      run.stderr,
      new RegExp(
        `^rafter: Unavailable: no registry node accepted a connection .*\\(tried ${url}\\).*Start a registry \\(deno task registry\\).*\nRegistry URLs: ${url} \\(from --registry\\)\\.\n$`,
      ),
    );
    assert.equal(run.stdout, "");
  }
  const status = await rafter(["status"], { RAFTER_REGISTRY: url });
  expectCode(status, 3);
  assert.match(
    status.stdout,
    new RegExp(`^\\?\\s+${url}\\s+unreachable .*Connection refused`, "m"),
  );
  assert.match(
    status.stderr,
    new RegExp(
      `^rafter: no registry node answered \\(${url}, from RAFTER_REGISTRY\\)\\.\nStart a registry with: deno task registry`,
    ),
  );
  const jsonError = await rafter(["ls", "--json"], { RAFTER_REGISTRY: url });
  expectCode(jsonError, 3);
  assert.equal(jsonError.stdout, "");
  const parsed = JSON.parse(jsonError.stderr);
  assert.equal(parsed.error.code, -32006);
  assert.deepEqual(parsed.error.data.tried, [url]);
});

Deno.test("rafter: a registry that accepts but never answers gives exit 3 after --timeout-ms", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })();
  const url = `tcp://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  try {
    const run = await rafter(["ls", "--registry", url, "--timeout-ms", "600"]);
    expectCode(run, 3);
    assert.ok(run.ms < 4_000, `took ${run.ms} ms`);
    assert.match(run.stderr, /^rafter: Deadline exceeded: registry\.list/);
    assert.match(
      run.stderr,
      /rafter status shows which members answer; --timeout-ms N allows more time \(now 600 ms\)\. Without a quorum, --serializable answers from one node \(possibly stale\)\.\n$/,
    );
  } finally {
    listener.close();
    await accepting.catch(() => {});
    for (const conn of held) conn.close();
  }
});

Deno.test("rafter registry runs a node as registry/main.ts does: same help, exit 2 on bad options, clean stop on SIGINT", async () => {
  const direct = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}registry/main.ts`, "--help"],
    stdout: "piped",
  }).output();
  const help = await rafter(["registry", "--help"]);
  expectCode(help, 0);
  assert.equal(help.stdout, new TextDecoder().decode(direct.stdout));
  const bad = await rafter(["registry", "--tick-ms", "fast"]);
  expectCode(bad, 2);
  assert.match(bad.stderr, /^registry: --tick-ms must be a positive integer/);

  const dir = await Deno.makeTempDir({ prefix: "rafter-cli-" });
  const [client, peer] = freePorts(2);
  const node = new Running([
    "registry",
    "--listen",
    `127.0.0.1:${client}`,
    "--peer-listen",
    `127.0.0.1:${peer}`,
    "--data",
    `${dir}/n1`,
    "--tick-ms",
    "20",
  ], {});
  try {
    const listening = Date.now() + 10_000;
    while (!/listening on/.test(node.stdout) && Date.now() < listening) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(
      node.stdout,
      new RegExp(`listening on tcp://127.0.0.1:${client}`),
    );
    const ls = await rafter(["ls", "--registry", `127.0.0.1:${client}`]);
    expectCode(ls, 0);
    node.process.kill("SIGINT");
    assert.equal(await node.exit(), 0);
    assert.match(node.stdout, /registry n1 stopped\n$/);
  } finally {
    try {
      node.process.kill("SIGKILL");
    } catch { /* exited */ }
    await node.done;
    await Deno.remove(dir, { recursive: true });
  }
});

// --- against a cluster ---------------------------------------------------------

Deno.test("rafter against a 3-node cluster with a bound hello server: every command", async (t) => {
  const cluster = new LocalCluster();
  try {
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader();
    await cluster.startHello("hello-1");
    const hello = cluster.child("hello-1").output.join("\n").match(
      /hello-1 serving on (tcp:\/\/127\.0\.0\.1:\d+), bound as "hello" with lease (\S+)/,
    );
    assert.ok(hello !== null);
    const [, helloUrl, helloLease] = hello;
    const env = { RAFTER_REGISTRY: cluster.registryUrls.join(",") };
    const run = (...args: string[]) => rafter(args, env);

    await t.step("status: one row per member, the leader, exit 0", async () => {
      const status = await run("status");
      expectCode(status, 0);
      const lines = status.stdout.trimEnd().split("\n");
      assert.deepEqual(cells(lines[0]), [
        "ID",
        "URL",
        "ROLE",
        "TERM",
        "LEADER",
        "COMMIT",
        "APPLIED",
        "REVISION",
        "ERRORS",
      ]);
      assert.equal(lines.length, 5);
      for (const [i, id] of ["n1", "n2", "n3"].entries()) {
        const row = cells(lines[i + 1]);
        assert.equal(row.length, 9, lines[i + 1]);
        assert.equal(row[0], id);
        assert.equal(row[1], cluster.registry.get(id));
        assert.equal(row[2], id === leader ? "leader" : "follower");
        assert.match(row[3], /^\d+$/);
        assert.equal(row[4], leader);
        assert.match(row[5], /^\d+$/);
        assert.match(row[6], /^\d+$/);
        assert.match(row[7], /^\d+$/);
        assert.equal(row[8], "-");
      }
      assert.match(
        lines[4],
        new RegExp(`^leader ${leader}, term \\d+; 3 of 3 members answered$`),
      );
      assert.equal(status.stderr, "");

      // Given one node, it asks the members that node reports.
      const one = await rafter(["status", "--json"], {
        RAFTER_REGISTRY: cluster.registry.get("n2")!,
      });
      expectCode(one, 0);
      const json = JSON.parse(one.stdout) as {
        leader: string;
        nodes: {
          id: string;
          url: string;
          status: RegistryStatus;
          error: null;
        }[];
      };
      assert.equal(json.leader, leader);
      assert.deepEqual(json.nodes.map((n) => [n.id, n.url, n.error]), [
        ["n1", cluster.registry.get("n1"), null],
        ["n2", cluster.registry.get("n2"), null],
        ["n3", cluster.registry.get("n3"), null],
      ]);
      assert.equal(json.nodes[0].status.members.length, 3);
    });

    await t.step(
      "ls: names and endpoint counts, then the revision",
      async () => {
        const ls = await run("ls");
        expectCode(ls, 0);
        assert.equal(
          ls.stdout,
          `NAME   ENDPOINTS\nhello  1\nrevision ${revisionOf(ls)}\n`,
        );
        const none = await run("ls", "nothing/");
        expectCode(none, 0);
        assert.equal(
          none.stdout,
          `NAME  ENDPOINTS\n(none)\nrevision ${revisionOf(none)}\n`,
        );
        const json = await run("ls", "--json");
        expectCode(json, 0);
        const listed = JSON.parse(json.stdout) as ListResult;
        assert.deepEqual(listed.names, [{ name: "hello", count: 1 }]);
      },
    );

    await t.step(
      "lookup: the endpoints; a query that matches nothing exits 4",
      async () => {
        const found = await run("lookup", "hello");
        expectCode(found, 0);
        const lines = found.stdout.trimEnd().split("\n");
        assert.deepEqual(cells(lines[0]), [
          "ID",
          "URL",
          "STATE",
          "WEIGHT",
          "ZONE",
          "LOAD",
          "LEASE",
          "ATTRS",
        ]);
        const row = cells(lines[1]);
        assert.deepEqual(
          [row[0], row[1], row[2], row[3], row[4], row[6], row[7]],
          ["hello-1", helloUrl, "serving", "1", "-", helloLease, "-"],
        );
        assert.match(row[5], /^(\d+|-)$/); // load: "-" until its first keep-alive
        assert.match(lines[2], /^revision \d+$/);
        assert.equal(lines.length, 3);

        const empty = await run("lookup", "hello?version=9");
        expectCode(empty, 4);
        assert.equal(empty.stdout, "");
        assert.match(
          empty.stderr,
          /^rafter: 1 endpoint is bound under "hello" but it does not match the query version=9 \(revision \d+\); it has no attributes; rafter lookup hello lists it\n$/,
        );
        const emptyJson = await run("lookup", "nothing", "--json");
        expectCode(emptyJson, 4);
        assert.deepEqual(
          (JSON.parse(emptyJson.stdout) as LookupResult).endpoints,
          [],
        );
      },
    );

    await t.step(
      "lookup of a name whose only endpoint fails its health check says so",
      async () => {
        // Nothing listens on port 9: the leader's tcp probes fail.
        expectCode(
          await run(
            "bind",
            "chk",
            "tcp://127.0.0.1:9",
            "--id",
            "c1",
            "--check",
            "tcp",
          ),
          0,
        );
        let last: Run | null = null;
        for (let i = 0; i < 100; i++) {
          last = await run("lookup", "chk");
          if (/failing its health check/.test(last.stderr)) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        expectCode(last!, 4);
        assert.match(
          last!.stderr,
          /^rafter: 1 endpoint\(s\) is bound under "chk" but failing its health check \(revision \d+\); --all shows it\n$/,
        );
        const all = await run("lookup", "chk", "--all");
        expectCode(all, 0);
        assert.match(all.stdout, /c1 +tcp:\/\/127\.0\.0\.1:9 +unhealthy/);
        expectCode(await run("unbind", "chk", "c1"), 0);
      },
    );

    await t.step(
      "bind, lookup with a query, drain, unbind; a missing binding exits 4",
      async () => {
        const bound = await run(
          "bind",
          "svc?version=1",
          "127.0.0.1:9301",
          "--id",
          "a",
          "--zone",
          "z1",
          "--weight",
          "3",
        );
        expectCode(bound, 0);
        assert.match(
          bound.stdout,
          /^bound "a" \(tcp:\/\/127\.0\.0\.1:9301\) under "svc" at revision \d+\n$/,
        );
        const other = await run(
          "bind",
          "svc",
          "tcp://127.0.0.1:9302",
          "--id",
          "b",
          "--json",
        );
        expectCode(other, 0);
        const otherResult = JSON.parse(other.stdout) as BindResult;
        assert.equal(otherResult.endpoint.id, "b");
        assert.equal(otherResult.leaseId, null);

        const query = await run("lookup", "svc?version=1");
        expectCode(query, 0);
        assert.equal(
          query.stdout,
          [
            "ID  URL                   STATE    WEIGHT  ZONE  LOAD  LEASE  ATTRS",
            "a   tcp://127.0.0.1:9301  serving  3       z1    -     -      version=1",
            `revision ${revisionOf(query)}`,
            "",
          ].join("\n"),
        );

        // --limit: the first N in binding order, and how many matched.
        const limited = await run("lookup", "svc", "--limit", "1");
        expectCode(limited, 0);
        assert.equal(
          limited.stdout,
          [
            "ID  URL                   STATE    WEIGHT  ZONE  LOAD  LEASE  ATTRS",
            "a   tcp://127.0.0.1:9301  serving  3       z1    -     -      version=1",
            `revision ${revisionOf(limited)}, 1 of 2 endpoints shown (--limit)`,
            "",
          ].join("\n"),
        );
        const badLimit = await run("lookup", "svc", "--limit", "0");
        expectCode(badLimit, 2);
        assert.match(
          badLimit.stderr,
          /--limit must be an integer of at least 1, not "0"/,
        );

        const drained = await run("drain", "svc", "a");
        expectCode(drained, 0);
        assert.match(
          drained.stdout,
          /^"a" of "svc" is draining \(revision \d+\)\n$/,
        );
        const state = await run("lookup", "svc?version=1", "--json");
        assert.equal(
          (JSON.parse(state.stdout) as LookupResult).endpoints[0].state,
          "draining",
        );
        const undone = await run("drain", "svc", "a", "--undo");
        expectCode(undone, 0);
        assert.match(
          undone.stdout,
          /^"a" of "svc" is serving \(revision \d+\)\n$/,
        );

        const unbound = await run("unbind", "svc", "a");
        expectCode(unbound, 0);
        assert.match(
          unbound.stdout,
          /^unbound "a" from "svc" at revision \d+\n$/,
        );
        const again = await run("unbind", "svc", "a");
        expectCode(again, 4);
        assert.equal(again.stdout, "");
        assert.equal(
          again.stderr,
          'rafter: nothing is bound as "a" under "svc"; rafter lookup svc lists what is\n',
        );
        const drainMissing = await run("drain", "svc", "a");
        expectCode(drainMissing, 4);
        assert.equal(
          drainMissing.stderr,
          'rafter: nothing is bound as "a" under "svc"; rafter lookup svc lists what is\n',
        );
        expectCode(await run("unbind", "svc", "b"), 0);

        // --local --ttl-ms: the lease is granted first (a local binding
        // cannot grant one), and the binding lives on that one node.
        const n2 = cluster.registry.get("n2")!;
        const local = await run(
          "bind",
          "loc",
          "tcp://127.0.0.1:9306",
          "--id",
          "l",
          "--local",
          "--ttl-ms",
          "5000",
          "--registry",
          n2,
        );
        expectCode(local, 0);
        const localLease = local.stdout.match(
          new RegExp(
            `^bound "l" \\(tcp://127\\.0\\.0\\.1:9306\\) under "loc" in the local area of ${n2} at revision \\d+, lease (\\S+) \\(ttl 5000 ms\\)`,
          ),
        )?.[1];
        assert.ok(localLease !== undefined, local.stdout);
        const here = await run("lookup", "loc", "--registry", n2);
        expectCode(here, 0);
        assert.match(
          here.stdout,
          new RegExp(
            `^l \\(local\\) +tcp://127\\.0\\.0\\.1:9306 +serving +1 +- +- +${localLease} +-$`,
            "m",
          ),
        );
        const elsewhere = cluster.registry.get("n1")!;
        expectCode(await run("lookup", "loc", "--registry", elsewhere), 4);
        expectCode(
          await run("unbind", "loc", "l", "--local", "--registry", n2),
          0,
        );
        expectCode(await run("lease", "revoke", localLease), 0);

        // An error answer from the registry: exit 1, its message.
        const wildcard = await run("bind", "svc", "tcp://0.0.0.0:9303");
        expectCode(wildcard, 1);
        assert.match(
          wildcard.stderr,
          /^rafter: Invalid params: "endpoint\.url" .* wildcard address/,
        );
      },
    );

    await t.step(
      "lease grant, bind --lease, ttl, ls, keepalive, revoke; an unknown lease exits 4",
      async () => {
        const granted = await run("lease", "grant", "30000");
        expectCode(granted, 0);
        const match = granted.stdout.match(
          /^lease (\S+) granted, ttl 30000 ms \(bind with --lease \1; renew with rafter lease keepalive \1\)\n$/,
        );
        assert.ok(match !== null, granted.stdout);
        const lease = match[1];
        expectCode(
          await run(
            "bind",
            "svc",
            "tcp://127.0.0.1:9304",
            "--id",
            "c",
            "--lease",
            lease,
          ),
          0,
        );

        const ttl = await run("lease", "ttl", lease);
        expectCode(ttl, 0);
        const lines = ttl.stdout.trimEnd().split("\n");
        assert.deepEqual(cells(lines[0]), [
          "LEASE",
          "TTL_MS",
          "REMAINING_MS",
          "BINDINGS",
        ]);
        const row = cells(lines[1]);
        assert.equal(row[0], lease);
        assert.equal(row[1], "30000");
        assert.ok(Number(row[2]) > 20_000 && Number(row[2]) <= 30_000, row[2]);
        assert.equal(row[3], "svc/c");

        const ls = await run("lease", "ls", "--json");
        expectCode(ls, 0);
        const leases = (JSON.parse(ls.stdout) as {
          leases: { id: string; bindings: unknown[] }[];
        }).leases;
        assert.deepEqual(
          leases.map((l) => [l.id, l.bindings]).sort(),
          [[helloLease, [{ name: "hello", id: "hello-1" }]], [lease, [{
            name: "svc",
            id: "c",
          }]]].sort(),
        );
        const table = await run("lease", "ls");
        expectCode(table, 0);
        assert.match(
          table.stdout,
          new RegExp(`^${lease} +30000 +\\d+ +svc/c$`, "m"),
        );

        const renewed = await run("lease", "keepalive", lease);
        expectCode(renewed, 0);
        assert.equal(renewed.stdout, `lease ${lease} renewed, ttl 30000 ms\n`);

        const revoked = await run("lease", "revoke", lease);
        expectCode(revoked, 0);
        assert.match(
          revoked.stdout,
          new RegExp(
            `^lease ${lease} revoked, 1 binding removed \\(revision \\d+\\)\n$`,
          ),
        );
        const gone = await run("lease", "ttl", lease);
        expectCode(gone, 4);
        assert.match(
          gone.stderr,
          new RegExp(`^rafter: Lease not found: lease ${lease} does not exist`),
        );
        const goneJson = await run("lease", "keepalive", lease, "--json");
        expectCode(goneJson, 4);
        assert.equal(goneJson.stdout, "");
        assert.equal(JSON.parse(goneJson.stderr).error.code, -32007);

        const granted2 = await run(
          "lease",
          "grant",
          "5000",
          "--id",
          "cli-test",
          "--json",
        );
        expectCode(granted2, 0);
        const result = JSON.parse(granted2.stdout) as LeaseGrantResult;
        assert.deepEqual([result.id, result.ttlMs], ["cli-test", 5000]);
        expectCode(await run("lease", "revoke", "cli-test"), 0);

        const tooShort = await run("lease", "grant", "10");
        expectCode(tooShort, 1);
        assert.match(
          tooShort.stderr,
          /^rafter: Invalid params: "ttlMs" is 10 ms; it must be at least/,
        );
      },
    );

    await t.step("watch --count N prints N events and exits 0", async () => {
      const watch = new Running(["watch", "w/", "--count", "3"], env);
      await watch.waitForStderr(/Ctrl-C stops/);
      assert.match(
        watch.stderr,
        /^watching names under "w\/" from revision \d+; Ctrl-C stops\n$/,
      );
      expectCode(
        await run("bind", "w/one", "tcp://127.0.0.1:9305", "--id", "x"),
        0,
      );
      expectCode(await run("drain", "w/one", "x"), 0);
      expectCode(await run("unbind", "w/one", "x"), 0);
      assert.equal(await watch.exit(), 0);
      const lines = watch.stdout.trimEnd().split("\n");
      assert.equal(lines.length, 3, watch.stdout);
      const revisions = lines.map((l) => Number(l.split(" ")[0]));
      assert.deepEqual(lines, [
        `${revisions[0]} put    w/one x tcp://127.0.0.1:9305 serving`,
        `${revisions[1]} put    w/one x tcp://127.0.0.1:9305 draining`,
        `${revisions[2]} delete w/one x tcp://127.0.0.1:9305 unbound`,
      ]);
      assert.deepEqual(revisions, [
        revisions[0],
        revisions[0] + 1,
        revisions[0] + 2,
      ]);

      // --from replays them, as JSON lines.
      const replay = await run(
        "watch",
        "w/",
        "--from",
        String(revisions[0]),
        "--count",
        "3",
        "--json",
      );
      expectCode(replay, 0);
      const events = replay.stdout.trimEnd().split("\n").map((l) =>
        JSON.parse(l) as WatchEvent
      );
      assert.deepEqual(
        events.map((
          e,
        ) => [e.revision, e.type, e.name, e.endpoint.id, e.reason]),
        [
          [revisions[0], "put", "w/one", "x", undefined],
          [revisions[0] + 1, "put", "w/one", "x", undefined],
          [revisions[0] + 2, "delete", "w/one", "x", "unbound"],
        ],
      );
      assert.equal(replay.stderr, "");
    });

    await t.step("watch ends on SIGINT with exit 130", async () => {
      const watch = new Running(["watch", ""], env);
      await watch.waitForStderr(/Ctrl-C stops/);
      watch.process.kill("SIGINT");
      assert.equal(await watch.exit(), 130);
      assert.equal(watch.stdout, "");
    });

    await t.step(
      "call: positional and named params, the result as JSON; nothing bound exits 4",
      async () => {
        const greeting = await run("call", "hello", "greet", '["Ada"]');
        expectCode(greeting, 0);
        assert.equal(
          greeting.stdout,
          '{\n  "greeting": "Hello, Ada!",\n  "server": "hello-1"\n}\n',
        );
        const ping = await run("call", "hello", "rpc.ping", "--json");
        expectCode(ping, 0);
        assert.equal(ping.stdout, '"pong"\n');

        // An object is sent as named params; greet takes them too. A wrong
        // type is the server's error answer (exit 1).
        const named = await run("call", "hello", "greet", '{"name":"Ada"}');
        expectCode(named, 0);
        assert.equal(
          named.stdout,
          '{\n  "greeting": "Hello, Ada!",\n  "server": "hello-1"\n}\n',
        );
        const wrong = await run("call", "hello", "greet", "[42]");
        expectCode(wrong, 1);
        assert.equal(
          wrong.stderr,
          'rafter: Invalid params: greet takes the name to greet: ["Ada"] or { "name": "Ada" }\n',
        );
        // A method that takes named params: a registry node bound as a service.
        expectCode(
          await run(
            "bind",
            "registry-n1",
            cluster.registry.get("n1")!,
            "--id",
            "n1",
          ),
          0,
        );
        const lookedUp = await run(
          "call",
          "registry-n1",
          "registry.lookup",
          '{"name":"hello"}',
        );
        expectCode(lookedUp, 0);
        const result = JSON.parse(lookedUp.stdout) as LookupResult;
        assert.deepEqual(result.endpoints.map((e) => e.id), ["hello-1"]);
        expectCode(await run("unbind", "registry-n1", "n1"), 0);

        const nothing = await run("call", "nobody", "greet", '["Ada"]');
        expectCode(nothing, 4);
        assert.equal(
          nothing.stderr,
          'rafter: No endpoints: nothing is bound under "nobody"; start a server that binds it, or check the name\n',
        );
        const missingMethod = await run("call", "hello", "shout", "--json");
        expectCode(missingMethod, 1);
        assert.equal(missingMethod.stdout, "");
        assert.equal(JSON.parse(missingMethod.stderr).error.code, -32601);
      },
    );

    await t.step(
      "member list: every member as the leader sees it, with match index and lag",
      async () => {
        const list = await run("member", "list");
        expectCode(list, 0);
        const lines = list.stdout.trimEnd().split("\n");
        assert.deepEqual(cells(lines[0]), [
          "ID",
          "ROLE",
          "KIND",
          "PEER_URL",
          "CLIENT_URL",
          "MATCH",
          "LAG",
        ]);
        assert.equal(lines.length, 5, list.stdout);
        for (const [i, id] of ["n1", "n2", "n3"].entries()) {
          const row = cells(lines[i + 1]);
          assert.deepEqual(row.slice(0, 5), [
            id,
            id === leader ? "leader" : "follower",
            "voter",
            cluster.peers.get(id),
            cluster.registry.get(id),
          ]);
          assert.match(row[5], /^\d+$/, lines[i + 1]);
          assert.match(row[6], /^\d+$/, lines[i + 1]);
        }
        assert.match(
          lines[4],
          new RegExp(
            `^leader ${leader}, term \\d+, last index \\d+, commit index \\d+$`,
          ),
        );
        // Asked of a follower, it comes from the leader all the same.
        const follower = leader === "n1" ? "n2" : "n1";
        const json = await rafter(["member", "list", "--json"], {
          RAFTER_REGISTRY: cluster.registry.get(follower)!,
        });
        expectCode(json, 0);
        const result = JSON.parse(json.stdout) as MemberListResult;
        assert.equal(result.leader, leader);
        assert.deepEqual(
          result.members.map((m) => [m.id, m.kind, m.lag === null]),
          [["n1", "voter", false], ["n2", "voter", false], [
            "n3",
            "voter",
            false,
          ]],
        );
      },
    );

    await t.step(
      "leader transfer --to a member, then to any, then back; rafter status agrees each time",
      async () => {
        /** Polls rafter status --json until every member names `expected` (or any other than `not`). */
        const agreedLeader = async (
          check: (leader: string | null) => boolean,
        ): Promise<string> => {
          let last = "";
          for (let tries = 0; tries < 20; tries++) {
            const status = await run("status", "--json");
            last = status.stdout;
            const json = JSON.parse(status.stdout) as {
              leader: string | null;
              nodes: { status: RegistryStatus | null }[];
            };
            if (
              status.code === 0 && check(json.leader) &&
              json.nodes.every((n) => n.status?.leader === json.leader)
            ) {
              return json.leader!;
            }
            await new Promise((r) => setTimeout(r, 100));
          }
          throw new Error(`status never agreed:\n${last}`);
        };
        const target = leader === "n1" ? "n2" : "n1";
        const named = await run("leader", "transfer", "--to", target);
        expectCode(named, 0);
        assert.match(
          named.stdout,
          new RegExp(
            `^leadership moved from ${leader} to ${target} in \\d+ ms; ${target} leads term \\d+ at ${
              cluster.registry.get(target)
            }\n$`,
          ),
        );
        assert.equal(await agreedLeader((l) => l === target), target);

        const any = await run("leader", "transfer", "--json");
        expectCode(any, 0);
        const moved = JSON.parse(any.stdout) as LeaderTransferResult;
        assert.equal(moved.previousLeader, target);
        assert.notEqual(moved.leader, target);
        assert.equal(moved.leaderUrl, cluster.registry.get(moved.leader));
        assert.equal(
          await agreedLeader((l) => l === moved.leader),
          moved.leader,
        );

        // Back to where the other steps expect it.
        const back = await run("leader", "transfer", "--to", leader);
        expectCode(back, 0);
        assert.match(
          back.stdout,
          moved.leader === leader
            ? new RegExp(
              `^${leader} already leads \\(term \\d+\\); nothing to do\n$`,
            )
            : new RegExp(
              `^leadership moved from ${moved.leader} to ${leader} in `,
            ),
        );
        assert.equal(await agreedLeader((l) => l === leader), leader);

        const unknown = await run("leader", "transfer", "--to", "n9");
        expectCode(unknown, 1);
        assert.equal(
          unknown.stderr,
          'rafter: Invalid params: "to" must name a member of this registry (n1, n2, n3), not "n9"\n',
        );
      },
    );

    await t.step(
      "status shows a stopped member as unreachable, with the reason, and exits 1",
      async () => {
        const victim = leader === "n3" ? "n2" : "n3";
        await cluster.kill(victim);
        // The leader notices the lost link within a few ticks.
        let status = await run("status");
        for (
          let tries = 0;
          tries < 20 && !status.stdout.includes(`cannot reach ${victim}`);
          tries++
        ) {
          await new Promise((r) => setTimeout(r, 100));
          status = await run("status");
        }
        expectCode(status, 1);
        const rows = status.stdout.trimEnd().split("\n");
        const row = rows.find((line) => line.startsWith(`${victim} `))!;
        assert.match(
          row,
          new RegExp(
            `^${victim}\\s+${
              cluster.registry.get(victim)
            }\\s+unreachable(\\s+-){5}\\s+cannot connect to ${
              cluster.registry.get(victim)
            }: Connection refused`,
          ),
        );
        assert.match(rows.at(-1)!, /; 2 of 3 members answered$/);
        const leaderRow = rows.find((line) => line.startsWith(`${leader} `))!;
        assert.match(
          leaderRow,
          new RegExp(`cannot reach ${victim} \\(`),
        );
        // member list says so too, not "follower".
        const list = await run("member", "list");
        expectCode(list, 0);
        const listed = list.stdout.split("\n").find((line) =>
          line.startsWith(`${victim} `)
        )!;
        assert.deepEqual(cells(listed).slice(0, 3), [
          victim,
          "unreachable",
          "voter",
        ]);
      },
    );
  } finally {
    await cluster.stop();
  }
});

/** Runs `openssl ...args`; its exit code and output. */
async function openssl(args: string[]): Promise<Run> {
  const started = Date.now();
  const output = await new Deno.Command("openssl", {
    args,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return {
    code: output.code,
    stdout: text.decode(output.stdout),
    stderr: text.decode(output.stderr),
    ms: Date.now() - started,
  };
}

Deno.test("rafter cert: ca and member n1 make files openssl verifies, keys 0600, nothing overwritten without --force", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_cert_e2e_" });
  try {
    const ca = await rafter(["cert", "ca", "--out", dir]);
    expectCode(ca, 0);
    assert.match(ca.stdout, /wrote CA "Rafter CA": .*ca\.pem .*ca\.key/);
    const member = await rafter([
      "cert",
      "member",
      "n1",
      "--ca",
      dir,
      "--host",
      "127.0.0.1",
      "--host",
      "n1.example.com",
      "--out",
      dir,
    ]);
    expectCode(member, 0);
    for (const key of ["ca.key", "n1.key"]) {
      assert.equal(
        (await Deno.stat(`${dir}/${key}`)).mode! & 0o777,
        0o600,
        key,
      );
    }
    assert.equal((await Deno.stat(`${dir}/n1.pem`)).mode! & 0o077, 0o044);

    const verified = await openssl([
      "verify",
      "-CAfile",
      `${dir}/ca.pem`,
      `${dir}/n1.pem`,
    ]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /n1\.pem: OK/);
    const shown = await openssl([
      "x509",
      "-in",
      `${dir}/n1.pem`,
      "-noout",
      "-ext",
      "subjectAltName",
    ]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /URI:rafter:\/\/member\/n1/);
    assert.match(shown.stdout, /IP Address:127\.0\.0\.1/);
    assert.match(shown.stdout, /DNS:n1\.example\.com/);
    // The key is the certificate's.
    const fromKey = await openssl(["pkey", "-in", `${dir}/n1.key`, "-pubout"]);
    const fromCert = await openssl([
      "x509",
      "-in",
      `${dir}/n1.pem`,
      "-noout",
      "-pubkey",
    ]);
    assert.equal(fromKey.stdout, fromCert.stdout);

    // A file that exists is left alone (exit 1), unless --force.
    const before = await Deno.readTextFile(`${dir}/ca.key`);
    const again = await rafter(["cert", "ca", "--out", dir]);
    expectCode(again, 1);
    assert.match(
      again.stderr,
      /ca\.pem exists: not overwritten \(--force overwrites it\)/,
    );
    assert.equal(await Deno.readTextFile(`${dir}/ca.key`), before);
    const memberAgain = await rafter([
      "cert",
      "member",
      "n1",
      "--ca",
      dir,
      "--out",
      dir,
    ]);
    expectCode(memberAgain, 1);
    assert.match(memberAgain.stderr, /n1\.pem exists/);
    await Deno.chmod(`${dir}/n1.key`, 0o644);
    const forced = await rafter([
      "cert",
      "member",
      "n1",
      "--ca",
      dir,
      "--out",
      dir,
      "--host",
      "localhost",
      "--force",
    ]);
    expectCode(forced, 0);
    assert.equal((await Deno.stat(`${dir}/n1.key`)).mode! & 0o777, 0o600);

    // A server and a client certificate of the same CA.
    const server = await rafter([
      "cert",
      "server",
      "billing",
      "--ca",
      dir,
      "--host",
      "localhost",
      "--out",
      `${dir}/srv`,
    ]);
    expectCode(server, 0);
    const client = await rafter([
      "cert",
      "client",
      "ops",
      "--ca",
      dir,
      "--out",
      `${dir}/srv`,
    ]);
    expectCode(client, 0);
    for (const name of ["billing", "ops"]) {
      const ok = await openssl([
        "verify",
        "-CAfile",
        `${dir}/ca.pem`,
        `${dir}/srv/${name}.pem`,
      ]);
      assert.equal(ok.code, 0, ok.stderr);
    }
    const purpose = await openssl([
      "x509",
      "-in",
      `${dir}/srv/ops.pem`,
      "-noout",
      "-ext",
      "extendedKeyUsage",
    ]);
    assert.match(purpose.stdout, /TLS Web Client Authentication/);
    assert.doesNotMatch(purpose.stdout, /Server Authentication/);

    // Names that are no file names, a missing CA.
    const bad = await rafter([
      "cert",
      "member",
      "../evil",
      "--ca",
      dir,
      "--out",
      dir,
    ]);
    expectCode(bad, 2);
    assert.match(bad.stderr, /ID must be 1\.\.64 characters/);
    const noCa = await rafter([
      "cert",
      "member",
      "n2",
      "--ca",
      `${dir}/none`,
      "--out",
      dir,
    ]);
    expectCode(noCa, 1);
    assert.match(noCa.stderr, /cannot read the CA .*rafter cert ca --out/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("rafter token create (a process) prints a token the registry knows; with no token, exit 5 says to set RAFTER_TOKEN", async () => {
  const { fakeAuthRegistry } = await import("../testing/fake_auth_registry.ts");
  const fake = fakeAuthRegistry();
  try {
    const made = await rafter(
      [
        "token",
        "create",
        "billing",
        "--perm",
        "read:billing",
        "--perm",
        "bind:billing",
      ],
      { RAFTER_REGISTRY: fake.url, RAFTER_TOKEN: fake.admin },
    );
    expectCode(made, 0);
    const token = made.stdout.trim();
    assert.match(token, /^rft_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.match(made.stderr, /not shown again/);
    const known = [...fake.tokens.values()].find((t) => t.token === token);
    assert.deepEqual(known?.permissions, ["read:billing", "bind:billing"]);

    // The new token works, and says who it is.
    const status = await rafter(["auth", "status"], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: token,
    });
    expectCode(status, 0);
    assert.match(
      status.stdout,
      /you: token [0-9a-f]{16} "billing" \(read:billing, bind:billing\)/,
    );

    const none = await rafter(["token", "list"], { RAFTER_REGISTRY: fake.url });
    expectCode(none, 5);
    assert.match(none.stderr, /set RAFTER_TOKEN \(or --token\)/);
  } finally {
    await fake.close();
  }
});
