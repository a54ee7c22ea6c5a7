/**
 * One hand-driven cluster of {@link RaftCore}s for the tests of the pure
 * Raft core (`raft/core*_test.ts`, `raft/interaction_test.ts`): no clock,
 * no network, no disk. Each node has a disk record (snapshot, entries, hard
 * state) that its Readys are persisted to in the Ready contract's order, a
 * state machine that is the list of payloads applied (serialised as JSON
 * for a snapshot), and a record of what it applied, read and configured.
 * Messages wait in one queue until the test delivers them, with a filter
 * to drop some (partitions, lost messages).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftHarness } from "./raft_harness.ts";
 *
 * const c = new RaftHarness(3);
 * const leader = c.elect("n1");
 * const { index } = leader.propose("x");
 * c.deliver();
 * assert.equal(c.core("n2").commitIndex, index);
 * assert.deepEqual(c.machines.get("n3")!.data, ["x"]);
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import { RaftCore, type RaftCoreConfig, type Ready } from "../raft/core.ts";
import {
  type RaftClock,
  RaftDriver,
  type StorageWrite,
} from "../raft/driver.ts";
import type { Configuration } from "../raft/configuration.ts";
import type {
  AppendRequest,
  Entry,
  HardState,
  InstallSnapshotRequest,
  Message,
  NodeId,
  Snapshot,
} from "../raft/types.ts";

/** What one node's driver has made durable. */
export interface HarnessDisk {
  hardState: HardState | undefined;
  snapshot: Snapshot | undefined;
  /** Entries after the snapshot (or a trailing window before it). */
  entries: Entry[];
}

/** One node's state machine: the payloads applied, and up to which index. */
export interface StateMachine {
  index: number;
  data: string[];
}

/** Keeps a message (true) or drops it (false). */
export type Filter = (message: Message) => boolean;

/** How a node is bootstrapped: its first configuration, or a join. */
export type Boot = Pick<RaftCoreConfig, "voters" | "learners" | "join">;

/** What a node's disk holds when the harness first starts it. */
export type InitialDisk = Record<
  NodeId,
  { entries?: Entry[]; hardState?: HardState }
>;

/** Builds entries 1..n with the given terms and data `"<index>@<term>"`. */
export function entries(...terms: number[]): Entry[] {
  return terms.map((term, i) => ({
    index: i + 1,
    term,
    data: `${i + 1}@${term}`,
  }));
}

/** The whole log of a core from index 1, read through `entryAt`. */
export function logOf(core: RaftCore): Entry[] {
  const log: Entry[] = [];
  for (let i = 1; i <= core.lastIndex; i++) log.push(core.entryAt(i)!);
  return log;
}

/**
 * An append message, by default n1's first heartbeat to n2 in term 1
 * (which makes n2 a follower that knows n1 leads); `fields` override.
 */
export function appendMessage(
  fields: Partial<Omit<AppendRequest, "type">> = {},
): AppendRequest {
  return {
    type: "append",
    from: "n1",
    to: "n2",
    term: 1,
    prevLogIndex: 0,
    prevLogTerm: 0,
    entries: [],
    commit: 0,
    ...fields,
  };
}

/**
 * One InstallSnapshot chunk, by default n1's whole snapshot `[]` at 1/1
 * of voters n1..n3 to n2 in term 1; `fields` override.
 */
export function snapshotMessage(
  fields: Partial<Omit<InstallSnapshotRequest, "type">> = {},
): InstallSnapshotRequest {
  return {
    type: "installSnapshot",
    configuration: { voters: ["n1", "n2", "n3"], learners: [] },
    from: "n1",
    to: "n2",
    term: 1,
    snapshot: { index: 1, term: 1 },
    offset: 0,
    data: "[]",
    done: true,
    ...fields,
  };
}

/** The messages of `type` (to `to`, when given), typed as such. */
export function messagesOf<T extends Message["type"]>(
  messages: readonly Message[],
  type: T,
  to?: NodeId,
): Extract<Message, { type: T }>[] {
  return messages.filter((m): m is Extract<Message, { type: T }> =>
    m.type === type && (to === undefined || m.to === to)
  );
}

/** Keeps only the messages between `a` and `b` (either way). */
export const between = (a: NodeId, b: NodeId): Filter => (m) =>
  (m.from === a && m.to === b) || (m.from === b && m.to === a);

/** Keeps what `f` drops and drops what it keeps. */
export const not = (f: Filter): Filter => (m) => !f(m);

