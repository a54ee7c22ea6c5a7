/**
 * What one attempt of a call came to, and the errors a call ends with.
 *
 * {@link classify} turns an attempt's failure into a typed {@link Outcome}
 * (not sent, ambiguous, a server's answer, or cancelled), recording it in
 * the endpoint's health; {@link decide} makes the retry decision after a
 * failed attempt (the distributor's `onError`, the attempts left, the
 * retry budget). The rest build the error a call ends with.
 *
 * @module
 */

import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  messageOf,
  RpcError,
} from "../../rpc/errors.ts";
import {
  defaultDecision,
  type Distributor,
  type FailureInfo,
  type FailureKind,
} from "../distributors/distributor.ts";
import type { EndpointHealth } from "../cluster_map/endpoint_health.ts";
import { AmbiguousError, NotSentError, ServerError } from "./call_errors.ts";
import type { RetryBudget } from "./retry_budget.ts";

/** How one attempt ended. */
export type Outcome = { ok: true; value: unknown } | Failed | Cancelled;

/** An attempt that failed: the failure a distributor's `onError` sees. */
export interface Failed {
  ok: false;
  kind: FailureKind;
  error: RpcError;
}

/** An attempt the caller aborted (`written`: after its request was sent). */
export interface Cancelled {
  ok: false;
  kind: "cancelled";
  error: RpcError;
  written: boolean;
}

/**
 * Classifies an attempt's failure on `url` (started at `started`, wall
 * clock ms) and records it in the endpoint's `health`.
 *
 * @throws `error` itself when it is not an {@link RpcError}.
 */
export function classify(
  error: unknown,
  url: string,
  label: string,
  started: number,
  health: EndpointHealth,
): Failed | Cancelled {
  if (error instanceof NotSentError) {
    // From opening the connection: refused, in its reconnect back-off,
    // or not open within the attempt's timeout.
    if (error.code === CANCELLED) {
      return { ok: false, kind: "cancelled", error, written: false };
    }
    health.failed(error.code === DEADLINE_EXCEEDED ? "timeout" : "refused");
    return { ok: false, kind: "notSent", error };
  }
  if (error instanceof ConnectionError) {
    // A closed connection is forgotten by the pool; others to the same
    // server (one draining its calls) are left alone.
    if (!error.written) {
      health.failed("refused");
      return {
        ok: false,
        kind: "notSent",
        error: new NotSentError(
          `${label} was not sent: ${error.message}`,
          { endpoint: url, cause: error },
        ),
      };
    }
    health.failed("broken");
    return {
      ok: false,
      kind: "ambiguous",
      error: new AmbiguousError(
        `${label} may have run on ${url}: ${error.message}`,
        { endpoint: url, cause: error },
      ),
    };
  }
  if (error instanceof RpcError) {
    return classifyRpc(error, url, label, started, health);
  }
  throw error;
}

