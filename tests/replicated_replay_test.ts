/**
 * A membership request's proof is good for one membership only: a
 * `replica.remove` or `replica.add` captured on the client port (plain
 * TCP: anyone on the path can read it) and sent again after the
 * membership changed is refused, so it cannot take out a replica that
 * re-joined with the same peer URL, nor bring back one an operator
 * removed. The genuine requesters still succeed when the membership
 * changed between their look and their ask (they ask again once).
 */

import assert from "node:assert/strict";
import { dial } from "../adapter/deno/mod.ts";
import { serve } from "../adapter/deno/serve.ts";
import { freePorts } from "../testing/ports.ts";
import { delay, waitFor } from "../testing/time.ts";
import { PERMISSION_DENIED, RpcError } from "../rpc/errors.ts";
import {
  type DialFunction,
  NOT_LEADER,
  removeReplica,
  type ReplicaOptions,
  ReplicatedService,
  UNAVAILABLE,
} from "../replicated/service.ts";
import { counter, type Counters } from "../examples/replicated/counter.ts";

const SECRET = "replay-test-secret-0123456789abcdef01";

/** A request as it went on the wire. */
interface Sent {
  method: string;
  params: unknown;
  outcome?: "ok" | RpcError;
}

/**
 * `dial` that records every call made on its connections (method, params
 * and how it ended) into `sent`, and lets `answer` change what comes back.
 */
function recordingDial(
  sent: Sent[],
  answer: (method: string, result: unknown) => unknown = (_, r) => r,
): DialFunction {
  return async (url) => {
    const connection = await dial(url);
    const call = connection.call.bind(connection);
    connection.call = (async (
      method: string,
      params?: unknown,
      options?: Parameters<typeof call>[2],
    ) => {
      const record: Sent = { method, params: structuredClone(params) };
      sent.push(record);
      try {
        const result = await call(
          method,
          params as Parameters<typeof call>[1],
          options,
        );
        record.outcome = "ok";
        return answer(method, result);
      } catch (error) {
        if (error instanceof RpcError) record.outcome = error;
        throw error;
      }
    }) as typeof connection.call;
    return connection;
  };
}