/** Drops every message to or from the given nodes. */
export const without = (...ids: NodeId[]): Filter => (m) =>
  !ids.includes(m.from) && !ids.includes(m.to);

/**
 * The cluster: nodes n1..nN (or the given voters and learners), a message
 * queue, and per-node disks, state machines and records.
 */
export class RaftHarness {
  /** Every node started, in start order. */
  readonly ids: NodeId[] = [];
  readonly cores = new Map<NodeId, RaftCore>();
  readonly disks = new Map<NodeId, HarnessDisk>();
  readonly boots = new Map<NodeId, Boot>();
  readonly machines = new Map<NodeId, StateMachine>();
  /** Every committed entry handed out since the node's last (re)start. */
  readonly applied = new Map<NodeId, Entry[]>();
  /** Every ReadIndex answer since the node's last (re)start. */
  readonly readStates = new Map<NodeId, { context: string; index: number }[]>();
  /** Every non-null Ready.configuration since the node's last (re)start. */
  readonly configurations = new Map<NodeId, Configuration[]>();
  /** Every Ready handled since the node's last (re)start. */
  readonly readys = new Map<NodeId, Ready[]>();
  readonly down = new Set<NodeId>();
  /** Messages sent and not yet delivered. */
  queue: Message[] = [];
  readonly #config: Partial<RaftCoreConfig>;

  /**
   * Starts `size` voters n1..nN, or the given voters and learners, as a new
   * cluster; `config` goes to every core (the default `random` of 0.5 gives
   * election timeouts of 15 ticks, so a follower's lease of 10 ticks ends
   * before it would campaign), `initial` seeds disks.
   */
  constructor(
    size: number | { voters: NodeId[]; learners?: NodeId[] },
    config: Partial<RaftCoreConfig> = {},
    initial: InitialDisk = {},
  ) {
    this.#config = config;
    const voters = typeof size === "number"
      ? Array.from({ length: size }, (_, i) => `n${i + 1}`)
      : size.voters;
    const learners = typeof size === "number" ? [] : size.learners ?? [];
    const boot = learners.length > 0 ? { voters, learners } : { voters };
    for (const id of [...voters, ...learners]) {
      this.start(id, boot, initial[id]);
    }
  }

  /** Starts a node with an empty disk (or `initial`) and the given boot. */
  start(
    id: NodeId,
    boot: Boot,
    initial: { entries?: Entry[]; hardState?: HardState } = {},
  ): void {
    this.disks.set(id, {
      hardState: initial.hardState && { ...initial.hardState },
      snapshot: undefined,
      entries: structuredClone(initial.entries ?? []),
    });
    this.boots.set(id, boot);
    if (!this.ids.includes(id)) this.ids.push(id);
    this.boot(id);
  }

  /** Starts a node that waits to be added (`join: true`, no voters). */
  startJoining(id: NodeId): void {
    this.start(id, { voters: [], join: true });
  }

  /** The running core of `id`. */
  core(id: NodeId): RaftCore {
    const core = this.cores.get(id);
    assert.ok(core !== undefined && !this.down.has(id), `${id} is down`);
    return core;
  }

  /** (Re)starts `id` from its disk, restoring its state machine first. */
  boot(id: NodeId): void {
    const disk = this.disks.get(id)!;
    const snapshot = disk.snapshot;
    this.cores.set(
      id,
      new RaftCore({
        id,
        ...this.boots.get(id)!,
        random: () => 0.5,
        ...this.#config,
        hardState: disk.hardState,
        entries: disk.entries.map((e) => ({ ...e })),
        snapshot: snapshot && { ...snapshot },
        ...(snapshot && { configuration: snapshot.configuration }),
      }),
    );
    this.machines.set(
      id,
      snapshot === undefined
        ? { index: 0, data: [] }
        : { index: snapshot.index, data: JSON.parse(snapshot.data) },
    );
    this.applied.set(id, []);
    this.readStates.set(id, []);
    this.configurations.set(id, []);
    this.readys.set(id, []);
    this.down.delete(id);
  }

  /** Rebuilds a node from its disk (the same as {@link boot}). */
  restart(id: NodeId): void {
    this.boot(id);
  }

  /**
   * Stops `id`; what it had not persisted is lost with it, and so are the
   * undelivered messages to it (and, with `dropSent`, those it sent).
   */
  crash(id: NodeId, { dropSent = false } = {}): void {
    this.down.add(id);
    this.queue = this.queue.filter((m) =>
      m.to !== id && (!dropSent || m.from !== id)
    );
  }

