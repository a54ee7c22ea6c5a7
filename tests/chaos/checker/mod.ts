/**
 * The checker of a chaos run's history: every check of `checker/` on one
 * {@link History}, and a readable report.
 *
 * - `linearizability`: each name's operations (without serializable
 *   lookups) against {@link registryModel}, with Wing & Gong's search; a
 *   violation comes with a shrunk sub-history.
 * - `watch`: the watch logs (order, duplicates, gaps, agreement) and the
 *   streams against the history ({@link checkWatches}).
 * - `revisions`: revisions in real time, lookup contents against the
 *   streams ({@link checkRevisions}).
 * - `leases`: no lease expired while kept alive ({@link checkLeases}).
 * - `final`: the final lookups hold every acknowledged bind that nothing
 *   could have replaced or removed since.
 *
 * The state rebuilt from the watch streams assumes the run's prefix holds
 * nothing at `startRevision` (each run uses a fresh prefix).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkHistory } from "./mod.ts";
 * const report = checkHistory({
 *   prefix: "chaos/", startRevision: 0, finalIndexes: [1],
 *   operations: [
 *     { index: 0, process: 0, invokedAt: 0, completedAt: 2, outcome: "ok",
 *       input: { f: "bind", name: "chaos/k1", id: "e1", url: "tcp://u1", leaseId: null },
 *       output: { f: "bind", revision: 1 } },
 *     { index: 1, process: 1, invokedAt: 3, completedAt: 4, outcome: "ok",
 *       input: { f: "lookup", name: "chaos/k1", consistency: "linearizable" },
 *       output: { f: "lookup", revision: 1, endpoints: [] } }, // misses e1
 *   ],
 *   watches: [],
 * });
 * assert.equal(report.valid, false);
 * assert.equal(report.checks.find((c) => c.check === "linearizability")?.status, "violation");
 * ```
 *
 * @module
 */

import type { History, Operation } from "../history.ts";
import {
  leaseRetirement,
  registryModel,
  type RegistryModelOptions,
  registryOps,
} from "./registry_model.ts";
import { checkLeases, checkRevisions } from "./revisions.ts";
import { formatOperation, shrink } from "./shrink.ts";
import { type CheckResult, Findings } from "./violation.ts";
import { checkWatches } from "./watch.ts";
import { resolveUnknowns, streamCovers } from "./resolve.ts";
import { checkLinearizable } from "./wgl.ts";

export type { CheckResult, Violation } from "./violation.ts";

/** Settings of {@link checkHistory}. */
export interface CheckOptions extends RegistryModelOptions {
  /** Budget of the linearizability search of one name, ms. @default 20_000 */
  maxMsPerName?: number;
  /** Most configurations explored per name. @default 2_000_000 */
  maxConfigurationsPerName?: number;
  /** Budget for shrinking one name's violation, ms. @default 5_000 */
  shrinkMs?: number;
  /** Slack for an early lease expiry, ms. @default 250 */
  leaseToleranceMs?: number;
}

/** Counts of a history. */
export interface HistoryCounts {
  operations: number;
  byOutcome: Record<"ok" | "fail" | "unknown", number>;
  byFunction: Record<string, number>;
  byName: Record<string, number>;
  watchLogs: number;
  watchEvents: number;
}

/** What {@link checkHistory} found. */
export interface CheckReport {
  /** true: every check passed; false: a violation; "unknown": some check could not decide. */
  valid: boolean | "unknown";
  checks: CheckResult[];
  counts: HistoryCounts;
  /** Time taken, ms, in all and by check. */
  timeMs: number;
  checkMs: Record<string, number>;
}

