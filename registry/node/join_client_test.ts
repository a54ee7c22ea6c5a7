import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { RpcError } from "../../rpc/errors.ts";
import { freePorts } from "../../testing/ports.ts";
import { shiftableWallClock } from "../../testing/time.ts";
import {
  NOT_LEADER,
  REGISTRY_METHODS,
  UNAVAILABLE,
} from "../../protocol/registry.ts";
import { JoinClient } from "./join_client.ts";

Deno.test("JoinClient follows a NOT_LEADER hint at once and asks that leader first next time", async () => {
  const calls = { follower: 0, leader: 0 };
  const leader = serve({
    methods: {
      [REGISTRY_METHODS.memberList]: () => {
        calls.leader++;
        return { clusterId: "c1", leader: "n2", members: [] };
      },
    },
  });
  const follower = serve({
    methods: {
      [REGISTRY_METHODS.memberList]: () => {
        calls.follower++;
        throw new RpcError(NOT_LEADER, "Not the leader", {
          leaderId: "n2",
          leaderUrl: leader.url,
        });
      },
    },
  });
  const client = new JoinClient([follower.url], { deadlineMs: 5_000 });
  try {
    const first = await client.call(REGISTRY_METHODS.memberList, {});
    assert.equal(first.clusterId, "c1");
    await client.call(REGISTRY_METHODS.memberList, {});
    assert.deepEqual(calls, { follower: 1, leader: 2 });
  } finally {
    client.close();
    await follower.close();
    await leader.close();
  }
});

Deno.test("JoinClient gives up with UNAVAILABLE, naming the URLs, once no URL accepts a connection for failFastRounds rounds", async () => {
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  const client = new JoinClient([url], {
    deadlineMs: 10_000,
    failFastRounds: 3,
  });
  const started = performance.now();
  try {
    await assert.rejects(
      client.call(REGISTRY_METHODS.memberList, {}),
      (error: unknown) =>
        error instanceof RpcError && error.code === UNAVAILABLE &&
        error.message.includes(
          `no registry node accepted a connection for registry.memberList (tried ${url})`,
        ),
    );
    assert.ok(performance.now() - started < 5_000, "well before the deadline");
  } finally {
    client.close();
  }
});

Deno.test("JoinClient passes an answer a retry cannot change through at once", async () => {
  let calls = 0;
  const server = serve({
    methods: {
      [REGISTRY_METHODS.memberAdd]: () => {
        calls++;
        throw new RpcError(-32602, "Invalid params: peerUrl");
      },
    },
  });
  const client = new JoinClient([server.url], { deadlineMs: 5_000 });
  try {
    await assert.rejects(
      client.call(REGISTRY_METHODS.memberAdd, {
        id: "n4",
        peerUrl: "tcp://127.0.0.1:1",
      }),
      /Invalid params: peerUrl/,
    );
    assert.equal(calls, 1);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("JoinClient keeps retrying to its deadline though the wall clock jumps an hour forward", async () => {
  // The cluster elects for its first 300 ms, then answers.
  const healthyAt = performance.now() + 300;
  const node = serve({
    methods: {
      [REGISTRY_METHODS.memberList]: () => {
        if (performance.now() < healthyAt) {
          throw new RpcError(UNAVAILABLE, "Unavailable: electing a leader", {
            retryAfterMs: 0,
            applied: false,
          });
        }
        return { clusterId: "c1", leader: "n1", members: [] };
      },
    },
  });
  const wall = shiftableWallClock();
  const client = new JoinClient([node.url], { deadlineMs: 5_000 });
  try {
    const answer = client.call(REGISTRY_METHODS.memberList, {});
    await new Promise((resolve) => setTimeout(resolve, 50));
    wall.offsetMs = 3_600_000;
    assert.equal((await answer).clusterId, "c1");
  } finally {
    wall.restore();
    client.close();
    await node.close();
  }
});
