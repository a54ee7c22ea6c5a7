/**
 * Fuzzed ports (issue 17, a bounded slice for CI): random and mutated
 * frames sent to a `serve()` server, a registry node's client port and its
 * peer port (before the handshake) — valid JSON-RPC with random methods
 * and params, broken JSON, deep nesting, huge numbers, long strings,
 * invalid UTF-8, truncated CBOR, oversize lengths, half-closed connections.
 * After every input a healthy client must still be answered on each port,
 * and the process (this one) must still be up.
 *
 * Mutated valid requests of every registry method (admin ones included:
 * the node is thrown away) and hostile inputs come from `tests/_fuzz.ts`,
 * as in `fuzz_cluster_e2e_test.ts`, which fuzzes real processes.
 *
 * `RAFTER_FUZZ_RUNS` sets the number of inputs per port (default 150); the
 * seed is printed (`RAFTER_FUZZ_SEED` replays it), and fast-check prints
 * the shrunk input of a failure: add it to `REGRESSIONS` below, or save it
 * under `tests/fuzz_corpus/<port>/`. A longer run by hand:
 *
 *     RAFTER_FUZZ_RUNS=5000 deno test -A tests/fuzz_ports_e2e_test.ts
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { serve } from "../adapter/deno/serve.ts";
import { dial } from "../rpc/transport/dial.ts";
import { startTestRegistry } from "../testing/cluster.ts";
import { within } from "../testing/time.ts";
import {
  ADMIN_SEEDS,
  fuzzedRequest,
  fuzzRuns,
  fuzzSeed,
  hostileInput,
  REGISTRY_SEEDS,
  Rng,
} from "./_fuzz.ts";

const RUNS = fuzzRuns(150);
const encoder = new TextEncoder();

/**
 * Inputs replayed on every port before the random ones: nesting that would
 * overflow a recursive parser's stack. Add the shrunk input of any failure
 * here, so it is tried on every run.
 */
const REGRESSIONS: Uint8Array[] = [
  // Nesting deep enough to overflow a recursive parser's stack.
  encoder.encode(`${"[".repeat(200_000)}\n`),
  encoder.encode(
    `{"jsonrpc":"2.0","id":1,"method":"rpc.ping","params":${
      "[".repeat(100_000)
    }${"]".repeat(100_000)}}\n`,
  ),
];

const METHODS = [
  "rpc.ping",
  "rpc.cancel",
  "rpc.authenticate",
  "registry.bind",
  "registry.lookup",
  "registry.watch",
  "registry.authenticate",
  "lease.grant",
  "peer.hello",
  "peer.auth",
  "raft.step",
  "greet",
];

/** A JSON value of bounded size, with the awkward corners JSON allows. */
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.constantFrom(1e308, -1e308, 2 ** 53 + 1, -0),
    fc.string({ maxLength: 40 }),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie("value"), { maxKeys: 4 }),
  ),
})).value;

/** A request-shaped object: sometimes valid JSON-RPC, sometimes not. */
const request = fc.record({
  jsonrpc: fc.oneof(fc.constant("2.0"), jsonValue),
  id: fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), jsonValue),
  method: fc.oneof(fc.constantFrom(...METHODS), fc.string({ maxLength: 20 })),
  params: fc.oneof(jsonValue, fc.array(jsonValue, { maxLength: 3 })),
  timeoutMs: fc.oneof(fc.integer(), jsonValue),
}, { requiredKeys: [] });

/**
 * Valid requests of every registry method (the admin ones too: this node
 * is thrown away) and of the serve() server, mutated (`tests/_fuzz.ts`):
 * members deleted, duplicated or of another type, boundary numbers, bit
 * flips, cuts, invalid UTF-8.
 */
const SEEDS = [
  ...REGISTRY_SEEDS,
  ...ADMIN_SEEDS,
  { method: "greet", params: ["Ada"] },
  { method: "greet", params: { name: "Ada" } },
];

