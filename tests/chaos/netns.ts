/**
 * Real network partitions for the chaos suite: Linux network namespaces
 * this process creates and removes itself, and iptables rules inside them
 * only.
 *
 * Topology ({@link createChaosNetwork}, as root on the host; it first
 * removes the networks of runs that died without cleaning up): one
 * namespace per node (`rft<pid>x<tag>n1`, …), one client namespace
 * (`rft<pid>x<tag>c`) where the workload and the chaos runner run, and a bridge
 * in a namespace of its own (`rft<pid>x<tag>br`), joined to each of the others
 * by a veth pair (`eth0` inside the node or client namespace). Addresses
 * are in {@link SUBNET}: nodes `.11`, `.12`, … in order, the client
 * `.100`. Nothing is created in the host's namespace and nothing is
 * routed to it: the host cannot reach the nodes, so whatever drives them
 * runs inside the client namespace (`ip netns exec <clientNamespace> …`),
 * and reads the topology with {@link ChaosNetwork.fromEnv} (the host
 * passes {@link ChaosNetwork.env}).
 *
 * Faults ({@link ChaosNetwork.cut} and friends) are a set of dropped
 * directions `from → to`; every change rewrites the filter table of each
 * affected namespace in one `iptables-restore` (atomic per namespace):
 * packets from `from` are dropped on `to`'s INPUT. Only node↔node traffic
 * is cut by the partition helpers; {@link ChaosNetwork.cutClient} also
 * cuts the client namespace off a node (a client stuck on a minority).
 * {@link ChaosNetwork.heal} removes every rule. The control works from
 * the host and from inside the client namespace alike (it shells out to
 * `ip netns exec <node namespace> iptables-restore`).
 *
 * @example
 * ```ts ignore
 * // not run: needs root, creates namespaces; netns_e2e_test.ts runs it.
 * import { createChaosNetwork } from "./netns.ts";
 * const net = await createChaosNetwork({ nodes: ["n1", "n2", "n3"] });
 * try {
 *   await net.partition([["n1"], ["n2", "n3"]]);
 *   await net.heal();
 * } finally {
 *   await net.destroy();
 * }
 * ```
 *
 * @module
 */

/** The subnet every chaos network uses (each in its own namespaces, so parallel runs never meet). */
export const SUBNET = "10.213.0.0/24";
const SUBNET_PREFIX = "10.213.0.";
const CLIENT_HOST = 100;
const FIRST_NODE_HOST = 11;

/** The environment variable {@link ChaosNetwork.env} sets and {@link ChaosNetwork.fromEnv} reads. */
export const CHAOS_NET_ENV = "RAFTER_CHAOS_NET";

/** The name of the client endpoint in cuts ({@link ChaosNetwork.cut} accepts it as `from` or `to`). */
export const CLIENT = "client";

/** What a process needs to know of a chaos network (JSON). */
export interface ChaosNetworkDescription {
  /** Prefix of every namespace name (`rft<pid>x<tag>`, a random tag). */
  prefix: string;
  /** The bridge's namespace. */
  bridgeNamespace: string;
  /** The client namespace and its address. */
  client: { namespace: string; address: string };
  /** Node id → its namespace and address, in node order. */
  nodes: Record<string, { namespace: string; address: string }>;
}

/** Whether this process can make chaos networks; `reason` says what is missing. */
export async function chaosNetworkSupport(): Promise<
  { ok: true } | { ok: false; reason: string }
> {
  if (Deno.build.os !== "linux") {
    return { ok: false, reason: "network namespaces need Linux" };
  }
  if (Deno.uid() !== 0) {
    return {
      ok: false,
      reason:
        "creating network namespaces needs root: run the chaos tests as root (CI does)",
    };
  }
  for (const tool of ["ip", "iptables", "iptables-restore"]) {
    const found = await run(["sh", "-c", `command -v ${tool}`], {
      check: false,
    });
    if (found.code !== 0) {
      return {
        ok: false,
        reason:
          `${tool} is not on PATH: install iproute2 and iptables (apt-get install -y iproute2 iptables)`,
      };
    }
  }
  return { ok: true };
}

