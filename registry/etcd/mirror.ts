/**
 * An etcd front's copy of the registry's keys, kept by one etcd watch from
 * the revision it read them at: the bindings (`<prefix>b/…`) and the
 * loads servers report (`<prefix>load/<lease>`). What it serves:
 *
 * - loads, so that a lookup or watch on any front shows the load a server
 *   reported through another (etcd is the only state fronts share);
 * - serializable lookups, answered from the copy as a Rafter follower
 *   answers from its state (possibly behind, never torn);
 * - the checked bindings the front running health checks probes, and the
 *   bindings of a lease whose load changed (for watches that ask for loads).
 *
 * @module
 */

// deno-lint-ignore no-import-prefix
import type { Etcd3, IKeyValue, Watcher } from "npm:etcd3@1.1.2";
import type { Attributes, HealthCheck } from "../../protocol/registry.ts";
import type { Binding } from "../state.ts";

/** What a binding's etcd value holds. */
export interface Stored {
  url: string;
  attrs: Attributes;
  weight: number;
  zone: string | null;
  state: "serving" | "draining" | "unhealthy";
  leaseId: string | null;
  check?: HealthCheck | null;
  /**
   * The binding's `createRevision` when it is not its key's: a server that
   * took an id over with a new lease (a restart at the same URL) is a new
   * instance, as on a Raft registry, though etcd kept the key: `"put"`
   * means the revision of the put that wrote this value, a number is that
   * revision carried on by later puts of the same instance (drain,
   * health). Absent: the key's create revision.
   */
  born?: number | "put";
}

/** A binding as the mirror holds it: the value and its key's revisions. */
export interface Mirrored {
  name: string;
  id: string;
  stored: Stored;
  createRevision: number;
  modRevision: number;
}

/** What changed in the mirror. */
export type MirrorChange =
  | { kind: "bindings" }
  | { kind: "load"; leaseId: string; load: number | null };

/** The key's name and id (`<prefix>b/<name>/<id>`; names may hold `/`). */
export function keyParts(
  prefix: string,
  key: string,
): { name: string; id: string } {
  const rest = key.slice(prefix.length + 2);
  const slash = rest.lastIndexOf("/");
  return { name: rest.slice(0, slash), id: rest.slice(slash + 1) };
}

/** A binding's `createRevision` (see {@link Stored.born}). */
export function createRevisionOf(stored: Stored, kv: IKeyValue): number {
  return stored.born === "put"
    ? Number(kv.mod_revision)
    : stored.born ?? Number(kv.create_revision);
}

/** The binding a key-value under `<prefix>b/` holds, or null for a bad value. */
export function bindingOf(prefix: string, kv: IKeyValue): Mirrored | null {
  const stored = parseStored(kv);
  if (stored === null) return null;
  return {
    ...keyParts(prefix, kv.key.toString()),
    stored,
    createRevision: createRevisionOf(stored, kv),
    modRevision: Number(kv.mod_revision),
  };
}

/** A mirrored binding's fields as the registry's state has them. */
export function bindingFields(binding: Mirrored): Binding {
  const { stored } = binding;
  return {
    name: binding.name,
    id: binding.id,
    url: stored.url,
    attrs: stored.attrs,
    weight: stored.weight,
    zone: stored.zone,
    state: stored.state,
    leaseId: stored.leaseId,
    check: stored.check ?? null,
    createRevision: binding.createRevision,
    modRevision: binding.modRevision,
  };
}

/** Reads a binding's value (a bad one is reported as null). */
export function parseStored(kv: IKeyValue): Stored | null {
  try {
    return JSON.parse(kv.value.toString()) as Stored;
  } catch {
    return null;
  }
}

/** A live copy of the bindings and loads under a front's prefix. */
export class EtcdMirror {
  readonly #prefix: string;
  readonly #etcd: Etcd3;
  readonly #log: (line: string, level?: "info" | "warn") => void;
  #watcher: Watcher | null = null;
  #closed = false;
  /** By key. */
  readonly bindings = new Map<string, Mirrored>();
  /** Loads by lease id. */
  readonly loads = new Map<string, number>();
  readonly #listeners = new Set<(change: MirrorChange) => void>();
  /** The revision the copy is current to. */
  revision: number;

  private constructor(
    etcd: Etcd3,
    prefix: string,
    log: (line: string, level?: "info" | "warn") => void,
  ) {
    this.#etcd = etcd;
    this.#prefix = prefix;
    this.#log = log;
    this.revision = 0;
  }

  /** Reads every key under `prefix`, then follows it. */
  static async start(
    etcd: Etcd3,
    prefix: string,
    log: (line: string, level?: "info" | "warn") => void,
  ): Promise<EtcdMirror> {
    const mirror = new EtcdMirror(etcd, prefix, log);
    await mirror.#read();
    await mirror.#follow();
    return mirror;
  }

