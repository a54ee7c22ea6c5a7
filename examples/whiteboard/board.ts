/**
 * The whiteboard's replicated state (the fault-tolerant RMI paper's shared
 * whiteboard, on Raft): the strokes drawn, in the order the log committed
 * them. `stroke` and `clear` are writes, `strokes` a linearizable read.
 * Each replica is told of every stroke and clear it applies (to push them
 * to its web pages), in log order.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { StateMachine } from "../../replicated/mod.ts";
 * import { whiteboard } from "./board.ts";
 * const seen: string[] = [];
 * const machine = new StateMachine(whiteboard((change) => seen.push(change.kind)));
 * const points = [[0, 0], [10, 10]];
 * machine.apply(StateMachine.encode("stroke", [{ points, color: "#d00" }]));
 * assert.equal((machine.read("strokes", []) as unknown[]).length, 1);
 * machine.apply(StateMachine.encode("clear", []));
 * assert.deepEqual(machine.read("strokes", []), []);
 * assert.deepEqual(seen, ["stroke", "clear"]);
 * ```
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import type { ServiceDefinition } from "../../replicated/mod.ts";

/** One stroke: points on the 800 × 500 board, and a CSS colour. */
export interface Stroke {
  /** Its place in the board's history, from 1. */
  seq: number;
  points: [number, number][];
  color: string;
}

/** The board: its strokes, and how many strokes were ever drawn. */
export interface Board {
  strokes: Stroke[];
  drawn: number;
}

/** A change a replica applied, for its pages. */
export type BoardChange =
  | { kind: "stroke"; stroke: Stroke }
  | { kind: "clear" }
  | { kind: "reset"; board: Board };

/** The whiteboard service as a stub sees it. */
export interface WhiteboardService {
  stroke(
    p: { points: [number, number][]; color?: string; requestId?: string },
  ): number;
  clear(p?: { requestId?: string }): number;
  strokes(): Stroke[];
}

const MAX_POINTS = 2_000;
const MAX_STROKES = 10_000;

function pointsOf(value: unknown): [number, number][] {
  if (
    !Array.isArray(value) || value.length === 0 || value.length > MAX_POINTS ||
    !value.every((p) =>
      Array.isArray(p) && p.length === 2 &&
      p.every((c) =>
        typeof c === "number" && Number.isFinite(c) && c >= 0 && c <= 10_000
      )
    )
  ) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: points must be 1 to ${MAX_POINTS} [x, y] pairs of numbers in 0..10000`,
    );
  }
  return value.map(([x, y]) => [Math.round(x), Math.round(y)]);
}

/** The whiteboard's definition; `onChange` hears each applied change. */
export function whiteboard(
  onChange: (change: BoardChange) => void = () => {},
): ServiceDefinition<Board> {
  return {
    initial: () => ({ strokes: [], drawn: 0 }),
    writes: {
      stroke(board, params: { points?: unknown; color?: unknown } = {}) {
        const points = pointsOf(params.points);
        const color = typeof params.color === "string" &&
            /^#[0-9a-fA-F]{3,8}$/.test(params.color)
          ? params.color
          : "#222";
        if (board.strokes.length >= MAX_STROKES) {
          throw new RpcError(
            INVALID_PARAMS,
            `the board holds ${MAX_STROKES} strokes: clear it first`,
          );
        }
        const stroke: Stroke = { seq: ++board.drawn, points, color };
        board.strokes.push(stroke);
        onChange({ kind: "stroke", stroke });
        return stroke.seq;
      },
      clear(board) {
        board.strokes = [];
        onChange({ kind: "clear" });
        return board.drawn;
      },
    },
    reads: {
      strokes: (board) => board.strokes,
    },
    // A snapshot from the leader (this replica was far behind): the pages
    // start over from it.
    restore(value) {
      const board = value as Board;
      onChange({ kind: "reset", board });
      return board;
    },
  };
}
