/**
 * What every check of the checker reports: violations, each naming its
 * check, its kind, the operations involved, and readable lines.
 *
 * @module
 */

/** One thing a check found wrong. */
export interface Violation {
  /** The check: `linearizability`, `watch`, `revisions`, `leases`. */
  check: string;
  /** What kind of violation (`stale-read`, `gap`, `duplicate`, …). */
  kind: string;
  /** One sentence: what is wrong. */
  message: string;
  /** The registry name concerned, when there is one. */
  name?: string;
  /** Indexes of the history operations involved. */
  operations?: number[];
  /**
   * A shrunk witness's operations taken as unknown (they may or may not
   * have happened; the witness needs them only as possibilities).
   */
  relaxed?: number[];
  /** Details: a shrunk sub-history, events, one per line. */
  lines?: string[];
}

/** The result of one check. */
export interface CheckResult {
  /** The check's name. */
  check: string;
  /** `ok`: nothing wrong; `violation`: see `violations`; `unknown`: could not decide. */
  status: "ok" | "violation" | "unknown";
  /** What was wrong (at most {@link MAX_LISTED} of each kind). */
  violations: Violation[];
  /** Violations found, by kind, including those not listed. */
  counts: Record<string, number>;
  /** Why something could not be decided, and what was not checked. */
  notes: string[];
}

/** Most violations of one kind listed in full; the rest are counted. */
export const MAX_LISTED = 20;

/** Collects the violations of one check. */
export class Findings {
  readonly check: string;
  readonly violations: Violation[] = [];
  readonly counts: Record<string, number> = {};
  readonly notes: string[] = [];
  unknown = false;

  constructor(check: string) {
    this.check = check;
  }

  /** Records one violation. */
  add(
    kind: string,
    message: string,
    extra: Omit<Violation, "check" | "kind" | "message"> = {},
  ): void {
    const seen = (this.counts[kind] ?? 0) + 1;
    this.counts[kind] = seen;
    if (seen <= MAX_LISTED) {
      this.violations.push({ check: this.check, kind, message, ...extra });
    }
  }

  /** Records something that could not be checked. */
  note(text: string, undecided = false): void {
    this.notes.push(text);
    if (undecided) this.unknown = true;
  }

  /** The result. */
  result(): CheckResult {
    const status = Object.keys(this.counts).length > 0
      ? "violation"
      : this.unknown
      ? "unknown"
      : "ok";
    return {
      check: this.check,
      status,
      violations: this.violations,
      counts: this.counts,
      notes: this.notes,
    };
  }
}