/**
 * Removes the chaos networks of processes that are gone: namespaces named
 * `rft<pid>…` whose `<pid>` no longer runs (a run killed before its
 * `destroy()`), after ending any process still inside. @returns the
 * namespaces removed. {@link createChaosNetwork} calls it first.
 */
export async function removeStaleChaosNetworks(): Promise<string[]> {
  const list = await run(["ip", "netns", "list"], { check: false });
  const stale: string[] = [];
  for (const line of list.stdout.split("\n")) {
    const name = line.split(" ")[0];
    const match = /^rft(\d+)(br|c|[a-z0-9]{1,16})$/.exec(name);
    if (match === null || Number(match[1]) === Deno.pid) continue;
    const alive = await Deno.stat(`/proc/${match[1]}`).then(
      () => true,
      () => false,
    );
    if (!alive) stale.push(name);
  }
  await removeNamespaces(stale);
  return stale;
}

/** Kills the processes inside each namespace, then deletes it. */
async function removeNamespaces(names: readonly string[]): Promise<void> {
  for (const namespace of names) {
    // Processes left in a namespace keep it alive unnamed: they are
    // ours (started in a namespace a chaos network made), so end them.
    const pids = await run(["ip", "netns", "pids", namespace], {
      check: false,
    });
    for (const pid of pids.stdout.split(/\s+/).filter((p) => p !== "")) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
      } catch { /* gone */ }
    }
    await run(["ip", "netns", "del", namespace], { check: false });
  }
}

/** Options of {@link createChaosNetwork}. */
export interface ChaosNetworkOptions {
  /** Node ids, in order (at most 89): `["n1", "n2", "n3"]`. */
  nodes: string[];
  /** Prefix of the namespace names; default `rft<pid>x<tag>` (the pid and a random tag: unique per network, even among the workers of one process). */
  prefix?: string;
}

/**
 * Creates the namespaces, the bridge and the veth pairs (as root, on the
 * host). On any failure what was made is removed again. `destroy()` also
 * runs on SIGINT.
 *
 * @throws {Error} when a command fails (its output in the message).
 */
export async function createChaosNetwork(
  options: ChaosNetworkOptions,
): Promise<ChaosNetwork> {
  if (options.nodes.length === 0 || options.nodes.length > 89) {
    throw new Error(
      `createChaosNetwork: ${options.nodes.length} nodes; give 1 to 89 node ids`,
    );
  }
  if (new Set(options.nodes).size !== options.nodes.length) {
    throw new Error(
      `createChaosNetwork: duplicate node ids in ${options.nodes}`,
    );
  }
  for (const id of options.nodes) {
    if (!/^[a-z0-9]{1,8}$/.test(id) || id === CLIENT) {
      throw new Error(
        `createChaosNetwork: node id ${
          JSON.stringify(id)
        } must be 1-8 lowercase letters or digits, not "${CLIENT}"`,
      );
    }
  }
  await removeStaleChaosNetworks();
  // The pid and a random tag: test files run in parallel share one
  // process (`deno test --parallel` runs them in workers).
  const prefix = options.prefix ??
    `rft${Deno.pid}x${crypto.randomUUID().slice(0, 4)}`;
  const description: ChaosNetworkDescription = {
    prefix,
    bridgeNamespace: `${prefix}br`,
    client: {
      namespace: `${prefix}c`,
      address: `${SUBNET_PREFIX}${CLIENT_HOST}`,
    },
    nodes: Object.fromEntries(
      options.nodes.map((id, i) => [id, {
        namespace: `${prefix}${id}`,
        address: `${SUBNET_PREFIX}${FIRST_NODE_HOST + i}`,
      }]),
    ),
  };
  const network = new ChaosNetwork(description, true);
  try {
    const br = description.bridgeNamespace;
    await run(["ip", "netns", "add", br]);
    network.made.push(br);
    await run(["ip", "-n", br, "link", "set", "lo", "up"]);
    await run(["ip", "-n", br, "link", "add", "br0", "type", "bridge"]);
    await run(["ip", "-n", br, "link", "set", "br0", "up"]);
    const hosts = [
      ["c", description.client] as const,
      ...options.nodes.map((id) => [id, description.nodes[id]] as const),
    ];
    for (const [short, { namespace, address }] of hosts) {
      await run(["ip", "netns", "add", namespace]);
      network.made.push(namespace);
      await run(["ip", "-n", namespace, "link", "set", "lo", "up"]);
      // Made in the bridge's namespace, one end moved at once: no
      // interface ever exists in the host's namespace.
      await run([
        "ip",
        "-n",
        br,
        "link",
        "add",
        `v${short}`,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        namespace,
      ]);
      await run(["ip", "-n", br, "link", "set", `v${short}`, "master", "br0"]);
      await run(["ip", "-n", br, "link", "set", `v${short}`, "up"]);
      await run([
        "ip",
        "-n",
        namespace,
        "addr",
        "add",
        `${address}/24`,
        "dev",
        "eth0",
      ]);
      await run(["ip", "-n", namespace, "link", "set", "eth0", "up"]);
    }
  } catch (error) {
    await network.destroy();
    throw error;
  }
  network.listenForSigint();
  return network;
}

