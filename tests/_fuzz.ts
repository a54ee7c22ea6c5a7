/**
 * Shared parts of the fuzz tests (issue 17, "fuzzed ports"): the seeded
 * generator and the time budget, a seed corpus of valid frames and the
 * mutations applied to them, the ways an input is sent (at once, half
 * closed, vanishing, dripped), a process's RSS, and the crash corpus.
 *
 * **The crash corpus** (`tests/fuzz_corpus/<port>/`): one file per input,
 * its bytes exactly what was written on one fresh connection to that
 * port. `<port>` is `serve` (an RPC server), `client` (a registry client
 * port), `peer` (a peer port, before any handshake) or `peer-step` (a peer
 * port after a successful handshake as member `n3` to member `n1`: the
 * bytes follow the handshake on the same connection, NDJSON frames whose
 * messages say `"from":"n3"` and `"to":"n1"`). Files are named
 * `seed-<what>.bin` (kept so the replay has something to do) or
 * `crash-<hash>.bin` (saved by a fuzz run). `tests/fuzz_corpus/open/`
 * holds, in the same layout, inputs that still break a port and whose fix
 * lies outside the ports (the replay skips them; move a file up once its
 * bug is fixed). A fuzz test that sees a port go down or stop answering
 * saves the input with {@link saveCrash}; `tests/fuzz_corpus_test.ts`
 * replays every file of the folder.
 *
 * @module
 */

import { join } from "node:path";
import { Prng } from "../raft/sim/prng.ts";
import {
  type ClusterKey,
  newNonce,
  PEER_AUTH_METHOD,
  PEER_HELLO_METHOD,
} from "../raft/peer_auth.ts";

/** The ports a corpus file can be for (the folder names). */
export const CORPUS_PORTS = ["serve", "client", "peer", "peer-step"] as const;
/** One of {@link CORPUS_PORTS}. */
export type CorpusPort = typeof CORPUS_PORTS[number];

const encoder = new TextEncoder();
const CORPUS_DIR = new URL("./fuzz_corpus/", import.meta.url).pathname;

/**
 * A seeded random source with the draws the fuzzers use: the simulator's
 * ({@link Prng}, mulberry32), plus floats and bytes.
 */
export class Rng extends Prng {
  /** @param seed the seed printed by {@link fuzzSeed}. */
  constructor(readonly seed: number) {
    super(seed);
  }

  /** A float in [0, 1). */
  float(): number {
    return this.next();
  }

  /** `count` random bytes. */
  bytes(count: number): Uint8Array {
    const out = new Uint8Array(count);
    for (let i = 0; i < count; i++) out[i] = this.int(0, 255);
    return out;
  }
}

/**
 * The seed of this run: `RAFTER_FUZZ_SEED` when set (to replay a failure),
 * else a fresh one; printed either way with how to replay it.
 */
export function fuzzSeed(what: string): number {
  const given = Deno.env.get("RAFTER_FUZZ_SEED");
  const seed = given === undefined
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(given);
  console.log(
    `${what}: fuzz seed ${seed} (replay with RAFTER_FUZZ_SEED=${seed})`,
  );
  return seed;
}

/** `RAFTER_FUZZ_SECONDS` (else `fallback`), in ms: how long the fuzz may run. */
export function fuzzBudgetMs(fallback: number): number {
  return Number(Deno.env.get("RAFTER_FUZZ_SECONDS") ?? fallback) * 1000;
}

/** `RAFTER_FUZZ_RUNS` (else `fallback`): the most inputs per port. */
export function fuzzRuns(fallback: number): number {
  return Number(Deno.env.get("RAFTER_FUZZ_RUNS") ?? fallback);
}

/** Numbers at the edges of what JSON, JavaScript and the limits allow. */
export const BOUNDARY_NUMBERS: readonly unknown[] = [
  0,
  -0,
  -1,
  1,
  2 ** 31,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  Number.MAX_VALUE,
  1e308,
  -1e308,
  5e-324,
  0.5,
  Number.MIN_SAFE_INTEGER,
];

