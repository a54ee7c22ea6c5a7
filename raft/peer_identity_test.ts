/**
 * Member identity on peer links from TLS certificates (issue #16): the
 * member a connection speaks for is the one its certificate names, not
 * the one its hello claims. Each link test runs on every stream source of
 * `SOURCES`: in-memory pairs and real TCP sockets that carry the
 * certificates a TLS layer would report (`testing/fake_tls.ts`); to repeat
 * them over real TLS, add a source whose `serve` and `dialer` run TLS with
 * client certificates (see {@link Links}).
 */

import assert from "node:assert/strict";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { ConnectionError } from "../rpc/errors.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { ServeOptions } from "../rpc/server/server.ts";
import type { RpcServer } from "../rpc/server/server.ts";
import type { Dialer, PeerCertificate } from "../rpc/transport/transport.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import {
  FakeTlsNetwork,
  memberCertificate,
  TcpCertNetwork,
} from "../testing/fake_tls.ts";
import { RealTlsNetwork } from "../testing/tls_links.ts";
import { waitFor, within } from "../testing/time.ts";
import {
  authenticatePeer,
  ClusterKey,
  type DialerHandshakeOptions,
  helloFailure,
  memberIdOf,
  normalizeClientUrl,
  PeerHandshakeError,
  PeerIdentityError,
} from "./peer_auth.ts";
import { PeerDirectory } from "./peer_directory.ts";
import { type PeerServer, servePeersOn } from "./peer_server.ts";
import { PeerTransport } from "./peer_transport.ts";
import type { Message } from "./types.ts";

const CLUSTER = "0123456789abcdef";
const key = await ClusterKey.fromSecret(TEST_SECRET);

/**
 * Where peer ports listen and how members dial them, each presenting a
 * certificate (null: none).
 */
interface Links {
  serve(cert: PeerCertificate | null): (options: ServeOptions) => RpcServer;
  dialer(cert: PeerCertificate | null): Dialer;
}

/** The stream sources each link test runs on; add a real TLS one here. */
const cert = (...ids: string[]) => memberCertificate(ids);
const realTls = await RealTlsNetwork.create();
await realTls.prepare([
  cert("n1"),
  cert("n2"),
  cert("n3"),
  cert("n1", "n2"),
  memberCertificate([]),
]);
const SOURCES: [string, () => Links][] = [
  ["in-memory", () => new FakeTlsNetwork()],
  ["TCP", () => new TcpCertNetwork()],
  ["real TLS", () => realTls],
];

const vote = (from: string, to: string, term: number): Message => ({
  type: "voteResponse",
  from,
  to,
  term,
  granted: true,
});

/** Member n2's peer port on `links`, recording what reaches it. */
interface Acceptor {
  server: PeerServer;
  stepped: { messages: Message[]; from: string }[];
  handled: { params: unknown; from: string }[];
  logs: string[];
}

function acceptorOn(
  links: Links,
  serverCert: PeerCertificate | null,
  options: { requirePeerCertificates?: boolean } = {},
): Acceptor {
  const acceptor: Acceptor = {
    stepped: [],
    handled: [],
    logs: [],
    server: undefined as unknown as PeerServer,
  };
  acceptor.server = servePeersOn(links.serve(serverCert), {
    id: "n2",
    clusterId: CLUSTER,
    key,
    directory: new PeerDirectory("n2", {
      n1: "tcp://127.0.0.1:7101",
      n2: "tcp://127.0.0.1:7102",
      n3: "tcp://127.0.0.1:7103",
    }),
    onStep: (messages, from) => acceptor.stepped.push({ messages, from }),
    handlers: {
      "app.note": (params, from) =>
        void acceptor.handled.push({ params, from }),
    },
    log: (line) => acceptor.logs.push(line),
    ...options,
  });
  return acceptor;
}

async function connect(
  links: Links,
  acceptor: Acceptor,
  clientCert: PeerCertificate | null,
): Promise<{ connection: RpcConnection; serverCert: PeerCertificate | null }> {
  let serverCert: PeerCertificate | null = null;
  const dialer = links.dialer(clientCert);
  const connection = await dial(acceptor.server.url, {
    dialer: async (url, options) => {
      const stream = await dialer(url, options);
      serverCert = stream.peerCertificate ?? null;
      return stream;
    },
  });
  return { connection, serverCert };
}