/**
 * A chaos network: its topology, and partition control over it. Made by
 * {@link createChaosNetwork} on the host (which alone may
 * {@link destroy} it), or from its description inside the client
 * namespace ({@link ChaosNetwork.fromEnv}).
 */
export class ChaosNetwork {
  /** The topology. */
  readonly description: ChaosNetworkDescription;
  /** Whether this object made the namespaces (and so removes them). */
  readonly #owner: boolean;
  /** Namespaces made so far, removed by {@link destroy}. */
  readonly made: string[] = [];
  /** Dropped directions, as `from>to` (node ids or {@link CLIENT}). */
  readonly #cuts = new Set<string>();
  /** The filter rules last written per namespace (to skip unchanged ones). */
  readonly #written = new Map<string, string>();
  #destroying: Promise<void> | null = null;
  #sigint: (() => void) | null = null;
  /** Serializes rule changes: each applies after the one before. */
  #applying: Promise<void> = Promise.resolve();

  /**
   * @param description the topology.
   * @param owner whether this object removes the namespaces on {@link destroy}.
   */
  constructor(description: ChaosNetworkDescription, owner = false) {
    this.description = description;
    this.#owner = owner;
  }

  /** The network described by `json` (as {@link toJSON} gives it), not owned. */
  static fromJson(json: string | ChaosNetworkDescription): ChaosNetwork {
    const description = typeof json === "string" ? JSON.parse(json) : json;
    if (
      typeof description?.client?.namespace !== "string" ||
      typeof description?.nodes !== "object"
    ) {
      throw new Error(
        "ChaosNetwork.fromJson: not a chaos network description (expected { prefix, bridgeNamespace, client, nodes })",
      );
    }
    return new ChaosNetwork(description, false);
  }

  /**
   * The network the environment names ({@link CHAOS_NET_ENV}, set from
   * {@link env} by the host that made it).
   *
   * @throws {Error} when the variable is not set.
   */
  static fromEnv(): ChaosNetwork {
    const json = Deno.env.get(CHAOS_NET_ENV);
    if (json === undefined) {
      throw new Error(
        `${CHAOS_NET_ENV} is not set: run this script through the host side (createChaosNetwork, then ip netns exec <clientNamespace> with env ${CHAOS_NET_ENV}=network.toJSON())`,
      );
    }
    return ChaosNetwork.fromJson(json);
  }

  /** The description as JSON. */
  toJSON(): ChaosNetworkDescription {
    return this.description;
  }

  /** `{ RAFTER_CHAOS_NET: <json> }`, for the environment of a script run in the client namespace. */
  env(): Record<string, string> {
    return { [CHAOS_NET_ENV]: JSON.stringify(this.description) };
  }

  /** Node ids, in order. */
  get nodes(): string[] {
    return Object.keys(this.description.nodes);
  }

  /** The client namespace, where the workload and the chaos runner run. */
  get clientNamespace(): string {
    return this.description.client.namespace;
  }

  /** The client namespace's address. */
  get clientAddress(): string {
    return this.description.client.address;
  }

  /** The address of node `id` (or of {@link CLIENT}). */
  addressOf(id: string): string {
    if (id === CLIENT) return this.description.client.address;
    return this.#node(id).address;
  }

  /** The namespace of node `id` (or of {@link CLIENT}). */
  namespaceOf(id: string): string {
    if (id === CLIENT) return this.description.client.namespace;
    return this.#node(id).namespace;
  }

