/**
 * End-to-end: the demo's scenario on real processes (3 registry nodes, hello
 * servers, SIGKILLs), and the demo program itself, run and interrupted.
 */

import assert from "node:assert/strict";
import { DEMO_TTL_MS, runScenario } from "../examples/demo/scenario.ts";
import type { LookupResult } from "../protocol/registry.ts";

const ROOT = new URL("../", import.meta.url);

function ids(lookup: LookupResult | string | null): string[] {
  assert.ok(
    lookup !== null && typeof lookup !== "string",
    `lookup failed: ${lookup}`,
  );
  return lookup.endpoints.map((e) => e.id).sort();
}

Deno.test("calls survive a server kill and a registry leader kill; the restarted node catches up", async () => {
  const lines: string[] = [];
  const result = await runScenario({
    timeline: {
      killServerAt: 1500,
      killLeaderAt: 3000,
      bindThirdAt: 4500,
      restartNodeAt: 5500,
      endAt: 7500,
    },
    log: (line) => lines.push(line),
  });
  const context = `\n${lines.join("\n")}\nfailures: ${result.failures}`;

  assert.equal(result.completed, true, context);
  assert.ok(result.calls > 1000, `only ${result.calls} calls${context}`);
  assert.equal(result.failed, 0, `calls failed${context}`);
  // Both survivors answered; the killed server answered only before its kill.
  assert.ok((result.answeredBy["hello-2"] ?? 0) > 0, context);
  assert.ok((result.answeredBy["hello-3"] ?? 0) > 0, context);
  assert.ok((result.answeredBy["hello-1"] ?? 0) > 0, context);

  // A new leader took over, and the bind made after the kill went through it.
  assert.notEqual(result.newLeader, null, context);
  assert.notEqual(result.newLeader, result.killedLeader, context);
  assert.equal(result.thirdBound, true, context);

  // hello-1's lease expired: it left the stubs list of every running node
  // within its TTL (plus a fail-over, when the leader kill came first).
  const gone = Object.entries(result.serverGoneMs);
  assert.ok(gone.length >= 2, `hello-1 left ${gone.length} nodes${context}`);
  for (const [id, ms] of gone) {
    assert.ok(
      ms <= DEMO_TTL_MS + (result.failoverMs ?? 0) + 1_000,
      `hello-1 left ${id} after ${ms} ms${context}`,
    );
  }
  // The clients found hello-3 through the watch, well before any poll
  // could have (there is none).
  assert.ok(result.thirdReachedMs !== null, context);
  assert.ok(result.thirdReachedMs! < 1_000, context);

  // Every node, the restarted one included, answers a linearizable lookup
  // with the same bindings: hello-2 and hello-3, no longer hello-1.
  const expected = ["hello-2", "hello-3"];
  assert.deepEqual(Object.keys(result.lookups).sort(), ["n1", "n2", "n3"]);
  const revisions = new Set<number>();
  for (const [id, lookup] of Object.entries(result.lookups)) {
    assert.deepEqual(ids(lookup), expected, `node ${id}${context}`);
    revisions.add((lookup as LookupResult).revision);
  }
  assert.equal(revisions.size, 1, `revisions differ${context}`);

  // The restarted node, asked on its own (serializable), caught up from its
  // data folder and the leader.
  assert.deepEqual(ids(result.restartedLookup), expected, context);
});

/** PIDs of the live children of `pid` (Linux /proc). */
async function childrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = await Deno.readTextFile(`/proc/${entry.name}/stat`);
      const parent = Number(
        stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1],
      );
      if (parent === pid) children.push(Number(entry.name));
    } catch {
      // The process ended while we looked.
    }
  }
  return children;
}

function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

