import assert from "node:assert/strict";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";
import {
  ConnectionError,
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  RpcError,
} from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { waitFor, within } from "../testing/time.ts";
import {
  authenticatePeer,
  ClusterKey,
  type HelloResult,
  newNonce,
  PEER_AUTH_METHOD,
  PEER_HELLO_METHOD,
  PeerHandshakeError,
} from "./peer_auth.ts";
import { PeerDirectory } from "./peer_directory.ts";
import { type PeerServer, servePeers } from "./deno.ts";
import { PeerTransport } from "./peer_transport.ts";
import type { Message } from "./types.ts";

const PEERS = {
  n1: "tcp://127.0.0.1:7101",
  n2: "tcp://127.0.0.1:7102",
  n3: "tcp://127.0.0.1:7103",
};
const N1_CLIENT = "tcp://127.0.0.1:7001";
/** The cluster id of n1..n3. */
const CLUSTER = "0123456789abcdef";
const N2_CLIENT = "tcp://127.0.0.1:7002";

/** Member n2's peer port, recording what reaches it. */
interface Acceptor {
  server: PeerServer;
  directory: PeerDirectory;
  stepped: { messages: Message[]; from: string }[];
  handled: { params: unknown; from: string }[];
  logs: string[];
}

async function withAcceptor(
  fn: (acceptor: Acceptor, key: ClusterKey) => Promise<void>,
  options: {
    logIntervalMs?: number;
    handshakeTimeoutMs?: number;
    onNewPeer?(id: string, peerUrl: string): boolean;
  } = {},
): Promise<void> {
  const key = await ClusterKey.fromSecret(TEST_SECRET);
  const directory = new PeerDirectory("n2", PEERS);
  const acceptor: Acceptor = {
    directory,
    stepped: [],
    handled: [],
    logs: [],
    server: undefined as unknown as PeerServer,
  };
  acceptor.server = servePeers({
    hostname: "127.0.0.1",
    port: 0,
    id: "n2",
    clusterId: CLUSTER,
    directory,
    key,
    clientUrl: () => N2_CLIENT,
    onStep: (messages, from) => acceptor.stepped.push({ messages, from }),
    handlers: {
      "app.note": (params, from) =>
        void acceptor.handled.push({ params, from }),
    },
    log: (line) => acceptor.logs.push(line),
    ...options,
  });
  try {
    await fn(acceptor, key);
  } finally {
    await acceptor.server.close();
  }
}

async function connectTo(acceptor: Acceptor): Promise<RpcConnection> {
  return await dial(acceptor.server.url, { connectTimeoutMs: 1000 });
}

/** Runs `fn` on a fresh connection, then closes it. */
async function onConnection(
  acceptor: Acceptor,
  fn: (connection: RpcConnection) => Promise<void>,
): Promise<void> {
  const connection = await connectTo(acceptor);
  try {
    await fn(connection);
  } finally {
    connection.close();
    await connection.closed;
  }
}

/** Asserts the server closes `connection` (a call on it fails, unanswered). */
async function closedBy(
  call: Promise<unknown>,
  connection: RpcConnection,
): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ConnectionError, String(error));
    return true;
  });
  await within(connection.closed, 1000, "the server to close the connection");
}

const otherKey = await ClusterKey.fromSecret(
  "another-secret-of-32-characters!!",
);

/** The dialer's half of the handshake, as member `from`, announcing no client URL. */
function signIn(connection: RpcConnection, key: ClusterKey, from = "n1") {
  return authenticatePeer(connection, {
    key,
    clusterId: CLUSTER,
    from,
    to: "n2",
    clientUrl: null,
  });
}

/** A `peer.hello` from n1 to n2 with `nonce`. */
function hello(connection: RpcConnection, nonce: string) {
  return connection.call<HelloResult>(PEER_HELLO_METHOD, {
    cluster: CLUSTER,
    from: "n1",
    to: "n2",
    nonce,
  });
}

