/**
 * A notification's rule in the retry loop: it has no answer, so it counts
 * as sent once its request was written. An endpoint that cannot take it
 * (its connection closed before the request was written) is replaced by
 * one not tried yet; any other failure ends it; it has no attempt
 * timeout, spends no retry budget and does not ask the distributor's
 * `onError`.
 *
 * @module
 */

import { ConnectionError } from "../../rpc/errors.ts";
import { NO_ENDPOINTS } from "../../protocol/registry.ts";
import { NotSentError } from "./call_errors.ts";
import type { Outcome } from "./outcome.ts";
import type { Rule } from "./retry_loop.ts";

const SENT: Outcome = Object.freeze({ ok: true, value: undefined });

/** The rule of loop of `ClusterStub.notify`. */
export const NOTIFICATION: Rule = {
  timed: false,
  onceEach: true,
  async attempt(loop, call, endpoint): Promise<Outcome> {
    const { url } = endpoint;
    try {
      const connection = await loop.attempts.connection(
        url,
        call.deadline,
        call.signal,
        call.label,
      );
      await connection.notify(call.method, call.params);
      return SENT;
    } catch (error) {
      if (!(error instanceof ConnectionError) || error.written) throw error;
      loop.attempts.context.health.of(url).failed("refused");
      return {
        ok: false,
        kind: "notSent",
        error: new NotSentError(
          `${call.label} was not sent to ${url}: ${error.message}`,
          { endpoint: url, cause: error },
        ),
      };
    }
  },
  failed: () => "retry",
  noEndpoints: (name, label) =>
    new NotSentError(
      `No endpoints: no server of "${name}" took the notification ${label}`,
      { code: NO_ENDPOINTS, endpoint: null },
    ),
  exhausted: (loop, call) =>
    call.last ?? NOTIFICATION.noEndpoints(loop.attempts.name, call.label),
};