Deno.test("the demo stops every process it started when interrupted with Ctrl-C", async () => {
  const demo = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "examples/demo/main.ts"],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output: string[] = [];
  const ticked = Promise.withResolvers<void>();
  const reading = (async () => {
    let rest = "";
    for await (const text of demo.stdout.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + text).split("\n");
      rest = parts.pop()!;
      output.push(...parts);
      if (parts.some((line) => line.startsWith("t= 1s"))) ticked.resolve();
    }
  })();
  const stderr = demo.stderr.pipeThrough(new TextDecoderStream());
  const errors = (async () => {
    let text = "";
    for await (const chunk of stderr) text += chunk;
    return text;
  })();
  const timer = setTimeout(
    () => ticked.reject(new Error("no t= 1s line")),
    30_000,
  );
  try {
    await ticked.promise;
  } finally {
    clearTimeout(timer);
  }
  const children = await childrenOf(demo.pid);
  assert.equal(children.length, 5, `expected 3 nodes + 2 servers: ${children}`);

  demo.kill("SIGINT");
  const status = await demo.status;
  await reading;
  const stderrText = await errors;
  assert.equal(status.code, 130, `${output.join("\n")}\n${stderrText}`);
  assert.ok(
    output.some((line) => line.startsWith("summary: ")),
    output.join("\n"),
  );
  // Give the children a moment to be reaped, then none may be left.
  const deadline = Date.now() + 5000;
  while (children.some(alive) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.deepEqual(children.filter(alive), [], "processes left behind");
});

/**
 * Runs `deno task demo` with `args`, asserts it ran to its end (exit 0, a
 * progress line per second without failures, a summary line) within
 * 60 s, and returns its output lines.
 */
async function runDemoTask(args: string[]): Promise<string[]> {
  const started = Date.now();
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["task", "demo", ...args],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout);
  const context = `${text}\n${new TextDecoder().decode(stderr)}`;
  assert.equal(code, 0, context);
  const lines = text.trimEnd().split("\n");
  const ticks = lines.filter((line) =>
    /^t=\s*\d+s\s+ok\s+\d+\s+failed 0/.test(line)
  );
  assert.ok(
    ticks.length >= 10,
    `only ${ticks.length} progress lines\n${context}`,
  );
  assert.match(lines.at(-1)!, /^summary: \d+ calls, 0 failed, /, context);
  assert.ok(Date.now() - started < 60_000, "the demo took over 60 s");
  return lines;
}

Deno.test("deno task demo runs to its end, prints a line per second and a summary, exits 0", async () => {
  const lines = await runDemoTask([]);
  assert.ok(
    !lines.some((line) => line.startsWith("secure:")),
    lines.join("\n"),
  );
});

Deno.test("deno task demo -- --secure runs the same story with TLS and tokens on and says so", async () => {
  const lines = await runDemoTask(["--", "--secure"]);
  const context = lines.join("\n");
  assert.ok(
    lines.some((line) =>
      /^secure: TLS on every link with certificates from a throw-away CA \(\/.*\/pki\/ca\.pem\): .*mutual TLS with member certificates.*--auth/
        .test(line)
    ),
    context,
  );
  assert.ok(
    lines.some((line) =>
      /^tokens: the demo uses the bootstrap admin token \(.*admin_token\) to make the others and for its status polls; hello servers bind with a bind:hello token .*read:hello token \([0-9a-f]{16}\)$/
        .test(line)
    ),
    context,
  );
  // Every registry node and hello server listened on TLS.
  assert.ok(
    lines.some((line) =>
      /^secure: registry at tls:\/\/127\.0\.0\.1:\d+, tls:\/\/127\.0\.0\.1:\d+, tls:\/\/127\.0\.0\.1:\d+; hello servers at tls:\/\/127\.0\.0\.1:\d+, tls:\/\/127\.0\.0\.1:\d+$/
        .test(line)
    ),
    context,
  );
  // The same story: the failover, the third server, every node agreeing.
  const summary = lines.at(-1)!;
  assert.match(summary, /hello-3 bound after the leader kill/, context);
  const lookups = /; lookups (.*)$/.exec(summary)?.[1] ?? "";
  const nodes = lookups.split(", ").map((part) => {
    const [, id, ids, revision] = /^(n\d): (.*)@rev(\d+)$/.exec(part) ?? [];
    return { id, ids: ids?.split("+").sort().join("+"), revision };
  });
  assert.deepEqual(nodes.map((n) => n.id), ["n1", "n2", "n3"], context);
  for (const node of nodes) {
    assert.equal(node.ids, "hello-2+hello-3", context);
    assert.equal(node.revision, nodes[0].revision, context);
  }
});
