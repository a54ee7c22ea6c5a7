/**
 * Data-driven scenarios of the Raft core, in the manner of etcd raft's
 * `interaction_test.go`: every `testdata/*.txt` is a story of commands run
 * on one {@link RaftHarness}, each followed by `----` and the output it must
 * give (the messages it sent or delivered, the role, term and commit changes
 * it caused, or what it was asked to show). A script fails at the first
 * command whose output differs. Rewrite the expected outputs with
 *
 * ```sh
 * deno test -A raft/interaction_test.ts -- --update
 * ```
 *
 * and read the diff before committing it.
 *
 * Commands (nodes are `n1`..`nN`; `drop(k=v,...)` drops the messages that
 * match every condition, keys `from`, `to`, `type`, `has` (an append that
 * carries that index), `k!=v` negates one):
 * - `add-nodes N [learners=n4,n5] [log-nX=1,1,2] [term-nX=T] [commit-nX=C]
 *   [pre-vote=false] [check-quorum=false] [max-entries-per-append=N]
 *   [max-inflight-appends=N] [snapshot-chunk-chars=N]`: the cluster.
 * - `start-joining nX`: a node that waits to be added.
 * - `campaign nX`, `tick nX [times]` (no delivery), `tick-deliver nX times
 *   [drop(...)]` (deliver everything after each tick; prints the changes).
 * - `deliver-msgs [nX ...] [drop(...)]`: one hop of the queued messages (to
 *   the given nodes only; the rest stay queued), `stabilize [drop(...)]`:
 *   hops until the queue is empty, `drop-msgs [nX ...]`: forgets queued
 *   messages (to the given nodes).
 * - `cut nX ...` / `heal`: drop every message to or from those nodes in
 *   every later delivery, until `heal`.
 * - `send nX->nY vote|preVote term=T last=I/T` and `send nX->nY append
 *   term=T prev=I/T commit=C [entries=I/T,...]`: steps a hand-made message
 *   into nY (entries carry the data `forged`).
 * - `propose nX data`, `conf-change nX addLearner|addVoter|promote|remove
 *   nY`, `transfer-leadership nX [nY]`, `read-index nX context`.
 * - `crash nX`, `restart nX`, `snapshot nX [compactTo]`.
 * - `status [nX ...]`, `log nX`, `applied nX`, `config nX`, `progress nX`,
 *   `read-states nX`, `disk nX`, `anomalies nX` (the non-zero counters of
 *   dropped and impossible messages, `RaftCoreStats`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { RaftHarness } from "../testing/raft_harness.ts";
import type { RaftCoreConfig } from "./core.ts";
import type { ConfChange } from "./configuration.ts";
import type { Entry, HardState, Message, NodeId } from "./types.ts";

const UPDATE = Deno.args.includes("--update");
const DIR = new URL("./testdata/", import.meta.url);

/** One command of a script, with the output it must give. */
interface Step {
  /** Comment lines before the command, kept on rewrite. */
  comments: string[];
  command: string;
  expected: string[];
  /** 1-based line of the command in the file. */
  line: number;
}

/** Parses a script: blocks of comments, a command, `----`, output lines. */
export function parseScript(text: string): Step[] {
  const lines = text.split("\n");
  const steps: Step[] = [];
  let comments: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      comments.push(line);
      continue;
    }
    const step: Step = { comments, command: line, expected: [], line: i + 1 };
    comments = [];
    if (lines[i + 1] !== "----") {
      throw new Error(`line ${i + 2}: "----" expected after the command`);
    }
    for (i += 2; i < lines.length && lines[i] !== ""; i++) {
      step.expected.push(lines[i]);
    }
    steps.push(step);
  }
  return steps;
}

/** Writes steps back in the script form, with their (new) outputs. */
function formatScript(steps: Step[], outputs: string[][]): string {
  return steps.map((step, i) =>
    [...step.comments, step.command, "----", ...outputs[i]].join("\n") + "\n"
  ).join("\n");
}

// --- how things print ---------------------------------------------------------

const point = (index: number, term: number) => `${index}/${term}`;

