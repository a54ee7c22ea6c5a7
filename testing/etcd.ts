/**
 * etcd for the registry benchmarks and the tests: finds the `etcd`
 * binary and `etcdctl` (installing Debian's `etcd-server` / `etcd-client`
 * package when one is missing and this process may), and starts a 3-member etcd cluster on 127.0.0.1 as
 * child processes, each with its own data folder, killed and restarted by
 * PID ({@link EtcdCluster}, for `bench/`). The member command line
 * ({@link etcdMemberArgs}), a member's status ({@link etcdMemberStatus})
 * and the leader the members agree on ({@link agreedEtcdLeader}) are
 * shared with `LocalCluster`'s etcd engine (`cluster.ts`).
 *
 * The members run with etcd's defaults (every WAL append fsynced) except
 * the Raft timing, which is set to the Rafter registry's defaults
 * (`registry/main.ts`: tick 100 ms, election timeout 10 ticks), so both
 * clusters elect with equal timeouts.
 *
 * @module
 */

import { freePorts } from "./ports.ts";

/** Where etcd is, or why it cannot be used (a row's `skipped` text). */
export type EtcdBinary = { path: string; version: string } | {
  skipped: string;
};

/** How long `apt-get install` may take, ms. */
const INSTALL_TIMEOUT_MS = 180_000;

/**
 * Runs `command` to its end (at most `timeoutMs`), its output collected;
 * never throws: a failure to start is `{ ok: false, out: why }`.
 */
export async function run(
  command: string,
  args: string[],
  timeoutMs: number,
  env?: Record<string, string>,
): Promise<{ ok: boolean; out: string }> {
  try {
    const output = await new Deno.Command(command, {
      args,
      env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    const decoder = new TextDecoder();
    return {
      ok: output.success,
      out: decoder.decode(output.stdout) + decoder.decode(output.stderr),
    };
  } catch (error) {
    return { ok: false, out: (error as Error).message };
  }
}

async function etcdVersion(path: string): Promise<string | null> {
  const { ok, out } = await run(path, ["--version"], 10_000);
  return ok ? (out.match(/etcd Version:\s*(\S+)/)?.[1] ?? "unknown") : null;
}

/** The first `name` on PATH that is a file (its path), or null. */
export function onPath(name: string): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir === "") continue;
    try {
      if (Deno.statSync(`${dir}/${name}`).isFile) return `${dir}/${name}`;
    } catch {
      // Not there.
    }
  }
  return null;
}

/**
 * Finds `etcd` on PATH; when it is missing and this process runs as root
 * (or has passwordless sudo), installs Debian's `etcd-server` package with
 * `apt-get install -y` (non-interactive, at most 3 minutes). Never throws:
 * a missing etcd is `{ skipped }` saying how to install it.
 */
export async function findEtcd(
  log: (line: string) => void,
): Promise<EtcdBinary> {
  const found = await findPackaged("etcd", "etcd-server", log);
  if ("skipped" in found) return found;
  const version = await etcdVersion(found.path);
  if (version === null) {
    return {
      skipped: `${found.path} --version failed: ${installHint(found)}`,
    };
  }
  return { path: found.path, version };
}

/**
 * Finds `etcdctl` (Debian's `etcd-client` package) the same way as
 * {@link findEtcd}: on PATH, else installed with apt-get when this process
 * may. Never throws. Its `version` is the `etcdctl version` line.
 */
export async function findEtcdctl(
  log: (line: string) => void,
): Promise<EtcdBinary> {
  const found = await findPackaged("etcdctl", "etcd-client", log);
  if ("skipped" in found) return found;
  const { ok, out } = await run(found.path, ["version"], 10_000, {
    ETCDCTL_API: "3",
  });
  if (!ok) {
    return { skipped: `${found.path} version failed: ${installHint(found)}` };
  }
  return {
    path: found.path,
    version: out.match(/etcdctl version:\s*(\S+)/)?.[1] ?? "unknown",
  };
}

function installHint(what: { binary: string; pkg: string }): string {
  return `install ${what.binary} (Debian/Ubuntu: \`sudo apt-get install -y ${what.pkg}\`) so \`${what.binary}\` is on PATH, then run again`;
}

