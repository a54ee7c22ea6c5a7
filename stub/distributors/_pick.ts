/**
 * Helpers the built-in distributors share (not part of the public API).
 *
 * @module
 */

/**
 * A round-robin cursor: each call gives the next position modulo `size`,
 * starting at `start` (any number is a position: -1 is the last, 1.5 is 1,
 * NaN is 0). Without `start`, a random one, so that many clients do not
 * all begin on the same server (as gRPC's round_robin policy does).
 */
export function cursor(start?: number): (size: number) => number {
  const first = start ?? Math.floor(Math.random() * 1024);
  let next = Number.isFinite(first) ? Math.trunc(first) : 0;
  return (size) => {
    const position = ((next % size) + size) % size;
    next = (next + 1) % Number.MAX_SAFE_INTEGER;
    return position;
  };
}