function entryText(e: Entry): string {
  const kind = e.type === "config"
    ? ` config ${e.data}`
    : e.data === ""
    ? ""
    : ` ${JSON.stringify(e.data)}`;
  return `${point(e.index, e.term)}${kind}`;
}

/** One line per message: `from->to type term=T fields`. */
export function messageText(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} term=${m.term}`;
  switch (m.type) {
    case "vote":
    case "preVote":
      return `${head} last=${point(m.lastLogIndex, m.lastLogTerm)}${
        m.type === "vote" && m.transfer ? " transfer" : ""
      }`;
    case "voteResponse":
    case "preVoteResponse":
      return `${head} ${m.granted ? "granted" : "rejected"}`;
    case "append":
      return `${head} prev=${
        point(m.prevLogIndex, m.prevLogTerm)
      } commit=${m.commit} entries=[${m.entries.map(entryText).join(", ")}]${
        m.context === undefined ? "" : ` context=${m.context}`
      }`;
    case "appendResponse":
      return `${head} ${m.success ? "ok" : "reject"} index=${m.index}${
        m.success ? "" : ` conflict=${point(m.conflictIndex, m.conflictTerm)}`
      }${m.context === undefined ? "" : ` context=${m.context}`}`;
    case "installSnapshot":
      return `${head} snapshot=${
        point(m.snapshot.index, m.snapshot.term)
      } offset=${m.offset} data=${JSON.stringify(m.data)}${
        m.done ? " done" : ""
      }`;
    case "installSnapshotResponse":
      return `${head} snapshot=${m.snapshotIndex} offset=${m.offset} ${
        m.success ? "ok" : "reject"
      }`;
    case "readIndex":
      return `${head} context=${m.context}`;
    case "readIndexResponse":
      return `${head} context=${m.context} index=${m.index}`;
    case "timeoutNow":
      return head;
  }
}

/** What a node's state looks like, for change lines and `status`. */
function stateOf(c: RaftHarness, id: NodeId): string {
  if (c.down.has(id)) return "down";
  const core = c.core(id);
  const role = core.preCandidate ? "pre-candidate" : core.role;
  return `${role} term=${core.term} lead=${core.leader ?? "-"}`;
}

function commitOf(c: RaftHarness, id: NodeId): number | null {
  return c.down.has(id) ? null : c.core(id).commitIndex;
}

// --- message filters ----------------------------------------------------------

type Filter = (m: Message) => boolean;

/** Parses `drop(k=v,k!=v)` into a predicate that is true for a dropped message. */
function dropRule(token: string): Filter {
  const body = token.slice("drop(".length, -1);
  const conditions = body.split(",").map((part) => {
    const negated = part.includes("!=");
    const [key, value] = part.split(negated ? "!=" : "=");
    const test = (m: Message): boolean => {
      switch (key) {
        case "from":
          return m.from === value;
        case "to":
          return m.to === value;
        case "type":
          return m.type === value;
        case "has":
          return m.type === "append" &&
            m.entries.some((e) => e.index === Number(value));
        default:
          throw new Error(`unknown drop key ${key}`);
      }
    };
    return negated ? (m: Message) => !test(m) : test;
  });
  return (m) => conditions.every((test) => test(m));
}

// --- the runner ---------------------------------------------------------------

class Interaction {
  c: RaftHarness | null = null;
  /** Nodes cut off by `cut`. */
  readonly cut = new Set<NodeId>();

  get harness(): RaftHarness {
    assert.ok(this.c !== null, "add-nodes first");
    return this.c;
  }

  /** Runs one command; @returns its output lines. */
  run(command: string): string[] {
    const [name, ...rest] = command.split(/\s+/);
    const drops = rest.filter((t) => t.startsWith("drop(")).map(dropRule);
    const options = new Map<string, string>();
    const args: string[] = [];
    for (const token of rest) {
      if (token.startsWith("drop(")) continue;
      const eq = token.indexOf("=");
      if (eq > 0) options.set(token.slice(0, eq), token.slice(eq + 1));
      else args.push(token);
    }
    const keep: Filter = (m) =>
      !this.cut.has(m.from) && !this.cut.has(m.to) &&
      !drops.some((drop) => drop(m));
    if (name === "add-nodes") return this.#addNodes(Number(args[0]), options);
    const c = this.harness;
    const before = new Map(
      c.ids.map((id) => [id, [stateOf(c, id), commitOf(c, id)] as const]),
    );
    const out: string[] = [];
    try {
      out.push(...this.#command(name, args, options, keep));
    } catch (error) {
      const e = error as Error;
      out.push(`error: ${e.name}: ${e.message}`);
    }
    // The changes the command caused, node by node.
    if (!SHOWS.has(name)) {
      for (const id of c.ids) {
        const [state, commit] = before.get(id) ?? ["new", null];
        const now = stateOf(c, id);
        if (now !== state) out.push(`${id}: ${state} -> ${now}`);
        const nowCommit = commitOf(c, id);
        if (nowCommit !== null && commit !== null && nowCommit !== commit) {
          out.push(`${id}: commit ${commit} -> ${nowCommit}`);
        }
      }
    }
    return out.length === 0 ? ["ok"] : out;
  }

  #addNodes(size: number, options: Map<string, string>): string[] {
    const config: Partial<RaftCoreConfig> = {};
    const numbers = {
      "max-entries-per-append": "maxEntriesPerAppend",
      "max-inflight-appends": "maxInflightAppends",
      "snapshot-chunk-chars": "snapshotChunkChars",
      "election-ticks": "electionTicks",
      "heartbeat-ticks": "heartbeatTicks",
    } as const;
    const initial: Record<NodeId, { entries: Entry[]; hardState: HardState }> =
      {};
    const disk = (id: NodeId) =>
      initial[id] ??= {
        entries: [],
        hardState: { term: 0, vote: null, commit: 0 },
      };
    let learners: NodeId[] = [];
    for (const [key, value] of options) {
      if (key in numbers) {
        config[numbers[key as keyof typeof numbers]] = Number(value);
      } else if (key === "pre-vote") config.preVote = value === "true";
      else if (key === "check-quorum") config.checkQuorum = value === "true";
      else if (key === "learners") learners = value.split(",");
      else if (key.startsWith("log-")) {
        const id = key.slice(4);
        disk(id).entries = value.split(",").map((t, i) => ({
          index: i + 1,
          term: Number(t),
          data: `${i + 1}@${t}`,
        }));
      } else if (key.startsWith("term-")) {
        disk(key.slice(5)).hardState.term = Number(value);
      } else if (key.startsWith("commit-")) {
        disk(key.slice(7)).hardState.commit = Number(value);
      } else throw new Error(`unknown add-nodes option ${key}`);
    }
    const voters = Array.from({ length: size }, (_, i) => `n${i + 1}`);
    this.c = new RaftHarness({ voters, learners }, config, initial);
    return this.c.ids.map((id) => `${id}: ${statusLine(this.c!, id)}`);
  }

  #command(
    name: string,
    args: string[],
    options: Map<string, string>,
    keep: Filter,
  ): string[] {
    const c = this.harness;
    const node = () => {
      assert.ok(args[0] !== undefined, `${name} needs a node`);
      return args[0];
    };
    const sent = (run: () => void): string[] => {
      const queued = c.queue.length;
      run();
      c.flush();
      return c.queue.slice(queued).map(messageText);
    };
    /** Runs a proposal; @returns where it went, then what was sent. */
    const proposed = (
      propose: () => { index: number; term: number },
    ): string[] => {
      let at = "";
      const out = sent(() => {
        const { index, term } = propose();
        at = `proposed at ${point(index, term)}`;
      });
      return [at, ...out];
    };
    switch (name) {
      case "start-joining":
        c.startJoining(node());
        return [`${node()}: ${statusLine(c, node())}`];
      case "campaign":
        return sent(() => c.core(node()).campaign());
      case "tick": {
        const times = Number(args[1] ?? 1);
        return sent(() => {
          for (let i = 0; i < times; i++) c.core(node()).tick();
        });
      }
      case "tick-deliver": {
        const out: string[] = [];
        for (let i = 0; i < Number(args[1] ?? 1); i++) {
          c.core(node()).tick();
          out.push(...this.#stabilize(keep));
        }
        return out;
      }
      case "deliver-msgs": {
        c.flush();
        const to = new Set(args);
        const batch = c.queue.filter((m) => to.size === 0 || to.has(m.to));
        c.queue = c.queue.filter((m) => !(to.size === 0 || to.has(m.to)));
        return this.#deliver(batch, keep);
      }
      case "stabilize":
        return this.#stabilize(keep);
      case "drop-msgs": {
        c.flush();
        const to = new Set(args);
        const dropped = c.queue.filter((m) => to.size === 0 || to.has(m.to));
        c.queue = c.queue.filter((m) => !(to.size === 0 || to.has(m.to)));
        return dropped.map((m) => `dropped ${messageText(m)}`);
      }
      case "send": {
        const [from, to] = args[0].split("->");
        const pair = (key: string) =>
          (options.get(key) ?? "0/0").split("/").map(Number);
        const term = Number(options.get("term"));
        let message: Message;
        if (args[1] === "vote" || args[1] === "preVote") {
          const [lastLogIndex, lastLogTerm] = pair("last");
          message = {
            type: args[1],
            from,
            to,
            term,
            lastLogIndex,
            lastLogTerm,
          };
        } else if (args[1] === "append") {
          const [prevLogIndex, prevLogTerm] = pair("prev");
          message = {
            type: "append",
            from,
            to,
            term,
            prevLogIndex,
            prevLogTerm,
            entries: (options.get("entries") ?? "").split(",")
              .filter((item) => item !== "").map((item) => {
                const [index, term] = item.split("/").map(Number);
                return { index, term, data: "forged" };
              }),
            commit: Number(options.get("commit") ?? 0),
          };
        } else throw new Error(`send cannot build ${args[1]}`);
        return sent(() => c.core(to).step(message));
      }
      case "cut":
        for (const id of args) this.cut.add(id);
        return [];
      case "heal":
        this.cut.clear();
        return [];
      case "propose":
        return proposed(() => c.core(node()).propose(args.slice(1).join(" ")));
      case "conf-change": {
        const change = { type: args[1], node: args[2] } as ConfChange;
        return proposed(() => c.core(node()).proposeConfChange(change));
      }
      case "transfer-leadership": {
        let target = "";
        const out = sent(() => {
          target = c.core(node()).transferLeadership(args[1]);
        });
        return [`transferring to ${target}`, ...out];
      }
      case "read-index": {
        // Whether the request left anything to do (a dropped one does not).
        let ready = false;
        const out = sent(() => {
          c.core(node()).readIndex(args[1]);
          ready = c.core(node()).hasReady();
        });
        return [`has ready: ${ready}`, ...out];
      }
      case "crash":
        c.crash(node(), { dropSent: options.get("drop-sent") === "true" });
        return [];
      case "restart":
        c.restart(node());
        return [];
      case "snapshot": {
        const compactTo = args[1] === undefined ? undefined : Number(args[1]);
        const taken = c.snapshot(node(), compactTo);
        return [
          `snapshot ${point(taken.index, taken.term)} data=${taken.data}`,
          `log from ${c.core(node()).snapshotPoint.index + 1}`,
        ];
      }
      case "anomalies": {
        const stats = c.core(node()).stats;
        const counts: Record<string, number> = {
          droppedNotMember: stats.droppedNotMember,
          droppedMisaddressed: stats.droppedMisaddressed,
          droppedStale: stats.droppedStale,
          ...stats.anomalies,
        };
        const out = Object.entries(counts).filter(([, n]) => n > 0)
          .map(([name, n]) => `${name}=${n}`);
        return out.length === 0 ? ["none"] : [out.join(" ")];
      }
      case "status":
        return (args.length > 0 ? args : c.ids).map((id) =>
          `${id}: ${statusLine(c, id)}`
        );
      case "log": {
        const core = c.core(node());
        const first = core.snapshotPoint.index + 1;
        const out: string[] = [];
        if (first > 1) {
          out.push(
            `snapshot ${
              point(core.snapshotPoint.index, core.snapshotPoint.term)
            }`,
          );
        }
        for (let i = first; i <= core.lastIndex; i++) {
          out.push(entryText(core.entryAt(i)!));
        }
        return out.length === 0 ? ["empty"] : out;
      }
      case "disk": {
        const disk = c.disks.get(node())!;
        const hs = disk.hardState;
        return [
          `hard state: ${
            hs === undefined
              ? "none"
              : `term=${hs.term} vote=${hs.vote ?? "-"} commit=${hs.commit}`
          }`,
          `snapshot: ${
            disk.snapshot === undefined
              ? "none"
              : point(disk.snapshot.index, disk.snapshot.term)
          }`,
          `entries: ${disk.entries.map(entryText).join(", ") || "none"}`,
        ];
      }
      case "applied": {
        const machine = c.machines.get(node())!;
        return [
          `index=${machine.index} data=${JSON.stringify(machine.data)}`,
          `entries: ${
            c.applied.get(node())!.map(entryText).join(", ") || "none"
          }`,
        ];
      }
      case "config": {
        const config = c.core(node()).configuration;
        return [
          `voters=${config.voters.join(",")} learners=${
            config.learners.join(",") || "-"
          }`,
        ];
      }
      case "progress":
        return [...c.core(node()).progress()].map(([peer, p]) =>
          `${peer}: ${JSON.stringify(p)}`
        );
      case "read-states": {
        const states = c.readStates.get(node())!;
        return states.length === 0
          ? ["none"]
          : states.map((r) => `context=${r.context} index=${r.index}`);
      }
      default:
        throw new Error(`unknown command ${name}`);
    }
  }

  /** Delivers hop after hop until no message is left. */
  #stabilize(keep: Filter): string[] {
    const c = this.harness;
    const out: string[] = [];
    for (let round = 0; round < 1000; round++) {
      c.flush();
      if (c.queue.length === 0) return out;
      const batch = c.queue;
      c.queue = [];
      out.push(...this.#deliver(batch, keep));
    }
    throw new Error("messages never stopped flowing");
  }

  /** Delivers `batch` one hop: each kept message is stepped, then all flush. */
  #deliver(batch: Message[], keep: Filter): string[] {
    const c = this.harness;
    const out: string[] = [];
    for (const m of batch) {
      if (c.down.has(m.to) || !c.cores.has(m.to)) {
        out.push(`lost ${messageText(m)}`);
      } else if (!keep(m)) out.push(`dropped ${messageText(m)}`);
      else {
        out.push(messageText(m));
        c.cores.get(m.to)!.step(m);
      }
    }
    c.flush();
    return out;
  }
}

/** Commands that only show state (no change lines after them). */
const SHOWS = new Set([
  "status",
  "log",
  "disk",
  "applied",
  "config",
  "progress",
  "read-states",
]);

function statusLine(c: RaftHarness, id: NodeId): string {
  if (c.down.has(id)) return "down";
  const core = c.core(id);
  const transferee = core.transferee === null
    ? ""
    : ` transferee=${core.transferee}`;
  return `${stateOf(c, id)} commit=${core.commitIndex} last=${
    point(core.lastIndex, core.lastIndex === 0 ? 0 : termAt(c, id))
  } applied=${c.machines.get(id)!.index}${transferee}`;
}

function termAt(c: RaftHarness, id: NodeId): number {
  const core = c.core(id);
  return core.lastIndex === core.snapshotPoint.index
    ? core.snapshotPoint.term
    : core.entryAt(core.lastIndex)!.term;
}

// --- the tests ----------------------------------------------------------------

const scripts = [...Deno.readDirSync(DIR)]
  .filter((e) => e.isFile && e.name.endsWith(".txt"))
  .map((e) => e.name)
  .sort();

for (const name of scripts) {
  Deno.test(`interaction: ${name}`, () => {
    const url = new URL(name, DIR);
    const steps = parseScript(Deno.readTextFileSync(url));
    const interaction = new Interaction();
    const outputs: string[][] = [];
    for (const step of steps) {
      const output = interaction.run(step.command);
      outputs.push(output);
      if (!UPDATE) {
        assert.equal(
          output.join("\n"),
          step.expected.join("\n"),
          `${name}:${step.line}: ${step.command} (if the new output is ` +
            "right, rewrite the scripts: deno test -A raft/interaction_test.ts -- --update)",
        );
      }
    }
    if (UPDATE) Deno.writeTextFileSync(url, formatScript(steps, outputs));
  });
}