/**
 * A valid request of every registry client method (and the RPC
 * extensions), the seeds the mutations start from. `id` is filled in.
 */
export const REGISTRY_SEEDS: readonly Record<string, unknown>[] = [
  { method: "rpc.ping" },
  { method: "rpc.cancel", params: { id: 1 } },
  { method: "registry.status" },
  { method: "registry.bind", params: fuzzBind("seed") },
  { method: "registry.unbind", params: { name: "fuzz-seed", id: "e1" } },
  {
    method: "registry.setState",
    params: { name: "fuzz-seed", id: "e1", state: "draining" },
  },
  {
    method: "registry.lookup",
    params: { name: "fuzz-seed", consistency: "linearizable", rotate: true },
  },
  {
    method: "registry.list",
    params: { prefix: "fuzz", consistency: "serializable", endpoints: true },
  },
  { method: "registry.watch", params: { prefix: "fuzz", fromRevision: 1 } },
  { method: "registry.unwatch", params: { watchId: "w1" } },
  { method: "registry.events", params: { fromRevision: 1 } },
  { method: "lease.grant", params: { ttlMs: 5_000 } },
  { method: "lease.keepAlive", params: { id: "l1", load: 0.5 } },
  { method: "lease.revoke", params: { id: "l1" } },
  { method: "lease.timeToLive", params: { id: "l1" } },
  { method: "lease.list" },
  { method: "registry.memberList" },
  { method: "registry.authStatus" },
  { method: "registry.authenticate", params: { token: "rafter_x" } },
  { method: "registry.tokenList" },
];

/**
 * Seeds of the methods that change a cluster's membership, leadership or
 * authentication: fuzzed only on a throw-away single node, never on the
 * cluster whose healthy client must keep working.
 */
export const ADMIN_SEEDS: readonly Record<string, unknown>[] = [
  { method: "registry.leaderTransfer", params: { to: "n1", timeoutMs: 100 } },
  {
    method: "registry.memberAdd",
    params: { id: "fz", peerUrl: "tcp://127.0.0.1:9", learner: true },
  },
  { method: "registry.memberPromote", params: { id: "fz" } },
  { method: "registry.memberRemove", params: { id: "fz" } },
  {
    method: "registry.tokenCreate",
    params: { name: "fz", permissions: ["bind:fuzz"] },
  },
  { method: "registry.tokenRevoke", params: { id: "t1" } },
  { method: "registry.authEnable" },
  { method: "registry.authDisable" },
];

/** A valid `registry.bind` of endpoint `id` under `fuzz-<id>`. */
export function fuzzBind(id: string): Record<string, unknown> {
  return {
    name: `fuzz-${id}`,
    endpoint: { id, url: "tcp://127.0.0.1:9", meta: { zone: "a" } },
  };
}

/** A JSON-ish value: whatever `JSON.stringify` writes (`undefined` dropped). */
type Value = unknown;

/** A random small JSON value, with the awkward corners. */
export function randomValue(rng: Rng, depth = 0): Value {
  switch (rng.int(0, depth > 2 ? 4 : 6)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick(BOUNDARY_NUMBERS);
    case 3:
      return rng.float() * 10 ** rng.int(-5, 20);
    case 4:
      return rng.pick(["", "n1", "n3", "fuzz", "\u0000", "\ud800", "é"]);
    case 5:
      return Array.from(
        { length: rng.int(0, 3) },
        () => randomValue(rng, depth + 1),
      );
    default:
      return Object.fromEntries(
        Array.from(
          { length: rng.int(0, 3) },
          () => [rng.pick(["a", "id", "__proto__", "name"]), randomValue(rng)],
        ),
      );
  }
}

/** Paths to every member of `value`'s objects and arrays. */
function paths(
  value: Value,
  at: (string | number)[] = [],
): (string | number)[][] {
  if (typeof value !== "object" || value === null) return [at];
  const keys = Array.isArray(value)
    ? value.map((_, i) => i)
    : Object.keys(value);
  return [at, ...keys.flatMap((k) => paths((value as never)[k], [...at, k]))];
}

