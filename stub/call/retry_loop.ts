/**
 * The one loop of a stub's calls and notifications: attempts until one
 * succeeds, an outcome ends the call, or the attempts, the deadline or
 * the retry budget run out. What differs between a call and a
 * notification is its {@link Rule}: `CALL` in `call_rule.ts`, `NOTIFICATION` in
 * `notification_rule.ts`.
 *
 * @module
 */

import type { RpcError } from "../../rpc/errors.ts";
import type { CallInfo, Candidate } from "../distributors/distributor.ts";
import type { AmbiguousError, NotSentError } from "./call_errors.ts";
import type { Attempts, Send } from "./attempt.ts";
import { hedged } from "./hedge.ts";
import {
  type HedgeOptions,
  type Latencies,
  LATENCY_TIMEOUT,
  latencyTimeoutMs,
} from "./latencies.ts";
import {
  type Cancelled,
  cancelled,
  classify,
  clientClosed,
  type Failed,
  mayHaveRun,
  type Outcome,
  type Step,
} from "./outcome.ts";
import type { RetryBudget } from "./retry_budget.ts";
import type { StubCallOptions } from "./call_options.ts";

const NONE_TRIED: readonly string[] = Object.freeze([]);
const NONE: readonly Candidate[] = Object.freeze([]);

/** What one call was asked, and what its failed attempts said so far. */
export class CallState {
  readonly method: string;
  readonly params: unknown[] | Record<string, unknown>;
  /** Whether the call may run twice. */
  readonly idempotent: boolean;
  /** How an attempt sends; null: a plain call (made without a closure on the fast path). */
  send: Send | null;
  /** `"name.method"`, as errors name the call. */
  readonly label: string;
  readonly deadlineMs: number;
  /** When the call started, wall-clock ms. */
  readonly calledAt: number;
  /** When its deadline passes, wall-clock ms. */
  readonly deadline: number;
  readonly signal: AbortSignal | undefined;
  /** The call's own attempt timeout, ms. */
  readonly attemptTimeoutMs: number | undefined;
  /** The method's latencies on the cluster (its answers are sampled there). */
  latencies: Latencies | null = null;
  /** The endpoints tried so far (made at the first retry). */
  tried: string[] | null = null;
  /** The current attempt, as the distributor sees it. */
  info: CallInfo | null = null;
  /** The current attempt's candidates not tried yet (all if none were). */
  untried: readonly Candidate[] = NONE;
  /** The last attempt's failure. */
  last: RpcError | null = null;
  /** The endpoints the last attempt went to (two for a hedged one). */
  attempted: Candidate[] = [];
  /** The endpoint an earlier attempt may have run the call on. */
  ranOn: string | null = null;
  /** That attempt's failure: the call ends ambiguous, whatever follows. */
  ran: AmbiguousError | null = null;

  /** The state of a call of `method` that starts now. */
  constructor(
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
    label: string,
    deadlineMs: number,
  ) {
    this.method = method;
    this.params = params;
    this.idempotent = idempotent;
    this.send = send;
    this.label = label;
    this.deadlineMs = deadlineMs;
    this.calledAt = Date.now();
    this.deadline = this.calledAt + deadlineMs;
    this.signal = options.signal;
    this.attemptTimeoutMs = options.attemptTimeoutMs;
  }

  /** How an attempt sends: `send`, or a call of the method. */
  sender(): Send {
    return this.send ??= (connection, attempt) =>
      connection.call(this.method, this.params, attempt);
  }

  /** Records a failed attempt on `url`. */
  failed(outcome: Failed, url: string): void {
    this.last = outcome.error;
    if (outcome.kind === "ambiguous") {
      this.ranOn = url;
      this.ran = outcome.error as AmbiguousError;
    }
  }
}

/** What differs between a call and a notification in the loop. */
export interface Rule {
  /**
   * Its attempts wait for an answer within a timeout: each needs time
   * left; one on an open connection is made inline; it spends the retry
   * budget; its answer goes through the distributor's `onReturn`.
   */
  readonly timed: boolean;
  /**
   * It tries each endpoint at most once, and checks the caller's signal
   * and the client before every attempt (not only the first).
   */
  readonly onceEach: boolean;
  /** An attempt that is not made inline. */
  attempt(
    loop: RetryLoop,
    call: CallState,
    endpoint: Candidate,
    timeoutMs: number,
  ): Promise<Outcome>;
  /** After a failed attempt, recorded in `call`: retry, stop, or answer. */
  failed(
    loop: RetryLoop,
    call: CallState,
    outcome: Failed,
    info: CallInfo,
    endpoint: Candidate,
    lastAttempt: boolean,
  ): Step;
  /** The error when nothing is bound under the name. */
  noEndpoints(name: string, label: string): NotSentError;
  /** The error once the attempts (or the deadline, or the endpoints) ran out. */
  exhausted(loop: RetryLoop, call: CallState): RpcError;
}