/** Three counter replicas, and how to add, find and stop more. */
async function cluster() {
  const ports = freePorts(4);
  const peers: Record<string, string> = {};
  ["r1", "r2", "r3"].forEach((id, i) =>
    peers[id] = `tcp://127.0.0.1:${ports[i]}`
  );
  const r4Peer = `tcp://127.0.0.1:${ports[3]}`;
  const dirs: string[] = [];
  const live = new Set<ReplicatedService<Counters>>();
  const start = async (
    id: string,
    own: Record<string, string>,
    extra: Partial<ReplicaOptions<Counters>> = {},
    dialer: DialFunction = (url) => dial(url),
  ) => {
    const dataDir = await Deno.makeTempDir();
    dirs.push(dataDir);
    const replica = await ReplicatedService.start<Counters>(
      {
        id,
        peers: own,
        dataDir,
        clusterSecret: SECRET,
        service: counter,
        tickMs: 20,
        log: () => {},
        ...extra,
      },
      serve,
      dialer,
    );
    live.add(replica);
    return replica;
  };
  const [r1] = await Promise.all(
    ["r1", "r2", "r3"].map((id) => start(id, peers)),
  );
  const leader = () =>
    waitFor(
      () => [...live].find((r) => r.status().role === "leader"),
      "a leader",
      10_000,
    );
  await leader();
  return {
    r1,
    /** Starts r4 joining through r1, at the same peer URL every time. */
    joinR4: (dialer?: DialFunction) =>
      start("r4", { r4: r4Peer }, { join: { via: [r1.url] } }, dialer),
    r4Peer,
    async stop(replica: ReplicatedService<Counters>) {
      live.delete(replica);
      await replica.close();
    },
    /** The leader's members and learners. */
    async members() {
      const status = (await leader()).status();
      return { members: status.members, learners: status.learners };
    },
    /** Waits until the leader's configuration is r1..r3 (+ r4 a voter when `withR4`). */
    async settled(withR4: boolean, what: string) {
      await waitFor(
        async () => {
          const { members, learners } = await this.members();
          return learners.length === 0 &&
            Object.keys(members).sort().join() ===
              (withR4 ? "r1,r2,r3,r4" : "r1,r2,r3");
        },
        what,
        20_000,
      );
    },
    /**
     * Sends `params` to the leader's client port as they are (a replay),
     * again while it answers NOT_LEADER or UNAVAILABLE (another change
     * under way), as an attacker would.
     */
    async callLeader(method: string, params: unknown): Promise<unknown> {
      for (let round = 0; round < 100; round++) {
        const connection = await dial((await leader()).url);
        try {
          return await connection.call(
            method,
            params as Record<string, unknown>,
            { timeoutMs: 5_000 },
          );
        } catch (error) {
          if (
            !(error instanceof RpcError) ||
            (error.code !== NOT_LEADER && error.code !== UNAVAILABLE)
          ) throw error;
          await delay(50);
        } finally {
          connection.close();
        }
      }
      throw new Error(`no leader answered ${method}`);
    },
    async close() {
      for (const replica of live) await replica.close();
      for (const dir of dirs) {
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
    },
  };
}

/** The one `method` request in `sent` that succeeded. */
function genuine(sent: Sent[], method: string): Record<string, unknown> {
  const ok = sent.filter((s) => s.method === method && s.outcome === "ok");
  assert.equal(ok.length, 1, `one ${method} went through`);
  return ok[0].params as Record<string, unknown>;
}

/**
 * `method` was refused once as stale (PERMISSION_DENIED, the membership
 * changed), then asked again and went through (NOT_LEADER answers from
 * followers, and UNAVAILABLE ones while another change commits, aside).
 */
function assertAskedAgainOnce(sent: Sent[], method: string): void {
  const asked = sent.filter((s) =>
    s.method === method &&
    !(s.outcome instanceof RpcError &&
      (s.outcome.code === NOT_LEADER || s.outcome.code === UNAVAILABLE))
  );
  assert.equal(asked.length, 2, `${method} asked twice`);
  const [first, second] = asked;
  assert.ok(first.outcome instanceof RpcError, "the first was refused");
  assert.equal(first.outcome.code, PERMISSION_DENIED);
  assert.match(first.outcome.message, /membership changed since this proof/);
  assert.equal(second.outcome, "ok", "the second went through");
  assert.notDeepEqual(second.params, first.params, "with a fresh proof");
}

Deno.test("a replica.remove captured on the wire and replayed after the replica re-joined is refused: it stays a member", async () => {
  const c = await cluster();
  try {
    const first = await c.joinR4();
    await c.settled(true, "r4 to join and be promoted");
    // r4 dies; the operator takes it out (the request is seen on the wire).
    await c.stop(first);
    const sent: Sent[] = [];
    await removeReplica(
      { via: [c.r1.url], id: "r4", clusterSecret: SECRET },
      recordingDial(sent),
    );
    const captured = genuine(sent, "replica.remove");
    await c.settled(false, "r4 to be removed");

    // r4 comes back: a new folder, the same peer URL.
    const again = await c.joinR4();
    await c.settled(true, "r4 to re-join and be promoted");
    assert.equal((await c.members()).members.r4, c.r4Peer);

    // The captured request, sent again as it was.
    await assert.rejects(
      c.callLeader("replica.remove", captured),
      (error: unknown) => {
        assert.ok(error instanceof RpcError, String(error));
        assert.equal(error.code, PERMISSION_DENIED);
        assert.match(error.message, /membership changed since this proof/);
        assert.match(error.message, /ask again/);
        return true;
      },
    );
    await delay(500);
    const after = await c.members();
    assert.equal(after.members.r4, c.r4Peer, "r4 is still a member");
    assert.deepEqual(after.learners, []);
    assert.equal(again.status().members.r4, c.r4Peer);
    console.log(
      `measured: a replica.remove replayed after r4 re-joined was refused; members ${
        Object.keys(after.members).sort()
      }`,
    );

    // A genuine request still works.
    await removeReplica({ via: [c.r1.url], id: "r4", clusterSecret: SECRET }, (
      url,
    ) => dial(url));
    await c.settled(false, "r4 to be removed by a fresh request");
  } finally {
    await c.close();
  }
});

Deno.test("a replica.add captured on the wire and replayed after the operator removed the replica is refused: it stays out", async () => {
  const c = await cluster();
  try {
    const sent: Sent[] = [];
    const r4 = await c.joinR4(recordingDial(sent));
    const captured = genuine(sent, "replica.add");
    await c.settled(true, "r4 to join and be promoted");
    await c.stop(r4);
    await removeReplica(
      { via: [c.r1.url], id: "r4", clusterSecret: SECRET },
      (url) => dial(url),
    );
    await c.settled(false, "r4 to be removed");

    await assert.rejects(
      c.callLeader("replica.add", captured),
      (error: unknown) => {
        assert.ok(error instanceof RpcError, String(error));
        assert.equal(error.code, PERMISSION_DENIED);
        assert.match(error.message, /membership changed since this proof/);
        return true;
      },
    );
    await delay(500);
    const after = await c.members();
    assert.ok(!Object.hasOwn(after.members, "r4"), "r4 stays out");
    assert.deepEqual(after.learners, []);
    console.log(
      `measured: a replica.add replayed after r4 was removed was refused; members ${
        Object.keys(after.members).sort()
      }`,
    );
  } finally {
    await c.close();
  }
});

Deno.test("a requester whose look at the membership is stale asks again once, with the leader's, and succeeds", async () => {
  const c = await cluster();
  try {
    // Every replica.status answer is doctored to the bootstrap membership
    // (configIndex 0), as a replica behind the leader, or one a change
    // raced, would tell it once the membership has changed.
    const stale = (method: string, result: unknown) =>
      method === "replica.status"
        ? { ...(result as object), configIndex: 0, configTerm: 0 }
        : result;
    const first = await c.joinR4();
    await c.settled(true, "r4 to join and be promoted");
    await c.stop(first);

    const removes: Sent[] = [];
    await removeReplica(
      { via: [c.r1.url], id: "r4", clusterSecret: SECRET },
      recordingDial(removes, stale),
    );
    await c.settled(false, "r4 to be removed with a stale look");
    assertAskedAgainOnce(removes, "replica.remove");

    const joins: Sent[] = [];
    await c.joinR4(recordingDial(joins, stale));
    await c.settled(true, "r4 to re-join with a stale look");
    assertAskedAgainOnce(joins, "replica.add");
  } finally {
    await c.close();
  }
});
