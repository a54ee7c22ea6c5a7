/**
 * A load-generator process of `bench/registry_etcd.ts` (private to
 * `bench/`): runs closed-loop callers against Rafter's registry
 * (`RafterClient`) or etcd (native gRPC through the `etcd3` client, or the
 * JSON gateway through `fetch`), so the bench can spread 64 callers over
 * several processes and the table measures the servers, not one client's
 * core.
 *
 * Protocol: one JSON {@linkcode LoadCommand} per line on stdin, one JSON
 * {@linkcode LoadResult} per line on stdout, in order. Prints `ready` once
 * it has loaded. Ends when stdin closes.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { Etcd3 } from "etcd3";
import { connect, type RafterClient } from "../stub/client.ts";

/** Which server and which API a command drives. */
export type System = "rafter" | "grpc" | "gateway";

/** What each caller does, over and over. */
export type LoadOp =
  | "write"
  | "read-lin"
  | "read-ser"
  | "grant"
  | "keepalive"
  | "grant-bind-keepalive";

/** One run of closed-loop callers. */
export interface LoadCommand {
  cmd: "run" | "cleanup";
  system: System;
  op: LoadOp;
  /** Callers in this process. */
  callers: number;
  /** Client objects the callers share (RafterClient / Etcd3 instances / none for the gateway). */
  objects: number;
  /** How long to run, ms. */
  ms: number;
  /** Record latencies (false for a warm-up). */
  measure: boolean;
  /** First sequence number: ids and keys are `seq`, `seq + 1`, … */
  seq: number;
  /** Rafter registry URLs (`tcp://…`). */
  rafterUrls: string[];
  /** etcd client URLs (`http://…`), every member. */
  etcdUrls: string[];
  /** The etcd leader's client URL: writes and lease calls go there. */
  etcdLeader: string;
}

/** What one command did. */
export interface LoadResult {
  count: number;
  /** Latency of each successful call, ms (when measured). */
  latencies: number[];
  errors: Record<string, number>;
  wallMs: number;
}

/** Names the bound lookups live under. */
export const LOOKUP_NAME = "bench/lookup";
/** The etcd prefix of the same endpoints. */
export const LOOKUP_PREFIX = "bench/lookup/";
/** TTL of the leases of the bench, ms: none expires during the run. */
export const LEASE_TTL_MS = 600_000;
const FAKE_URL = "tcp://127.0.0.1:9";
const CALL_DEADLINE_MS = 5_000;
/** Most calls one command makes. */
const MAX_OPS = 2_000_000;

const encoder = new TextEncoder();
const b64 = (text: string) => Buffer.from(text).toString("base64");
/** `key` + 1 in its last byte: the end of a prefix range. */
const prefixEnd = (key: string) =>
  key.slice(0, -1) + String.fromCharCode(key.charCodeAt(key.length - 1) + 1);

function endpointValue(id: string): string {
  return JSON.stringify({ id, url: FAKE_URL });
}

/** A keep-alive stream of one caller (etcd's LeaseKeepAlive is a bidi stream). */
interface KeepAliveStream {
  once(event: "data", listener: (data: unknown) => void): void;
  write(data: { ID: string }): void;
  end(): void;
}

/** Per-system state: clients, leases per caller, leases to revoke. */
class Driver {
  rafter: RafterClient[] = [];
  grpcAll: Etcd3[] = [];
  grpcLeader: Etcd3[] = [];
  #leaderUrl = "";
  /** The registry the Rafter clients were made for (a bench may run two). */
  #rafterUrls = "";
  /** Lease of each caller for keepalive, per system. */
  callerLeases = new Map<string, string>();
  streams = new Map<string, KeepAliveStream>();
  /** Leases granted by grant ops, to revoke in cleanup. */
  granted: { system: System; id: string }[] = [];