  /** Performs every running node's pending Ready, in the Ready contract's order. */
  flush(): void {
    for (const id of this.ids) {
      if (this.down.has(id)) continue;
      const core = this.cores.get(id)!;
      for (let i = 0; i < 100 && core.hasReady(); i++) {
        this.#handle(id, core, core.ready());
      }
      assert.equal(core.hasReady(), false, `${id} keeps producing Readys`);
    }
  }

  #handle(id: NodeId, core: RaftCore, ready: Ready): void {
    this.readys.get(id)!.push(ready);
    this.queue.push(...ready.leaderMessages);
    this.#persist(this.disks.get(id)!, ready);
    this.queue.push(...ready.messages);
    const machine = this.machines.get(id)!;
    if (ready.snapshot !== null) {
      machine.index = ready.snapshot.index;
      machine.data = JSON.parse(ready.snapshot.data);
    }
    for (const entry of ready.committedEntries) {
      assert.equal(entry.index, machine.index + 1, `${id} applies in order`);
      machine.index = entry.index;
      if (entry.data !== "") machine.data.push(entry.data);
    }
    this.applied.get(id)!.push(...ready.committedEntries);
    this.readStates.get(id)!.push(...ready.readStates);
    if (ready.configuration !== null) {
      this.configurations.get(id)!.push(ready.configuration);
    }
    core.advance(ready);
  }

  #persist(disk: HarnessDisk, ready: Ready): void {
    if (ready.snapshot !== null) {
      const { index, term } = ready.snapshot;
      const at = disk.entries.find((e) => e.index === index);
      disk.entries = at?.term === term
        ? disk.entries.filter((e) => e.index > index)
        : [];
      disk.snapshot = { ...ready.snapshot };
    }
    if (ready.entries.length > 0) {
      const first = ready.entries[0].index;
      const start = disk.entries[0]?.index ?? (disk.snapshot?.index ?? 0) + 1;
      assert.ok(
        first <= start + disk.entries.length,
        "gap in persisted entries",
      );
      disk.entries.length = Math.max(0, first - start);
      disk.entries.push(...ready.entries.map((e) => ({ ...e })));
    }
    if (ready.hardState !== null) disk.hardState = { ...ready.hardState };
  }

  /**
   * Takes a snapshot of `id`'s state machine at its applied index and hands
   * it to the core, which compacts to `compactTo` (default: the index); the
   * disk drops the same entries.
   */
  snapshot(id: NodeId, compactTo?: number): Snapshot {
    const core = this.core(id);
    const machine = this.machines.get(id)!;
    const disk = this.disks.get(id)!;
    const index = machine.index;
    const term = index === core.snapshotPoint.index
      ? core.snapshotPoint.term
      : core.entryAt(index)!.term;
    const snapshot = { index, term, data: JSON.stringify(machine.data) };
    core.snapshotTaken(snapshot, { compactTo });
    const taken = { ...snapshot, configuration: core.snapshotConfiguration! };
    disk.snapshot = taken;
    const kept = core.snapshotPoint.index;
    disk.entries = disk.entries.filter((e) => e.index > kept);
    return taken;
  }

  /**
   * One network hop: flushes, then delivers the messages queued so far (not
   * those they provoke) that `keep` keeps and whose recipient is up and
   * started.
   * @returns the delivered messages.
   */
  round(keep: Filter = () => true): Message[] {
    this.flush();
    const batch = this.queue;
    this.queue = [];
    const delivered = batch.filter((m) =>
      !this.down.has(m.to) && this.cores.has(m.to) && keep(m)
    );
    for (const message of delivered) this.cores.get(message.to)!.step(message);
    this.flush();
    return delivered;
  }

  /** Rounds until no message is left (at most `maxRounds`). */
  deliver(keep: Filter = () => true, maxRounds = 1000): Message[] {
    const delivered: Message[] = [];
    for (let round = 0; round < maxRounds; round++) {
      this.flush();
      if (this.queue.length === 0) return delivered;
      delivered.push(...this.round(keep));
    }
    throw new Error("messages never stopped flowing");
  }

  /** Ticks `id` `times` times, delivering everything after each tick. */
  tick(id: NodeId, times = 1, keep: Filter = () => true): Message[] {
    const delivered: Message[] = [];
    for (let i = 0; i < times; i++) {
      this.core(id).tick();
      delivered.push(...this.deliver(keep));
    }
    return delivered;
  }

  /**
   * Ticks followers past their lease (10 ticks) without delivering
   * anything, and checks none of them campaigned.
   */
  expireLease(...ids: NodeId[]): void {
    for (const id of ids) {
      for (let i = 0; i < 10; i++) this.core(id).tick();
      assert.notEqual(this.core(id).role, "candidate");
    }
  }

  /** Makes `id` the leader (a forced election) and lets every message flow. */
  elect(id: NodeId, keep: Filter = () => true): RaftCore {
    this.core(id).campaign();
    this.deliver(keep);
    assert.equal(this.core(id).role, "leader", `${id} won the election`);
    return this.core(id);
  }

  /** Proposes `data` on `leader`, delivers, @returns whether it committed. */
  commits(leader: NodeId, data: string, keep?: Filter): boolean {
    const { index } = this.core(leader).propose(data);
    this.deliver(keep);
    return this.core(leader).commitIndex >= index;
  }
}

