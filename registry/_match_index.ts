/**
 * The leader's view of how far each follower's log matches its own (Raft
 * paper §5.3 matchIndex), read off the successful append responses the
 * leader receives, for `registry.memberList`. It watches the messages on
 * their way into the Raft node and changes nothing.
 *
 * @module
 */

import type { Message } from "../raft/types.ts";

/**
 * Highest acknowledged index per follower, per term: a follower's
 * successful `appendResponse` carries the last index in agreement with the
 * leader's log, which only grows within a leader's term (a new term starts
 * from nothing known, as the leader's own progress does).
 *
 * @example
 * ```ts
 * import { MatchIndex } from "./_match_index.ts";
 * const match = new MatchIndex("n1");
 * match.observe([{ type: "appendResponse", from: "n2", to: "n1", term: 3, success: true, index: 7, conflictTerm: 0, conflictIndex: 0 }]);
 * console.log(match.of("n2", 3), match.of("n2", 4)); // 7 null
 * ```
 */
export class MatchIndex {
  readonly #self: string;
  readonly #matches = new Map<string, { term: number; index: number }>();

  /** @param self this node's id: only responses sent to it count. */
  constructor(self: string) {
    this.#self = self;
  }

  /** Notes the successful append responses among `messages`. */
  observe(messages: readonly Message[]): void {
    for (const message of messages) {
      if (
        message.type !== "appendResponse" || !message.success ||
        message.to !== this.#self
      ) {
        continue;
      }
      const known = this.#matches.get(message.from);
      if (known === undefined || known.term !== message.term) {
        this.#matches.set(message.from, {
          term: message.term,
          index: message.index,
        });
      } else if (message.index > known.index) {
        known.index = message.index;
      }
    }
  }

  /**
   * The highest index `peer` acknowledged in `term`, or null when it has
   * acknowledged no append of that term.
   */
  of(peer: string, term: number): number | null {
    const known = this.#matches.get(peer);
    return known === undefined || known.term !== term ? null : known.index;
  }
}