  prepare(command: LoadCommand): void {
    const n = Math.max(1, command.objects);
    const urls = command.rafterUrls.join(",");
    if (
      command.system === "rafter" &&
      (this.rafter.length !== n || this.#rafterUrls !== urls)
    ) {
      this.#rafterUrls = urls;
      for (const client of this.rafter) client.close();
      this.rafter = Array.from(
        { length: n },
        () =>
          connect(command.rafterUrls, {
            deadlineMs: CALL_DEADLINE_MS,
            watch: false,
          }),
      );
    }
    if (command.system === "grpc") {
      if (
        this.grpcAll.length !== n || this.#leaderUrl !== command.etcdLeader
      ) {
        this.closeGrpc();
        this.#leaderUrl = command.etcdLeader;
        this.grpcAll = Array.from(
          { length: n },
          () => new Etcd3({ hosts: command.etcdUrls }),
        );
        this.grpcLeader = Array.from(
          { length: n },
          () => new Etcd3({ hosts: [command.etcdLeader] }),
        );
      }
    }
  }

  closeGrpc(): void {
    for (const stream of this.streams.values()) stream.end();
    for (const key of [...this.streams.keys()]) this.streams.delete(key);
    for (const client of [...this.grpcAll, ...this.grpcLeader]) client.close();
    this.grpcAll = [];
    this.grpcLeader = [];
  }

  close(): void {
    this.closeGrpc();
    for (const client of this.rafter) client.close();
    this.rafter = [];
  }
}

const driver = new Driver();
let gatewayTurn = 0;

async function gateway(
  url: string,
  path: string,
  body: unknown,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(CALL_DEADLINE_MS),
  });
  const json = await response.json();
  if (!response.ok || json.error !== undefined) {
    throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  }
  return json;
}

function etcdGrant(c: LoadCommand, client: Etcd3): Promise<string> {
  const ttl = LEASE_TTL_MS / 1000;
  if (c.system === "grpc") {
    return client.leaseClient.leaseGrant({ TTL: ttl }).then((r) => r.ID);
  }
  return gateway(c.etcdLeader, "/v3/lease/grant", { TTL: ttl }).then((r) =>
    String(r.ID)
  );
}

async function etcdKeepAlive(
  c: LoadCommand,
  client: Etcd3,
  caller: string,
  id: string,
): Promise<void> {
  if (c.system === "gateway") {
    const r = await gateway(c.etcdLeader, "/v3/lease/keepalive", { ID: id });
    const result = r.result as { TTL?: string } | undefined;
    if (result?.TTL === undefined || result.TTL === "0") {
      throw new Error(`keepalive of lease ${id}: ${JSON.stringify(r)}`);
    }
    return;
  }
  let stream = driver.streams.get(caller);
  if (stream === undefined) {
    stream = await client.leaseClient
      .leaseKeepAlive() as unknown as KeepAliveStream;
    driver.streams.set(caller, stream);
  }
  const s = stream;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error("keepalive: no answer")),
      CALL_DEADLINE_MS,
    );
    s.once("data", (data) => {
      clearTimeout(timer);
      const ttl = (data as { TTL?: string }).TTL;
      if (ttl === undefined || ttl === "0") {
        reject(new Error(`keepalive of lease ${id}: expired`));
      } else resolve();
    });
    s.write({ ID: id });
  });
}

/** One call of `c.op` by caller `caller` with sequence number `n`. */
async function op(c: LoadCommand, caller: number, n: number): Promise<void> {
  const o = caller % Math.max(1, c.objects);
  const key = `${c.system}/${caller}`;
  if (c.system === "rafter") {
    const client = driver.rafter[o];
    switch (c.op) {
      case "write":
        await client.bind("bench/bind", { id: `b${n}`, url: FAKE_URL });
        return;
      case "read-lin":
      case "read-ser":
        await client.lookup(LOOKUP_NAME, {
          consistency: c.op === "read-lin" ? "linearizable" : "serializable",
        });
        return;
      case "grant": {
        const lease = await client.registry.grantLease(LEASE_TTL_MS);
        driver.granted.push({ system: "rafter", id: lease.id });
        return;
      }
      case "keepalive": {
        let id = driver.callerLeases.get(key);
        if (id === undefined) {
          id = (await client.registry.grantLease(LEASE_TTL_MS)).id;
          driver.callerLeases.set(key, id);
          driver.granted.push({ system: "rafter", id });
        }
        await client.registry.keepAlive(id);
        return;
      }
      case "grant-bind-keepalive": {
        const bound = await client.bind("bench/lease", {
          id: `l${n}`,
          url: FAKE_URL,
        }, { grant: { ttlMs: LEASE_TTL_MS } });
        driver.granted.push({ system: "rafter", id: bound.leaseId! });
        await client.registry.keepAlive(bound.leaseId!);
        return;
      }
    }
  }
  const write = driver.grpcLeader[o];
  const read = driver.grpcAll[o];
  switch (c.op) {
    case "write": {
      const k = `bench/put/${n}`;
      const value = endpointValue(`b${n}`);
      if (c.system === "grpc") {
        await write.kv.put({ key: Buffer.from(k), value: Buffer.from(value) });
      } else {
        await gateway(c.etcdLeader, "/v3/kv/put", {
          key: b64(k),
          value: b64(value),
        });
      }
      return;
    }
    case "read-lin":
    case "read-ser": {
      const serializable = c.op === "read-ser";
      if (c.system === "grpc") {
        const r = await read.kv.range({
          key: Buffer.from(LOOKUP_PREFIX),
          range_end: Buffer.from(prefixEnd(LOOKUP_PREFIX)),
          serializable,
        });
        if (r.kvs.length === 0) throw new Error("range: no keys");
      } else {
        const url = c.etcdUrls[gatewayTurn++ % c.etcdUrls.length];
        const r = await gateway(url, "/v3/kv/range", {
          key: b64(LOOKUP_PREFIX),
          range_end: b64(prefixEnd(LOOKUP_PREFIX)),
          serializable,
        });
        if (!Array.isArray(r.kvs)) throw new Error("range: no keys");
      }
      return;
    }
    case "grant": {
      const id = await etcdGrant(c, write);
      driver.granted.push({ system: c.system, id });
      return;
    }
    case "keepalive": {
      let id = driver.callerLeases.get(key);
      if (id === undefined) {
        id = await etcdGrant(c, write);
        driver.callerLeases.set(key, id);
        driver.granted.push({ system: c.system, id });
      }
      await etcdKeepAlive(c, write, key, id);
      return;
    }
    case "grant-bind-keepalive": {
      const id = await etcdGrant(c, write);
      driver.granted.push({ system: c.system, id });
      const k = `bench/lease/${n}`;
      const value = endpointValue(`l${n}`);
      if (c.system === "grpc") {
        await write.kv.put({
          key: Buffer.from(k),
          value: Buffer.from(value),
          lease: id,
        });
      } else {
        await gateway(c.etcdLeader, "/v3/kv/put", {
          key: b64(k),
          value: b64(value),
          lease: id,
        });
      }
      await etcdKeepAlive(c, write, key, id);
      return;
    }
  }
}

