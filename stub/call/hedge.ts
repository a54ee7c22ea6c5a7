/**
 * Hedged requests: when an idempotent call's attempt has not answered
 * within the hedge delay (a fixed one, or a percentile of the stub's
 * recent latencies), a second attempt goes to another server; the first
 * answer wins and the other is cancelled.
 *
 * @module
 */

import type { CallInfo, Candidate } from "../distributors/distributor.ts";
import type { Attempts, Send } from "./attempt.ts";
import type { Outcome } from "./outcome.ts";
import type { RetryBudget } from "./retry_budget.ts";
import type { HedgeOptions } from "./latencies.ts";

export type { HedgeOptions } from "./latencies.ts";

/** One hedged attempt: where it goes, and what bounds it. */
export interface HedgedAttempt {
  /** The endpoint of the first attempt. */
  first: Candidate;
  /** The endpoints a hedge may go to. */
  others: Candidate[];
  label: string;
  send: Send;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  /** The call, as the distributor sees it. */
  info: CallInfo;
  /** The endpoints tried so far; the hedge's is added. */
  tried: string[];
}

/**
 * An attempt, and, when it has not answered within the hedge delay, a
 * second one on another server (if the retry budget allows); the first
 * success wins, the other is cancelled; when both fail, an ambiguous
 * failure wins.
 */
export async function hedged(
  attempts: Attempts,
  options: HedgeOptions,
  budget: RetryBudget | null,
  call: HedgedAttempt,
): Promise<Outcome> {
  const { first, others, label, send, timeoutMs, signal } = call;
  const delay = attempts.latencies!.hedgeDelay(options);
  if (delay === null || delay >= timeoutMs || others.length === 0) {
    return await attempts.attempt(first, label, send, timeoutMs, signal);
  }
  const controllers = [new AbortController(), new AbortController()];
  const signals = controllers.map((c) =>
    signal === undefined ? c.signal : AbortSignal.any([signal, c.signal])
  );
  const primary = attempts.attempt(first, label, send, timeoutMs, signals[0]);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hedgeDue = new Promise<"hedge">((resolve) => {
    timer = setTimeout(() => resolve("hedge"), delay);
  });
  const early = await Promise.race([primary, hedgeDue]);
  clearTimeout(timer);
  if (early !== "hedge") return early;
  if (
    attempts.context.closed?.aborted ||
    (budget !== null && !budget.tryWithdraw())
  ) {
    return await primary;
  }
  const second = attempts.choose(
    others,
    { ...call.info, tried: [...call.tried] },
    label,
  );
  call.tried.push(second.id);
  const backup = attempts.attempt(
    second,
    label,
    send,
    Math.max(1, timeoutMs - delay),
    signals[1],
  );
  return await firstSuccess([primary, backup], controllers);
}

/** The first success of two attempts (aborting the other), or, when both fail, the ambiguous failure if the first to fail was. */
function firstSuccess(
  attempts: Promise<Outcome>[],
  controllers: AbortController[],
): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    let failures = 0;
    let lastFailure: Outcome | null = null;
    attempts.forEach((attempt, i) =>
      attempt.then((outcome) => {
        if (outcome.ok) {
          controllers[1 - i].abort();
          resolve(outcome);
        } else if (++failures === 2) {
          resolve(
            lastFailure !== null && lastFailure.ok === false &&
              lastFailure.kind === "ambiguous"
              ? lastFailure
              : outcome,
          );
        } else {
          lastFailure = outcome;
        }
      })
    );
  });
}