/** {@link classify} for an {@link RpcError} that is not a connection's. */
function classifyRpc(
  error: RpcError,
  url: string,
  label: string,
  started: number,
  health: EndpointHealth,
): Failed | Cancelled {
  const data = error.data as { written?: unknown } | undefined;
  const local = data !== undefined && typeof data.written === "boolean" &&
    (error.code === DEADLINE_EXCEEDED || error.code === CANCELLED);
  if (local && error.code === CANCELLED) {
    return {
      ok: false,
      kind: "cancelled",
      error,
      written: data!.written === true,
    };
  }
  // The attempt's deadline passed: by this client's timer, or by the
  // server, which honoured the deadline the attempt sent it and said
  // so first (`{ timeoutMs, started }`): the same as that timer.
  const sent = error.data as { timeoutMs?: unknown; started?: unknown };
  const byServer = !local && error.code === DEADLINE_EXCEEDED &&
    typeof sent === "object" && sent !== null &&
    typeof sent.timeoutMs === "number" && typeof sent.started === "boolean";
  if (local || byServer) {
    if (local ? data!.written === false : sent.started === false) {
      return {
        ok: false,
        kind: "notSent",
        error: new NotSentError(`${label}: ${error.message}`, {
          code: DEADLINE_EXCEEDED,
          endpoint: url,
          cause: error,
        }),
      };
    }
    health.failed("timeout");
    return {
      ok: false,
      kind: "ambiguous",
      error: new AmbiguousError(
        `${label} may have run on ${url}: ${
          local
            ? `no answer within ${
              Date.now() - started
            } ms (the attempt's timeout)`
            : error.message
        }`,
        { code: DEADLINE_EXCEEDED, endpoint: url, cause: error },
      ),
    };
  }
  // An error answer: the server is alive.
  health.answered(Date.now() - started);
  return {
    ok: false,
    kind: "server",
    error: new ServerError(error.code, error.message, error.data, url),
  };
}

/** What a call does after a failed attempt. */
export type Step = "retry" | "stop" | { return: unknown };

/**
 * The retry decision after a failed call attempt: the distributor's
 * `onError` (or the default rule: retry what is safe to retry and is not
 * a server's answer), then the attempts left and the retry budget. A
 * retry of an attempt that was not sent spends no budget: it cost no
 * server anything, and the budget is meant for calls that may have run.
 *
 * @param ran the failure of an earlier attempt that may have run the call.
 * @throws the call's final error when the decision is to stop with one.
 */
export function decide(
  failure: FailureInfo,
  error: RpcError,
  ran: AmbiguousError | null,
  distributor: Distributor,
  lastAttempt: boolean,
  budget: RetryBudget | null,
): Step {
  const decision = distributor.onError?.(error, failure) ??
    defaultDecision(failure);
  if (typeof decision === "object") return decision;
  if (decision === "throw") throw mayHaveRun(error, ran);
  if (lastAttempt) return "stop";
  if (
    budget !== null && failure.kind !== "notSent" && !budget.tryWithdraw()
  ) {
    throw withNote(
      mayHaveRun(error, ran),
      "not retried: the stub's retry budget is spent (too many retries lately: the cluster is failing)",
    );
  }
  return "retry";
}

/** The CANCELLED error of an aborted call: ambiguous if an attempt may have run. */
export function cancelled(label: string, ranOn: string | null): RpcError {
  return ranOn === null
    ? new NotSentError(
      `Cancelled: the call to ${label} was aborted before it was sent`,
      { code: CANCELLED, endpoint: null },
    )
    : new AmbiguousError(
      `Cancelled: the call to ${label} was aborted; it may have run on ${ranOn}`,
      { code: CANCELLED, endpoint: ranOn },
    );
}

/** The CANCELLED error of a call its client's `close()` ended. */
export function clientClosed(label: string, ranOn: string | null): RpcError {
  return ranOn === null
    ? new NotSentError(
      `Cancelled: ${label} was not sent: its client is closed`,
      { code: CANCELLED, endpoint: null },
    )
    : new AmbiguousError(
      `Cancelled: the client of ${label} was closed while the call was under way; it may have run on ${ranOn}`,
      { code: CANCELLED, endpoint: ranOn },
    );
}

/** An endpoint an attempt of a call went to, as a deadline error names it. */
export interface AttemptedEndpoint {
  /** Its instance id. */
  id: string;
  /** Its URL. */
  url: string;
}

/**
 * The extra `data` of a call's DEADLINE_EXCEEDED error (besides `written`
 * and `endpoint`): what the call was waiting for when its time ran out.
 */
export interface DeadlineData {
  /**
   * `"registry"`: the lookup of the name (the registry's time);
   * `"endpoint"`: the server(s) of the last attempt (`endpoints`);
   * `"nothing"`: no attempt was under way (the time ran out between
   * attempts, or before the first).
   */
  waitingFor: "registry" | "endpoint" | "nothing";
  /** The endpoints the last attempt went to (two for a hedged one); may be empty. */
  endpoints: AttemptedEndpoint[];
}

/**
 * The DEADLINE_EXCEEDED error of a call: ambiguous if an attempt may have
 * run (on `ranOn`), naming what it waited for: the registry (`step`, a
 * lookup under way), or the `endpoints` of the last attempt (id and URL)
 * with why they did not answer (sent and no answer, or not connected),
 * and the `last` error when it was something else.
 */
export function deadlineError(
  label: string,
  deadlineMs: number,
  ranOn: string | null,
  last: RpcError | null,
  step?: string,
  endpoints: readonly AttemptedEndpoint[] = [],
): RpcError {
  const lastStep = (last?.data as { step?: unknown } | undefined)?.step;
  // An attempt cut off by the deadline itself: its failure is the wait.
  const cutOff = last !== null && last.code === DEADLINE_EXCEEDED;
  const named = endpoints.map((e) => `endpoint ${e.id} at ${e.url}`).join(
    " and ",
  );
  let waitingFor: DeadlineData["waitingFor"];
  let where: string;
  if (step !== undefined) {
    waitingFor = "registry";
    where = ` (${step} still under way)`;
  } else if (cutOff && endpoints.length > 0) {
    waitingFor = "endpoint";
    const why = typeof lastStep === "string" || last instanceof NotSentError
      ? "not sent: the connection did not open in time; is the server up and reachable?"
      : "sent, no answer: the server may be stopped or overloaded";
    where = `, waiting for ${named} (${why})`;
  } else if (cutOff && typeof lastStep === "string") {
    waitingFor = "endpoint";
    where = ` (${lastStep} still under way)`;
  } else {
    waitingFor = cutOff ? "endpoint" : "nothing";
    where = last === null || cutOff || endpoints.length === 0
      ? ""
      : ` (the last attempt went to ${named})`;
  }
  const head =
    `Deadline exceeded: ${label} did not get an answer within ${deadlineMs} ms${where}`;
  const detail = last === null || cutOff ? "" : `; last error: ${last.message}`;
  const data: DeadlineData = {
    waitingFor,
    endpoints: endpoints.map(({ id, url }) => ({ id, url })),
  };
  return ranOn === null
    ? new NotSentError(`${head}${detail}`, {
      code: DEADLINE_EXCEEDED,
      endpoint: null,
      cause: last ?? undefined,
      data: { ...data },
    })
    : new AmbiguousError(
      `${head}; it may have run ${
        waitingFor === "endpoint" && endpoints.some((e) => e.url === ranOn)
          ? "there"
          : `on ${ranOn}`
      }${detail}`,
      {
        code: DEADLINE_EXCEEDED,
        endpoint: ranOn,
        cause: last ?? undefined,
        data: { ...data },
      },
    );
}

/**
 * The error a call ends with: `error`, unless it says the call was not sent
 * while an earlier attempt (`ran`) may have run it: then an
 * {@link AmbiguousError} naming that attempt's endpoint, with both reasons.
 */
export function mayHaveRun(
  error: RpcError,
  ran: AmbiguousError | null,
): RpcError {
  if (ran === null || !(error instanceof NotSentError)) return error;
  return new AmbiguousError(
    `${ran.message}; the last attempt: ${error.message}`,
    { code: error.code, endpoint: ran.endpoint, cause: error },
  );
}

/** The same kind of error with a note added to its message. */
function withNote(error: RpcError, note: string): RpcError {
  const message = `${error.message}; ${note}`;
  if (error instanceof AmbiguousError) {
    return new AmbiguousError(message, {
      code: error.code,
      endpoint: error.endpoint,
      cause: error,
    });
  }
  if (error instanceof NotSentError) {
    return new NotSentError(message, {
      code: error.code,
      endpoint: error.endpoint,
      cause: error,
    });
  }
  if (error instanceof ServerError) {
    return new ServerError(error.code, message, error.data, error.endpoint);
  }
  return new RpcError(
    error.code,
    `${message} (${messageOf(error)})`,
    error.data,
  );
}
