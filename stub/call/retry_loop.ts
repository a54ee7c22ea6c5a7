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
import type { RpcConnection } from "../../rpc/client/connection.ts";
import type { CallInfo, Candidate } from "../distributors/distributor.ts";
import type { AmbiguousError, NotSentError } from "./call_errors.ts";
import type { Attempts, Send } from "./attempt.ts";
import { hedged } from "./hedge.ts";
import {
  type HedgeOptions,
  type Latencies,
  LATENCY_TIMEOUT,
  latencyTimeoutMs,
  WARMUP_TIMEOUT,
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
/** Most free moves of one call (see {@link CallState.moves}). */
const MAX_MOVES = 64;

/** What the distributor is told of a call's first attempt. */
function firstInfo(
  name: string,
  method: string,
  params: unknown[] | Record<string, unknown>,
  idempotent: boolean,
  remainingMs: number,
): CallInfo {
  return {
    name,
    method,
    params,
    attempt: 0,
    idempotent,
    tried: NONE_TRIED,
    remainingMs,
  };
}

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
  /**
   * Free moves: attempts that were not sent, each to an endpoint the call
   * had not tried before. They count against neither `maxAttempts` nor
   * the retry budget (a not-sent call moves on to every untried endpoint
   * within the deadline), at most once per endpoint and {@link MAX_MOVES}.
   */
  moves = 0;

  /** The state of a call of `method` that started at `calledAt` (wall-clock ms). */
  constructor(
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
    label: string,
    deadlineMs: number,
    calledAt: number,
  ) {
    this.method = method;
    this.params = params;
    this.idempotent = idempotent;
    this.send = send;
    this.label = label;
    this.deadlineMs = deadlineMs;
    this.calledAt = calledAt;
    this.deadline = calledAt + deadlineMs;
    this.signal = options.signal;
    this.attemptTimeoutMs = options.attemptTimeoutMs;
  }

  /**
   * Records a first attempt chosen before this state was made: on
   * `endpoint` among `candidates` (nothing tried before), as `info` says.
   */
  first(
    candidates: readonly Candidate[],
    info: CallInfo,
    endpoint: Candidate,
  ): void {
    this.untried = candidates;
    this.info = info;
    this.attempted = [endpoint];
  }

  /** How an attempt sends: `send`, or a call of the method. */
  sender(): Send {
    return this.send ??= (connection, attempt) =>
      connection.call(this.method, this.params, attempt);
  }

  /** Records a failed attempt on `endpoint` (its id in `tried` already). */
  failed(outcome: Failed, { url, id }: Candidate): void {
    this.last = outcome.error;
    const tried = this.tried!;
    if (
      outcome.kind === "notSent" && this.moves < MAX_MOVES &&
      tried.indexOf(id) === tried.lastIndexOf(id)
    ) {
      this.moves++;
    }
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
  /** The options of the last attempt sent inline without a signal. */
  #lastSending: { timeoutMs: number; signal: undefined } | null = null;

  /** The loop of `attempts` within `settings`. */
  constructor(attempts: Attempts, settings: RetrySettings) {
    this.attempts = attempts;
    this.settings = settings;
  }

  /**
   * Runs `method` by `rule`: its answer, or its final error.
   *
   * Not an async function: a first attempt on an open connection (no
   * lookup due, no hedge) is chosen here without an await and waited for
   * by {@link #inline}, whose frame is a fraction of the loop's; it makes
   * no {@link CallState} unless it fails, and no CallInfo when the
   * distributor has `pick` and no `onReturn`. Anything else goes to
   * {@link #loop}.
   */
  run<R>(
    rule: Rule,
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
  ): Promise<R> {
    try {
      const { attempts, settings } = this;
      const { map } = attempts.context;
      const calledAt = Date.now();
      const deadlineMs = options.deadlineMs ?? settings.deadlineMs;
      this.#ensureLive(options.signal, method, null);
      if (rule.timed) settings.budget?.deposit(calledAt);
      // An idempotent call's attempt timeout and hedge follow the
      // method's latency: the loop sets them.
      if (!rule.timed || idempotent || deadlineMs <= 0 || map.needsLookup()) {
        return this.#loop(
          rule,
          this.#state(
            method,
            params,
            idempotent,
            options,
            send,
            deadlineMs,
            calledAt,
          ),
          0,
          null,
        );
      }
      const candidates = map.candidates();
      if (candidates.length === 0) {
        throw rule.noEndpoints(attempts.name, attempts.label(method));
      }
      let info: CallInfo | null = null;
      let endpoint: Candidate;
      if (attempts.distributor.pick !== undefined) {
        endpoint = attempts.pick(candidates, method);
      } else {
        info = firstInfo(attempts.name, method, params, idempotent, deadlineMs);
        endpoint = attempts.choose(candidates, info, attempts.label(method));
      }
      // Read once: the pool's use time and the latency sample's start.
      const sentAt = performance.now();
      const open = attempts.context.pool.ready(endpoint.url, sentAt);
      if (open === undefined) {
        const call = this.#firstState(
          method,
          params,
          idempotent,
          options,
          send,
          calledAt,
          candidates,
          info,
          endpoint,
        );
        return this.#loop(rule, call, 0, endpoint);
      }
      return this.#inline(
        rule,
        method,
        params,
        idempotent,
        options,
        send,
        calledAt,
        open,
        candidates,
        info,
        endpoint,
        sentAt,
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * A call's first attempt on `open`, the connection to `endpoint` (chosen
   * among `candidates`, with `info` if one was made), sent at `sentAt`
   * (performance.now()): its answer, or on a failure the state
   * {@link #loop} goes on with.
   */
  async #inline<R>(
    rule: Rule,
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
    calledAt: number,
    open: RpcConnection,
    candidates: readonly Candidate[],
    info: CallInfo | null,
    endpoint: Candidate,
    sentAt: number,
  ): Promise<R> {
    const { attempts, settings } = this;
    const deadlineMs = options.deadlineMs ?? settings.deadlineMs;
    // Not idempotent (run() sends the others to the loop): the time left,
    // unless an attempt timeout is given.
    const sending = this.#sending(
      Math.min(
        deadlineMs,
        options.attemptTimeoutMs ?? settings.attemptTimeoutMs ?? deadlineMs,
      ),
      options.signal,
    );
    const health = attempts.context.health.of(endpoint.url);
    health.started();
    let value: unknown;
    let call: CallState | null = null;
    let outcome: Failed | Cancelled | null = null;
    try {
      value = await (send === null
        ? open.call(method, params, sending)
        : send(open, sending));
      attempts.answered(health, sentAt, attempts.latencies(method));
    } catch (error) {
      call = this.#firstState(
        method,
        params,
        idempotent,
        options,
        send,
        calledAt,
        candidates,
        info,
        endpoint,
      );
      call.tried = [endpoint.id];
      // The attempt's start in wall-clock ms, as classify takes it.
      const started = Date.now() - (performance.now() - sentAt);
      outcome = classify(error, endpoint.url, call.label, started, health);
    } finally {
      health.ended();
    }
    if (outcome === null) {
      if (attempts.distributor.onReturn === undefined) return value as R;
      return attempts.returned(
        value,
        info ??
          firstInfo(attempts.name, method, params, idempotent, deadlineMs),
        endpoint,
      );
    }
    const step = this.#failed(rule, call!, outcome, endpoint, 1);
    if (step === "stop") throw rule.exhausted(this, call!);
    if (step !== "retry") return step.return as R;
    return await this.#loop<R>(rule, call!, 1, null);
  }

  /**
   * The loop of attempts of `call` from attempt `start` (the first one on
   * `first` when {@link run} chose it already): its answer, or its final
   * error.
   */
  async #loop<R>(
    rule: Rule,
    call: CallState,
    start: number,
    first: Candidate | null,
  ): Promise<R> {
    const { attempts, settings } = this;
    const { map, pool } = attempts.context;
    const { method, params, idempotent, label, deadline, deadlineMs, signal } =
      call;
    const max = settings.maxAttempts;
    let chosen = first;
    for (let attempt = start; attempt < max + call.moves; attempt++) {
      if (attempt > 0 && rule.onceEach) this.#ensureLive(signal, method, call);
      if (attempt === 0 ? deadlineMs <= 0 : Date.now() >= deadline) break;
      let candidates: readonly Candidate[];
      let remaining: number;
      let endpoint: Candidate | null;
      if (chosen !== null) {
        // Chosen by run(), its state recorded (no lookup was due).
        candidates = call.untried;
        remaining = deadlineMs;
        endpoint = chosen;
        chosen = null;
      } else {
        // No lookup due: no await.
        const lookup = map.needsLookup();
        candidates = lookup
          ? await attempts.lookup(
            deadline,
            signal,
            label,
            deadlineMs,
            call.ranOn,
            call.attempted,
          )
          : map.candidates();
        // What is left after the lookup bounds the attempt (and the
        // deadline the server is sent).
        remaining = attempt === 0 && !lookup
          ? deadlineMs
          : deadline - Date.now();
        if (remaining <= 0 && rule.timed) break;
        endpoint = this.#choose(rule, call, candidates, attempt, remaining);
        if (endpoint === null) break;
        call.attempted = [endpoint];
      }
      const left = max + call.moves - attempt;
      const timeoutMs = this.#timeoutMs(call, left, remaining);
      const hedgeMs = idempotent && left > 1
        ? this.#hedgeMs(call, timeoutMs)
        : null;
      const inline = hedgeMs === null && rule.timed;
      const sentAt = inline ? performance.now() : 0;
      const open = inline ? pool.ready(endpoint.url, sentAt) : undefined;
      let outcome: Outcome | undefined;
      if (open !== undefined) {
        // The connection is open: the call's own await is the only one
        // (no promise or closure of an attempt, no outcome object for an
        // answer).
        const health = attempts.context.health.of(endpoint.url);
        health.started();
        const sending = this.#sending(timeoutMs, signal);
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
   * The state of a call whose first attempt went to `endpoint` among
   * `candidates` (with `info` when the distributor was given one), as the
   * loop goes on from it.
   */
  #firstState(
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
    calledAt: number,
    candidates: readonly Candidate[],
    info: CallInfo | null,
    endpoint: Candidate,
  ): CallState {
    const deadlineMs = options.deadlineMs ?? this.settings.deadlineMs;
    const call = this.#state(
      method,
      params,
      idempotent,
      options,
      send,
      deadlineMs,
      calledAt,
    );
    call.first(
      candidates,
      info ??
        firstInfo(this.attempts.name, method, params, idempotent, deadlineMs),
      endpoint,
    );
    return call;
  }

  /** The state of a call (see {@link run}) made when it first needs one. */
  #state(
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    send: Send | null,
    deadlineMs: number,
    calledAt: number,
  ): CallState {
    const call = new CallState(
      method,
      params,
      idempotent,
      options,
      send,
      this.attempts.label(method),
      deadlineMs,
      calledAt,
    );
    call.latencies = this.attempts.latencies(method);
    return call;
  }

  /**
   * The options of an attempt sent inline: without a signal, the last ones
   * again when they hold the same timeout (they are frozen, and read once
   * by the send), so that a run of calls with the same timeout makes no
   * object per call.
   */
  #sending(
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): { timeoutMs: number; signal: AbortSignal | undefined } {
    const wanted = Math.max(1, timeoutMs);
    // A call's own signal is not kept beyond its call.
    if (signal !== undefined) return { timeoutMs: wanted, signal };
    const last = this.#lastSending;
    if (last !== null && last.timeoutMs === wanted) return last;
    return this.#lastSending = Object.freeze({ timeoutMs: wanted, signal });
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
    call.info = tried === null
      ? firstInfo(
        attempts.name,
        call.method,
        call.params,
        call.idempotent,
        remaining,
      )
      : {
        name: attempts.name,
        method: call.method,
        params: call.params,
        attempt,
        idempotent: call.idempotent,
        tried: [...tried],
        remainingMs: remaining,
      };
    // A first attempt goes to the distributor's `pick` when it has one.
    if (tried === null && attempts.distributor.pick !== undefined) {
      return attempts.pick(candidates, call.method);
    }
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
      const split = Math.max(remaining / attemptsLeft, 1);
      // Warming up: a few answers tell more than the deadline does.
      const slowest = call.latencies?.max ?? 0;
      if (slowest === 0) return Math.min(remaining, split);
      return Math.min(
        remaining,
        split,
        Math.max(WARMUP_TIMEOUT.floorMs, WARMUP_TIMEOUT.factor * slowest),
      );
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
   * Records a failed attempt (the `attempts`-th, free moves included) in
   * `call` and asks the rule what next.
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
    call.failed(outcome, endpoint);
    return rule.failed(
      this,
      call,
      outcome,
      call.info!,
      endpoint,
      attempts - call.moves >= this.settings.maxAttempts,
    );
  }

  /** Throws when the caller aborted the call of `method` or its client is closed. */
  #ensureLive(
    signal: AbortSignal | undefined,
    method: string,
    call: CallState | null,
  ): void {
    if (signal?.aborted) {
      throw cancelled(call?.label ?? this.attempts.label(method), null);
    }
    if (this.attempts.context.closed?.aborted) {
      throw clientClosed(call?.label ?? this.attempts.label(method), null);
    }
  }
}
