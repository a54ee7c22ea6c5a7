import assert from "node:assert/strict";
import { dial } from "../rpc/transport/dial.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import { authenticatePeer, ClusterKey } from "./peer_auth.ts";
import { PeerDirectory } from "./peer_directory.ts";
import { servePeers } from "./deno.ts";
import { type PeerProbeOptions, probePeer } from "./peer_probe.ts";

const CLUSTER = "0123456789abcdef";
const PEERS = { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" };

/** A member n1 as a registry runs it: it admits unknown authenticated peers. */
async function withMember(
  fn: (
    member: {
      url: string;
      key: ClusterKey;
      directory: PeerDirectory;
      admitted: string[];
      stepped: number;
      logs: string[];
    },
  ) => Promise<void>,
): Promise<void> {
  const key = await ClusterKey.fromSecret(TEST_SECRET);
  const directory = new PeerDirectory("n1", PEERS);
  const member = {
    url: "",
    key,
    directory,
    admitted: [] as string[],
    stepped: 0,
    logs: [] as string[],
  };
  const server = servePeers({
    id: "n1",
    clusterId: CLUSTER,
    directory,
    key,
    onStep: (messages) => member.stepped += messages.length,
    onNewPeer: (id, peerUrl) => {
      member.admitted.push(id);
      directory.add(id, peerUrl);
      return true;
    },
    log: (line, level) => member.logs.push(`${level} ${line}`),
    logIntervalMs: 0,
  });
  member.url = server.url;
  try {
    await fn(member);
  } finally {
    await server.close();
  }
}

/** Probes member n1 as n4, with its key and cluster unless told otherwise. */
function probeMember(
  member: { url: string; key: ClusterKey },
  options: Partial<PeerProbeOptions> = {},
) {
  return probePeer(member.url, {
    key: member.key,
    clusterId: CLUSTER,
    from: "n4",
    to: "n1",
    ...options,
  });
}

Deno.test("probePeer: the right secret from a non-member is ok, and the probe is closed, not admitted", async () => {
  await withMember(async (member) => {
    const result = await probeMember(member);
    assert.deepEqual(result, { outcome: "ok", detail: "the secrets match" });
    // The member checked our proof too, said so, and admitted nothing.
    await waitFor(
      () =>
        member.logs.some((l) =>
          /join probe from n4: its cluster secret matches/.test(l)
        ),
      "the member to log the probe",
      5_000,
    );
    // At info, and not as a refused connection: a probe is no fault.
    assert.match(
      member.logs.find((l) => /join probe from n4/.test(l))!,
      /^info n1: answered a join probe from n4: its cluster secret matches; a probe is closed, never admitted \(from 127\.0\.0\.1:\d+\)$/,
    );
    assert.ok(
      !member.logs.some((l) => /refused a peer connection/.test(l)),
      member.logs.join("\n"),
    );
    assert.deepEqual(member.admitted, []);
    assert.equal(member.directory.has("n4"), false);
  });
});

Deno.test("probePeer: a probe that claims a member's id completes the proofs but never speaks for it", async () => {
  await withMember(async (member) => {
    const result = await probeMember(member, { from: "n2" });
    assert.equal(result.outcome, "ok");
    await waitFor(
      () => member.logs.some((l) => /join probe from n2/.test(l)),
      "the member to log the probe",
      5_000,
    );
    // An admitted connection is recorded as heard from; a probe is not.
    const n2 = member.directory.status().find((p) => p.id === "n2")!;
    assert.equal(n2.lastHeardAt, null);
    // A real handshake from n2 still works afterwards.
    const connection = await dial(member.url);
    try {
      await authenticatePeer(connection, {
        key: member.key,
        clusterId: CLUSTER,
        from: "n2",
        to: "n1",
        clientUrl: null,
      });
      const heard = member.directory.status().find((p) => p.id === "n2")!;
      assert.notEqual(heard.lastHeardAt, null);
    } finally {
      connection.close();
    }
  });
});

Deno.test("probePeer: another cluster secret is wrongSecret, and the member admits nothing", async () => {
  await withMember(async (member) => {
    const other = await ClusterKey.fromSecret(
      "another-secret-of-at-least-32-characters",
    );
    const result = await probeMember(member, { key: other });
    assert.equal(result.outcome, "wrongSecret");
    assert.match(result.detail, /does not verify with our cluster secret/);
    assert.deepEqual(member.admitted, []);
  });
});

Deno.test("probePeer: another cluster id is otherCluster, with the member's reason", async () => {
  await withMember(async (member) => {
    const result = await probeMember(member, { clusterId: "fedcba9876543210" });
    assert.equal(result.outcome, "otherCluster");
    assert.match(
      result.detail,
      /is for cluster "fedcba9876543210", but n1 belongs to cluster "0123456789abcdef"/,
    );
  });
});

Deno.test("probePeer: a hello addressed to another member is refused", async () => {
  await withMember(async (member) => {
    const result = await probeMember(member, { to: "n3" });
    assert.equal(result.outcome, "refused");
  });
});

Deno.test("probePeer: nothing listening is unreachable", async () => {
  const [port] = freePorts(1);
  const result = await probePeer(`tcp://127.0.0.1:${port}`, {
    key: await ClusterKey.random(),
    clusterId: CLUSTER,
    from: "n4",
    to: "n1",
    timeoutMs: 2_000,
  });
  assert.equal(result.outcome, "unreachable");
  assert.equal(result.detail, "connection refused");
});

Deno.test("probePeer: a listener that accepts and never answers is noAnswer after timeoutMs", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })();
  try {
    const started = Date.now();
    const result = await probePeer(
      `tcp://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
      {
        key: await ClusterKey.random(),
        clusterId: CLUSTER,
        from: "n4",
        to: "n1",
        timeoutMs: 300,
      },
    );
    const ms = Date.now() - started;
    assert.equal(result.outcome, "noAnswer");
    assert.match(result.detail, /no answer to peer\.hello within 300 ms/);
    assert.ok(ms >= 250 && ms < 5_000, `took ${ms} ms`);
  } finally {
    listener.close();
    for (const conn of held) conn.close();
    await accepting.catch(() => {});
  }
});
