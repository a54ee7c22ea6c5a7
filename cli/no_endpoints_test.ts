/**
 * What `rafter call` and `rafter lookup` say when they find no endpoint,
 * and whose registry their hints name for `NAME@CLUSTER`, against
 * registry nodes in this process:
 *
 * - a query that matches none of the endpoints bound under the name
 *   (`hello?id=c1`, `hello?version=9`) says how many are bound, that none
 *   matches, what attributes they have, and that an id is no attribute;
 *   it no longer says "nothing is bound";
 * - `name@b` failing in sibling cluster b names cluster b and its
 *   registry URLs as the local registry tells them, not the local
 *   registry's; a suffix that names no sibling says so.
 */

import assert from "node:assert/strict";
import { startRegistryNode } from "../registry/main.ts";
import type { RegistryNode } from "../registry/mod.ts";
import { EXIT, runCli } from "./main.ts";

interface Ran {
  code: number;
  out: string;
  err: string;
}

/** Runs the CLI in this process against `registry`. */
async function rafter(registry: string, ...args: string[]): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    env: (name) => name === "RAFTER_REGISTRY" ? registry : undefined,
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** Asserts the exit code, showing the output when it differs. */
function expectCode(ran: Ran, code: number): void {
  assert.equal(
    ran.code,
    code,
    `exit ${ran.code}, wanted ${code}\nout:\n${ran.out}\nerr:\n${ran.err}`,
  );
}

/** A one-node registry in this process (fast ticks), and its folder. */
async function node(
  federation?: Parameters<typeof startRegistryNode>[0]["federation"],
): Promise<{ node: RegistryNode; dir: string }> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_no_endpoints_" });
  return {
    node: await startRegistryNode({
      id: "n1",
      listen: { hostname: "127.0.0.1", port: 0 },
      dataDir: dir,
      tickMs: 10,
      federation,
    }),
    dir,
  };
}

