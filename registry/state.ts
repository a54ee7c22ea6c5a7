/**
 * The registry state machine: service name → endpoints, changed only by
 * commands applied from the Raft log, so every replica holds the same
 * bindings at the same log index.
 *
 * @module
 */

import type { Endpoint, LookupResult, WriteResult } from "./types.ts";

/** A command as it is stored in a Raft log entry (JSON). */
export type Command =
  | { op: "bind"; name: string; endpoint: Endpoint }
  | { op: "unbind"; name: string; id: string };

/** Encodes a command as log entry data. */
export function encodeCommand(command: Command): string {
  return JSON.stringify(command);
}

/**
 * The bindings of every name, and the revision: a counter bumped by each
 * change (as etcd's store revision).
 *
 * @example
 * ```ts
 * import { encodeCommand, RegistryState } from "./state.ts";
 * const state = new RegistryState();
 * state.apply(encodeCommand({
 *   op: "bind", name: "hello", endpoint: { id: "h1", url: "tcp://127.0.0.1:9001" },
 * }));
 * console.log(state.lookup("hello").endpoints.length, state.revision); // 1 1
 * ```
 */
export class RegistryState {
  readonly #bindings = new Map<string, Endpoint[]>();
  #revision = 0;

  /** Revision of the last change applied, 0 when empty. */
  get revision(): number {
    return this.#revision;
  }

  /**
   * Applies one log entry's data. The empty string (a new leader's entry)
   * changes nothing. Data that is not a known command also changes nothing
   * and yields an error result, identically on every replica, rather than
   * stopping the node.
   */
  apply(data: string): WriteResult | { error: string } {
    if (data === "") return { revision: this.#revision };
    let command: unknown;
    try {
      command = JSON.parse(data);
    } catch {
      return { error: "log entry is not JSON" };
    }
    if (isBind(command)) return this.#bind(command.name, command.endpoint);
    if (isUnbind(command)) return this.#unbind(command.name, command.id);
    return { error: `unknown registry command ${JSON.stringify(command)}` };
  }

  /** The endpoints bound under `name` (a copy), with the current revision. */
  lookup(name: string): LookupResult {
    const endpoints = (this.#bindings.get(name) ?? []).map((e) => ({ ...e }));
    return { name, endpoints, revision: this.#revision };
  }

  /** Every name with at least one endpoint, sorted. */
  names(): string[] {
    return [...this.#bindings.keys()].sort();
  }

  #bind(name: string, endpoint: Endpoint): WriteResult {
    const endpoints = this.#bindings.get(name) ?? [];
    const copy = { id: endpoint.id, url: endpoint.url };
    const position = endpoints.findIndex((e) => e.id === endpoint.id);
    if (position === -1) {
      endpoints.push(copy);
    } else if (endpoints[position].url === copy.url) {
      return { revision: this.#revision };
    } else {
      endpoints[position] = copy;
    }
    this.#bindings.set(name, endpoints);
    return { revision: ++this.#revision };
  }

  #unbind(name: string, id: string): WriteResult {
    const endpoints = this.#bindings.get(name);
    const position = endpoints?.findIndex((e) => e.id === id) ?? -1;
    if (endpoints === undefined || position === -1) {
      return { revision: this.#revision, removed: 0 };
    }
    endpoints.splice(position, 1);
    if (endpoints.length === 0) this.#bindings.delete(name);
    return { revision: ++this.#revision, removed: 1 };
  }
}

function isText(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isBind(value: unknown): value is Extract<Command, { op: "bind" }> {
  return isRecord(value) && value.op === "bind" && isText(value.name) &&
    isRecord(value.endpoint) && isText(value.endpoint.id) &&
    isText(value.endpoint.url);
}

function isUnbind(
  value: unknown,
): value is Extract<Command, { op: "unbind" }> {
  return isRecord(value) && value.op === "unbind" && isText(value.name) &&
    isText(value.id);
}
