/**
 * Issue #16, shown with real processes: a 3-node registry (`deno run
 * registry/main.ts`, peer mutual TLS with member certificates and TLS on
 * the client port, all on 127.0.0.1) and a forger in this test process
 * that holds n2's real certificate and key and the cluster secret.
 *
 * - It cannot say `peer.hello` as n1 or n3 (its certificate names n2).
 * - Authenticated as n2, the messages it sends claiming `from: "n1"` or
 *   `"n3"` are dropped by the peer port, and those it sends as n2 that
 *   only a leader may send (n2 does not lead) are dropped by the Raft
 *   core: terms, leader and replicas stay as they were, a write still
 *   commits, and `registry.status` counts every drop (`security`).
 * - A certificate of another CA, or none, gets no TLS connection.
 * - Holding the leader's certificate, it can send appends; one that
 *   contradicts a committed entry stops the follower with
 *   `RAFT_COMMITTED_ENTRY_CONFLICT`, naming the index and the sender.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import type { ByteStream } from "../rpc/transport/transport.ts";
import { denoDialer } from "../adapter/deno/tcp.ts";
import {
  authenticatePeer,
  ClusterKey,
  PeerHandshakeError,
  PeerIdentityError,
} from "../raft/peer_auth.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import type { Message } from "../raft/types.ts";
import type {
  LookupResult,
  PeerSecurityStatus,
  RegistryStatus,
} from "../protocol/registry.ts";
import { makeTestPki, type TestPki } from "../testing/certs.ts";
import { freePorts } from "../testing/ports.ts";
import { spawnRegistry } from "./_registry_process.ts";
import { logPrefix } from "./_log_prefix.ts";

const IDS = ["n1", "n2", "n3"] as const;
type Id = typeof IDS[number];
const SECRET = "forgery-e2e-cluster-secret-".padEnd(48, "x");

/** Polls `condition` every 50 ms until it holds; @throws after `timeoutMs`. */
async function eventually<T>(
  condition: () => Promise<T | null | undefined | false>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  for (let round = 0; round < 100_000; round++) {
    try {
      const value = await condition();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${
      last === null ? "" : ` (last error: ${last})`
    }`,
  );
}

/** Rejects with `what` timed out if `promise` takes over `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) =>
        timer = setTimeout(
          () => reject(new Error(`${what}: over ${ms} ms`)),
          ms,
        )
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** One planned node, and its process once started. */
interface Node {
  id: Id;
  /** Client address, `127.0.0.1:port` (TLS). */
  client: string;
  /** Peer address, `127.0.0.1:port` (mutual TLS). */
  peer: string;
  dataDir: string;
  process?: ReturnType<typeof spawnRegistry>;
  exited?: number;
}

/** The running cluster: its PKI, nodes, and calls on their client ports. */
class Cluster {
  readonly nodes = new Map<Id, Node>();
  readonly #clientDialer: ReturnType<typeof denoDialer>;

  constructor(readonly root: string, readonly pki: TestPki) {
    this.#clientDialer = denoDialer({ caFile: pki.caFile });
    const ports = freePorts(2 * IDS.length);
    IDS.forEach((id, i) => {
      this.nodes.set(id, {
        id,
        client: `127.0.0.1:${ports[2 * i]}`,
        peer: `127.0.0.1:${ports[2 * i + 1]}`,
        dataDir: join(root, id),
      });
    });
  }

  node(id: Id): Node {
    return this.nodes.get(id)!;
  }

  /** Starts node `id` and waits until it listens. */
  async start(id: Id): Promise<void> {
    const node = this.node(id);
    const cert = this.pki.certs[id];
    const child = spawnRegistry(this.root, [
      "--id",
      id,
      "--listen",
      node.client,
      "--peers",
      IDS.map((peer) => `${peer}=${this.node(peer).peer}`).join(","),
      "--cluster-secret-file",
      join(this.root, "cluster_secret"),
      "--data",
      node.dataDir,
      "--tick-ms",
      "50",
      // Election timeout 1.5..3 s: a loaded machine's late heartbeat does
      // not start an election while the test checks that terms stay put.
      "--election-ticks",
      "30",
      "--tls-cert",
      cert.certFile,
      "--tls-key",
      cert.keyFile,
      "--peer-tls-cert",
      cert.certFile,
      "--peer-tls-key",
      cert.keyFile,
      "--peer-tls-ca",
      this.pki.caFile,
    ]);
    node.process = child;
    child.child.status.then((status) => node.exited = status.code);
    await eventually(
      () => {
        if (node.exited !== undefined) {
          throw new Error(`${id} exited (${node.exited}):\n${child.output}`);
        }
        return Promise.resolve(/listening on/.test(child.output));
      },
      `${id} to listen`,
      30_000,
    );
  }

  /** One call on node `id`'s client port (TLS). */
  async call<T>(id: Id, method: string, params?: unknown): Promise<T> {
    const connection = await dial(`tls://${this.node(id).client}`, {
      dialer: this.#clientDialer,
      connectTimeoutMs: 2000,
    });
    try {
      return await connection.call<T>(method, params as never, {
        timeoutMs: 5000,
      });
    } finally {
      connection.close();
    }
  }

  status(id: Id): Promise<RegistryStatus> {
    return this.call<RegistryStatus>(id, "registry.status");
  }

  async lookup(id: Id): Promise<string[]> {
    const result = await this.call<LookupResult>(id, "registry.lookup", {
      name: "svc",
      consistency: "serializable",
    });
    return result.endpoints.map((e) => `${e.id}=${e.url}`).sort();
  }

  /** Waits until the nodes `ids` agree on a leader; @returns it. */
  async leaderOf(ids: readonly Id[]): Promise<Id> {
    return await eventually(async () => {
      const statuses = await Promise.all(ids.map((id) => this.status(id)));
      const leader = statuses[0].leader;
      return leader !== null && statuses.every((s) => s.leader === leader)
        ? leader as Id
        : null;
    }, `${ids.join(", ")} to agree on a leader`);
  }

  /** Waits until every running node `ids` applied `index`. */
  async converged(ids: readonly Id[], index: number): Promise<void> {
    await eventually(async () => {
      const statuses = await Promise.all(ids.map((id) => this.status(id)));
      return statuses.every((s) =>
        s.commitIndex >= index && s.appliedIndex >= index
      );
    }, `${ids.join(", ")} to apply index ${index}`);
  }

  /** Ends every node still running (SIGTERM, then SIGKILL), by its PID. */
  async stop(): Promise<void> {
    await Promise.all([...this.nodes.values()].map(async (node) => {
      const child = node.process;
      if (child === undefined) return;
      const signal = (name: Deno.Signal) => {
        try {
          child.child.kill(name);
        } catch {
          // Exited already.
        }
      };
      signal("SIGTERM");
      try {
        await within(child.exit(), 10_000, `${node.id} to exit`);
      } catch {
        signal("SIGKILL");
        await child.exit();
      }
    }));
  }
}

/**
 * A forger's peer connection to `target`, over mutual TLS with
 * `certFile`/`keyFile`, trusting `caFile` for the target's certificate;
 * @returns the connection and the stream (for the server's certificate).
 */
async function dialPeer(
  target: Node,
  tls: { caFile: string; certFile?: string; keyFile?: string },
): Promise<{ connection: RpcConnection; stream: ByteStream }> {
  const dialer = denoDialer(tls);
  let stream: ByteStream | null = null;
  const connection = await dial(`tls://${target.peer}`, {
    dialer: async (url, options) => (stream = await dialer(url, options)),
    connectTimeoutMs: 2000,
  });
  return { connection, stream: stream! };
}

function counters(status: RegistryStatus): PeerSecurityStatus {
  assert.ok(
    status.security !== undefined,
    `${status.id}'s status has no security counters`,
  );
  return status.security;
}

/** `after - before`, field by field, for the counters the test moves. */
function moved(before: PeerSecurityStatus, after: PeerSecurityStatus) {
  const a = after.raft.anomalies;
  const b = before.raft.anomalies;
  return {
    forgedFrom: after.peerServer.forgedFrom - before.peerServer.forgedFrom,
    identityRefused: after.peerServer.identityRefused -
      before.peerServer.identityRefused,
    refusedConnections: after.peerServer.refusedConnections -
      before.peerServer.refusedConnections,
    invalid: after.peerServer.invalid - before.peerServer.invalid,
    wrongTo: after.peerServer.wrongTo - before.peerServer.wrongTo,
    appendNotFromLeader: a.appendNotFromLeader - b.appendNotFromLeader,
    timeoutNowNotFromLeader: a.timeoutNowNotFromLeader -
      b.timeoutNowNotFromLeader,
    successFromLaterTerm: a.successFromLaterTerm - b.successFromLaterTerm,
    voteFromNonVoter: a.voteFromNonVoter - b.voteFromNonVoter,
    fromSelf: a.fromSelf - b.fromSelf,
  };
}

Deno.test("a peer holding n2's certificate cannot speak as n1 or n3, n2's own leader-only messages are dropped, another CA's certificate gets no connection, and a conflicting committed entry stops a follower", async (t) => {
  const started = Date.now();
  const root = await Deno.makeTempDir({ prefix: "rafter-forgery-e2e-" });
  await Deno.mkdir(join(root, "pki"));
  await Deno.mkdir(join(root, "other-ca"));
  const pki = await makeTestPki(join(root, "pki"), { members: [...IDS] });
  const otherPki = await makeTestPki(join(root, "other-ca"), {
    members: ["n2"],
  });
  await Deno.writeTextFile(join(root, "cluster_secret"), SECRET + "\n", {
    mode: 0o600,
  });
  const cluster = new Cluster(root, pki);
  const seen: Record<string, unknown> = {};
  try {
    // n1 and n3 first: one of them leads, and n2 (the identity the forger
    // holds) follows, so n2 is never the leader.
    await Promise.all([cluster.start("n1"), cluster.start("n3")]);
    const leader = await cluster.leaderOf(["n1", "n3"]);
    await cluster.start("n2");
    assert.equal(await cluster.leaderOf(IDS), leader);
    const others = IDS.filter((id) => id !== "n2"); // n1, n3
    for (const [i, url] of ["9001", "9002"].entries()) {
      await cluster.call(leader, "registry.bind", {
        name: "svc",
        endpoint: { id: `real-${i}`, url: `tcp://127.0.0.1:${url}` },
      });
    }
    const base = await cluster.status(leader);
    await cluster.converged(IDS, base.commitIndex);
    const term = base.term;
    const commit = base.commitIndex;
    const real = await cluster.lookup(leader);
    assert.deepEqual(real, [
      "real-0=tcp://127.0.0.1:9001",
      "real-1=tcp://127.0.0.1:9002",
    ]);
    const before = new Map<Id, RegistryStatus>();
    for (const id of IDS) before.set(id, await cluster.status(id));
    for (const id of IDS) {
      // A clean start: nothing forged, nothing refused for its identity.
      const c = counters(before.get(id)!);
      assert.equal(c.peerServer.forgedFrom, 0, id);
      assert.equal(c.peerServer.identityRefused, 0, id);
      assert.equal(c.peerTransport.identityRefused, 0, id);
      assert.equal(c.raft.anomalies.appendNotFromLeader, 0, id);
    }

    const key = await ClusterKey.fromSecret(SECRET);
    const clusterId = (await readDataDirMeta(cluster.node("n1").dataDir))!
      .clusterId;
    const n2 = pki.certs.n2;
    const n2Status = before.get("n2")!;

    await t.step(
      "peer.hello as n1 or n3 with n2's certificate is refused",
      async () => {
        for (const target of others) {
          for (const claimed of others) {
            const { connection, stream } = await dialPeer(
              cluster.node(target),
              {
                caFile: pki.caFile,
                certFile: n2.certFile,
                keyFile: n2.keyFile,
              },
            );
            try {
              const error = await authenticatePeer(connection, {
                key,
                clusterId,
                from: claimed,
                to: target,
                clientUrl: null,
                peerCertificate: stream.peerCertificate,
                requireCertificate: true,
              }).then(() => null, (e) => e);
              if (claimed === target) {
                // Its own id: refused before the certificate is looked at.
                assert.ok(error instanceof PeerHandshakeError, String(error));
              } else {
                assert.ok(error instanceof PeerIdentityError, String(error));
                assert.match(
                  error.message,
                  new RegExp(
                    `peer\\.hello claims to come from "${claimed}", but the connection's certificate names member "n2"`,
                  ),
                );
              }
            } finally {
              connection.close();
            }
          }
        }
      },
    );

    await t.step(
      "authenticated as n2: forged and leader-only messages are dropped",
      async () => {
        for (const target of others) {
          const { connection, stream } = await dialPeer(cluster.node(target), {
            caFile: pki.caFile,
            certFile: n2.certFile,
            keyFile: n2.keyFile,
          });
          try {
            // The legitimate handshake, announcing n2's real URLs so the
            // target's directory keeps them.
            await authenticatePeer(connection, {
              key,
              clusterId,
              from: "n2",
              to: target,
              clientUrl: n2Status.url,
              peerUrl: n2Status.peerUrl,
              peerCertificate: stream.peerCertificate,
              requireCertificate: true,
            });
            const step = (message: Message) =>
              connection.call("raft.step", [[message]], { timeoutMs: 5000 });
            const forgedBind = JSON.stringify({
              op: "bind",
              name: "svc",
              endpoint: { id: "forged", url: "tcp://127.0.0.1:6666" },
            });
            for (const claimed of others) {
              // Claiming another member's id: the peer port drops them all.
              await step({
                type: "append",
                from: claimed,
                to: target,
                term,
                // Overwrites the committed entry at `commit`.
                prevLogIndex: commit - 1,
                prevLogTerm: term,
                entries: [{ index: commit, term, data: forgedBind }],
                commit,
              });
              await step({
                type: "vote",
                from: claimed,
                to: target,
                term: term + 1,
                lastLogIndex: commit + 100,
                lastLogTerm: term + 1,
              });
              await step({
                type: "voteResponse",
                from: claimed,
                to: target,
                term,
                granted: true,
              });
              await step({
                type: "timeoutNow",
                from: claimed,
                to: target,
                term,
              });
            }
            // As n2 itself, which does not lead term `term`: the Raft core
            // drops them.
            await step({
              type: "append",
              from: "n2",
              to: target,
              term,
              prevLogIndex: commit,
              prevLogTerm: term,
              entries: [{ index: commit + 1, term, data: forgedBind }],
              commit: commit + 1,
            });
            await step({ type: "timeoutNow", from: "n2", to: target, term });
            await step({
              type: "voteResponse",
              from: "n2",
              to: target,
              term: term + 1,
              granted: true,
            });
          } finally {
            connection.close();
          }
        }
        const expected = {
          forgedFrom: 8, // 4 kinds × 2 claimed ids
          identityRefused: 1, // the hello as the other member
          refusedConnections: 2, // that one, and the hello as the target itself
          invalid: 0,
          wrongTo: 0,
          appendNotFromLeader: 1,
          timeoutNowNotFromLeader: 1,
          successFromLaterTerm: 1,
          voteFromNonVoter: 0,
          fromSelf: 0,
        };
        for (const target of others) {
          const after = await eventually(async () => {
            const status = await cluster.status(target);
            const delta = moved(
              counters(before.get(target)!),
              counters(status),
            );
            return delta.appendNotFromLeader >= 1 &&
                delta.timeoutNowNotFromLeader >= 1 &&
                delta.successFromLaterTerm >= 1
              ? status
              : null;
          }, `${target} to count the forged messages`);
          assert.deepEqual(
            moved(counters(before.get(target)!), counters(after)),
            expected,
            target,
          );
          seen[target] = after.security;
        }
        // n2 itself was not talked to: its counters did not move.
        const n2After = await cluster.status("n2");
        assert.deepEqual(
          moved(counters(n2Status), counters(n2After)),
          {
            forgedFrom: 0,
            identityRefused: 0,
            refusedConnections: 0,
            invalid: 0,
            wrongTo: 0,
            appendNotFromLeader: 0,
            timeoutNowNotFromLeader: 0,
            successFromLaterTerm: 0,
            voteFromNonVoter: 0,
            fromSelf: 0,
          },
        );
        assert.equal(counters(n2After).peerTransport.identityRefused, 0);
      },
    );

    await t.step(
      "nothing changed: terms, leader, replicas; a write commits",
      async () => {
        const bound = await cluster.call<{ revision: number }>(
          leader,
          "registry.bind",
          {
            name: "svc",
            endpoint: { id: "real-2", url: "tcp://127.0.0.1:9003" },
          },
        );
        assert.ok(bound.revision > 0);
        const index = (await cluster.status(leader)).commitIndex;
        assert.ok(index > commit, `commit ${commit} → ${index}`);
        // The replicas converge on one log: the same commit and applied
        // index on every node (the leader may have committed more since).
        const statuses = await eventually(async () => {
          const all = await Promise.all(IDS.map((id) => cluster.status(id)));
          return all.every((s) =>
              s.commitIndex === all[0].commitIndex &&
              s.appliedIndex === s.commitIndex && s.commitIndex >= index
            )
            ? all
            : null;
        }, "the replicas to converge");
        const expected = [
          ...real,
          "real-2=tcp://127.0.0.1:9003",
        ];
        for (const status of statuses) {
          const id = status.id as Id;
          assert.equal(status.term, term, `${id}'s term`);
          assert.equal(status.leader, leader, `${id}'s leader`);
          assert.deepEqual(await cluster.lookup(id), expected, id);
        }
      },
    );

    await t.step(
      "rafter status shows the counters (--json) and names them (table)",
      async () => {
        const rafter = (...args: string[]) =>
          new Deno.Command(Deno.execPath(), {
            args: [
              "run",
              "-A",
              new URL("../cli/main.ts", import.meta.url).pathname,
              "status",
              "--registry",
              `tls://${cluster.node("n1").client}`,
              "--cacert",
              pki.caFile,
              ...args,
            ],
            env: { NO_COLOR: "1" },
            stdin: "null",
            stdout: "piped",
            stderr: "piped",
          }).output();
        const [json, table] = await Promise.all([rafter("--json"), rafter()]);
        const text = new TextDecoder();
        const out = text.decode(json.stdout);
        assert.equal(json.code, 0, out + text.decode(json.stderr));
        const nodes = (JSON.parse(out) as {
          nodes: { id: Id; status: RegistryStatus }[];
        }).nodes;
        assert.deepEqual(nodes.map((n) => n.id), [...IDS]);
        for (const { id, status } of nodes) {
          const c = counters(status);
          assert.equal(c.peerServer.forgedFrom, id === "n2" ? 0 : 8, id);
          assert.equal(c.peerServer.identityRefused, id === "n2" ? 0 : 1, id);
          assert.equal(
            c.raft.anomalies.appendNotFromLeader,
            id === "n2" ? 0 : 1,
            id,
          );
        }
        const lines = text.decode(table.stdout).split("\n");
        assert.equal(table.code, 0, lines.join("\n"));
        for (const id of IDS) {
          const row = lines.find((line) => line.startsWith(`${id} `));
          assert.ok(row !== undefined, lines.join("\n"));
          if (id === "n2") {
            assert.doesNotMatch(row, /forged|impossible|certificate/);
            continue;
          }
          assert.match(
            row,
            /peer messages forged for another member: 8; peer connections refused for their certificate: 1; raft messages dropped as impossible: timeoutNowNotFromLeader 1, appendNotFromLeader 1, successFromLaterTerm 1/,
          );
        }
      },
    );

    await t.step(
      "a certificate of another CA, or none, gets no TLS connection",
      async () => {
        const target = cluster.node("n1");
        const beforeTls = counters(await cluster.status("n1"));
        const attempts = [
          {
            certFile: otherPki.certs.n2.certFile,
            keyFile: otherPki.certs.n2.keyFile,
          },
          {},
        ];
        for (const cert of attempts) {
          // TLS 1.3: the client's side may complete before the server checks
          // the client certificate, so the refusal shows at the first call.
          const refused = await dialPeer(target, {
            caFile: pki.caFile,
            ...cert,
          })
            .then(async ({ connection, stream }) => {
              try {
                await authenticatePeer(connection, {
                  key,
                  clusterId,
                  from: "n2",
                  to: "n1",
                  clientUrl: null,
                  peerCertificate: stream.peerCertificate,
                  requireCertificate: true,
                  timeoutMs: 5000,
                });
                return null;
              } catch (error) {
                return error;
              } finally {
                connection.close();
              }
            }, (error) => error);
          assert.ok(
            refused instanceof Error,
            `connected with ${JSON.stringify(cert)}`,
          );
          // The server ends the TLS session: the hello gets no answer.
          assert.ok(refused instanceof PeerHandshakeError, String(refused));
          assert.ok(!(refused instanceof PeerIdentityError), String(refused));
          assert.match(refused.message, /^the peer refused our peer\.hello/);
        }
        // Refused by TLS, before the peer port's handshake: no hello was
        // seen, so no identity refusal was counted.
        const afterTls = counters(await cluster.status("n1"));
        assert.equal(
          afterTls.peerServer.identityRefused,
          beforeTls.peerServer.identityRefused,
        );
        assert.equal(
          afterTls.peerServer.forgedFrom,
          beforeTls.peerServer.forgedFrom,
        );
        // The TLS layer refused them: the peer port never saw a connection.
        assert.equal(
          afterTls.peerServer.refusedConnections,
          beforeTls.peerServer.refusedConnections,
        );
        assert.match(
          cluster.node("n1").process!.output,
          /n1: peer port: TLS handshake with 127\.0\.0\.1 failed/,
        );
      },
    );

    await t.step(
      "holding the leader's certificate: a conflicting committed entry stops n2 with RAFT_COMMITTED_ENTRY_CONFLICT",
      async () => {
        const status = await cluster.status("n2");
        const at = status.commitIndex;
        const leaderCert = pki.certs[leader];
        const { connection, stream } = await dialPeer(cluster.node("n2"), {
          caFile: pki.caFile,
          certFile: leaderCert.certFile,
          keyFile: leaderCert.keyFile,
        });
        try {
          const leaderStatus = await cluster.status(leader);
          await authenticatePeer(connection, {
            key,
            clusterId,
            from: leader,
            to: "n2",
            clientUrl: leaderStatus.url,
            peerUrl: leaderStatus.peerUrl,
            peerCertificate: stream.peerCertificate,
            requireCertificate: true,
          });
          // A leader of term + 1 that rewrites committed entry `at` (term
          // `term`, as every entry since this term's first is).
          await connection.call("raft.step", [[
            {
              type: "append",
              from: leader,
              to: "n2",
              term: term + 1,
              prevLogIndex: at - 1,
              prevLogTerm: term,
              entries: [{
                index: at,
                term: term + 1,
                data: JSON.stringify({
                  op: "unbind",
                  name: "svc",
                  id: "real-0",
                }),
              }],
              commit: at,
            } satisfies Message,
          ]], { timeoutMs: 5000 }).catch(() => {
            // n2 may stop before it answers.
          });
        } finally {
          connection.close();
        }
        const n2Process = cluster.node("n2").process!;
        const code = await within(n2Process.exit(), 20_000, "n2 to stop");
        assert.notEqual(code, 0, n2Process.output);
        assert.match(
          n2Process.output,
          new RegExp(
            `^${
              logPrefix("error", "n2")
            }registry n2: stopped to keep the log safe \\(Raft §5\\.4\\): RAFT_COMMITTED_ENTRY_CONFLICT: n2 holds committed entry ${at} of term ${term}, but ${leader} \\(leader of term ${
              term + 1
            } as it claims\\) sent term ${term + 1} for that index`,
            "m",
          ),
        );
        seen.n2Exit = code;
        // The two others lead on in their term and still take writes.
        await cluster.call(leader, "registry.bind", {
          name: "svc",
          endpoint: { id: "real-3", url: "tcp://127.0.0.1:9004" },
        });
        for (const id of others) {
          const s = await cluster.status(id);
          assert.equal(s.term, term, id);
          assert.equal(s.leader, leader, id);
        }
      },
    );
  } finally {
    await cluster.stop();
    await Deno.remove(root, { recursive: true });
    console.log(
      `peer forgery e2e: ${Date.now() - started} ms; counters seen: ${
        JSON.stringify(seen)
      }`,
    );
  }
});