  /** The command prefix that runs a program in node `id`'s namespace. */
  execIn(id: string): string[] {
    return ["ip", "netns", "exec", this.namespaceOf(id)];
  }

  /**
   * A `deno run -A script …args` in the client namespace, with this
   * network's description in its environment ({@link fromEnv}): how the
   * host starts what drives a run. `options` are `Deno.Command`'s (stdio).
   */
  clientCommand(
    script: string | URL,
    args: readonly string[],
    options: Omit<Deno.CommandOptions, "args" | "env"> = {},
  ): Deno.Command {
    const [command, ...prefix] = this.execIn(CLIENT);
    const path = script instanceof URL ? script.pathname : script;
    return new Deno.Command(command, {
      ...options,
      args: [...prefix, Deno.execPath(), "run", "-A", path, ...args],
      env: this.env(),
    });
  }

  /** The dropped directions now, sorted: `[from, to]` pairs. */
  cuts(): Array<[string, string]> {
    return [...this.#cuts].sort().map((c) => c.split(">") as [string, string]);
  }

  /** Drops every packet from `from` to `to` (one way: `to → from` still flows). */
  cut(from: string, to: string): Promise<void> {
    return this.#change(() => this.#add(from, to));
  }

  /** Drops traffic both ways between `a` and `b`. */
  cutBoth(a: string, b: string): Promise<void> {
    return this.#change(() => {
      this.#add(a, b);
      this.#add(b, a);
    });
  }

  /**
   * Only nodes of the same group talk to each other (nodes in no group
   * talk to no node). Adds to the cuts already in place.
   */
  partition(groups: string[][]): Promise<void> {
    const groupOf = new Map<string, number>();
    groups.forEach((group, i) => {
      for (const id of group) {
        this.#node(id);
        if (groupOf.has(id)) {
          throw new Error(`partition: ${id} is in two groups`);
        }
        groupOf.set(id, i);
      }
    });
    return this.#change(() => {
      for (const a of this.nodes) {
        for (const b of this.nodes) {
          if (a === b) continue;
          const ga = groupOf.get(a);
          if (ga === undefined || ga !== groupOf.get(b)) this.#add(a, b);
        }
      }
    });
  }

  /** Cuts node `id` off every other node (both ways; the client still reaches it). */
  isolate(id: string): Promise<void> {
    return this.partition([[id], this.nodes.filter((n) => n !== id)]);
  }

  /**
   * `middle` sees every node; the others see `middle` and their own half
   * only (`left`, `right`: default the nodes before and after `middle`'s
   * position once it is taken out, split in two).
   */
  bridge(middle: string, left?: string[], right?: string[]): Promise<void> {
    this.#node(middle);
    const others = this.nodes.filter((n) => n !== middle);
    const half = Math.ceil(others.length / 2);
    const l = left ?? others.slice(0, half);
    const r = right ?? others.filter((n) => !l.includes(n));
    return this.#change(() => {
      for (const a of l) {
        for (const b of r) {
          this.#add(a, b);
          this.#add(b, a);
        }
      }
    });
  }

  /**
   * Each node sees only its two neighbours in `order` (default node
   * order), as a ring. With 3 nodes every node is every other's
   * neighbour, so nothing is cut.
   */
  ring(order: string[] = this.nodes): Promise<void> {
    order.forEach((id) => this.#node(id));
    const n = order.length;
    const neighbours = (i: number, j: number) =>
      (i + 1) % n === j || (j + 1) % n === i;
    return this.#change(() => {
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < n; j++) {
          if (i !== j && !neighbours(i, j)) this.#add(order[i], order[j]);
        }
      }
    });
  }

  /** Cuts the client namespace off node `id` (both ways); nodes still talk. */
  cutClient(id: string): Promise<void> {
    return this.cutBoth(CLIENT, id);
  }

  /** Removes the cut `from → to` (if any). */
  uncut(from: string, to: string): Promise<void> {
    return this.#change(() => this.#cuts.delete(`${from}>${to}`));
  }

  /** Removes every cut: every namespace's filter table is flushed. */
  heal(): Promise<void> {
    return this.#change(() => this.#cuts.clear(), true);
  }

  /**
   * Removes every namespace (and so every veth, bridge and rule) this
   * object made, after killing any process still inside one. Idempotent;
   * a no-op on a network that was not made here.
   */
  destroy(): Promise<void> {
    if (!this.#owner) return Promise.resolve();
    // Every caller waits for the one removal: on Ctrl-C the signal
    // handler starts it while the run's own `finally` calls it again, and
    // the process must not exit before it is done.
    this.#destroying ??= this.#remove();
    return this.#destroying;
  }

  async #remove(): Promise<void> {
    await removeNamespaces([...this.made].reverse());
    this.made.length = 0;
    if (this.#sigint !== null) {
      try {
        Deno.removeSignalListener("SIGINT", this.#sigint);
      } catch { /* not listening */ }
      this.#sigint = null;
    }
  }

  /** @internal Removes the namespaces on SIGINT, then exits (130). */
  listenForSigint(): void {
    this.#sigint = () => {
      this.destroy().finally(() => Deno.exit(130));
    };
    Deno.addSignalListener("SIGINT", this.#sigint);
  }

  #node(id: string): { namespace: string; address: string } {
    const node = this.description.nodes[id];
    if (node === undefined) {
      throw new Error(
        `no node ${JSON.stringify(id)} in this chaos network (nodes: ${
          this.nodes.join(", ")
        })`,
      );
    }
    return node;
  }

  #add(from: string, to: string): void {
    if (from === to) throw new Error(`cut: ${from} → ${to} is one endpoint`);
    this.addressOf(from);
    this.addressOf(to);
    if (from === CLIENT && to === CLIENT) return;
    this.#cuts.add(`${from}>${to}`);
  }

  /**
   * Applies `mutate` to the cut set, then writes the filter table of every
   * node namespace whose rules changed (every one when `all`).
   */
  #change(mutate: () => void, all = false): Promise<void> {
    const next = this.#applying.then(async () => {
      mutate();
      await Promise.all(this.nodes.map(async (id) => {
        const rules = this.#rulesOf(id);
        if (!all && this.#written.get(id) === rules) return;
        await run(
          [...this.execIn(id), "iptables-restore"],
          { stdin: rules },
        );
        this.#written.set(id, rules);
      }));
    });
    // A failed change must not block the ones after it.
    this.#applying = next.catch(() => {});
    return next;
  }

  /**
   * The filter table of node `id`'s namespace: every cut towards it drops
   * on INPUT; a cut from it towards the client drops on OUTPUT (so no rule
   * is ever needed in the client namespace).
   */
  #rulesOf(id: string): string {
    const lines = [
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
    ];
    for (const cut of [...this.#cuts].sort()) {
      const [from, to] = cut.split(">");
      if (to === id) {
        lines.push(`-A INPUT -s ${this.addressOf(from)}/32 -j DROP`);
      } else if (from === id && to === CLIENT) {
        lines.push(`-A OUTPUT -d ${this.addressOf(CLIENT)}/32 -j DROP`);
      }
    }
    lines.push("COMMIT", "");
    return lines.join("\n");
  }
}