/** Runs every check on `history` (which {@link historyProblems} found sound). */
export function checkHistory(
  history: History,
  options: CheckOptions = {},
): CheckReport {
  const started = performance.now();
  const checkMs: Record<string, number> = {};
  const timed = <T>(name: string, run: () => T): T => {
    const at = performance.now();
    const value = run();
    checkMs[name] = Math.round(performance.now() - at);
    return value;
  };
  const watch = timed("watch", () => checkWatches(history));
  const linearizability = timed("linearizability", () => {
    // Unknown operations settled from the streams, when they can be trusted.
    if (watch.result.status === "ok" && streamCovers(history, watch.stream)) {
      const resolution = resolveUnknowns(history, watch.stream);
      const result = checkNames(
        resolution.operations,
        resolution.notes,
        options,
      );
      result.notes.push(
        `${resolution.applied} unknown writes settled as applied (their events are in the watch streams) and ${resolution.dropped} unknown operations as never applied (absent from the streams)`,
      );
      return result;
    }
    return checkNames(history.operations, new Map(), options);
  });
  const revisions = timed(
    "revisions",
    () => checkRevisions(history, watch.stream),
  );
  const leases = timed(
    "leases",
    () =>
      checkLeases(history, watch.stream, {
        leaseToleranceMs: options.leaseToleranceMs,
      }),
  );
  const final = timed("final", () => checkFinal(history));
  const checks = [linearizability, watch.result, revisions, leases, final];
  const valid = checks.some((c) => c.status === "violation")
    ? false
    : checks.some((c) => c.status === "unknown")
    ? "unknown"
    : true;
  return {
    valid,
    checks,
    counts: countHistory(history),
    timeMs: Math.round(performance.now() - started),
    checkMs,
  };
}

/** Linearizability, one name at a time. */
function checkNames(
  operations: readonly Operation[],
  notes: ReadonlyMap<number, string>,
  options: CheckOptions,
): CheckResult {
  const findings = new Findings("linearizability");

  const byName = new Map<string, Operation[]>();
  for (const op of operations) {
    if (op.input.f === "lookup" && op.input.consistency === "serializable") {
      continue;
    }
    let list = byName.get(op.input.name);
    if (list === undefined) byName.set(op.input.name, list = []);
    list.push(op);
  }
  for (
    const [name, operations] of [...byName].sort(([a], [b]) => a < b ? -1 : 1)
  ) {
    const ops = registryOps(operations);
    const model = registryModel({
      ...options,
      retiredAfter: leaseRetirement(ops),
    });
    const result = checkLinearizable(model, ops, {
      maxMs: options.maxMsPerName ?? 20_000,
      maxConfigurations: options.maxConfigurationsPerName,
    });
    if (result.ok === true) continue;
    if (result.ok === "unknown") {
      findings.note(`${name}: not decided: ${result.reason}`, true);
      continue;
    }
    const witness = shrink(model, ops, {
      readOnly: (op) => model.readOnly!(op),
      maxMs: options.shrinkMs ?? 5_000,
    });
    const kept = [
      ...witness.definite.map((i) => ({ i, how: "definite" as const })),
      ...witness.ignored.map((i) => ({ i, how: "ignored" as const })),
      ...witness.relaxed.map((i) => ({ i, how: "unknown" as const })),
    ]
      .sort((a, b) => ops[a.i].call - ops[b.i].call || a.i - b.i);
    findings.add(
      "not-linearizable",
      `${name}: no order of its ${ops.length} operations explains every answer; ${
        witness.definite.length + witness.ignored.length
      } operations (${witness.ignored.length} of them without their answers), and ${witness.relaxed.length} more that may or may not have happened, are enough to show it${
        witness.minimal ? "" : " (shrinking ran out of time: not minimal)"
      }`,
      {
        name,
        operations: [...witness.definite, ...witness.ignored].map((i) =>
          ops[i].source.index
        ).sort((a, b) => a - b),
        relaxed: witness.relaxed.map((i) => ops[i].source.index),
        lines: witnessLines(kept, (i, how) => {
          const source = ops[i].source;
          const note = notes.get(source.index);
          return formatOperation(source, how) +
            (note === undefined ? "" : ` [${note}]`);
        }),
      },
    );
  }
  return findings.result();
}

/** Most operations listed whose answers a witness does not need. */
const MAX_IGNORED_LINES = 20;

/**
 * A witness's lines, in call order: every operation whose answer it needs
 * and every one that may or may not have happened, but at most
 * {@link MAX_IGNORED_LINES} of those whose answers it does not need (a
 * long witness is mostly writes whose effects alone matter), then a count
 * of the rest.
 */
function witnessLines(
  kept: readonly { i: number; how: "definite" | "ignored" | "unknown" }[],
  line: (i: number, how: "definite" | "ignored" | "unknown") => string,
): string[] {
  const lines: string[] = [];
  let ignored = 0;
  for (const { i, how } of kept) {
    if (how === "ignored" && ++ignored > MAX_IGNORED_LINES) continue;
    lines.push(line(i, how));
  }
  if (ignored > MAX_IGNORED_LINES) {
    lines.push(
      `… and ${
        ignored - MAX_IGNORED_LINES
      } more operations whose effects (not their answers) the witness needs`,
    );
  }
  return lines;
}