function errorKind(error: unknown): string {
  const message = error instanceof Error
    ? `${error.name}: ${error.message}`
    : String(error);
  return message.slice(0, 160);
}

async function run(c: LoadCommand): Promise<LoadResult> {
  driver.prepare(c);
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  let n = c.seq;
  const last = c.seq + MAX_OPS;
  let count = 0;
  const start = performance.now();
  const until = start + c.ms;
  await Promise.all(
    Array.from({ length: c.callers }, async (_, caller) => {
      while (performance.now() < until && n < last) {
        const begin = performance.now();
        try {
          await op(c, caller, n++);
          count++;
          if (c.measure) latencies.push(performance.now() - begin);
        } catch (error) {
          const kind = errorKind(error);
          errors[kind] = (errors[kind] ?? 0) + 1;
          // A call that fails at once must not spin the loop.
          await new Promise((r) => setTimeout(r, 5));
        }
      }
    }),
  );
  return { count, latencies, errors, wallMs: performance.now() - start };
}

/** Revokes the leases the grant ops left (64 at a time), and the callers' leases. */
async function cleanup(c: LoadCommand): Promise<LoadResult> {
  driver.prepare(c);
  const start = performance.now();
  const mine = driver.granted.filter((g) => g.system === c.system);
  driver.granted = driver.granted.filter((g) => g.system !== c.system);
  for (const key of [...driver.callerLeases.keys()]) {
    if (key.startsWith(`${c.system}/`)) driver.callerLeases.delete(key);
  }
  const errors: Record<string, number> = {};
  let next = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < mine.length) {
      const { id } = mine[next++];
      try {
        if (c.system === "rafter") {
          await driver.rafter[0].registry.revokeLease(id);
        } else if (c.system === "grpc") {
          await driver.grpcLeader[0].leaseClient.leaseRevoke({ ID: id });
        } else {
          await gateway(c.etcdLeader, "/v3/lease/revoke", { ID: id });
        }
      } catch (error) {
        const kind = errorKind(error);
        errors[kind] = (errors[kind] ?? 0) + 1;
      }
    }
  }));
  return {
    count: mine.length,
    latencies: [],
    errors,
    wallMs: performance.now() - start,
  };
}

if (import.meta.main) {
  const out = (line: string) => {
    const bytes = encoder.encode(`${line}\n`);
    for (let at = 0; at < bytes.length;) {
      at += Deno.stdout.writeSync(bytes.subarray(at));
    }
  };
  out("ready");
  let rest = "";
  for await (
    const text of Deno.stdin.readable.pipeThrough(new TextDecoderStream())
  ) {
    const lines = (rest + text).split("\n");
    rest = lines.pop()!;
    for (const line of lines) {
      if (line.trim() === "") continue;
      const command = JSON.parse(line) as LoadCommand;
      const result = command.cmd === "cleanup"
        ? await cleanup(command)
        : await run(command);
      out(JSON.stringify(result));
    }
  }
  driver.close();
  Deno.exit(0);
}
