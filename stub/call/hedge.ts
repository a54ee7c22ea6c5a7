/**
 * Hedged requests: when an idempotent call's attempt has not answered
 * within the hedge delay (a fixed one, or a quantile of the method's
 * recent latencies), a second attempt goes to another server; the first
 * success answers the call.
 *
 * The attempt that lost is not cancelled: it runs on to its own attempt
 * timeout, so that a server that stopped answering still times out, and
 * is ejected, although hedges answer every call it was sent (a frozen
 * server would otherwise stay in play, costing each of its calls a hedge
 * delay); a slow answer it gets is sampled too, so the latency quantiles
 * see the tail the hedges cut off.
 *
 * @module
 */

import type { CallInfo, Candidate } from "../distributors/distributor.ts";
import type { Attempts, Send } from "./attempt.ts";
import type { Latencies } from "./latencies.ts";
import { HedgeClock } from "./hedge_clock.ts";
import type { Outcome } from "./outcome.ts";
import type { RetryBudget } from "./retry_budget.ts";

export type { HedgeOptions } from "./latencies.ts";

/** One hedged attempt: where it goes, and what bounds it. */
export interface HedgedAttempt {
  /** The endpoint of the first attempt. */
  first: Candidate;
  /** The endpoints a hedge may go to, but `first` (filtered out only when a hedge goes). */
  others: readonly Candidate[];
  label: string;
  send: Send;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  /** The call, as the distributor sees it. */
  info: CallInfo;
  /** The endpoints tried so far; the hedge's is added. */
  tried: string[];
  /** Where the method's answered attempts are sampled. */
  latencies: Latencies | null;
}

/**
 * An attempt, and, when it has not answered within `delayMs`, a second
 * one on another server (if the retry budget allows); the first success
 * wins (the other runs on to its timeout); when both fail, an ambiguous
 * failure wins.
 */
export async function hedged(
  attempts: Attempts,
  delayMs: number,
  budget: RetryBudget | null,
  call: HedgedAttempt,
): Promise<Outcome> {
  const { first, others, label, send, timeoutMs, signal, latencies } = call;
  const primary = attempts.attempt(
    first,
    label,
    send,
    timeoutMs,
    signal,
    latencies,
  );
  if (delayMs >= timeoutMs) return await primary;
  const clock = clockOf(latencies ?? attempts);
  let early: Outcome | "hedge";
  try {
    early = await new Promise<Outcome | "hedge">((wake) => {
      clock.arm(delayMs, wake);
      primary.then(wake);
    });
  } finally {
    clock.ended();
  }
  if (early !== "hedge") return early;
  if (
    attempts.context.closed?.aborted ||
    !others.some((c) => c !== first) ||
    (budget !== null && !budget.tryWithdraw())
  ) {
    return await primary;
  }
  const second = attempts.choose(
    others.filter((c) => c !== first),
    { ...call.info, tried: [...call.tried] },
    label,
  );
  call.tried.push(second.id);
  const backup = attempts.attempt(
    second,
    label,
    send,
    Math.max(1, timeoutMs - delayMs),
    signal,
    latencies,
  );
  return await firstSuccess(primary, backup);
}

const CLOCKS = new WeakMap<object, HedgeClock>();

/** The hedge clock of a method's `latencies` (or of a stub's attempts, for a method that has none). */
function clockOf(key: object): HedgeClock {
  let clock = CLOCKS.get(key);
  if (clock === undefined) {
    clock = new HedgeClock();
    CLOCKS.set(key, clock);
  }
  return clock;
}

/** The first success of two attempts, or, when both fail, the ambiguous failure if the first to fail was. */
function firstSuccess(
  primary: Promise<Outcome>,
  backup: Promise<Outcome>,
): Promise<Outcome> {
  return new Promise<Outcome>((resolve, reject) => {
    let lastFailure: Outcome | null = null;
    const settle = (outcome: Outcome) => {
      if (outcome.ok) resolve(outcome);
      else if (lastFailure === null) lastFailure = outcome;
      else {
        resolve(
          lastFailure.ok === false && lastFailure.kind === "ambiguous"
            ? lastFailure
            : outcome,
        );
      }
    };
    primary.then(settle, reject);
    backup.then(settle, reject);
  });
}