/** The final lookups hold every acknowledged bind nothing could have undone. */
function checkFinal(history: History): CheckResult {
  const findings = new Findings("final");
  const finals = history.finalIndexes.map((i) => history.operations[i]);
  const ok = finals.filter((op) =>
    op.outcome === "ok" && op.output?.f === "lookup"
  );
  if (finals.length === 0) findings.note("no final lookups recorded");
  if (ok.length < finals.length) {
    findings.note(
      `${finals.length - ok.length} final lookups did not answer`,
      true,
    );
  }
  const byId = new Map<string, Operation[]>();
  for (const op of history.operations) {
    if (op.outcome === "fail") continue;
    const input = op.input;
    if (input.f === "bind" || input.f === "unbind") {
      const key = `${input.name}\n${input.id}`;
      const list = byId.get(key);
      if (list === undefined) byId.set(key, [op]);
      else list.push(op);
    }
  }
  for (const final of ok) {
    if (final.input.f !== "lookup" || final.output?.f !== "lookup") continue;
    const name = final.input.name;
    const seen = new Set(final.output.endpoints.map((e) => e.url));
    for (const op of history.operations) {
      const input = op.input;
      if (input.f !== "bind" || input.name !== name || op.outcome !== "ok") {
        continue;
      }
      if (op.output?.f !== "bind" || !("revision" in op.output)) continue;
      // A leased binding may expire; another write of the id may replace it.
      if (input.leaseId !== null) continue;
      const others = byId.get(`${name}\n${input.id}`)!.filter((other) =>
        other !== op && other.invokedAt < final.completedAt! &&
        (other.completedAt === null || other.completedAt > op.invokedAt)
      );
      if (others.length > 0 || op.completedAt! > final.invokedAt) continue;
      if (!seen.has(input.url)) {
        findings.add(
          "lost-write",
          `final lookup #${final.index} of ${name} misses ${input.id}=${input.url}, acknowledged by bind #${op.index}, which no later write could have replaced or removed`,
          {
            name,
            operations: [op.index, final.index],
            lines: [formatOperation(op), formatOperation(final)],
          },
        );
      }
    }
  }
  return findings.result();
}

function countHistory(history: History): HistoryCounts {
  const counts: HistoryCounts = {
    operations: history.operations.length,
    byOutcome: { ok: 0, fail: 0, unknown: 0 },
    byFunction: {},
    byName: {},
    watchLogs: history.watches.length,
    watchEvents: 0,
  };
  for (const op of history.operations) {
    counts.byOutcome[op.outcome]++;
    counts.byFunction[op.input.f] = (counts.byFunction[op.input.f] ?? 0) + 1;
    counts.byName[op.input.name] = (counts.byName[op.input.name] ?? 0) + 1;
  }
  for (const log of history.watches) {
    for (const record of log.records) {
      if (record.kind === "event") counts.watchEvents++;
    }
  }
  return counts;
}

/** The report as text: the verdict, each check, its violations with their lines. */
export function formatReport(report: CheckReport): string {
  const lines: string[] = [];
  const verdict = report.valid === true
    ? "VALID: every check passed"
    : report.valid === false
    ? "INVALID: violations found"
    : "UNKNOWN: some check could not decide";
  lines.push(verdict);
  const c = report.counts;
  lines.push(
    `${c.operations} operations (ok ${c.byOutcome.ok}, fail ${c.byOutcome.fail}, unknown ${c.byOutcome.unknown}) on ${
      Object.keys(c.byName).length
    } names; ${c.watchLogs} watch logs, ${c.watchEvents} events; checked in ${report.timeMs} ms`,
  );
  lines.push(
    `  by function: ${
      Object.entries(c.byFunction).map(([f, n]) => `${f} ${n}`).join(", ")
    }`,
  );
  for (const check of report.checks) {
    const kinds = Object.entries(check.counts).map(([kind, n]) =>
      `${kind} ×${n}`
    ).join(", ");
    lines.push(
      `[${check.status}] ${check.check} (${
        report.checkMs[check.check] ?? 0
      } ms)${kinds === "" ? "" : `: ${kinds}`}`,
    );
    for (const violation of check.violations) {
      lines.push(`  - ${violation.kind}: ${violation.message}`);
      for (const line of violation.lines ?? []) lines.push(`      ${line}`);
    }
    for (const note of check.notes) lines.push(`  note: ${note}`);
  }
  return lines.join("\n");
}