/**
 * `binary` on PATH, or installed from Debian package `pkg` with `apt-get
 * install -y` (non-interactive, at most 3 minutes, once more after `apt-get
 * update` if it fails) when it is missing and this process runs as root or
 * has passwordless sudo; else `{ skipped }` saying how to install it.
 */
async function findPackaged(
  binary: string,
  pkg: string,
  log: (line: string) => void,
): Promise<
  { path: string; binary: string; pkg: string } | { skipped: string }
> {
  const hint = installHint({ binary, pkg });
  let path = onPath(binary);
  if (path !== null) return { path, binary, pkg };
  const root = Deno.uid() === 0;
  const sudo = !root && onPath("sudo") !== null &&
    (await run("sudo", ["-n", "true"], 5_000)).ok;
  if (!root && !sudo) {
    return {
      skipped:
        `${binary} is not on PATH and this user cannot install packages (not root, no passwordless sudo): ${hint}`,
    };
  }
  if (onPath("apt-get") === null) {
    return {
      skipped: `${binary} is not on PATH and there is no apt-get: ${hint}`,
    };
  }
  log(`${binary} is not on PATH: installing Debian's ${pkg} package…`);
  const [command, prefix] = root
    ? ["apt-get", []]
    : ["sudo", ["-n", "apt-get"]];
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  let result = await run(
    command,
    [...prefix, "install", "-y", "-q", pkg],
    INSTALL_TIMEOUT_MS,
    env,
  );
  if (!result.ok) {
    // The package lists may be missing or old: once more after an update.
    await run(command, [...prefix, "update", "-q"], INSTALL_TIMEOUT_MS, env);
    result = await run(
      command,
      [...prefix, "install", "-y", "-q", pkg],
      INSTALL_TIMEOUT_MS,
      env,
    );
  }
  path = onPath(binary);
  if (!result.ok || path === null) {
    return {
      skipped: `apt-get install ${pkg} failed (${
        result.out.trim().split("\n").pop()?.slice(0, 200)
      }): ${hint}`,
    };
  }
  return { path, binary, pkg };
}

/** Raft timing of the members, ms (etcd's flags of the same names). */
export interface EtcdTiming {
  heartbeatMs: number;
  /** At least 5 heartbeats: etcd refuses to start otherwise. */
  electionMs: number;
}

/** Where one etcd member listens and keeps its data. */
export interface EtcdMemberPlace {
  /** Its `--name`, as `--initial-cluster` lists it. */
  name: string;
  /** `http://host:port`: gRPC and the JSON gateway. */
  clientUrl: string;
  /** `http://host:port`: where the other members reach it. */
  peerUrl: string;
  dataDir: string;
}

/**
 * The command line (after the binary) of etcd member `member` of the
 * cluster `members`: its URLs and data folder, `--initial-cluster` of
 * every member, `state` (`new` the first time; etcd ignores the initial
 * cluster flags when the data folder holds a member already), the
 * cluster `token`, the Raft `timing`, and warnings only in its log.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { etcdMemberArgs } from "./etcd.ts";
 * const e1 = { name: "e1", clientUrl: "http://127.0.0.1:1", peerUrl: "http://127.0.0.1:2", dataDir: "/d/e1" };
 * const e2 = { name: "e2", clientUrl: "http://127.0.0.1:3", peerUrl: "http://127.0.0.1:4", dataDir: "/d/e2" };
 * const args = etcdMemberArgs(e2, [e1, e2], {
 *   state: "new",
 *   token: "t",
 *   timing: { heartbeatMs: 50, electionMs: 500 },
 * });
 * assert.equal(args[args.indexOf("--initial-cluster") + 1], "e1=http://127.0.0.1:2,e2=http://127.0.0.1:4");
 * assert.equal(args[args.indexOf("--election-timeout") + 1], "500");
 * ```
 */