/** A stub's bounds on its calls. */
export interface RetrySettings {
  deadlineMs: number;
  maxAttempts: number;
  attemptTimeoutMs: number | undefined;
  budget: RetryBudget | null;
  /** How idempotent calls hedge; null: they do not. */
  hedge: HedgeOptions | null;
}

/** The loop of one stub's calls. */
export class RetryLoop {
  /** Makes the loop's attempts. */
  readonly attempts: Attempts;
  /** The stub's bounds. */
  readonly settings: RetrySettings;

  /** The loop of `attempts` within `settings`. */
  constructor(attempts: Attempts, settings: RetrySettings) {
    this.attempts = attempts;
    this.settings = settings;
  }

  /** Runs `method` by `rule`: its answer, or its final error. */
  async run<R>(
    rule: Rule,
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
  ): Promise<R> {
    const { attempts, settings } = this;
    const { map, pool } = attempts.context;
    const call = new CallState(
      method,
      params,
      idempotent,
      options,
      send,
      attempts.label(method),
      options.deadlineMs ?? settings.deadlineMs,
    );
    const { label, deadline, deadlineMs, signal } = call;
    call.latencies = attempts.latencies(method);
    this.#ensureLive(call);
    if (rule.timed) settings.budget?.deposit(call.calledAt);
    const max = settings.maxAttempts;
    for (let attempt = 0; attempt < max; attempt++) {
      if (attempt > 0 && rule.onceEach) this.#ensureLive(call);
      if (attempt === 0 ? deadlineMs <= 0 : Date.now() >= deadline) break;
      // The fast path (no lookup due) takes no await.
      const lookup = map.needsLookup();
      const candidates = lookup
        ? await attempts.lookup(
          deadline,
          signal,
          label,
          deadlineMs,
          call.ranOn,
          call.attempted,
        )
        : map.candidates();
      // What is left after the lookup bounds the attempt (and the deadline
      // the server is sent).
      const remaining = attempt === 0 && !lookup
        ? deadlineMs
        : deadline - Date.now();
      if (remaining <= 0 && rule.timed) break;
      const endpoint = this.#choose(rule, call, candidates, attempt, remaining);
      if (endpoint === null) break;
      const timeoutMs = this.#timeoutMs(call, max - attempt, remaining);
      call.attempted = [endpoint];
      const hedgeMs = idempotent && max - attempt > 1
        ? this.#hedgeMs(call, timeoutMs)
        : null;
      const open = hedgeMs !== null || !rule.timed
        ? undefined
        : pool.ready(endpoint.url);
      let outcome: Outcome | undefined;
      if (open !== undefined) {
        // The fast path: the connection is open, and the call's own await
        // is the only one (no promise or closure of an attempt, no outcome
        // object for an answer).
        const health = attempts.context.health.of(endpoint.url);
        health.started();
        const sentAt = performance.now();
        const sending = { timeoutMs: Math.max(1, timeoutMs), signal };
        let value: unknown;
        try {
          value = await (call.send === null
            ? open.call(method, params, sending)
            : call.send(open, sending));
          attempts.answered(health, sentAt, call.latencies);
        } catch (error) {
          (call.tried ??= []).push(endpoint.id);
          // The attempt's start in wall-clock ms, as classify takes it.
          const started = Date.now() - (performance.now() - sentAt);
          outcome = classify(error, endpoint.url, label, started, health);
        } finally {
          health.ended();
        }
        if (outcome === undefined) {
          return attempts.returned(value, call.info!, endpoint);
        }
      } else {
        const tried = (call.tried ??= []);
        tried.push(endpoint.id);
        if (hedgeMs !== null) {
          const mark = tried.length;
          outcome = await this.#hedged(call, endpoint, timeoutMs, hedgeMs);
          // The hedge's second attempt went to another endpoint too.
          for (let i = mark; i < tried.length; i++) {
            const other = candidates.find((c) => c.id === tried[i]);
            if (other !== undefined) call.attempted.push(other);
          }
        } else {
          outcome = await rule.attempt(this, call, endpoint, timeoutMs);
        }
      }
      if (outcome.ok) {
        return (rule.timed
          ? attempts.returned(outcome.value, call.info!, endpoint)
          : undefined) as R;
      }
      const step = this.#failed(rule, call, outcome, endpoint, attempt + 1);
      if (step === "stop") break;
      if (step !== "retry") return step.return as R;
    }
    throw rule.exhausted(this, call);
  }