/** The handshake subject of n1..n3's cluster. */
const subject = (
  from: string,
  to: string,
  dialerNonce: string,
  acceptorNonce: string,
) => ({ cluster: CLUSTER, from, to, dialerNonce, acceptorNonce });

const vote = (from: string, to: string, term = 1): Message => ({
  type: "voteResponse",
  from,
  to,
  term,
  granted: true,
});

Deno.test("handshake: the right secret authenticates both sides, each learns the other's client URL, and raft.step flows", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      const answer = await authenticatePeer(connection, {
        key,
        clusterId: CLUSTER,
        from: "n1",
        to: "n2",
        clientUrl: "127.0.0.1:7001",
      });
      assert.deepEqual(answer, { clientUrl: N2_CLIENT });
      assert.equal(acceptor.directory.clientUrl("n1"), N1_CLIENT);
      assert.notEqual(acceptor.directory.status()[0].lastHeardAt, null);
      await connection.notify("raft.step", [[vote("n1", "n2")]]);
      assert.equal(await connection.call("rpc.ping"), "pong");
      assert.deepEqual(acceptor.stepped, [{
        messages: [vote("n1", "n2")],
        from: "n1",
      }]);
    });
    assert.equal(acceptor.server.acceptor.refusedConnections, 0);
    assert.deepEqual(acceptor.logs, []);
  });
});

Deno.test("handshake: a dialer with another secret finds the acceptor's proof wrong and gives up", async () => {
  await withAcceptor(async (acceptor) => {
    await onConnection(acceptor, async (connection) => {
      await assert.rejects(
        signIn(connection, otherKey),
        (error: unknown) => {
          assert.ok(error instanceof PeerHandshakeError);
          assert.match(error.message, /cluster secret differs from ours/);
          return true;
        },
      );
    });
    // The dialer's connection never authenticated: nothing of it was used.
    assert.equal(acceptor.directory.clientUrl("n1"), null);
    assert.deepEqual(acceptor.stepped, []);
    // The acceptor sees the dialer leave after its hello, and says why.
    await waitFor(() => acceptor.logs.length === 1, "the refusal to be logged");
    assert.match(
      acceptor.logs[0],
      /^n2: refused a peer connection from 127\.0\.0\.1:\d+: n1 closed the connection after our peer\.hello answer \(does it hold another cluster secret\?\)$/,
    );
  });
});

Deno.test("handshake: the acceptor closes the connection on a peer.auth proof made with another secret", async () => {
  await withAcceptor(async (acceptor) => {
    await onConnection(acceptor, async (connection) => {
      const nonce = newNonce();
      const answer = await hello(connection, nonce);
      const proof = await otherKey.prove(
        "dialer",
        subject("n1", "n2", nonce, answer.nonce),
      );
      await closedBy(
        connection.call(PEER_AUTH_METHOD, { proof, clientUrl: N1_CLIENT }),
        connection,
      );
    });
    assert.equal(acceptor.directory.clientUrl("n1"), null);
    assert.equal(acceptor.logs.length, 1, acceptor.logs.join("\n"));
    assert.match(
      acceptor.logs[0],
      /^n2: refused a peer connection from 127\.0\.0\.1:\d+: peer\.auth from n1: the proof does not match the cluster secret$/,
    );
  });
});