/**
 * What is wrong with `value` as a {@link History} (empty when nothing):
 * each problem names where it is.
 */
export function historyProblems(value: unknown): string[] {
  const problems: string[] = [];
  if (typeof value !== "object" || value === null) {
    return ["the history must be a JSON object"];
  }
  const h = value as Record<string, unknown>;
  if (typeof h.prefix !== "string") problems.push("prefix must be a string");
  if (typeof h.startRevision !== "number") {
    problems.push("startRevision must be a number");
  }
  if (!Array.isArray(h.operations)) {
    problems.push("operations must be an array");
  }
  if (!Array.isArray(h.watches)) problems.push("watches must be an array");
  if (!Array.isArray(h.finalIndexes)) {
    problems.push("finalIndexes must be an array");
  }
  if (problems.length > 0) return problems;
  const operations = h.operations as unknown[];
  const functions = [
    "bind",
    "unbind",
    "lookup",
    "leaseGrant",
    "leaseKeepAlive",
    "leaseRevoke",
  ];
  const urls = new Map<string, number>();
  operations.forEach((raw, i) => {
    const where = `operations[${i}]`;
    if (typeof raw !== "object" || raw === null) {
      return problems.push(`${where} is not an object`);
    }
    const op = raw as Record<string, unknown>;
    const input = op.input as Record<string, unknown> | undefined;
    if (op.index !== i) {
      problems.push(`${where}.index is ${op.index}, not ${i}`);
    }
    if (typeof op.process !== "number") {
      problems.push(`${where}.process must be a number`);
    }
    if (
      typeof input !== "object" || input === null ||
      !functions.includes(input.f as string)
    ) {
      return problems.push(
        `${where}.input.f must be one of ${functions.join(", ")}`,
      );
    }
    if (typeof input.name !== "string") {
      problems.push(`${where}.input.name must be a string`);
    }
    if (typeof op.invokedAt !== "number") {
      problems.push(`${where}.invokedAt must be a number`);
    }
    if (op.outcome === "ok") {
      if (
        typeof op.completedAt !== "number" ||
        !(op.completedAt >= (op.invokedAt as number))
      ) {
        problems.push(
          `${where}: an ok operation needs completedAt >= invokedAt`,
        );
      }
      const output = op.output as Record<string, unknown> | undefined;
      if (
        typeof output !== "object" || output === null || output.f !== input.f
      ) {
        problems.push(
          `${where}: an ok operation needs an output with f "${input.f}"`,
        );
      } else if (input.f === "lookup" && !Array.isArray(output.endpoints)) {
        problems.push(`${where}.output.endpoints must be an array`);
      }
    } else if (op.outcome === "unknown") {
      if (op.completedAt !== null) {
        problems.push(`${where}: an unknown operation has completedAt null`);
      }
    } else if (op.outcome !== "fail") {
      problems.push(`${where}.outcome must be ok, fail or unknown`);
    }
    if (input.f === "bind") {
      if (typeof input.url !== "string" || typeof input.id !== "string") {
        problems.push(`${where}: a bind needs id and url strings`);
      } else if (urls.has(input.url)) {
        problems.push(
          `${where}: bind url ${input.url} is also operations[${
            urls.get(input.url)
          }]'s; every bind needs its own url`,
        );
      } else urls.set(input.url, i);
    }
  });
  (h.finalIndexes as unknown[]).forEach((index, i) => {
    const op = operations[index as number] as
      | { input?: { f?: string } }
      | undefined;
    if (!Number.isInteger(index) || op?.input?.f !== "lookup") {
      problems.push(
        `finalIndexes[${i}] (${index}) is not the index of a lookup`,
      );
    }
  });
  (h.watches as unknown[]).forEach((raw, i) => {
    const log = raw as Record<string, unknown> | null;
    if (
      typeof log !== "object" || log === null || !Array.isArray(log.records) ||
      typeof log.prefix !== "string"
    ) {
      problems.push(`watches[${i}] needs prefix and records`);
    }
  });
  return problems.slice(0, 50);
}