/** The dialer's handshake as `from` to n2 (secret and cluster of n1..n3). */
function handshake(
  connection: RpcConnection,
  from: string,
  extra: Partial<DialerHandshakeOptions> = {},
) {
  return authenticatePeer(connection, {
    key,
    clusterId: CLUSTER,
    from,
    to: "n2",
    clientUrl: null,
    ...extra,
  });
}

Deno.test("memberIdOf: the one member a certificate's URI SAN names, decoded; others and ambiguity name nobody", () => {
  const of = (...altNames: string[]) =>
    memberIdOf({ ...cert(), altNames, commonName: "n1" });
  assert.equal(memberIdOf(cert("n1")), "n1");
  assert.equal(memberIdOf(cert("node a/1")), "node a/1"); // percent-decoded
  assert.equal(of("DNS:localhost", "URI:https://example.com/n1"), null);
  assert.equal(of(), null, "the common name is not an identity");
  assert.equal(memberIdOf(cert("n1", "n2")), null, "several members");
  assert.equal(
    of("URI:rafter://member/n1", "URI:rafter://member/n1"),
    "n1",
    "the same member twice is still one",
  );
  assert.equal(of("URI:rafter://member/"), null, "an empty id");
  assert.equal(of("URI:rafter://member/n%7C1"), null, "a | is no member id");
  assert.equal(
    of("URI:rafter://member/n1", "URI:rafter://member/%E0%A4%A"),
    null,
    "a member SAN that does not decode makes the certificate name nobody",
  );
  assert.equal(of("URI:RAFTER://member/n1"), null);
});

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`a connection whose certificate names n3 cannot hello as n1: refused with the reason, logged and counted (${source})`, async () => {
    const links = makeLinks();
    const acceptor = acceptorOn(links, cert("n2"));
    try {
      const { connection } = await connect(links, acceptor, cert("n3"));
      const error = await handshake(connection, "n1").then(
        () => null,
        (error) => error,
      );
      assert.ok(error instanceof PeerIdentityError, String(error));
      assert.match(
        error.message,
        /refused our peer\.hello: peer\.hello claims to come from "n1", but the connection's certificate names member "n3"/,
      );
      await within(connection.closed, 5_000, "the acceptor closes it");
      const stats = acceptor.server.acceptor.stats;
      assert.equal(stats.identityRefused, 1);
      assert.equal(stats.refusedConnections, 1);
      assert.equal(acceptor.logs.length, 1);
      assert.match(
        acceptor.logs[0],
        /^n2: refused a peer connection from 127\.0\.0\.1:\d+: peer\.hello claims to come from "n1", but the connection's certificate names member "n3"/,
      );
      assert.deepEqual(acceptor.stepped, []);
    } finally {
      await acceptor.server.close();
    }
  });
}

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`after a handshake as n3 (its certificate), messages and notifications claiming from n1 are dropped and counted (${source})`, async () => {
    const links = makeLinks();
    const acceptor = acceptorOn(links, cert("n2"));
    try {
      const { connection, serverCert } = await connect(
        links,
        acceptor,
        cert("n3"),
      );
      await handshake(connection, "n3", {
        peerCertificate: serverCert,
        requireCertificate: true,
      });
      // The leader's vote, forged by n3 on its own authenticated link.
      await connection.call("raft.step", [[vote("n1", "n2", 4)]]);
      await assert.rejects(
        connection.call("app.note", { from: "n1", term: 4 }),
        /app\.note names from="n1", but this connection is member n3's/,
      );
      await connection.call("raft.step", [[vote("n3", "n2", 5)]]);
      await connection.call("app.note", { term: 5 });
      assert.deepEqual(acceptor.stepped, [{
        messages: [vote("n3", "n2", 5)],
        from: "n3",
      }]);
      assert.deepEqual(acceptor.handled, [{ params: { term: 5 }, from: "n3" }]);
      const stats = acceptor.server.acceptor.stats;
      assert.equal(stats.forgedFrom, 2);
      assert.equal(stats.delivered, 1);
      assert.equal(stats.identityRefused, 0);
      assert.match(
        acceptor.logs.join("\n"),
        /n2: dropped a raft message from peer n3 that claims from="n1" to="n2"/,
      );
      connection.close();
    } finally {
      await acceptor.server.close();
    }
  });
}

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`the dialer refuses an acceptor whose certificate names another member, before it says hello (${source})`, async () => {
    const links = makeLinks();
    // The address the dialer has for n2 is served by n3.
    const acceptor = acceptorOn(links, cert("n3"));
    try {
      const { connection, serverCert } = await connect(
        links,
        acceptor,
        cert("n1"),
      );
      await assert.rejects(
        handshake(connection, "n1", {
          peerCertificate: serverCert,
        }),
        (error: unknown) =>
          error instanceof PeerIdentityError &&
          /dialed member "n2", but the peer's certificate names member "n3"/
            .test(error.message),
      );
      connection.close();
      await waitFor(
        () => acceptor.server.acceptor.refusedConnections === 1,
        "the acceptor to see the connection end",
      );
      assert.match(acceptor.logs[0], /closed before completing the handshake/);
    } finally {
      await acceptor.server.close();
    }
  });
}

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`PeerTransport: an acceptor certificate naming the wrong member is refused and counted; the right one carries messages (${source})`, async () => {
    const links = makeLinks();
    const impostor = acceptorOn(links, cert("n3"));
    const real = acceptorOn(links, cert("n2"), {
      requirePeerCertificates: true,
    });
    const transportTo = (url: string) =>
      new PeerTransport({
        id: "n1",
        peers: { n1: "tcp://127.0.0.1:7101", n2: url },
        key,
        clusterId: CLUSTER,
        dialer: links.dialer(cert("n1")),
        requirePeerCertificates: true,
        minBackoffMs: 10,
        maxBackoffMs: 20,
        probeIntervalMs: 0,
      });
    const wrong = transportTo(impostor.server.url);
    const right = transportTo(real.server.url);
    try {
      wrong.start();
      right.start();
      await waitFor(
        () => wrong.stats.identityRefused >= 2,
        "the wrong acceptor refused on each retry",
      );
      const status = wrong.peerStatus().find((peer) => peer.id === "n2");
      assert.equal(status?.reachable, false);
      assert.match(
        status?.lastError ?? "",
        /dialed member "n2", but the peer's certificate names member "n3"/,
      );
      wrong.send([vote("n1", "n2", 1)]);
      right.send([vote("n1", "n2", 1)]);
      await waitFor(() => real.stepped.length === 1, "n2 to get the vote");
      assert.deepEqual(real.stepped, [{
        messages: [vote("n1", "n2", 1)],
        from: "n1",
      }]);
      assert.deepEqual(impostor.stepped, []);
      assert.equal(right.stats.identityRefused, 0);
    } finally {
      wrong.close();
      right.close();
      await impostor.server.close();
      await real.server.close();
    }
  });
}

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`requirePeerCertificates: a connection without a member certificate is refused although it knows the secret (${source})`, async () => {
    const links = makeLinks();
    const acceptor = acceptorOn(links, cert("n2"), {
      requirePeerCertificates: true,
    });
    try {
      for (const clientCert of [null, memberCertificate([])]) {
        const { connection } = await connect(links, acceptor, clientCert);
        await assert.rejects(
          handshake(connection, "n1"),
          (error: unknown) =>
            error instanceof PeerIdentityError &&
            /requires member certificates/.test(error.message),
        );
        connection.close();
      }
      assert.equal(acceptor.server.acceptor.stats.identityRefused, 2);
      assert.deepEqual(acceptor.stepped, []);
    } finally {
      await acceptor.server.close();
    }
    // And a dialer that requires one refuses an acceptor without it.
    const plain = acceptorOn(links, null);
    try {
      const { connection, serverCert } = await connect(
        links,
        plain,
        cert("n1"),
      );
      await assert.rejects(
        handshake(connection, "n1", {
          peerCertificate: serverCert,
          requireCertificate: true,
        }),
        /the acceptor \("n2"\) presented no TLS certificate/,
      );
      connection.close();
    } finally {
      await plain.server.close();
    }
  });
}