Deno.test("handshake: a peer.auth replayed from an earlier session is refused", async () => {
  await withAcceptor(async (acceptor, key) => {
    // A recorded, successful session.
    const nonce = newNonce();
    let recorded!: { hello: HelloResult; proof: string };
    await onConnection(acceptor, async (connection) => {
      const answer = await hello(connection, nonce);
      const proof = await key.prove(
        "dialer",
        subject("n1", "n2", nonce, answer.nonce),
      );
      await connection.call(PEER_AUTH_METHOD, { proof, clientUrl: null });
      recorded = { hello: answer, proof };
    });
    // The attacker replays both of the dialer's frames, as they were.
    await onConnection(acceptor, async (connection) => {
      const answer = await hello(connection, nonce);
      assert.notEqual(answer.nonce, recorded.hello.nonce);
      await closedBy(
        connection.call(PEER_AUTH_METHOD, {
          proof: recorded.proof,
          clientUrl: null,
        }),
        connection,
      );
    });
    // Nor can the acceptor's own proof be reflected back as the dialer's.
    await onConnection(acceptor, async (connection) => {
      const answer = await hello(connection, newNonce());
      await closedBy(
        connection.call(PEER_AUTH_METHOD, {
          proof: answer.proof,
          clientUrl: null,
        }),
        connection,
      );
    });
    assert.equal(acceptor.server.acceptor.refusedConnections, 2);
  });
});

Deno.test("handshake: a hello to another id, from this node's own id, from a stranger or malformed is refused", async () => {
  await withAcceptor(async (acceptor) => {
    const cases: [Params, RegExp][] = [
      [
        { cluster: CLUSTER, from: "n1", to: "n3", nonce: newNonce() },
        /addressed to "n3", not to this node \(n2\)/,
      ],
      [
        { cluster: CLUSTER, from: "n2", to: "n2", nonce: newNonce() },
        /claims to come from this node's own id \(n2\)/,
      ],
      [
        { cluster: CLUSTER, from: "n9", to: "n2", nonce: newNonce() },
        /comes from "n9", not a member \(n1, n2, n3\)/,
      ],
      [
        { cluster: CLUSTER, from: "n1", to: "n2", nonce: "short" },
        /not \{ cluster, from, to, nonce \}/,
      ],
      [["n1", "n2"], /not \{ cluster, from, to, nonce \}/],
    ];
    for (const [i, [params, reason]] of cases.entries()) {
      await onConnection(acceptor, async (connection) => {
        await closedBy(connection.call(PEER_HELLO_METHOD, params), connection);
      });
      await waitFor(
        () => acceptor.logs.length === i + 1,
        `refusal ${i + 1} to be logged`,
      );
      assert.match(acceptor.logs[i], reason);
    }
    assert.deepEqual(acceptor.stepped, []);
  }, { logIntervalMs: 0 });
});

Deno.test("handshake: each refusal reason is logged with the remote address, rate-limited per host", async () => {
  await withAcceptor(async (acceptor) => {
    const reasons = [
      /addressed to "n3", not to this node \(n2\)/,
      /claims to come from this node's own id \(n2\)/,
      /comes from "n9", not a member \(n1, n2, n3\)/,
    ];
    const hellos = [
      { cluster: CLUSTER, from: "n1", to: "n3", nonce: newNonce() },
      { cluster: CLUSTER, from: "n2", to: "n2", nonce: newNonce() },
      { cluster: CLUSTER, from: "n9", to: "n2", nonce: newNonce() },
    ];
    for (const [i, hello] of hellos.entries()) {
      await onConnection(acceptor, async (connection) => {
        await closedBy(connection.call(PEER_HELLO_METHOD, hello), connection);
      });
      await waitFor(() => acceptor.logs.length === i + 1, `log line ${i + 1}`);
      assert.match(acceptor.logs[i], reasons[i]);
      assert.match(acceptor.logs[i], /from 127\.0\.0\.1:\d+: /);
      if (i === 1) {
        assert.match(acceptor.logs[i], /\(1 more like it not logged\)$/);
      }
      // Next refusal in the same interval is held back, counted.
      if (i === 0) {
        await onConnection(acceptor, async (connection) => {
          await closedBy(
            connection.call(PEER_HELLO_METHOD, hellos[0]),
            connection,
          );
        });
        assert.equal(acceptor.logs.length, 1);
      }
      await new Promise((resolve) => setTimeout(resolve, 450));
    }
  }, { logIntervalMs: 400 });
});

