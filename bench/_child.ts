/**
 * A child process of a bench script (private to `bench/`), talked to in
 * lines: commands written to its stdin, answers read from its stdout one
 * line at a time, its stderr kept (the last lines) for error messages.
 * Closing its stdin asks it to exit; {@linkcode Child.stop} then kills it
 * by its PID if it has not.
 *
 * @module
 */

const encoder = new TextEncoder();

/** A started child process. */
export class Child {
  /** What the bench calls it in messages. */
  readonly name: string;
  readonly pid: number;
  readonly #process: Deno.ChildProcess;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: string[] = [];
  readonly #stderr: string[] = [];
  #wake: (() => void) | null = null;
  #exited = false;
  readonly #status: Promise<Deno.CommandStatus>;

  /** Starts `command args…` in `cwd` with stdin, stdout and stderr piped. */
  constructor(name: string, command: string, args: string[], cwd?: string) {
    this.name = name;
    this.#process = new Deno.Command(command, {
      args,
      cwd,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.pid = this.#process.pid;
    this.#stdin = this.#process.stdin.getWriter();
    this.#read(this.#process.stdout, (line) => {
      this.#lines.push(line);
      this.#wake?.();
    });
    this.#read(this.#process.stderr, (line) => {
      this.#stderr.push(line);
      if (this.#stderr.length > 20) this.#stderr.shift();
    });
    this.#status = this.#process.status.then((status) => {
      this.#exited = true;
      this.#wake?.();
      return status;
    });
  }

  async #read(
    stream: ReadableStream<Uint8Array>,
    onLine: (line: string) => void,
  ): Promise<void> {
    let rest = "";
    try {
      for await (const text of stream.pipeThrough(new TextDecoderStream())) {
        const parts = (rest + text).split("\n");
        rest = parts.pop()!;
        parts.forEach(onLine);
      }
    } catch {
      // The process went away.
    }
    if (rest !== "") onLine(rest);
  }

  /** The last lines it wrote to stderr, for an error message. */
  stderrTail(): string {
    return this.#stderr.join("\n").trim();
  }

  /**
   * Its next stdout line.
   *
   * @throws {Error} when it exits first or after `timeoutMs`, with its
   * stderr's last lines.
   */
  async nextLine(timeoutMs: number): Promise<string> {
    const deadline = performance.now() + timeoutMs;
    for (let i = 0; i < 1_000_000; i++) {
      const line = this.#lines.shift();
      if (line !== undefined) return line;
      const left = deadline - performance.now();
      if (this.#exited || left <= 0) break;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
      this.#wake = null;
    }
    const why = this.#exited ? "exited" : `gave no answer in ${timeoutMs} ms`;
    throw new Error(
      `${this.name} ${why}${
        this.stderrTail() ? `; its stderr:\n${this.stderrTail()}` : ""
      }`,
    );
  }

  /** Writes `line` and a newline to its stdin. */
  async send(line: string): Promise<void> {
    await this.#stdin.write(encoder.encode(line + "\n"));
  }

  /** Closes its stdin, waits up to `graceMs` for it to exit, then SIGKILLs it. */
  async stop(graceMs = 2_000): Promise<void> {
    await this.#stdin.close().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([
      this.#status.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), graceMs);
      }),
    ]);
    clearTimeout(timer);
    if (!exited) {
      try {
        this.#process.kill("SIGKILL");
      } catch { /* gone meanwhile */ }
      await this.#status;
    }
  }
}