/**
 * A structural mutation of `value` (deep-copied): a member deleted,
 * duplicated under another name, or given a value of another type or a
 * boundary number.
 */
export function mutateValue(rng: Rng, value: Value): Value {
  const copy = structuredClone(value) as Record<string, unknown>;
  const all = paths(copy).filter((p) => p.length > 0);
  if (all.length === 0) return randomValue(rng);
  const path = rng.pick(all);
  const parent = path.slice(0, -1).reduce<Record<string, unknown>>(
    (node, key) => node[key as string] as Record<string, unknown>,
    copy,
  );
  const key = path[path.length - 1] as string;
  switch (rng.int(0, 4)) {
    case 0:
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
      break;
    case 1:
      parent[Array.isArray(parent) ? parent.length : `${key}_`] = parent[key];
      break;
    case 2:
      parent[key] = rng.pick(BOUNDARY_NUMBERS);
      break;
    case 3:
      parent[key] = typeof parent[key] === "string"
        ? rng.pick([1, [parent[key]], { s: parent[key] }, true])
        : String(parent[key]);
      break;
    default:
      parent[key] = randomValue(rng);
  }
  return copy;
}

/** A seed request, mutated in its structure and maybe in its bytes. */
export function fuzzedRequest(
  rng: Rng,
  seed: Record<string, unknown>,
): Uint8Array {
  let frame: unknown = { jsonrpc: "2.0", id: rng.int(1, 1_000), ...seed };
  for (let n = rng.int(0, 3); n > 0; n--) frame = mutateValue(rng, frame);
  if (rng.chance(0.1)) frame = [frame, mutateValue(rng, frame)];
  const bytes = line(frame);
  return rng.chance(0.4) ? mutateBytes(rng, bytes) : bytes;
}

/** `frame` (one JSON-RPC message) as one NDJSON line. */
export function line(frame: Value): Uint8Array {
  return encoder.encode(`${JSON.stringify(frame)}\n`);
}

/**
 * A byte-level mutation of an encoded frame: bit flips, a cut, a byte
 * spliced in or repeated, invalid UTF-8, a value swapped for a huge one.
 */
export function mutateBytes(rng: Rng, bytes: Uint8Array): Uint8Array {
  const out = Uint8Array.from(bytes);
  switch (rng.int(0, 5)) {
    case 0: {
      for (let i = rng.int(1, 4); i > 0; i--) {
        out[rng.int(0, out.length - 1)] ^= 1 << rng.int(0, 7);
      }
      return out;
    }
    case 1: // truncated (maybe without its newline)
      return out.slice(0, rng.int(1, out.length - 1));
    case 2: { // invalid UTF-8 inside the text
      const at = rng.int(1, out.length - 2);
      const bad = rng.pick([[0xc3], [0xff], [0xed, 0xa0, 0x80], [0xf8, 0x88]]);
      return concat(out.slice(0, at), Uint8Array.from(bad), out.slice(at));
    }
    case 3: { // a slice repeated
      const at = rng.int(0, out.length - 2);
      const end = rng.int(at + 1, out.length - 1);
      return concat(out.slice(0, end), out.slice(at, end), out.slice(end));
    }
    case 4: // two frames glued, or a newline too many
      return concat(out.slice(0, -1), out, Uint8Array.of(0x0a));
    default: { // a byte replaced at random
      out[rng.int(0, out.length - 1)] = rng.int(0, 255);
      return out;
    }
  }
}

/** The bytes of `parts`, one after another. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * Hostile inputs that are not mutations of one frame: deep nesting
 * (10^5), a 1 MiB string, a 4,000-digit number, CBOR with truncated or
 * oversize lengths, raw bytes.
 */