Deno.test("handshake: raft.step, rpc.ping, another method, peer.auth first or a second hello before auth closes the connection", async () => {
  await withAcceptor(async (acceptor, key) => {
    const forged = [vote("n1", "n2", 100)];
    // As a request, and as a notification.
    await onConnection(acceptor, async (connection) => {
      await closedBy(connection.call("raft.step", [forged]), connection);
    });
    await onConnection(acceptor, async (connection) => {
      await connection.notify("raft.step", [forged]);
      await within(connection.closed, 1000, "the connection to close");
    });
    for (const method of ["rpc.ping", "app.note"]) {
      await onConnection(acceptor, async (connection) => {
        await closedBy(connection.call(method, {}), connection);
      });
    }
    // A client method (a client that dialed the peer port by mistake) is
    // told which port to use, then the connection is closed.
    await onConnection(acceptor, async (connection) => {
      await assert.rejects(
        connection.call("registry.bind", {}),
        (error: unknown) => {
          assert.ok(error instanceof RpcError);
          assert.equal(error.code, METHOD_NOT_FOUND);
          assert.equal(
            error.message,
            'Method not found: "registry.bind" is not served on the peer port of registry node n2, which only its peers use; clients and servers use its client port (by default the peer port - 100)',
          );
          return true;
        },
      );
      await within(connection.closed, 1000, "the connection to close");
    });
    await onConnection(acceptor, async (connection) => {
      await closedBy(
        connection.call(PEER_AUTH_METHOD, { proof: "x", clientUrl: null }),
        connection,
      );
    });
    await onConnection(acceptor, async (connection) => {
      const hello = {
        cluster: CLUSTER,
        from: "n1",
        to: "n2",
        nonce: newNonce(),
      };
      await connection.call(PEER_HELLO_METHOD, hello);
      await closedBy(connection.call(PEER_HELLO_METHOD, hello), connection);
    });
    // Between hello and auth, a raft.step is refused too.
    await onConnection(acceptor, async (connection) => {
      const nonce = newNonce();
      await connection.call(PEER_HELLO_METHOD, {
        cluster: CLUSTER,
        from: "n1",
        to: "n2",
        nonce,
      });
      await closedBy(connection.call("raft.step", [forged]), connection);
    });
    assert.deepEqual(acceptor.stepped, []);
    assert.deepEqual(acceptor.handled, []);
    assert.equal(acceptor.server.acceptor.refusedConnections, 8);
    // After auth, a second hello still closes the connection.
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key);
      await closedBy(
        connection.call(PEER_HELLO_METHOD, {
          cluster: CLUSTER,
          from: "n1",
          to: "n2",
          nonce: newNonce(),
        }),
        connection,
      );
    });
  });
});

Deno.test("handshake: a connection silent for 2 s, or stuck after its hello, is closed", async () => {
  await withAcceptor(async (acceptor) => {
    const started = Date.now();
    const silent = await connectTo(acceptor);
    const stuck = await connectTo(acceptor);
    try {
      await stuck.call(PEER_HELLO_METHOD, {
        cluster: CLUSTER,
        from: "n1",
        to: "n2",
        nonce: newNonce(),
      });
      await within(
        Promise.all([silent.closed, stuck.closed]),
        3_500,
        "both connections to be closed",
      );
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 1_900, `closed after only ${elapsed} ms`);
      await waitFor(
        () => acceptor.server.acceptor.refusedConnections === 2,
        "two refusals",
      );
      assert.match(acceptor.logs[0], /no handshake within 2000 ms$/);
      assert.equal(acceptor.server.acceptor.openConnections, 0);
    } finally {
      silent.close();
      stuck.close();
    }
  });
});

