/**
 * Lease keep-alives of an etcd front over one long-lived etcd
 * `LeaseKeepAlive` stream, shared by every client of the front: a renewal
 * writes the lease id on the stream and waits for etcd's answer for that
 * id (etcd answers each request in order, naming its lease). Opening a
 * gRPC stream per keep-alive cost a stream set-up for each renewal of
 * each server; one stream carries them all, and a renewal of a lease
 * already under way waits for that one's answer.
 *
 * @module
 */

// deno-lint-ignore no-import-prefix
import type { Etcd3 } from "npm:etcd3@1.1.2";

/** The duplex stream etcd3 gives for lease keep-alives. */
type KeepAliveStream = Awaited<
  ReturnType<Etcd3["leaseClient"]["leaseKeepAlive"]>
>;

/** How long a renewal waits for etcd's answer, ms. */
const RENEW_TIMEOUT_MS = 2_000;

interface Pending {
  resolve(ttlSeconds: number): void;
  reject(error: Error): void;
  promise: Promise<number>;
}

/**
 * Renews etcd leases over one stream, opened on first use and again after
 * it fails.
 */
export class LeaseRenewer {
  readonly #etcd: Etcd3;
  #stream: Promise<KeepAliveStream> | null = null;
  /** Renewals waiting for etcd's answer, by lease id (decimal). */
  readonly #pending = new Map<string, Pending>();
  #closed = false;

  /** @param etcd the front's client. */
  constructor(etcd: Etcd3) {
    this.#etcd = etcd;
  }

  /**
   * Renews lease `id` once: resolves with its TTL in seconds as etcd
   * answered (0 or less: the lease is gone), or rejects when the stream
   * failed (the next renewal opens a new one).
   */
  renew(id: string): Promise<number> {
    const waiting = this.#pending.get(id);
    if (waiting !== undefined) return waiting.promise;
    const done = Promise.withResolvers<number>();
    const pending: Pending = { ...done };
    this.#pending.set(id, pending);
    // A stream to a member that went silent answers nothing: give up on
    // it, so that the next renewal opens one (etcd3 picks a member that
    // answers).
    const timer = setTimeout(() => {
      if (this.#pending.get(id) !== pending) return;
      this.#reset();
      this.#fail(
        new Error(
          `etcd did not renew lease ${id} within ${RENEW_TIMEOUT_MS} ms`,
        ),
      );
    }, RENEW_TIMEOUT_MS);
    done.promise.then(() => clearTimeout(timer), () => clearTimeout(timer));
    this.#open().then((stream) => stream.write({ ID: id })).catch((error) =>
      this.#fail(error as Error)
    );
    return done.promise;
  }

  /** Ends the stream; renewals under way reject. */
  close(): void {
    this.#closed = true;
    this.#reset();
    this.#fail(new Error("the etcd front is closing"));
  }

  /** Drops the stream (the next renewal opens a new one). */
  #reset(): void {
    const stream = this.#stream;
    this.#stream = null;
    stream?.then((s) => s.end(), () => {});
  }

  #open(): Promise<KeepAliveStream> {
    if (this.#closed) {
      return Promise.reject(new Error("the etcd front is closing"));
    }
    if (this.#stream !== null) return this.#stream;
    const opening = this.#etcd.leaseClient.leaseKeepAlive().then((stream) => {
      stream.on("data", (answer: { ID: string; TTL: string }) => {
        const pending = this.#pending.get(String(answer.ID));
        if (pending === undefined) return;
        this.#pending.delete(String(answer.ID));
        pending.resolve(Number(answer.TTL));
      });
      const broken = (error?: Error) => {
        if (this.#stream === opening) this.#stream = null;
        this.#fail(error ?? new Error("etcd ended the keep-alive stream"));
      };
      stream.on("error", broken);
      stream.on("end", () => broken());
      return stream;
    });
    this.#stream = opening;
    opening.catch(() => {
      if (this.#stream === opening) this.#stream = null;
    });
    return opening;
  }

  /** Rejects every renewal under way (their stream failed). */
  #fail(error: Error): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(error);
  }
}