export function etcdMemberArgs(
  member: EtcdMemberPlace,
  members: readonly Pick<EtcdMemberPlace, "name" | "peerUrl">[],
  options: { state: "new" | "existing"; token: string; timing: EtcdTiming },
): string[] {
  return [
    "--name",
    member.name,
    "--data-dir",
    member.dataDir,
    "--listen-client-urls",
    member.clientUrl,
    "--advertise-client-urls",
    member.clientUrl,
    "--listen-peer-urls",
    member.peerUrl,
    "--initial-advertise-peer-urls",
    member.peerUrl,
    "--initial-cluster",
    members.map((m) => `${m.name}=${m.peerUrl}`).join(","),
    "--initial-cluster-state",
    options.state,
    "--initial-cluster-token",
    options.token,
    "--heartbeat-interval",
    String(options.timing.heartbeatMs),
    "--election-timeout",
    String(options.timing.electionMs),
    "--logger",
    "zap",
    "--log-level",
    "warn",
  ];
}

/** What a member says of itself: its member id and the leader's ("0": none known). */
export interface EtcdMemberStatus {
  id: string;
  leader: string;
  raftIndex: string;
}

/**
 * `POST /v3/maintenance/status` of the member at `clientUrl` through its
 * JSON gateway: its member id and the leader it knows ("0": none); null
 * when it does not answer within `timeoutMs`. (A member answers once the
 * cluster has let it publish itself: a fresh one, once a quorum runs.)
 */