Deno.test("after auth, raft messages whose from is not the peer or whose to is not this node are dropped and counted", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key);
      await connection.call("raft.step", [[
        vote("n1", "n2", 1),
        vote("n3", "n2", 2),
        vote("n1", "n3", 3),
        vote("n1", "n2", 4),
      ]]);
      await connection.call("raft.step", [[vote("n3", "n2", 5)]]);
    });
    assert.deepEqual(acceptor.stepped, [{
      messages: [vote("n1", "n2", 1), vote("n1", "n2", 4)],
      from: "n1",
    }]);
    assert.equal(acceptor.server.acceptor.droppedMessages, 3);
    assert.deepEqual(acceptor.server.acceptor.stats, {
      delivered: 2,
      forgedFrom: 2,
      wrongTo: 1,
      notMember: 0,
      invalid: 0,
      refusedConnections: 0,
      identityRefused: 0,
    });
    // Logged once per kind (rate-limited), naming the peer and the claim.
    assert.deepEqual(acceptor.logs, [
      'n2: dropped a raft message from peer n1 that claims from="n3" to="n2" (a peer speaks only for itself, to this node; 1 dropped so far)',
      'n2: dropped a raft message from peer n1 that claims from="n1" to="n3" (a peer speaks only for itself, to this node; 1 dropped so far)',
    ]);
  });
});

Deno.test("after auth, raft.step with malformed params answers -32602 and steps nothing", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key);
      const bad = async (params: unknown, message: string) => {
        await assert.rejects(
          connection.call("raft.step", params as unknown[]),
          (error: unknown) => {
            assert.ok(error instanceof RpcError);
            assert.equal(error.code, INVALID_PARAMS);
            assert.equal(error.message, message);
            return true;
          },
        );
      };
      const takes = "Invalid params: raft.step takes [messages]";
      await bad([], takes);
      await bad({ type: "vote" }, takes);
      await bad([{ type: "vote" }], takes);
      await bad([[null]], "Invalid params: a Raft message must be an object");
      // A message that would depose a leader, after one that is malformed:
      // neither is stepped.
      await bad(
        [[
          { ...vote("n1", "n2"), type: "append", entries: "none" },
        ]],
        'Invalid params: Raft message field "prevLogIndex" must be a non-negative integer',
      );
      await bad(
        [[
          vote("n1", "n2"),
          { type: "vote", from: "n1", to: "n2", term: 50 },
        ]],
        'Invalid params: Raft message field "lastLogIndex" must be a non-negative integer',
      );
      await bad(
        [[{ type: "readIndex", from: "n1", to: "n2", term: -1, context: "x" }]],
        'Invalid params: Raft message field "term" must be a non-negative integer',
      );
      // The connection stays open and usable.
      assert.equal(
        await connection.call("raft.step", [[vote("n1", "n2")]]),
        null,
      );
    });
    assert.deepEqual(acceptor.stepped, [{
      messages: [vote("n1", "n2")],
      from: "n1",
    }]);
  });
});

Deno.test("after auth, the messages of a peer removed from the members are dropped, counted and logged", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key);
      await connection.call("raft.step", [[vote("n1", "n2", 1)]]);
      // A membership change removes n1 while its connection is open.
      assert.equal(acceptor.directory.remove("n1"), true);
      await connection.notify("raft.step", [[vote("n1", "n2", 2)]]);
      await connection.call("raft.step", [[vote("n1", "n2", 3)]]);
    });
    assert.deepEqual(acceptor.stepped, [{
      messages: [vote("n1", "n2", 1)],
      from: "n1",
    }]);
    assert.equal(acceptor.server.acceptor.stats.notMember, 2);
    assert.equal(acceptor.server.acceptor.stats.delivered, 1);
    assert.deepEqual(acceptor.logs, [
      'n2: dropped a raft message from peer n1 that claims from="n1" to="n2" (n1 is no longer a member; 1 dropped so far)',
    ]);
  });
});

