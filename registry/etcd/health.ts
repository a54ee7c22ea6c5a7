/**
 * Active health checks over etcd: the fronts of one etcd cluster elect one
 * of them (an etcd election, `<prefix>election/health/…`, on a lease of
 * {@link ELECTION_TTL_S} s), and the elected front probes the checked
 * bindings with the Rafter registry leader's own {@link HealthChecker}.
 * A transition is written as the binding's new `state`, by a transaction
 * that holds only while the key is the one probed (same create revision)
 * and unchanged since it was read, so a deposed front that has not yet
 * noticed can never undo a newer bind, drain or transition.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix
import type { Campaign, Etcd3 } from "npm:etcd3@1.1.2";
import { HealthChecker } from "../_health_checker.ts";
import type { Binding } from "../state.ts";
import {
  bindingFields,
  createRevisionOf,
  type EtcdMirror,
  parseStored,
} from "./mirror.ts";

/** TTL of a front's election lease, s: how long a dead checker holds the role. */
export const ELECTION_TTL_S = 2;

/** How often the elected front looks for due probes, ms (a registry tick). */
const TICK_MS = 50;

/** Runs health checks while this front is the elected one. */
export class EtcdHealth {
  readonly #etcd: Etcd3;
  readonly #mirror: EtcdMirror;
  readonly #prefix: string;
  readonly #log: (line: string, level?: "info" | "warn") => void;
  readonly #checker: HealthChecker;
  readonly #stopListening: () => void;
  #campaign: Campaign | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  /**
   * Campaigns as `value` (the front's URL) and probes once elected.
   */
  constructor(
    etcd: Etcd3,
    mirror: EtcdMirror,
    prefix: string,
    value: string,
    log: (line: string, level?: "info" | "warn") => void,
  ) {
    this.#etcd = etcd;
    this.#mirror = mirror;
    this.#prefix = prefix;
    this.#log = log;
    this.#checker = new HealthChecker({
      propose: (command) => this.#write(command),
      log: (line, level) => log(line, level === "warn" ? "warn" : "info"),
    });
    this.#stopListening = mirror.listen((change) => {
      if (change.kind === "bindings") this.#update();
    });
    this.#update();
    this.#campaignAs(value);
  }

  /** Whether this front runs the checks now. */
  get running(): boolean {
    return this.#checker.running;
  }

  /** Resigns and stops probing. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stopListening();
    this.#stopProbing();
    await this.#campaign?.resign().catch(() => {});
  }

  #campaignAs(value: string): void {
    if (this.#closed) return;
    const campaign = this.#etcd.namespace(this.#prefix).election(
      "health",
      ELECTION_TTL_S,
    ).campaign(value);
    this.#campaign = campaign;
    campaign.on("elected", () => {
      if (this.#closed || this.#campaign !== campaign) return;
      this.#log(`health checks: this front (${value}) runs them now`);
      this.#checker.start();
      this.#timer = setInterval(() => this.#checker.tick(), TICK_MS);
    });
    campaign.on("error", () => {
      if (this.#campaign !== campaign) return;
      if (this.#checker.running) {
        this.#log(
          `health checks: this front stops running them: its election lease in etcd ended (etcd unreachable, or this front was paused); it campaigns again`,
          "warn",
        );
      }
      this.#stopProbing();
      // Campaign again after a pause (etcd may be unreachable meanwhile).
      setTimeout(() => {
        if (this.#campaign === campaign) this.#campaignAs(value);
      }, 1_000);
    });
  }

  #stopProbing(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#checker.stop();
  }

  /** Gives the checker the checked bindings now in the mirror. */
  #update(): void {
    const checked: Binding[] = [];
    for (const binding of this.#mirror.bindings.values()) {
      const { check } = binding.stored;
      if (check !== undefined && check !== null) {
        checked.push(bindingFields(binding));
      }
    }
    this.#checker.update(checked);
  }

  /** Writes one health transition, if the binding is still the one probed. */
  async #write(
    command: {
      name: string;
      id: string;
      createRevision: number;
      healthy: boolean;
    },
  ): Promise<void> {
    const key = `${this.#prefix}b/${command.name}/${command.id}`;
    const kv = (await this.#etcd.get(key).exec()).kvs[0];
    const stored = kv === undefined ? null : parseStored(kv);
    if (
      stored === null ||
      createRevisionOf(stored, kv!) !== command.createRevision
    ) {
      return; // unbound, or bound again since: nothing to mark
    }
    if (stored.state === "draining") return;
    const state = command.healthy ? "serving" : "unhealthy";
    if (stored.state === state) return;
    const put = this.#etcd.put(key).value(
      JSON.stringify({ ...stored, state, born: command.createRevision }),
    );
    if (stored.leaseId !== null) put.lease(stored.leaseId);
    const done = await this.#etcd.if(key, "Mod", "==", Number(kv.mod_revision))
      .then(put).commit();
    if (!done.succeeded) {
      throw new Error(`${key} changed while it was marked ${state}`);
    }
  }
}
