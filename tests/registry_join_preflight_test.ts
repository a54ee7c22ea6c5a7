/**
 * `--join` authenticates before it changes anything (issue 16), on real
 * processes: a node with another cluster secret is refused by the
 * preflight probe of the members' peer ports, exits 1 with the reason and
 * adds no learner; the same node with the cluster's secret then joins and
 * is promoted.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import { waitFor } from "../testing/time.ts";
import { makeTestPki } from "../testing/certs.ts";
import type { MemberListResult } from "../protocol/registry.ts";

async function memberList(url: string): Promise<MemberListResult> {
  const connection = await dial(url);
  try {
    return await connection.call<MemberListResult>("registry.memberList", {});
  } finally {
    connection.close();
  }
}

Deno.test("--join with another cluster secret exits 1 with the reason before adding a learner; with the cluster's secret it joins", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  try {
    await cluster.startWithJoiners(1, "n2");
    await cluster.waitForLeader(15_000);
    const n1 = cluster.registry.get("n1")!;
    const wrongSecret = `${await cluster.dataDirOf("wrong")}_secret`;
    await Deno.writeTextFile(
      wrongSecret,
      "a-different-secret-0123456789abcdefghij\n",
    );
    const started = Date.now();
    const refused = await cluster.startNode("n2", {
      join: n1,
      secretFile: wrongSecret,
      ready: /cannot join/,
    });
    assert.equal(await refused.exited, 1, refused.output.join("\n"));
    const ms = Date.now() - started;
    // Process start included; the probe itself takes milliseconds.
    assert.ok(ms < 15_000, `took ${ms} ms`);
    const output = refused.output.join("\n");
    assert.match(
      output,
      /registry n2: cannot join: member n1 at tcp:\/\/127\.0\.0\.1:\d+ refused the cluster secret in \S+_secret \(its proof did not verify\): copy the cluster's secret file to this node/,
    );
    assert.doesNotMatch(output, /added as a learner/);
    const after = await memberList(n1);
    assert.deepEqual(after.members.map((m) => [m.id, m.kind]), [
      ["n1", "voter"],
    ]);
    // Nothing of the refused start is left behind.
    await assert.rejects(
      Deno.stat(await cluster.dataDirOf("n2")),
      Deno.errors.NotFound,
    );

    // No secret file at all: the one it generates is refused, and removed.
    const missing = `${await cluster.dataDirOf("missing")}_secret`;
    const generated = await cluster.startNode("n2", {
      join: n1,
      secretFile: missing,
      ready: /cannot join/,
    });
    assert.equal(await generated.exited, 1, generated.output.join("\n"));
    assert.match(
      generated.output.join("\n"),
      /cannot join: member n1 at \S+ refused the cluster secret in \S+missing_secret/,
    );
    await assert.rejects(Deno.stat(missing), Deno.errors.NotFound);
    assert.deepEqual((await memberList(n1)).members.map((m) => m.id), ["n1"]);

    await cluster.startNode("n2", { join: n1, ready: /added as a learner/ });
    await waitFor(
      async () =>
        (await memberList(n1).catch(() => null))?.members.find((m) =>
          m.id === "n2"
        )?.kind === "voter",
      "n2 to be promoted",
      20_000,
    );
    assert.ok(cluster.child("n2").running);
  } finally {
    await cluster.stop();
  }
});

Deno.test("--join over mutual TLS with a member certificate from another CA exits 1 before adding a learner; with the cluster's certificate it joins", async () => {
  const cluster = new LocalCluster({
    tickMs: 50,
    electionTicks: 10,
    secure: true,
  });
  try {
    await cluster.startWithJoiners(1, "n2");
    await cluster.waitForLeader(15_000);
    const n1 = cluster.registry.get("n1")!;
    const admin = await cluster.adminToken();
    const members = async () => {
      const connection = await cluster.dialNode("n1", { token: admin });
      try {
        const list = await connection.call<MemberListResult>(
          "registry.memberList",
          {},
        );
        return list.members.map((m) => m.id);
      } finally {
        connection.close();
      }
    };
    // n2's certificate, from a CA the cluster does not trust.
    const otherDir = await cluster.dataDirOf("other_ca");
    await Deno.mkdir(otherDir, { recursive: true });
    const other = await makeTestPki(otherDir, {
      members: ["n2"],
      caName: "another CA",
    });
    const started = Date.now();
    const refused = await cluster.startNode("n2", {
      join: n1,
      ready: /cannot join/,
      // Later flags win: the cluster's own n2 files are given first.
      args: [
        "--peer-tls-cert",
        other.certs.n2.certFile,
        "--peer-tls-key",
        other.certs.n2.keyFile,
      ],
    });
    assert.equal(await refused.exited, 1, refused.output.join("\n"));
    assert.ok(Date.now() - started < 20_000);
    const output = refused.output.join("\n");
    assert.match(
      output,
      /registry n2: cannot join: cannot reach the peer port of the leader n1: .*is this node's certificate signed by the CA the members trust, --peer-tls-ca/,
    );
    assert.doesNotMatch(output, /added as a learner/);
    assert.deepEqual(await members(), ["n1"]);

    await cluster.startNode("n2", { join: n1, ready: /added as a learner/ });
    await waitFor(
      async () => (await members().catch((): string[] => [])).includes("n2"),
      "n2 in the member list",
      20_000,
    );
  } finally {
    await cluster.stop();
  }
});