for (const [source, makeLinks] of SOURCES) {
  Deno.test(`without certificates the handshake is unchanged, and the secret is still checked over TLS (${source})`, async () => {
    const links = makeLinks();
    const acceptor = acceptorOn(links, null);
    try {
      const { connection } = await connect(links, acceptor, null);
      await handshake(connection, "n1");
      await connection.call("raft.step", [[vote("n1", "n2", 1)]]);
      assert.equal(acceptor.stepped.length, 1);
      connection.close();
      // The right certificate does not stand in for the secret.
      const { connection: second, serverCert } = await connect(
        links,
        acceptor,
        cert("n1"),
      );
      await assert.rejects(
        authenticatePeer(second, {
          key: await ClusterKey.fromSecret(
            "another secret, 32 characters long!",
          ),
          clusterId: CLUSTER,
          from: "n1",
          to: "n2",
          clientUrl: null,
          peerCertificate: serverCert,
        }),
        (error: unknown) =>
          error instanceof PeerHandshakeError &&
          !(error instanceof PeerIdentityError) &&
          /cluster secret differs/.test(error.message),
      );
      second.close();
    } finally {
      await acceptor.server.close();
    }
  });
}

Deno.test("URLs announced in the handshake may be tls://, in one spelling; wildcards and other schemes are dropped", () => {
  assert.equal(
    normalizeClientUrl("tls://127.0.0.1:7001"),
    "tls://127.0.0.1:7001",
  );
  assert.equal(normalizeClientUrl("tls://[::1]:7001"), "tls://[::1]:7001");
  assert.equal(
    normalizeClientUrl("tcp://127.0.0.1:7001"),
    "tcp://127.0.0.1:7001",
  );
  assert.equal(normalizeClientUrl("tls://0.0.0.0:7001"), null);
  assert.equal(normalizeClientUrl("tls://127.0.0.1"), null);
  assert.equal(normalizeClientUrl("https://127.0.0.1:7001"), null);
});

