import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { dial } from "../rpc/transport/dial.ts";
import { shiftableWallClock, within } from "../testing/time.ts";
import {
  authenticatePeer,
  ClusterKey,
  type HelloParams,
  newNonce,
  PEER_AUTH_METHOD,
  PEER_HELLO_METHOD,
  PeerHandshakeError,
} from "./peer_auth.ts";

Deno.test("a wall clock stepped back an hour mid-handshake does not stretch the handshake's timeout", async () => {
  const key = await ClusterKey.random();
  const wall = shiftableWallClock();
  // An acceptor that answers peer.hello well, while the dialer's wall
  // clock steps back an hour, and then never answers peer.auth.
  const server = serve({
    methods: {
      [PEER_HELLO_METHOD]: async (params: HelloParams) => {
        const nonce = newNonce();
        const proof = await key.prove("acceptor", {
          cluster: params.cluster,
          from: params.from,
          to: params.to,
          dialerNonce: params.nonce,
          acceptorNonce: nonce,
        });
        wall.offsetMs = -3_600_000;
        return { nonce, proof };
      },
      [PEER_AUTH_METHOD]: () => new Promise(() => {}),
    },
  });
  const connection = await dial(server.url);
  try {
    const started = performance.now();
    await assert.rejects(
      within(
        authenticatePeer(connection, {
          key,
          clusterId: "c1",
          from: "n1",
          to: "n2",
          clientUrl: null,
          timeoutMs: 500,
        }),
        5_000,
        "the handshake to time out",
      ),
      PeerHandshakeError,
    );
    const tookMs = performance.now() - started;
    assert.ok(tookMs < 2_000, `timed out after ${tookMs} ms`);
  } finally {
    wall.restore();
    connection.close();
    await server.close();
  }
});
