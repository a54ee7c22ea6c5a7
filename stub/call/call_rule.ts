/**
 * A call's rule in the retry loop: an attempt that fails is retried by
 * the distributor's `onError` (or the default rule: what was not sent,
 * or anything of an idempotent method, but never a server's answer),
 * within the attempts left, the deadline and the retry budget (which a
 * not-sent attempt does not spend).
 *
 * @module
 */

import { NO_ENDPOINTS } from "../../protocol/registry.ts";
import type { FailureInfo } from "../distributors/distributor.ts";
import { NotSentError } from "./call_errors.ts";
import { clientClosed, deadlineError, decide, mayHaveRun } from "./outcome.ts";
import type { Rule } from "./retry_loop.ts";

/**
 * A call's rule: retried by the distributor's `onError` (or the default
 * rule), the attempts left and the retry budget; a retry goes to a server
 * the call has not tried yet while there is one.
 */
export const CALL: Rule = {
  timed: true,
  onceEach: false,
  attempt: (loop, call, endpoint, timeoutMs) =>
    loop.attempts.attempt(
      endpoint,
      call.label,
      call.sender(),
      timeoutMs,
      call.signal,
      call.latencies,
    ),
  failed(loop, call, outcome, info, endpoint, lastAttempt) {
    // Closing the client closed the connection: no retry.
    if (loop.attempts.context.closed?.aborted && outcome.kind !== "server") {
      throw clientClosed(call.label, call.ranOn);
    }
    if (Date.now() >= call.deadline) return "stop";
    const failure: FailureInfo = {
      ...info,
      endpoint,
      kind: outcome.kind,
      safeToRetry: outcome.kind === "notSent" || call.idempotent,
    };
    return decide(
      failure,
      outcome.error,
      call.ran,
      loop.attempts.distributor,
      lastAttempt,
      loop.settings.budget,
    );
  },
  noEndpoints: (name) =>
    new NotSentError(
      `No endpoints: nothing is bound under "${name}"; start a server that binds it, or check the name`,
      { code: NO_ENDPOINTS, endpoint: null, data: { name } },
    ),
  exhausted(_loop, call) {
    if (call.last !== null && Date.now() < call.deadline) {
      return mayHaveRun(call.last, call.ran);
    }
    return deadlineError(
      call.label,
      call.deadlineMs,
      call.ranOn,
      call.last,
      undefined,
      call.attempted,
    );
  },
};