Deno.test("real TLS: a peer whose certificate comes from another CA cannot connect, even as the member it names", async () => {
  const other = await RealTlsNetwork.create();
  await other.prepare([cert("n1")]);
  const acceptor = acceptorOn(realTls, cert("n2"));
  // It trusts the cluster's CA; its own certificate is signed by another.
  const stranger = {
    ...other,
    serve: () => {
      throw new Error("unused");
    },
    dialer: (certificate: PeerCertificate | null) =>
      other.dialer(certificate, realTls),
  };
  try {
    const failure = await connect(stranger, acceptor, cert("n1")).then(
      async ({ connection, serverCert }) => {
        // A TLS 1.3 client may finish its side before the server refuses:
        // then the first call fails instead.
        try {
          await handshake(connection, "n1", { peerCertificate: serverCert });
          return null;
        } catch (error) {
          return error;
        } finally {
          connection.close();
        }
      },
      (error) => error,
    );
    assert.ok(failure instanceof Error, "the handshake must fail");
    if (failure instanceof PeerHandshakeError) {
      // Refused after our side finished: the message puts the CA first,
      // not the --peers listing.
      assert.match(
        failure.message,
        /^the peer refused our peer\.hello: it closed the TLS connection.*; likely causes, most likely first: its --peer-tls-ca does not trust our --peer-tls-cert \(signed by another CA\?\), or ours does not trust its certificate; it does not list n1 among its --peers, or it is not n2; /,
      );
    }
    assert.deepEqual(acceptor.stepped, []);
    assert.equal(acceptor.server.acceptor.stats.identityRefused, 0);
  } finally {
    await acceptor.server.close();
  }
});

Deno.test("helloFailure: a connection closed on our hello names the CA first over TLS, with the TLS error when there is one; over plain TCP the --peers listing", () => {
  const closed = new ConnectionError(
    'connection to tls://127.0.0.1:7102 closed before the response to "peer.hello": read failed: …',
    true,
    { cause: new Error("tlsv13 alert certificate required") },
  );
  assert.equal(
    helloFailure(closed, "n1", "n2", 2000, true),
    "the peer refused our peer.hello: it closed the TLS connection (tlsv13 alert certificate required); likely causes, most likely first: its --peer-tls-ca does not trust our --peer-tls-cert (signed by another CA?), or ours does not trust its certificate; it does not list n1 among its --peers, or it is not n2; the network between them cuts connections",
  );
  assert.equal(
    helloFailure(new ConnectionError("closed", true), "n1", "n2", 2000),
    "the peer refused our peer.hello: it closed the connection (does it list n1 among its --peers, and is it n2? or is the network between them cutting connections?)",
  );
});
