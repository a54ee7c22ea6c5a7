/**
 * A {@link RaftNetwork} that sends a leader's bare heartbeats one event-loop
 * turn later (private to `node.ts`, apart for its tests).
 *
 * @module
 */

import type { RaftNetwork } from "./driver.ts";
import type { Message } from "./types.ts";

/**
 * Wraps `network` so that bare heartbeats (appends without entries and
 * without a ReadIndex context: the commit announcement right after a
 * commit, and the ticks' heartbeats) leave after the current turn of the
 * event loop (a `setTimeout(0)`), once the microtasks that answer the
 * clients whose writes just committed have written those answers. Sent
 * at once, they woke the followers (and their answers this node) just
 * when the client's answer was to be written and read, on a machine with
 * few cores. Every other message is sent at once, after the heartbeats
 * still held (so the order of messages to a peer is kept). A heartbeat
 * only tells a follower the commit index; a turn's delay is harmless
 * (Raft dissertation §3.5: followers learn the commit index from the next
 * AppendEntries, whenever it comes).
 *
 * @returns the wrapped network and `close()`, which drops held heartbeats.
 */
export function answersFirst(
  network: RaftNetwork,
): RaftNetwork & { close(): void } {
  let held: Message[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const release = () => {
    clearTimeout(timer);
    timer = undefined;
    const messages = held;
    held = [];
    if (messages.length > 0) network.send(messages);
  };
  return {
    send(messages) {
      if (messages.length === 0) return;
      if (messages.every(isBareHeartbeat)) {
        held.push(...messages);
        timer ??= setTimeout(release, 0);
        return;
      }
      release();
      network.send(messages);
    },
    close() {
      clearTimeout(timer);
      timer = undefined;
      held = [];
    },
  };
}

function isBareHeartbeat(message: Message): boolean {
  return message.type === "append" && message.entries.length === 0 &&
    message.context === undefined;
}
