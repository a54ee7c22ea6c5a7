/**
 * A hand-driven cluster of {@link RaftCore}s for the replication and
 * snapshot tests (no tests of its own): each node has a disk record
 * (snapshot, entries, hard state) and a state machine that is the list of
 * payloads applied, serialised as JSON for a snapshot.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RaftCore, type RaftCoreConfig, type Ready } from "./core.ts";
import type { Entry, HardState, Message, NodeId, Snapshot } from "./types.ts";

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

/** Builds entries 1..n with the given terms and data `"<index>@<term>"`. */
export function entries(...terms: number[]): Entry[] {
  return terms.map((term, i) => ({
    index: i + 1,
    term,
    data: `${i + 1}@${term}`,
  }));
}

/** The cluster: nodes n1..nN, a message queue, and per-node disks. */
export class Harness {
  readonly ids: NodeId[];
  readonly cores = new Map<NodeId, RaftCore>();
  readonly disks = new Map<NodeId, HarnessDisk>();
  readonly machines = new Map<NodeId, StateMachine>();
  readonly down = new Set<NodeId>();
  /** Messages sent and not yet delivered. */
  queue: Message[] = [];
  /** Every Ready handled, per node (for tests that inspect them). */
  readonly readys = new Map<NodeId, Ready[]>();
  readonly #config: Partial<RaftCoreConfig>;

  constructor(
    size: number,
    config: Partial<RaftCoreConfig> = {},
    initial: Record<NodeId, { entries?: Entry[]; hardState?: HardState }> = {},
  ) {
    this.ids = Array.from({ length: size }, (_, i) => `n${i + 1}`);
    this.#config = config;
    for (const id of this.ids) {
      const start = initial[id] ?? {};
      this.disks.set(id, {
        hardState: start.hardState && { ...start.hardState },
        snapshot: undefined,
        entries: structuredClone(start.entries ?? []),
      });
      this.boot(id);
    }
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
        voters: this.ids,
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
    this.readys.set(id, []);
    this.down.delete(id);
  }

  /** Stops `id`; what it had not persisted is lost with it. */
  crash(id: NodeId): void {
    this.down.add(id);
    this.queue = this.queue.filter((m) => m.to !== id && m.from !== id);
  }

  /** Performs every running node's pending Ready, in the Ready contract's order. */
  flush(): void {
    for (const id of this.ids) {
      if (this.down.has(id)) continue;
      const core = this.cores.get(id)!;
      for (let i = 0; i < 100 && core.hasReady(); i++) {
        const ready = core.ready();
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
          assert.equal(
            entry.index,
            machine.index + 1,
            `${id} applies in order`,
          );
          machine.index = entry.index;
          if (entry.data !== "") machine.data.push(entry.data);
        }
        core.advance(ready);
      }
      assert.equal(core.hasReady(), false, `${id} keeps producing Readys`);
    }
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
   * those they provoke) that `keep` keeps and whose recipient is up.
   * @returns the delivered messages.
   */
  round(keep: Filter = () => true): Message[] {
    this.flush();
    const batch = this.queue;
    this.queue = [];
    const delivered = batch.filter((m) => !this.down.has(m.to) && keep(m));
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

  /** Makes `id` the leader (a forced election) and lets every message flow. */
  elect(id: NodeId, keep: Filter = () => true): RaftCore {
    this.core(id).campaign();
    this.deliver(keep);
    assert.equal(this.core(id).role, "leader", `${id} won the election`);
    return this.core(id);
  }
}