Deno.test("dissertation §4.1 a member this node does not know yet (added by a change it has not seen) is admitted with its peer URL; a removed one is refused", async () => {
  const admitted: string[] = [];
  let directory: PeerDirectory | undefined;
  await withAcceptor(async (acceptor, key) => {
    directory = acceptor.directory;
    // Without a peer URL it cannot be answered: refused.
    await onConnection(acceptor, async (connection) => {
      await assert.rejects(signIn(connection, key, "n4"));
    });
    assert.deepEqual(admitted, []);
    await onConnection(acceptor, async (connection) => {
      await authenticatePeer(connection, {
        key,
        clusterId: CLUSTER,
        from: "n4",
        to: "n2",
        clientUrl: null,
        peerUrl: "tcp://127.0.0.1:7104",
      });
      await connection.call("raft.step", [[vote("n4", "n2", 5)]]);
    });
    assert.deepEqual(admitted, ["n4 tcp://127.0.0.1:7104"]);
    assert.deepEqual(acceptor.stepped, [{
      messages: [vote("n4", "n2", 5)],
      from: "n4",
    }]);
    // A member this node removed is refused, peer URL or not.
    assert.equal(acceptor.directory.remove("n3"), true);
    await onConnection(acceptor, async (connection) => {
      const signing = authenticatePeer(connection, {
        key,
        clusterId: CLUSTER,
        from: "n3",
        to: "n2",
        clientUrl: null,
        peerUrl: "tcp://127.0.0.1:7103",
      });
      await assert.rejects(signing, /refused our peer.hello/);
    });
    assert.deepEqual(admitted, ["n4 tcp://127.0.0.1:7104"]);
  }, {
    onNewPeer: (id, peerUrl) => {
      admitted.push(`${id} ${peerUrl}`);
      directory!.add(id, peerUrl);
      return true;
    },
  });
});

Deno.test("after auth, an invalid raft.step notification is logged with its sender and the validation error, once per peer per interval with a count", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key);
      // Peers send raft.step as notifications: nothing answers them, so
      // the log line is the only trace.
      const bad = { type: "vote", from: "n1", to: "n2", term: -1 };
      for (let i = 0; i < 3; i++) {
        await connection.notify("raft.step", [[bad]]);
      }
      await connection.notify("raft.step", [{ not: "an array" }]);
      await waitFor(
        () => acceptor.server.acceptor.stats.invalid === 4,
        "4 invalid batches to be counted",
      );
      assert.deepEqual(acceptor.logs, [
        'n2: dropped invalid raft messages from peer n1: Raft message field "term" must be a non-negative integer (1 invalid batches so far)',
      ]);
      await new Promise((resolve) => setTimeout(resolve, 350));
      await connection.notify("raft.step", [[null]]);
      await waitFor(() => acceptor.logs.length === 2, "a second line");
      assert.equal(
        acceptor.logs[1],
        "n2: dropped invalid raft messages from peer n1: a Raft message must be an object (5 invalid batches so far) (3 more like it not logged)",
      );
      // Valid messages still flow on the same connection.
      await connection.call("raft.step", [[vote("n1", "n2", 7)]]);
    });
    assert.deepEqual(acceptor.stepped, [{
      messages: [vote("n1", "n2", 7)],
      from: "n1",
    }]);
    assert.equal(acceptor.server.acceptor.droppedMessages, 5);
  }, { logIntervalMs: 300 });
});