  /** Replaces the copy with every key under the prefix, as etcd has it now. */
  async #read(): Promise<void> {
    const all = await this.#etcd.getAll().prefix(this.#prefix).exec();
    const before = new Map(this.loads);
    this.bindings.clear();
    this.loads.clear();
    this.revision = Number(all.header.revision);
    for (const kv of all.kvs) this.#put(kv, false);
    for (const [leaseId] of before) {
      if (!this.loads.has(leaseId)) {
        this.#emit({ kind: "load", leaseId, load: null });
      }
    }
    for (const [leaseId, load] of this.loads) {
      if (before.get(leaseId) !== load) {
        this.#emit({ kind: "load", leaseId, load });
      }
    }
    this.#emit({ kind: "bindings" });
  }

  /**
   * Follows the prefix from the revision after the copy's. When etcd ends
   * the watch (a member restarted, the history was compacted), the copy
   * follows again from where it was, or reads everything again if that
   * revision is gone; until then it may be behind, never torn.
   */
  async #follow(): Promise<void> {
    const prefix = this.#prefix;
    const watcher = await this.#etcd.watch().prefix(prefix).startRevision(
      String(this.revision + 1),
    ).create();
    if (this.#closed) {
      await watcher.cancel().catch(() => {});
      return;
    }
    this.#watcher = watcher;
    watcher.on("data", (response) => {
      let bindings = false;
      for (const event of response.events) {
        const key = event.kv.key.toString();
        if (event.type === "Put") {
          bindings = this.#put(event.kv) || bindings;
        } else if (key.startsWith(`${prefix}b/`)) {
          bindings = this.bindings.delete(key) || bindings;
        } else if (key.startsWith(`${prefix}load/`)) {
          const leaseId = key.slice(prefix.length + 5);
          if (this.loads.delete(leaseId)) {
            this.#emit({ kind: "load", leaseId, load: null });
          }
        }
      }
      this.revision = Math.max(this.revision, Number(response.header.revision));
      if (bindings) this.#emit({ kind: "bindings" });
    });
    watcher.on("error", (error: Error) => {
      // etcd cancelled it: do not cancel it again (etcd3 would get an
      // answer for a watcher it no longer knows, and throw).
      if (this.#watcher !== watcher) return;
      this.#watcher = null;
      this.#log(
        `etcd ended the front's watch of its bindings (${error.message}): following again from revision ${
          this.revision + 1
        }`,
        "warn",
      );
      void this.#refollow();
    });
  }

  /** Follows again after the watch ended, reading everything again if need be (bounded retries, 1 s apart, until closed). */
  async #refollow(): Promise<void> {
    for (let attempt = 0; !this.#closed; attempt++) {
      try {
        try {
          await this.#etcd.get(this.#prefix).revision(this.revision + 1)
            .exec();
        } catch (error) {
          if (!/compacted/i.test(String((error as Error).message))) {
            throw error;
          }
          await this.#read(); // the revision is gone: start over
        }
        await this.#follow();
        this.#log(
          `the front follows etcd again from revision ${this.revision + 1}`,
        );
        return;
      } catch (error) {
        if (attempt === 0) {
          this.#log(
            `cannot follow etcd yet (${
              (error as Error).message
            }); trying every second`,
            "warn",
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  }

  /** Calls `listener` on each change until the returned function is called. */
  listen(listener: (change: MirrorChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The mirrored bindings of `name`, in creation order. */
  bindingsOf(name: string): Mirrored[] {
    const base = `${this.#prefix}b/${name}/`;
    const result: Mirrored[] = [];
    for (const [key, binding] of this.bindings) {
      if (key.startsWith(base) && binding.name === name) result.push(binding);
    }
    return result.sort((a, b) => a.createRevision - b.createRevision);
  }

  /**
   * Takes a load this front was told, before etcd echoes it back, so that
   * this front's watches and lookups see it at once.
   */
  setLoad(leaseId: string, load: number): void {
    if (this.loads.get(leaseId) === load) return;
    this.loads.set(leaseId, load);
    this.#emit({ kind: "load", leaseId, load });
  }

  /** The names bound, in order, with their binding counts (as RegistryState's). */
  names(): { name: string; count: number }[] {
    const counts = new Map<string, number>();
    for (const { name } of this.bindings.values()) {
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    return [...counts].sort(([a], [b]) => a < b ? -1 : 1).map((
      [name, count],
    ) => ({ name, count }));
  }

  /** The bindings of `name` as the registry's state has them, in bind order. */
  bindingFieldsOf(name: string): Binding[] {
    return this.bindingsOf(name).map(bindingFields);
  }

  /** Stops following etcd. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#listeners.clear();
    const watcher = this.#watcher;
    this.#watcher = null;
    await watcher?.cancel();
  }

  /** Applies a put; whether it was a binding's. */
  #put(kv: IKeyValue, emit = true): boolean {
    const key = kv.key.toString();
    if (key.startsWith(`${this.#prefix}b/`)) {
      const binding = bindingOf(this.#prefix, kv);
      if (binding === null) return false;
      this.bindings.set(key, binding);
      return true;
    }
    if (key.startsWith(`${this.#prefix}load/`)) {
      const leaseId = key.slice(this.#prefix.length + 5);
      const load = Number(kv.value.toString());
      if (Number.isFinite(load) && this.loads.get(leaseId) !== load) {
        this.loads.set(leaseId, load);
        if (emit) this.#emit({ kind: "load", leaseId, load });
      }
    }
    return false;
  }

  #emit(change: MirrorChange): void {
    for (const listener of this.#listeners) listener(change);
  }
}
