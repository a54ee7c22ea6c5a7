/**
 * Figures of a chaos run for `RESULTS.md`: operations by kind and outcome,
 * faults by kind, and availability per fault kind, measured as etcd's
 * robustness suite and Jepsen report it: the time with no acknowledged
 * write. For each fault, the longest stretch inside it (and until the
 * first acknowledged write after its heal) in which no write completed ok.
 *
 * @module
 */

import type { History, Operation } from "./history.ts";
import type { FaultRecord } from "./nemesis.ts";

/** Availability under one kind of fault. */
export interface FaultKindFigures {
  kind: string;
  count: number;
  /** Total time under this fault, ms. */
  totalMs: number;
  /** Longest time with no acknowledged write, over its faults, ms. */
  maxUnavailableMs: number;
  /** Median over its faults of each fault's longest write gap, ms. */
  medianUnavailableMs: number;
  /** Longest time from a heal to the next acknowledged write, ms. */
  maxRecoveryMs: number;
}

/** The figures of a run. */
export interface RunFigures {
  durationMs: number;
  operations: number;
  byOutcome: Record<string, number>;
  byKind: Record<string, Record<string, number>>;
  faults: FaultKindFigures[];
  /** Acknowledged writes per second over the whole run. */
  writesPerSecond: number;
}

function isWrite(op: Operation): boolean {
  return op.input.f !== "lookup";
}

/** The run's figures from its history and faults. */
export function runFigures(
  history: History,
  faults: readonly FaultRecord[],
): RunFigures {
  const byOutcome: Record<string, number> = {};
  const byKind: Record<string, Record<string, number>> = {};
  for (const op of history.operations) {
    byOutcome[op.outcome] = (byOutcome[op.outcome] ?? 0) + 1;
    const kind = (byKind[op.input.f] ??= {});
    kind[op.outcome] = (kind[op.outcome] ?? 0) + 1;
  }
  const acks = history.operations
    .filter((op) => isWrite(op) && op.outcome === "ok")
    .map((op) => op.completedAt!)
    .sort((a, b) => a - b);
  const first = history.operations[0]?.invokedAt ?? 0;
  const last = Math.max(
    first,
    ...history.operations.map((op) => op.completedAt ?? op.invokedAt),
  );
  const kinds = new Map<string, FaultRecord[]>();
  for (const fault of faults) {
    const list = kinds.get(fault.kind) ?? [];
    list.push(fault);
    kinds.set(fault.kind, list);
  }
  const figures: FaultKindFigures[] = [];
  for (const [kind, list] of kinds) {
    const gaps: number[] = [];
    let recovery = 0;
    let total = 0;
    for (const fault of list) {
      const end = fault.healedAt ?? last;
      total += end - fault.startedAt;
      const afterHeal = nextAck(acks, end);
      const windowEnd = afterHeal ?? last;
      gaps.push(longestGap(acks, fault.startedAt, windowEnd));
      recovery = Math.max(recovery, (afterHeal ?? last) - end);
    }
    gaps.sort((a, b) => a - b);
    figures.push({
      kind,
      count: list.length,
      totalMs: total,
      maxUnavailableMs: gaps.at(-1) ?? 0,
      medianUnavailableMs: gaps[Math.floor(gaps.length / 2)] ?? 0,
      maxRecoveryMs: recovery,
    });
  }
  figures.sort((a, b) => a.kind.localeCompare(b.kind));
  const durationMs = last - first;
  return {
    durationMs,
    operations: history.operations.length,
    byOutcome,
    byKind,
    faults: figures,
    writesPerSecond: durationMs > 0 ? acks.length / (durationMs / 1000) : 0,
  };
}

/** The first acknowledgement at or after `at`, or null. */
function nextAck(acks: readonly number[], at: number): number | null {
  let lo = 0;
  let hi = acks.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (acks[mid] < at) lo = mid + 1;
    else hi = mid;
  }
  return lo < acks.length ? acks[lo] : null;
}

/** Longest stretch of [from, to] with no acknowledgement in it, ms. */
export function longestGap(
  acks: readonly number[],
  from: number,
  to: number,
): number {
  let previous = from;
  let gap = 0;
  for (const at of acks) {
    if (at < from) continue;
    if (at > to) break;
    gap = Math.max(gap, at - previous);
    previous = at;
  }
  return Math.max(gap, to - previous);
}

/** The figures as Markdown tables. */
export function formatFigures(figures: RunFigures): string {
  const lines: string[] = [];
  lines.push(
    `${figures.operations} operations in ${
      (figures.durationMs / 1000).toFixed(1)
    } s (${
      figures.writesPerSecond.toFixed(0)
    } acknowledged writes/s); outcomes: ${
      Object.entries(figures.byOutcome).map(([k, v]) => `${k} ${v}`).join(", ")
    }`,
  );
  lines.push("");
  lines.push("| operation | ok | fail | unknown |");
  lines.push("|---|---:|---:|---:|");
  for (const [kind, counts] of Object.entries(figures.byKind).sort()) {
    lines.push(
      `| ${kind} | ${counts.ok ?? 0} | ${counts.fail ?? 0} | ${
        counts.unknown ?? 0
      } |`,
    );
  }
  lines.push("");
  lines.push(
    "| fault | count | time under it | longest time without an acknowledged write (median / max) | heal → next acknowledged write (max) |",
  );
  lines.push("|---|---:|---:|---:|---:|");
  for (const fault of figures.faults) {
    lines.push(
      `| ${fault.kind} | ${fault.count} | ${
        (fault.totalMs / 1000).toFixed(1)
      } s | ${ms(fault.medianUnavailableMs)} / ${
        ms(fault.maxUnavailableMs)
      } | ${ms(fault.maxRecoveryMs)} |`,
    );
  }
  return lines.join("\n");
}

/** A duration for the tables: ms below a second, else seconds. */
export function ms(value: number): string {
  return value >= 1000
    ? `${(value / 1000).toFixed(2)} s`
    : `${value.toFixed(0)} ms`;
}