Deno.test("two clusters sharing a secret: a peer of another cluster id is refused in peer.hello, with the reason logged on both sides", async () => {
  await withAcceptor(async (acceptor, key) => {
    const other = "fedcba9876543210";
    // n1 of another cluster, same secret, dialing this cluster's n2.
    const transport = new PeerTransport({
      id: "n1",
      peers: { n1: PEERS.n1, n2: acceptor.server.url },
      key,
      clusterId: other,
      minBackoffMs: 20,
      maxBackoffMs: 50,
    });
    try {
      transport.start();
      await waitFor(
        () => transport.directory.status()[1].lastError !== null,
        "n1's transport to record why n2 refused it",
      );
      assert.equal(
        transport.directory.status()[1].lastError,
        `peer.hello failed: peer.hello from "n1" is for cluster "${other}", but n2 belongs to cluster "${CLUSTER}": the two nodes were bootstrapped with different --peers or --cluster-token, or one of them runs on another cluster's data folder; they share the cluster secret but must not exchange Raft messages`,
      );
      transport.send([vote("n1", "n2")]);
      await waitFor(() => acceptor.logs.length > 0, "n2 to log the refusal");
      assert.match(
        acceptor.logs[0],
        new RegExp(
          `^n2: refused a peer connection from 127\\.0\\.0\\.1:\\d+: peer\\.hello from "n1" is for cluster "${other}", but n2 belongs to cluster "${CLUSTER}"`,
        ),
      );
    } finally {
      transport.close();
    }
    assert.deepEqual(acceptor.stepped, []);
    assert.equal(acceptor.directory.clientUrl("n1"), null);
    assert(acceptor.server.acceptor.refusedConnections >= 1);
  });
});

Deno.test("application peer methods are called with (params, from) on authenticated connections only", async () => {
  await withAcceptor(async (acceptor, key) => {
    await onConnection(acceptor, async (connection) => {
      await closedBy(connection.call("app.note", { x: 0 }), connection);
    });
    await onConnection(acceptor, async (connection) => {
      await signIn(connection, key, "n3");
      await connection.notify("app.note", { x: 1 });
      assert.equal(await connection.call("app.note"), null);
      // An unknown method after auth is just -32601; the connection stays.
      await assert.rejects(connection.call("app.unknown"), { code: -32601 });
      assert.equal(await connection.call("rpc.ping"), "pong");
    });
    assert.deepEqual(acceptor.handled, [
      { params: { x: 1 }, from: "n3" },
      { params: undefined, from: "n3" },
    ]);
  });
});

Deno.test("servePeers refuses handlers with reserved names", async () => {
  const key = await ClusterKey.fromSecret(TEST_SECRET);
  for (const method of ["peer.hello", "peer.auth", "raft.step", "rpc.ping"]) {
    assert.throws(
      () =>
        servePeers({
          id: "n2",
          clusterId: CLUSTER,
          directory: new PeerDirectory("n2", PEERS),
          key,
          onStep: () => {},
          handlers: { [method]: () => null },
        }),
      { name: "RangeError", message: new RegExp(`${method} is reserved`) },
    );
  }
});

Deno.test("ClusterKey refuses a secret shorter than 32 characters; proofs depend on every field", async () => {
  await assert.rejects(ClusterKey.fromSecret("  too short  "), {
    name: "RangeError",
    message: "the cluster secret has 9 characters; it needs at least 32",
  });
  const key = await ClusterKey.fromSecret(TEST_SECRET);
  const [a, b] = [newNonce(), newNonce()];
  const proof = await key.prove("dialer", subject("n1", "n2", a, b));
  const ok = subject("n1", "n2", a, b);
  assert.equal(await key.verify("dialer", ok, proof), true);
  assert.equal(await key.verify("acceptor", ok, proof), false);
  assert.equal(
    await key.verify("dialer", subject("n2", "n1", a, b), proof),
    false,
  );
  assert.equal(
    await key.verify("dialer", subject("n1", "n2", b, a), proof),
    false,
  );
  assert.equal(
    await key.verify("dialer", { ...ok, cluster: "fedcba9876543210" }, proof),
    false,
  );
  assert.equal(await key.verify("dialer", ok, 5), false);
  assert.equal(await key.verify("dialer", ok, "!!"), false);
  const same = await ClusterKey.fromSecret(`\n${TEST_SECRET}  \n`);
  assert.equal(await same.verify("dialer", ok, proof), true);
});