// --- drivers ------------------------------------------------------------------

/** A clock that never fires timers; deferred work runs at `run()`. */
export class HandClock implements RaftClock {
  deferred: (() => void)[] = [];
  timers = 0;
  setTimeout(): unknown {
    return ++this.timers;
  }
  clearTimeout(): void {}
  defer(callback: () => void): void {
    this.deferred.push(callback);
  }
  run(): void {
    for (let i = 0; i < 100 && this.deferred.length > 0; i++) {
      const work = this.deferred;
      this.deferred = [];
      for (const callback of work) callback();
    }
  }
}

/** One node of a {@link DriverHarness}: its state machine and its writes. */
export interface DriverNode {
  driver: RaftDriver<string>;
  /** The payloads applied (or restored from a snapshot). */
  state: string[];
  /** Every write handed to its storage (each completed at once). */
  writes: StorageWrite[];
  /** The index of every snapshot restored. */
  restored: number[];
}

/** Settings of a {@link DriverHarness}. */
export interface DriverHarnessOptions {
  /** The drivers' snapshot policy (a snapshot is the state as JSON). */
  snapshot?: { everyEntries: number; trailingEntries: number };
  /** A node given no restore(): its fatal errors go to `errors`. */
  withoutRestore?: NodeId;
}

/**
 * {@link RaftDriver}s on instant storage and {@link HandClock}s, connected
 * by a queue the test delivers: each applies by appending the payload to
 * its state and answers `applied <data>`.
 */
export class DriverHarness {
  readonly clock = new HandClock();
  readonly drivers = new Map<NodeId, RaftDriver<string>>();
  readonly nodes = new Map<NodeId, DriverNode>();
  /** The fatal errors of the node without restore(). */
  readonly errors: unknown[] = [];
  queue: Message[] = [];

  constructor(ids: NodeId[], options: DriverHarnessOptions = {}) {
    const { snapshot, withoutRestore } = options;
    for (const id of ids) {
      const node: DriverNode = {
        state: [],
        writes: [],
        restored: [],
        driver: undefined as unknown as RaftDriver<string>,
      };
      node.driver = new RaftDriver({
        core: new RaftCore({ id, voters: ids, random: () => 0.5 }),
        storage: {
          persist: (write, done) => {
            node.writes.push(write);
            done();
          },
        },
        network: { send: (messages) => this.queue.push(...messages) },
        clock: this.clock,
        apply: (entry) => {
          if (entry.data !== "") node.state.push(entry.data);
          return `applied ${entry.data}`;
        },
        restore: withoutRestore !== id
          ? (taken) => {
            node.restored.push(taken.index);
            node.state = JSON.parse(taken.data);
          }
          : undefined,
        ...(snapshot && {
          snapshot: { ...snapshot, take: () => JSON.stringify(node.state) },
        }),
        onFatal: (error) => {
          if (withoutRestore !== id) throw error;
          this.errors.push(error);
        },
      });
      this.nodes.set(id, node);
      this.drivers.set(id, node.driver);
    }
  }

  /** The driver of `id`. */
  get(id: NodeId): RaftDriver<string> {
    return this.drivers.get(id)!;
  }

  /** Delivers until quiet (at most `maxRounds`), dropping what `keep` rejects. */
  deliver(keep: Filter = () => true, maxRounds = 100): void {
    for (let round = 0; round < maxRounds; round++) {
      this.clock.run();
      if (this.queue.length === 0) return;
      const batch = this.queue;
      this.queue = [];
      for (const message of batch.filter(keep)) {
        this.get(message.to).step([message]);
      }
    }
    throw new Error("messages never stopped flowing");
  }
}