  /**
   * The endpoint of the call's next attempt (its `info` and `untried` set),
   * or null when the rule has none left to try.
   *
   * @throws when nothing is bound under the name.
   */
  #choose(
    rule: Rule,
    call: CallState,
    candidates: readonly Candidate[],
    attempt: number,
    remaining: number,
  ): Candidate | null {
    const { attempts } = this;
    if (candidates.length === 0) {
      throw mayHaveRun(
        call.last ?? rule.noEndpoints(attempts.name, call.label),
        call.ran,
      );
    }
    const tried = call.tried;
    const untried = tried === null
      ? candidates
      : candidates.filter((c) => !tried.includes(c.id));
    if (untried.length === 0 && rule.onceEach) return null;
    call.untried = untried;
    call.info = {
      name: attempts.name,
      method: call.method,
      params: call.params,
      attempt,
      idempotent: call.idempotent,
      tried: tried === null ? NONE_TRIED : [...tried],
      remainingMs: remaining,
    };
    return attempts.choose(
      untried.length > 0 ? untried : candidates,
      call.info,
      call.label,
    );
  }

  /**
   * An attempt's timeout, capped by the time left: the call's or the
   * stub's; else, for an idempotent call that has another attempt left
   * and a retry in the budget, `max(100, 3 × p99)` of the method's
   * latency on the cluster (the time left divided by the attempts left
   * before 20 answers were sampled); else (not idempotent, the last
   * attempt, no retry in the budget) the time left: a timed-out attempt
   * that cannot be retried would only turn a late answer into a failure.
   */
  #timeoutMs(call: CallState, attemptsLeft: number, remaining: number): number {
    const given = call.attemptTimeoutMs ?? this.settings.attemptTimeoutMs;
    if (given !== undefined) return Math.min(remaining, given);
    if (!call.idempotent || attemptsLeft <= 1) return remaining;
    const p99 = call.latencies?.quantile(LATENCY_TIMEOUT.quantile) ?? null;
    if (p99 === null) {
      return Math.min(remaining, Math.max(remaining / attemptsLeft, 1));
    }
    const { budget } = this.settings;
    if (budget !== null && budget.balance < 1) return remaining;
    return Math.min(remaining, latencyTimeoutMs(p99));
  }

  /**
   * The hedge delay of an idempotent call's attempt timed out after
   * `timeoutMs`, ms, or null when it is not hedged: the stub does not
   * hedge, there is no other endpoint to hedge on, too few latencies
   * were sampled, or the delay is not shorter than the timeout.
   */
  #hedgeMs(call: CallState, timeoutMs: number): number | null {
    const { hedge } = this.settings;
    if (hedge === null || call.untried.length < 2) return null;
    const delay = hedge.delayMs ??
      call.latencies?.quantile(hedge.percentile ?? 0.99) ?? null;
    return delay === null || delay >= timeoutMs ? null : delay;
  }

  /** A hedged attempt of an idempotent call, hedged after `delayMs`. */
  #hedged(
    call: CallState,
    endpoint: Candidate,
    timeoutMs: number,
    delayMs: number,
  ): Promise<Outcome> {
    const { settings } = this;
    return hedged(this.attempts, delayMs, settings.budget, {
      first: endpoint,
      others: call.untried,
      label: call.label,
      send: call.sender(),
      timeoutMs,
      signal: call.signal,
      info: call.info!,
      tried: call.tried!,
      latencies: call.latencies,
    });
  }

  /**
   * Records a failed attempt (the `attempts`-th) in `call` and asks the
   * rule what next.
   *
   * @throws the CANCELLED error of an aborted attempt, or the rule's.
   */
  #failed(
    rule: Rule,
    call: CallState,
    outcome: Failed | Cancelled,
    endpoint: Candidate,
    attempts: number,
  ): Step {
    if (outcome.kind === "cancelled") {
      throw cancelled(call.label, outcome.written ? endpoint.url : call.ranOn);
    }
    call.failed(outcome, endpoint.url);
    return rule.failed(
      this,
      call,
      outcome,
      call.info!,
      endpoint,
      attempts >= this.settings.maxAttempts,
    );
  }

  /** Throws when the caller aborted the call or its client is closed. */
  #ensureLive(call: CallState): void {
    if (call.signal?.aborted) throw cancelled(call.label, null);
    if (this.attempts.context.closed?.aborted) {
      throw clientClosed(call.label, null);
    }
  }
}