/** The bytes of one input. */
const input: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(fc.integer(), fc.nat(SEEDS.length - 1)).map(([seed, at]) =>
    fuzzedRequest(new Rng(seed), SEEDS[at])
  ),
  fc.tuple(fc.integer(), fc.nat(SEEDS.length - 1)).map(([seed, at]) =>
    hostileInput(new Rng(seed), SEEDS[at].method as string)
  ),
  // Valid JSON lines, one or several, perhaps in a batch.
  fc.array(request, { minLength: 1, maxLength: 3 }).map((requests) =>
    encoder.encode(requests.map((r) => JSON.stringify(r)).join("\n") + "\n")
  ),
  fc.array(request, { maxLength: 3 }).map((batch) =>
    encoder.encode(`${JSON.stringify(batch)}\n`)
  ),
  // Broken JSON: a valid line cut or mutated.
  fc.tuple(request, fc.nat(), fc.integer({ min: 0, max: 255 })).map(
    ([r, at, byte]) => {
      const bytes = encoder.encode(`${JSON.stringify(r)}\n`);
      const copy = bytes.slice(0, Math.max(1, at % (bytes.length + 1)));
      if (copy.length > 0) copy[at % copy.length] = byte;
      return copy;
    },
  ),
  // Deep nesting.
  fc.integer({ min: 1_000, max: 50_000 }).map((depth) =>
    encoder.encode(`${"[".repeat(depth)}${"]".repeat(depth)}\n`)
  ),
  fc.integer({ min: 1_000, max: 50_000 }).map((depth) =>
    encoder.encode(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}\n`)
  ),
  // Long strings and numbers.
  fc.integer({ min: 10_000, max: 300_000 }).map((n) =>
    encoder.encode(
      `{"jsonrpc":"2.0","id":1,"method":"${"m".repeat(n)}"}\n`,
    )
  ),
  fc.integer({ min: 400, max: 5_000 }).map((n) =>
    encoder.encode(
      `{"jsonrpc":"2.0","id":${"9".repeat(n)},"method":"rpc.ping"}\n`,
    )
  ),
  // Invalid UTF-8 and raw bytes.
  fc.uint8Array({ minLength: 1, maxLength: 300 }),
  fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) => {
    const out = new Uint8Array(bytes.length + 1);
    out.set(bytes.map((b) => b | 0x80));
    out[bytes.length] = 0x0a;
    return out;
  }),
  // CBOR: the magic, then a length that is truncated, oversize, or wrong.
  fc.tuple(fc.nat({ max: 0xffffffff }), fc.uint8Array({ maxLength: 64 })).map(
    ([length, body]) => {
      const out = new Uint8Array(3 + 4 + body.length);
      out.set([0xd9, 0xd9, 0xf7]);
      new DataView(out.buffer).setUint32(3, length);
      out.set(body, 7);
      return out;
    },
  ),
);

/** Sends `bytes` on a fresh connection, reads briefly, maybe half-closes. */
async function poke(
  port: number,
  bytes: Uint8Array,
  halfClose: boolean,
): Promise<void> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(bytes).catch(() => {});
    if (halfClose) await conn.closeWrite().catch(() => {});
    const buffer = new Uint8Array(64 * 1024);
    // Read what comes back for a moment (or until the server closes).
    await Promise.race([
      (async () => {
        for (let i = 0; i < 64; i++) {
          const n = await conn.read(buffer).catch(() => null);
          if (n === null) return;
        }
      })(),
      new Promise((resolve) => setTimeout(resolve, 50)),
    ]);
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the server already.
    }
  }
}

Deno.test(`fuzzed frames on a serve() port, a registry client port and a peer port: every port still answers a healthy client (${RUNS} inputs each)`, async () => {
  const seed = fuzzSeed("fuzz_ports_e2e");
  const { registry, dir } = await startTestRegistry("rafter_fuzz_");
  const server = serve({ methods: { greet: (name: string) => `hi ${name}` } });
  const ports = {
    serve: server.port,
    client: Number(new URL(registry.url).port),
    peer: Number(new URL(registry.peerUrl).port),
  };
  const rpc = await dial(server.url);
  const registryConnection = await dial(registry.url);
  const healthy = async (what: string) => {
    assert.equal(
      await within(rpc.call("greet", ["Ada"]), 5_000, `${what}: serve()`),
      "hi Ada",
    );
    const lookup = await within(
      registryConnection.call<{ endpoints: unknown[] }>("registry.lookup", {
        name: "fuzz",
      }),
      5_000,
      `${what}: registry lookup`,
    );
    assert.deepEqual(lookup.endpoints, []);
    // The peer port is alive when it accepts a connection and answers
    // the handshake's first call (with a refusal: wrong cluster).
    const peer = await dial(registry.peerUrl);
    try {
      await assert.rejects(
        within(
          peer.call("peer.hello", {
            cluster: "0000000000000000",
            from: "x",
            to: "n1",
            nonce: "A".repeat(43),
          }),
          5_000,
          `${what}: peer port`,
        ),
      );
    } finally {
      peer.close();
    }
  };
  try {
    for (const [i, bytes] of REGRESSIONS.entries()) {
      for (const port of Object.values(ports)) await poke(port, bytes, false);
      await healthy(`regression ${i}`);
    }
    for (const [name, port] of Object.entries(ports)) {
      let count = 0;
      await fc.assert(
        fc.asyncProperty(input, fc.boolean(), async (bytes, halfClose) => {
          await poke(port, bytes, halfClose);
          if (++count % 25 === 0) await healthy(`${name} after ${count}`);
          return true;
        }),
        { numRuns: RUNS, seed: seed + Object.keys(ports).indexOf(name) },
      );
      await healthy(`${name}, end`);
    }
  } finally {
    rpc.close();
    registryConnection.close();
    await server.close();
    await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