/** How long one `ip` or `iptables-restore` may take before it is killed, ms. */
const COMMAND_TIMEOUT_MS = 10_000;

/**
 * Runs `cmd` (killed after {@link COMMAND_TIMEOUT_MS}); @throws {Error}
 * with its output when it fails (unless `check: false`) or times out.
 */
async function run(
  cmd: string[],
  options: { stdin?: string; check?: boolean } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const process = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill("SIGKILL");
    } catch { /* gone */ }
  }, COMMAND_TIMEOUT_MS);
  let out: Deno.CommandOutput;
  try {
    if (options.stdin !== undefined) {
      const writer = process.stdin.getWriter();
      await writer.write(new TextEncoder().encode(options.stdin));
      await writer.close();
    }
    out = await process.output();
  } finally {
    clearTimeout(timer);
  }
  if (timedOut) {
    throw new Error(
      `\`${
        cmd.join(" ")
      }\` did not finish within ${COMMAND_TIMEOUT_MS} ms (killed)`,
    );
  }
  const result = {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
  if (options.check !== false && result.code !== 0) {
    throw new Error(
      `\`${cmd.join(" ")}\` failed (exit ${result.code}): ${
        result.stderr.trim() || result.stdout.trim()
      }`,
    );
  }
  return result;
}