export async function etcdMemberStatus(
  clientUrl: string,
  timeoutMs = 500,
): Promise<EtcdMemberStatus | null> {
  try {
    const response = await fetch(`${clientUrl}/v3/maintenance/status`, {
      method: "POST",
      body: "{}",
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await response.json();
    if (!response.ok) return null;
    return {
      id: String(body.header?.member_id ?? ""),
      leader: String(body.leader ?? "0"),
      raftIndex: String(body.raftIndex ?? "0"),
    };
  } catch {
    return null;
  }
}

/**
 * The index in `statuses` of the leader they all name, when it is one of
 * them (so it answered too); -1 when they name none, disagree, or name a
 * member not among them.
 */
export function agreedEtcdLeader(
  statuses: readonly EtcdMemberStatus[],
): number {
  const leader = statuses[0]?.leader ?? "0";
  if (leader === "0" || statuses.some((s) => s.leader !== leader)) return -1;
  return statuses.findIndex((s) => s.id === leader);
}

interface Member extends EtcdMemberPlace {
  process: Deno.ChildProcess | null;
  exited: Promise<void>;
  /** The last lines it printed (its log), for errors. */
  output: string[];
}

/**
 * A 3-member (or `size`-member) etcd cluster of child processes on
 * 127.0.0.1, data in a fresh temporary folder removed by {@link stop}.
 */
export class EtcdCluster {
  readonly #binary: string;
  readonly #timing: EtcdTiming;
  readonly #members: Member[] = [];
  #root = "";

  constructor(binary: string, timing: EtcdTiming) {
    this.#binary = binary;
    this.#timing = timing;
  }

  /** Member names, e1..eN. */
  get names(): string[] {
    return this.#members.map((m) => m.name);
  }

  /** Client URLs (`http://127.0.0.1:PORT`: gRPC and the JSON gateway), in member order. */
  get clientUrls(): string[] {
    return this.#members.map((m) => m.clientUrl);
  }

  /** The client URL of member `name`. */
  clientUrl(name: string): string {
    return this.#member(name).clientUrl;
  }

  /** The PID of member `name`, or null while it is not running. */
  pid(name: string): number | null {
    return this.#member(name).process?.pid ?? null;
  }

  /** Whether member `name` runs. */
  running(name: string): boolean {
    return this.#member(name).process !== null;
  }

  /** Starts `size` members and waits until they have a leader (at most `timeoutMs`). */
  async start(size = 3, timeoutMs = 20_000): Promise<void> {
    this.#root = await Deno.makeTempDir({ prefix: "rafter-bench-etcd-" });
    const ports = freePorts(2 * size);
    for (let i = 0; i < size; i++) {
      const name = `e${i + 1}`;
      this.#members.push({
        name,
        clientUrl: `http://127.0.0.1:${ports[2 * i]}`,
        peerUrl: `http://127.0.0.1:${ports[2 * i + 1]}`,
        dataDir: `${this.#root}/${name}`,
        process: null,
        exited: Promise.resolve(),
        output: [],
      });
    }
    for (const member of this.#members) this.#spawn(member, "new");
    await this.waitForLeader(timeoutMs);
  }

  /** The data folder of the members (beside Rafter's, in the temp folder). */
  get dataDir(): string {
    return this.#root;
  }

  #member(name: string): Member {
    const member = this.#members.find((m) => m.name === name);
    if (member === undefined) throw new Error(`no etcd member named ${name}`);
    return member;
  }

  #spawn(member: Member, state: "new" | "existing"): void {
    const child = new Deno.Command(this.#binary, {
      args: etcdMemberArgs(member, this.#members, {
        state,
        token: `rafter-bench-${Deno.pid}`,
        timing: this.#timing,
      }),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    member.process = child;
    member.output = [];
    const keep = async (stream: ReadableStream<Uint8Array>) => {
      for await (const text of stream.pipeThrough(new TextDecoderStream())) {
        member.output.push(...text.split("\n").filter(Boolean));
        if (member.output.length > 200) member.output.splice(0, 100);
      }
    };
    member.exited = Promise.all([
      child.status,
      keep(child.stdout),
      keep(child.stderr),
    ]).then(() => {
      if (member.process === child) member.process = null;
    });
  }

  /** SIGKILLs member `name` and waits until it has exited. */
  async kill(name: string): Promise<void> {
    const member = this.#member(name);
    if (member.process === null) return;
    try {
      member.process.kill("SIGKILL");
    } catch {
      // Exited already.
    }
    await member.exited;
  }

  /** Restarts member `name` from its data folder and waits until it answers. */
  async restart(name: string, timeoutMs = 20_000): Promise<void> {
    const member = this.#member(name);
    if (member.process !== null) throw new Error(`${name} is running`);
    this.#spawn(member, "existing");
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (member.process === null) break;
      if (await this.status(name) !== null) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(
      `etcd member ${name} did not answer within ${timeoutMs} ms after its restart; its last lines:\n${
        member.output.slice(-20).join("\n")
      }`,
    );
  }

  /**
   * {@link etcdMemberStatus} of member `name`; null while it is not
   * running.
   */
  async status(
    name: string,
    timeoutMs = 500,
  ): Promise<EtcdMemberStatus | null> {
    const member = this.#member(name);
    if (member.process === null) return null;
    return await etcdMemberStatus(member.clientUrl, timeoutMs);
  }

  /**
   * Polls until every running member names one leader, a running member;
   * returns its name. @throws {Error} after `timeoutMs`.
   */
  async waitForLeader(timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const running = this.#members.filter((m) => m.process !== null);
      const statuses = await Promise.all(
        running.map((m) => this.status(m.name)),
      );
      if (statuses.every((s) => s !== null)) {
        const index = agreedEtcdLeader(statuses as EtcdMemberStatus[]);
        if (index !== -1) return running[index].name;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(
      `etcd: no leader within ${timeoutMs} ms; last lines of each member:\n${
        this.#members.map((m) =>
          `${m.name}:\n${m.output.slice(-10).join("\n")}`
        ).join("\n")
      }`,
    );
  }

  /** SIGKILLs every member and removes the data folder. */
  async stop(): Promise<void> {
    await Promise.all(this.#members.map((m) => this.kill(m.name)));
    if (this.#root !== "") {
      await Deno.remove(this.#root, { recursive: true }).catch(() => {});
      this.#root = "";
    }
  }
}

/**
 * The `deno` arguments of a registry front over etcd at `endpoints`
 * (`registry/main.ts --engine etcd`) listening on `listen`, run with the
 * development config, so that etcd3 stays out of deno.lock (the
 * registry's own lock), as for a user who never runs that engine.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { etcdFrontArgs } from "./etcd.ts";
 * const args = etcdFrontArgs(["http://127.0.0.1:2379"], "127.0.0.1:7001");
 * assert.deepEqual(args.slice(-6), ["--engine", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379", "--listen", "127.0.0.1:7001"]);
 * ```
 */
export function etcdFrontArgs(
  endpoints: readonly string[],
  listen: string,
): string[] {
  return [
    "run",
    "--config",
    "deno.dev.json",
    "-A",
    "registry/main.ts",
    "--engine",
    "etcd",
    "--etcd-endpoints",
    endpoints.join(","),
    "--listen",
    listen,
  ];
}