export function hostileInput(rng: Rng, method: string): Uint8Array {
  const head = `{"jsonrpc":"2.0","id":1,"method":"${method}","params":`;
  switch (rng.int(0, 7)) {
    case 0: {
      const depth = rng.pick([1_000, 100_000]);
      return encoder.encode(
        `${head}${"[".repeat(depth)}${"]".repeat(depth)}}\n`,
      );
    }
    case 1: {
      const depth = rng.pick([1_000, 100_000]);
      return encoder.encode(
        `${head}${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}\n`,
      );
    }
    case 2:
      return encoder.encode(`${head}{"name":"${"x".repeat(1 << 20)}"}}\n`);
    case 3:
      return encoder.encode(
        `${head}{"ttlMs":${"9".repeat(4_000)},"name":1e999}}\n`,
      );
    case 4: { // CBOR: a length prefix beyond anything allowed
      const out = new Uint8Array(7 + 16);
      out.set([0xd9, 0xd9, 0xf7]);
      new DataView(out.buffer).setUint32(3, rng.pick([0xffffffff, 1 << 30]));
      out.set(rng.bytes(16), 7);
      return out;
    }
    case 5: { // CBOR: a short frame whose body is cut or random
      const body = rng.bytes(rng.int(0, 40));
      const out = new Uint8Array(7 + body.length);
      out.set([0xd9, 0xd9, 0xf7]);
      new DataView(out.buffer).setUint32(3, body.length + rng.int(0, 8));
      out.set(body, 7);
      return out;
    }
    case 6: // an array batch of many members
      return encoder.encode(
        `[${
          Array.from(
            { length: rng.int(100, 3_000) },
            (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"rpc.ping"}`,
          ).join(",")
        }]\n`,
      );
    default:
      return rng.bytes(rng.int(1, 512));
  }
}

/** How {@link sendRaw} ends the connection after writing. */
export type Ending = "read" | "halfClose" | "vanish";

/**
 * Writes `bytes` on a fresh connection to 127.0.0.1:`port`, then ends it as
 * `ending` says: read what comes back for up to `readMs` (or until the
 * server closes), shut the write side and read, or close at once.
 * @returns whether the server closed its side within the read.
 */
export async function sendRaw(
  port: number,
  bytes: Uint8Array,
  ending: Ending,
  readMs = 100,
): Promise<boolean> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(bytes).catch(() => {});
    if (ending === "vanish") return false;
    if (ending === "halfClose") await conn.closeWrite().catch(() => {});
    return await readUntilClosed(conn, readMs);
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the server already.
    }
  }
}

/** Reads `conn` until the server closes it (true) or `ms` pass (false). */
export async function readUntilClosed(
  conn: Deno.Conn,
  ms: number,
): Promise<boolean> {
  const buffer = new Uint8Array(64 * 1024);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      (async () => {
        while (true) {
          const n = await conn.read(buffer).catch(() => null);
          if (n === null) return true;
        }
      })(),
      new Promise<boolean>((resolve) => timer = setTimeout(resolve, ms, false)),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes `bytes` one byte every `everyMs` on a fresh connection, and keeps
 * dripping (repeating the bytes) until the server closes it or `maxMs`
 * pass. @returns how long the server let it drip, in ms, or null when it
 * never closed it.
 */
export async function drip(
  port: number,
  bytes: Uint8Array,
  everyMs: number,
  maxMs: number,
): Promise<number | null> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const started = Date.now();
  let closed = false;
  const reading = readUntilClosed(conn, maxMs).then((c) => closed = c);
  try {
    for (let i = 0; !closed && Date.now() - started < maxMs; i++) {
      const wrote = await conn.write(
        bytes.subarray(i % bytes.length, i % bytes.length + 1),
      )
        .then(() => true, () => false);
      if (!wrote) break;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
    await Promise.race([reading, new Promise((r) => setTimeout(r, 200))]);
    return closed || Date.now() - started < maxMs ? Date.now() - started : null;
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the server already.
    }
  }
}

/** The resident set of process `pid`, in KiB (`/proc/<pid>/status` VmRSS). */
export function rssKiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (match === null) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]);
}

/** Samples the RSS of `pids` every `everyMs` and keeps each one's peak. */
export class RssSampler {
  readonly before: Map<number, number>;
  readonly peak: Map<number, number>;
  readonly #timer: ReturnType<typeof setInterval>;

  /** Starts sampling now. */
  constructor(readonly pids: readonly number[], everyMs = 100) {
    this.before = new Map(pids.map((pid) => [pid, rssKiB(pid)]));
    this.peak = new Map(this.before);
    this.#timer = setInterval(() => this.sample(), everyMs);
  }

  /** One sample of every process. */
  sample(): void {
    for (const pid of this.pids) {
      try {
        this.peak.set(pid, Math.max(this.peak.get(pid)!, rssKiB(pid)));
      } catch {
        // Exited: the test's liveness checks say so.
      }
    }
  }

  /** Stops sampling; @returns before, peak and now of each process, in KiB. */
  stop(): { pid: number; before: number; peak: number; after: number }[] {
    clearInterval(this.#timer);
    this.sample();
    return this.pids.map((pid) => ({
      pid,
      before: this.before.get(pid)!,
      peak: this.peak.get(pid)!,
      after: rssKiB(pid),
    }));
  }
}

/**
 * Saves an input that crashed or hung `port` as a corpus file (named by
 * its hash) and @returns its path: add it to the commit with the fix.
 */
export async function saveCrash(
  port: CorpusPort,
  bytes: Uint8Array,
): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  const name = [...digest.slice(0, 8)]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  const dir = join(CORPUS_DIR, port);
  await Deno.mkdir(dir, { recursive: true });
  const path = join(dir, `crash-${name}.bin`);
  await Deno.writeFile(path, bytes);
  console.error(`saved the input that broke the ${port} port as ${path}`);
  return path;
}

/** Every corpus file of `port`: its name and bytes. */
export function readCorpus(
  port: CorpusPort,
): { name: string; bytes: Uint8Array }[] {
  const dir = join(CORPUS_DIR, port);
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
  return entries
    .filter((e) => e.isFile && !e.name.startsWith("."))
    .map((e) => e.name)
    .sort()
    .map((name) => ({ name, bytes: Deno.readFileSync(join(dir, name)) }));
}

/** What a raw peer handshake needs: the secret's key and both ends. */
export interface RawHandshake {
  key: ClusterKey;
  clusterId: string;
  /** The member id the fuzzer speaks as. */
  from: string;
  /** The member it talks to. */
  to: string;
  clientUrl: string | null;
  peerUrl: string | null;
  /**
   * For a peer port with mutual TLS: the CA to trust and the member
   * certificate and key to present (PEM text).
   */
  tls?: { caCert: string; cert: string; key: string };
}

/**
 * Opens a TCP (or mutual TLS) connection to a peer port and completes a legitimate
 * `peer.hello` / `peer.auth` on it by hand (NDJSON), so the caller can
 * write any bytes after it. @throws when the handshake is refused.
 */
export async function rawPeerHandshake(
  port: number,
  options: RawHandshake,
): Promise<Deno.Conn> {
  const conn = options.tls === undefined
    ? await Deno.connect({ hostname: "127.0.0.1", port })
    : await Deno.connectTls({
      hostname: "127.0.0.1",
      port,
      caCerts: [options.tls.caCert],
      cert: options.tls.cert,
      key: options.tls.key,
    });
  try {
    const reader = lineReader(conn);
    const dialerNonce = newNonce();
    await conn.write(line({
      jsonrpc: "2.0",
      id: 1,
      method: PEER_HELLO_METHOD,
      params: {
        cluster: options.clusterId,
        from: options.from,
        to: options.to,
        nonce: dialerNonce,
      },
    }));
    const hello = JSON.parse(await reader());
    if (hello.result === undefined) {
      throw new Error(`peer.hello refused: ${JSON.stringify(hello)}`);
    }
    const proof = await options.key.prove("dialer", {
      cluster: options.clusterId,
      from: options.from,
      to: options.to,
      dialerNonce,
      acceptorNonce: hello.result.nonce,
    });
    await conn.write(line({
      jsonrpc: "2.0",
      id: 2,
      method: PEER_AUTH_METHOD,
      params: {
        proof,
        clientUrl: options.clientUrl,
        peerUrl: options.peerUrl,
      },
    }));
    const auth = JSON.parse(await reader());
    if (auth.result === undefined) {
      throw new Error(`peer.auth refused: ${JSON.stringify(auth)}`);
    }
    return conn;
  } catch (error) {
    conn.close();
    throw error;
  }
}

/** Reads `conn` one NDJSON line at a time (the handshake's answers). */
function lineReader(conn: Deno.Conn): () => Promise<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  const chunk = new Uint8Array(16 * 1024);
  return async () => {
    while (!buffered.includes("\n")) {
      const n = await conn.read(chunk);
      if (n === null) throw new Error("the peer closed the connection");
      buffered += decoder.decode(chunk.subarray(0, n), { stream: true });
    }
    const at = buffered.indexOf("\n");
    const text = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return text;
  };
}

/** Where the target's log stands: what valid peer messages are built from. */
export interface LogPoint {
  term: number;
  commit: number;
}

/**
 * A valid Raft message of a random kind (`raft/types.ts`) from `from` to
 * `to` at `at`: appends (with entries, or a heartbeat), votes and
 * pre-votes, their answers, read-index, snapshot chunks, `timeoutNow`.
 * Entries carry registry commands that bind `forged-*` names, or data the
 * state machine cannot read.
 */
export function validPeerMessage(
  rng: Rng,
  from: string,
  to: string,
  at: LogPoint,
): Record<string, unknown> {
  const { term, commit } = at;
  const base = { from, to, term };
  const data = () =>
    rng.pick([
      JSON.stringify({
        op: "bind",
        name: "forged",
        endpoint: { id: `f${rng.int(0, 99)}`, url: "tcp://127.0.0.1:6666" },
      }),
      JSON.stringify({ op: "unbind", name: "healthy", id: "h1" }),
      JSON.stringify({ op: rng.pick(["nope", "bind", "lease"]) }),
      "not json",
      "",
      "{}",
    ]);
  switch (rng.int(0, 10)) {
    case 0:
    case 1:
      return {
        type: "append",
        ...base,
        prevLogIndex: commit,
        prevLogTerm: term,
        entries: Array.from({ length: rng.int(0, 3) }, (_, i) => ({
          index: commit + 1 + i,
          term,
          data: data(),
          ...(rng.chance(0.1) ? { type: "config" } : {}),
        })),
        commit: commit + rng.int(0, 3),
      };
    case 2:
      return {
        type: rng.pick(["vote", "preVote"]),
        ...base,
        term: term + 1,
        lastLogIndex: commit + rng.int(0, 5),
        lastLogTerm: term,
      };
    case 3:
      return {
        type: rng.pick(["voteResponse", "preVoteResponse"]),
        ...base,
        granted: rng.chance(0.5),
      };
    case 4:
      return {
        type: "appendResponse",
        ...base,
        success: rng.chance(0.5),
        index: commit + rng.int(0, 5),
        conflictTerm: term,
        conflictIndex: commit,
      };
    case 5:
      return {
        type: "installSnapshot",
        ...base,
        snapshot: { index: commit + rng.int(1, 10), term },
        offset: rng.pick([0, 0, 10, 2 ** 40]),
        data: rng.pick(["", "e30", "not base64 !", "A".repeat(1_000)]),
        done: rng.chance(0.5),
        configuration: { voters: ["n1", "n2", "n3"], learners: [] },
      };
    case 6:
      return {
        type: "installSnapshotResponse",
        ...base,
        snapshotIndex: commit,
        offset: 0,
        success: rng.chance(0.5),
      };
    case 7:
      return { type: "readIndex", ...base, context: "c1" };
    case 8:
      return {
        type: "readIndexResponse",
        ...base,
        context: "c1",
        index: commit,
      };
    case 9:
      return { type: "timeoutNow", ...base };
    default: // a heartbeat
      return {
        type: "append",
        ...base,
        prevLogIndex: commit,
        prevLogTerm: term,
        entries: [],
        commit,
      };
  }
}

/** `messages` as one `raft.step` request frame (NDJSON). */
export function stepFrame(id: number, messages: unknown[]): Uint8Array {
  return line({ jsonrpc: "2.0", id, method: "raft.step", params: [messages] });
}