Deno.test("rafter call and lookup of a query that matches none of the endpoints bound say so, with their attributes, and that an id is no attribute", async () => {
  const { node: registry, dir } = await node();
  const url = registry.url;
  try {
    for (
      const [id, attrs] of [["c1", ["version=1", "zone=x"]], ["c2", [
        "version=2",
      ]]] as const
    ) {
      expectCode(
        await rafter(
          url,
          "bind",
          "hello",
          "tcp://127.0.0.1:9",
          "--id",
          id,
          ...attrs.flatMap((a) => ["--attr", a]),
        ),
        EXIT.ok,
      );
    }
    const attributes = "their attributes: version=1, version=2, zone=x";
    const idHint =
      `"id" is not an attribute: a query matches the attributes endpoints were bound with (rafter bind --attr key=value), not their ids (rafter lookup hello lists them); to call one endpoint alone, bind it with an attribute of its own and query that.`;

    const byId = await rafter(url, "call", "hello?id=c1", "greet");
    expectCode(byId, EXIT.notFound);
    assert.equal(
      byId.err,
      `rafter: No endpoints: 2 endpoints are bound under "hello" but none matches the query id=c1; ${attributes}; rafter lookup hello lists them\n${idHint}`,
    );
    const byVersion = await rafter(url, "call", "hello?version=9", "greet");
    expectCode(byVersion, EXIT.notFound);
    assert.equal(
      byVersion.err,
      `rafter: No endpoints: 2 endpoints are bound under "hello" but none matches the query version=9; ${attributes}; rafter lookup hello lists them`,
    );
    // --json: the same words, and the counts.
    const json = await rafter(
      url,
      "call",
      "hello?version=9",
      "greet",
      "--json",
    );
    expectCode(json, EXIT.notFound);
    const error = JSON.parse(json.err).error;
    assert.equal(error.code, -32002);
    assert.match(error.message, /^No endpoints: 2 endpoints are bound under/);
    assert.equal(error.data.name, "hello?version=9");
    assert.deepEqual(
      [
        error.data.base,
        error.data.query,
        error.data.bound,
        error.data.matching,
      ],
      ["hello", { version: "9" }, 2, 0],
    );

    // lookup: the same words, with the revision.
    const lookedUpById = await rafter(url, "lookup", "hello?id=c1");
    expectCode(lookedUpById, EXIT.notFound);
    assert.match(
      lookedUpById.err,
      new RegExp(
        `^rafter: 2 endpoints are bound under "hello" but none matches the query id=c1 \\(revision \\d+\\); ${attributes}; rafter lookup hello lists them\n`,
      ),
    );
    assert.equal(lookedUpById.err.split("\n")[1], idHint);
    const lookedUp = await rafter(url, "lookup", "hello?version=9");
    expectCode(lookedUp, EXIT.notFound);
    assert.match(
      lookedUp.err,
      new RegExp(
        `^rafter: 2 endpoints are bound under "hello" but none matches the query version=9 \\(revision \\d+\\); ${attributes}; rafter lookup hello lists them$`,
      ),
    );
    assert.doesNotMatch(lookedUp.err + byVersion.err, /nothing is bound/);
    // A query that matches: found, as before.
    expectCode(await rafter(url, "lookup", "hello?version=1"), EXIT.ok);

    // Nothing bound under the name at all: said as before.
    const nobody = await rafter(url, "call", "nobody", "greet");
    expectCode(nobody, EXIT.notFound);
    assert.equal(
      nobody.err,
      'rafter: No endpoints: nothing is bound under "nobody"; start a server that binds it, or check the name',
    );
    const nobodyQueried = await rafter(url, "lookup", "nobody?version=1");
    expectCode(nobodyQueried, EXIT.notFound);
    assert.match(
      nobodyQueried.err,
      /^rafter: nothing is bound under "nobody" at all \(revision \d+\), so no endpoint matches version=1; rafter ls lists the names bound$/,
    );

    // An endpoint that matches but fails its health check: said so.
    expectCode(
      await rafter(
        url,
        "bind",
        "chk",
        "tcp://127.0.0.1:9",
        "--id",
        "k1",
        "--attr",
        "version=1",
        "--check",
        "tcp",
      ),
      EXIT.ok,
    );
    let unhealthy: Ran | null = null;
    for (let i = 0; i < 200; i++) {
      unhealthy = await rafter(url, "call", "chk?version=1", "greet");
      if (/failing its health check/.test(unhealthy.err)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expectCode(unhealthy!, EXIT.notFound);
    assert.equal(
      unhealthy!.err,
      'rafter: No endpoints: 1 endpoint(s) is bound under "chk" matching version=1 but failing its health check; rafter lookup chk --all shows it',
    );
  } finally {
    await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * Cluster a (one node in this process, domain acme) with two siblings: b
 * (a one-node registry with "hello" bound, id h1, version=1) and s (a
 * listener that accepts connections and never answers); runs `body` with
 * them, then stops them.
 */
async function withFederation(
  body: (
    f: { local: string; b: RegistryNode; silentUrl: string },
  ) => Promise<void>,
): Promise<void> {
  const b = await node();
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of silent) held.push(conn);
  })();
  const silentUrl = `tcp://127.0.0.1:${(silent.addr as Deno.NetAddr).port}`;
  const a = await node({
    domain: "acme",
    cluster: "a",
    siblings: { b: [b.node.url], s: [silentUrl] },
  });
  try {
    expectCode(
      await rafter(
        b.node.url,
        "bind",
        "hello",
        "tcp://127.0.0.1:9",
        "--id",
        "h1",
        "--attr",
        "version=1",
      ),
      EXIT.ok,
    );
    await body({ local: a.node.url, b: b.node, silentUrl });
  } finally {
    await a.node.stop();
    await b.node.stop();
    silent.close();
    await accepting.catch(() => {});
    for (const conn of held) conn.close();
    await Deno.remove(a.dir, { recursive: true });
    await Deno.remove(b.dir, { recursive: true });
  }
}

Deno.test("rafter call and lookup of name@b that fail in sibling cluster b name b and its registry URLs as the local registry told them, not the local registry's", async () => {
  await withFederation(async ({ local, b, silentUrl }) => {
    const found = await rafter(local, "lookup", "hello@b");
    expectCode(found, EXIT.ok);
    assert.match(found.out, /^h1\s/m);
    const siblingHint = (cluster: string, url: string) =>
      `Cluster ${cluster}'s registry URLs: ${url} (the registry at ${local} names them for its sibling ${cluster})`;

    // Cluster s does not answer: the hint names s's registry.
    for (
      const command of [["lookup", "hello@s"], ["call", "hello@s", "greet"]]
    ) {
      const late = await rafter(local, ...command, "--timeout-ms", "800");
      expectCode(late, EXIT.unavailable);
      assert.equal(
        late.err.split("\n").slice(1).join("\n"),
        `${
          siblingHint("s", silentUrl)
        }. rafter status --registry ${silentUrl} shows which of cluster s's members answer; --timeout-ms N allows more time (now 800 ms).${
          command[0] === "lookup"
            ? " Without a quorum, --serializable answers from one node (possibly stale)."
            : ""
        }`,
        late.err,
      );
    }

    // Cluster b stopped: the hint names b's registry.
    const bUrl = b.url;
    await b.stop();
    for (
      const command of [["lookup", "hello@b"], ["call", "hello@b", "greet"]]
    ) {
      const down = await rafter(local, ...command, "--timeout-ms", "2000");
      expectCode(down, EXIT.unavailable);
      assert.match(down.err, /^rafter: Unavailable: /);
      assert.equal(
        down.err.split("\n").slice(1).join("\n"),
        `${
          siblingHint("b", bUrl)
        }; rafter status --registry ${bUrl} shows which of cluster b's members answer.`,
        down.err,
      );
    }
  });
});

Deno.test("rafter call and lookup of name@b that find no endpoint say it is in cluster b; a suffix that names no sibling, or one before the query, says so", async () => {
  await withFederation(async ({ local, b }) => {
    // A query that matches none in b: b's endpoints, said to be in b.
    const none = await rafter(local, "call", "hello?version=9@b", "greet");
    expectCode(none, EXIT.notFound);
    assert.equal(
      none.err,
      'rafter: No endpoints: 1 endpoint is bound under "hello" in cluster b but it does not match the query version=9; its attributes: version=1; rafter lookup hello@b lists it',
    );
    const nothing = await rafter(local, "lookup", "ghost@b");
    expectCode(nothing, EXIT.notFound);
    assert.match(
      nothing.err,
      new RegExp(
        `^rafter: nothing is bound under "ghost" in cluster b \\(revision \\d+\\); rafter ls --registry ${b.url} lists the names bound in cluster b$`,
      ),
    );
    // The query written after the suffix: a local name, and how to write it.
    const misplaced = await rafter(local, "lookup", "hello@b?version=1");
    expectCode(misplaced, EXIT.notFound);
    assert.equal(
      misplaced.err.split("\n")[1],
      `"hello@b?version=1" is a local name: the @b of a sibling cluster goes after the query, as in 'hello?version=1@b'.`,
    );
    // rafter watch hello@b says it does not follow the suffix, and how to
    // watch b (stopped at once, as Ctrl-C would).
    const stop = new AbortController();
    const watchErr: string[] = [];
    const watching = runCli(["watch", "hello@b"], {
      out: () => {},
      err: (line) => {
        watchErr.push(line);
        if (/^watching /.test(line)) stop.abort();
      },
      env: (name) => name === "RAFTER_REGISTRY" ? local : undefined,
      signal: stop.signal,
    });
    const ceiling = setTimeout(() => stop.abort(), 10_000);
    await watching;
    clearTimeout(ceiling);
    assert.ok(
      watchErr.includes(
        `note: rafter watch does not follow "@b" yet: it watches the local name "hello@b"; to watch hello in cluster b, run rafter --registry ${b.url} watch hello`,
      ),
      watchErr.join("\n"),
    );
    // A cluster the local registry does not know.
    const unknown = await rafter(local, "call", "hello@c", "greet");
    expectCode(unknown, EXIT.notFound);
    assert.equal(
      unknown.err,
      `rafter: No endpoints: nothing is bound under "hello@c"; start a server that binds it, or check the name\n` +
        `c is not a sibling cluster of the registry at ${local} (its siblings: b, s), so "hello@c" was looked up there as a local name, "@c" and all.`,
    );
    // This cluster's own name, and an @ in a query's value: no such line.
    const own = await rafter(local, "lookup", "hello@a");
    expectCode(own, EXIT.notFound);
    assert.match(
      own.err,
      /^rafter: nothing is bound under "hello" \(revision \d+\); rafter ls lists the names bound$/,
    );
    const email = await rafter(local, "lookup", "users?email=ada@example.com");
    expectCode(email, EXIT.notFound);
    assert.match(
      email.err,
      /^rafter: nothing is bound under "users" at all \(revision \d+\), so no endpoint matches email=ada%40example\.com; rafter ls lists the names bound$/,
    );
  });
});
