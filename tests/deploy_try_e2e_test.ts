/**
 * Tries the deployment examples of `examples/deploy/` as closely as a
 * machine without a docker engine and without systemd as PID 1 allows
 * (issue 18); `tests/deploy_files_test.ts` checks their flags parse.
 *
 * - The image: its filesystem is built as the Dockerfile says, step by
 *   step (`WORKDIR`, `ENV`, `RUN`, `COPY . .` honouring
 *   `Dockerfile.dockerignore`), into a temp folder standing in for `/`;
 *   then `ENTRYPOINT` + `CMD` run as written, offline (`--cached-only`,
 *   and the npm registry and proxies point at a closed port), with
 *   `0.0.0.0` replaced by `127.0.0.1` and the exposed ports by free ones.
 *   The `HEALTHCHECK` command passes while the node runs and fails after;
 *   `STOPSIGNAL` stops it within docker's 10 s grace.
 * - The systemd unit: `rafter-registry@n1.service`'s `ExecStart`,
 *   `Environment`, `EnvironmentFile`, `WorkingDirectory`,
 *   `StateDirectory`, `CacheDirectory` and `%i` are read as systemd reads
 *   them, after the README's install step; the node starts, `rafter
 *   status` answers leader n1, and `KillSignal` stops it within
 *   `TimeoutStopSec`.
 *
 * Deno is this test's own (`Deno.execPath()`), which must be the version
 * the Dockerfile's `FROM` names. Not tried: a real `docker build`/`docker
 * run` (user `deno`, the volume), a real systemd start (`User=`, the
 * hardening); `examples/deploy/README.md` says so.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath as fromFileUrl } from "node:url";
import { copyContext, parseDockerignore } from "./_dockerignore.ts";
import { freePorts } from "../testing/ports.ts";
import { withTempDir } from "../testing/temp.ts";

const REPO = fromFileUrl(new URL("../", import.meta.url)).replace(/\/$/, "");
const DEPLOY = `${REPO}/examples/deploy`;
const DENO = Deno.execPath();

/**
 * Environment added to every process that must start offline: the npm
 * registry and any proxy are a closed port, so a download would fail.
 */
const OFFLINE = {
  NPM_CONFIG_REGISTRY: "http://127.0.0.1:9/",
  HTTP_PROXY: "http://127.0.0.1:9",
  HTTPS_PROXY: "http://127.0.0.1:9",
  NO_PROXY: "127.0.0.1,localhost",
};

// --- a child process whose output the test waits on ---------------------------

class Child {
  readonly process: Deno.ChildProcess;
  output = "";
  readonly done: Promise<Deno.CommandStatus>;
  #exited = false;

  /**
   * `env` is the child's whole environment, unless `inherit`: then it is
   * added to this process's (for build steps, which download through this
   * machine's network settings: proxies, certificate authorities).
   */
  constructor(
    words: string[],
    cwd: string,
    env: Record<string, string>,
    inherit = false,
  ) {
    this.process = new Deno.Command(words[0], {
      args: words.slice(1),
      cwd,
      env,
      clearEnv: !inherit,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const decoder = new TextDecoder();
    const drain = (stream: ReadableStream<Uint8Array>) =>
      stream.pipeTo(
        new WritableStream({
          write: (chunk) => {
            this.output += decoder.decode(chunk, { stream: true });
          },
        }),
      );
    const drained = Promise.all([
      drain(this.process.stdout),
      drain(this.process.stderr),
    ]);
    this.done = Promise.all([this.process.status, drained]).then(([s]) => {
      this.#exited = true;
      return s;
    });
  }

  /** Waits (up to `ms`) for `pattern` in the output; fails saying what it got. */
  async waitFor(pattern: RegExp, ms: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const match = this.output.match(pattern);
      if (match !== null) return match;
      if (this.#exited) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`no ${pattern} in:\n${this.output}`);
  }

  /** The exit status, or undefined when it did not exit within `ms`. */
  async exitWithin(ms: number): Promise<Deno.CommandStatus | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), ms);
    });
    try {
      return await Promise.race([this.done, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL unless it exited; then waits for it. */
  async kill(): Promise<void> {
    if (!this.#exited) {
      try {
        this.process.kill("SIGKILL");
      } catch { /* exited meanwhile */ }
    }
    await this.done;
  }
}

/** Runs `words` to the end; its exit code and output. */
async function run(
  words: string[],
  cwd: string,
  env: Record<string, string>,
  inherit = false,
): Promise<{ code: number; output: string }> {
  const child = new Child(words, cwd, env, inherit);
  const status = await child.done;
  return { code: status.code, output: child.output };
}

// --- the Dockerfile ------------------------------------------------------------

interface Instruction {
  name: string;
  rest: string;
}

/** The Dockerfile's instructions, continuation lines joined, comments out. */
function dockerInstructions(text: string): Instruction[] {
  const lines = text.split("\n").filter((l) => !/^\s*#/.test(l));
  return lines.join("\n").replace(/\\\n\s*/g, " ").split("\n")
    .map((l) => l.trim()).filter((l) => l !== "")
    .map((l) => {
      const [name] = l.split(/\s/, 1);
      return { name: name.toUpperCase(), rest: l.slice(name.length).trim() };
    });
}

/** The words of an exec-form (`["a", "b"]`) instruction. */
function execForm(rest: string, what: string): string[] {
  assert.ok(rest.startsWith("["), `${what} is not in exec form: ${rest}`);
  const words: unknown = JSON.parse(rest);
  assert.ok(
    Array.isArray(words) && words.every((w) => typeof w === "string"),
    `${what} is not an array of strings: ${rest}`,
  );
  return words;
}

/** `KEY=VALUE KEY2="VALUE 2"` as docker's `ENV` reads it. */
function assignments(rest: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const match of rest.matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    env[match[1]] = match[2].startsWith('"')
      ? match[2].slice(1, -1).replace(/\\(.)/g, "$1")
      : match[2];
  }
  return env;
}

Deno.test("the image, built without docker as the Dockerfile says, starts offline, passes its health check and stops on SIGTERM", async () => {
  const text = await Deno.readTextFile(`${DEPLOY}/Dockerfile`);
  const steps = dockerInstructions(text);
  const one = (name: string) => {
    const found = steps.filter((s) => s.name === name);
    assert.equal(found.length, 1, `the Dockerfile has ${found.length} ${name}`);
    return found[0].rest;
  };
  assert.equal(
    one("FROM"),
    `denoland/deno:${Deno.version.deno}`,
    "the test's deno is the version the image is built FROM",
  );
  const exposed = one("EXPOSE").split(/\s+/).map(Number);
  const free = freePorts(exposed.length);
  const portOf = new Map(exposed.map((port, i) => [port, free[i]]));

  await withTempDir(async (root) => {
    // `root` stands for the container's `/`. Paths of the image are
    // mapped into it; 0.0.0.0 and the exposed ports onto 127.0.0.1 and
    // free ports.
    const map = (word: string) =>
      word
        .replace(/(^|[=:])\/(app|var)(?=\/|$)/g, `$1${root}/$2`)
        .replace(
          /\b(?:0\.0\.0\.0|127\.0\.0\.1):(\d+)\b/g,
          (all, port) =>
            portOf.has(Number(port))
              ? `127.0.0.1:${portOf.get(Number(port))}`
              : all,
        );
    const env: Record<string, string> = {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: `${root}/home/deno`,
    };
    await Deno.mkdir(env.HOME, { recursive: true });
    let workdir = root;
    const copied: string[] = [];

    for (const step of steps) {
      switch (step.name) {
        case "WORKDIR":
          workdir = map(step.rest);
          await Deno.mkdir(workdir, { recursive: true });
          break;
        case "ENV":
          for (const [key, value] of Object.entries(assignments(step.rest))) {
            env[key] = map(value);
          }
          break;
        case "COPY": {
          // `COPY --chown=... . .`: the build context (the repository
          // root), trimmed by the dockerignore next to the Dockerfile.
          const words = step.rest.split(/\s+/).filter((w) =>
            !w.startsWith("--")
          );
          assert.deepEqual(words, [".", "."], `COPY ${step.rest}`);
          const ignore = parseDockerignore(
            await Deno.readTextFile(`${DEPLOY}/Dockerfile.dockerignore`),
          );
          copied.push(...await copyContext(REPO, workdir, ignore));
          break;
        }
        case "RUN":
          for (const command of step.rest.split("&&").map((c) => c.trim())) {
            assert.doesNotMatch(command, /[|;<>`$"']/, `RUN ${command}`);
            const words = command.split(/\s+/).map(map);
            if (words[0] === "mkdir" && words[1] === "-p") {
              for (const dir of words.slice(2)) {
                await Deno.mkdir(dir, { recursive: true });
              }
            } else if (words[0] === "chown") {
              // One user here: nothing to change.
            } else if (words[0] === "deno") {
              // As a builder on this machine: its network settings.
              const build = await run(
                [DENO, ...words.slice(1)],
                workdir,
                env,
                true,
              );
              assert.equal(build.code, 0, `RUN ${command}:\n${build.output}`);
            } else {
              assert.fail(`this test cannot run RUN ${command}`);
            }
          }
          break;
        default:
          // FROM, USER, EXPOSE, VOLUME, STOPSIGNAL, HEALTHCHECK,
          // ENTRYPOINT and CMD describe the container, used below.
      }
    }

    // What the dockerignore kept out, and what the image needs.
    const ignored = (await Deno.readTextFile(
      `${DEPLOY}/Dockerfile.dockerignore`,
    )).split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    for (const pattern of [".git", "node_modules", "data*"]) {
      assert.ok(ignored.includes(pattern), `the dockerignore lacks ${pattern}`);
    }
    const top = new Set(copied.map((p) => p.split("/")[0]));
    for (const name of top) {
      assert.ok(
        !/^(\.git|node_modules|dist|\.deno-cache)$|^data/.test(name),
        `${name} was copied into the image`,
      );
    }
    for (const name of [".git", "node_modules"]) {
      // The checkout has them (a worktree's .git is a file); the copy not.
      if (await Deno.lstat(`${REPO}/${name}`).catch(() => null)) {
        assert.ok(!copied.includes(name) && !top.has(name), name);
      }
    }
    assert.ok(
      copied.includes("raft/data_dir.ts"),
      "data* is anchored at the root",
    );
    const entry = execForm(one("ENTRYPOINT"), "ENTRYPOINT");
    const cmd = execForm(one("CMD"), "CMD");
    const health = execForm(
      one("HEALTHCHECK").replace(/^(--\S+\s+)*CMD\s+/, ""),
      "HEALTHCHECK",
    );
    const cached = /^deno cache (.+)$/m.exec(
      steps.filter((s) => s.name === "RUN").map((s) => s.rest).join("\n"),
    )?.[1].split(/\s+/) ?? [];
    for (const file of ["deno.json", "deno.lock", ...cached]) {
      assert.ok(copied.includes(file), `${file} is not in the image`);
    }
    for (
      const script of [entry, health].map((w) =>
        w.find((x) => x.endsWith(".ts"))
      )
    ) {
      assert.ok(
        script !== undefined && cached.includes(script),
        `${script} is not cached`,
      );
    }
    // The build step cached into the image (DENO_DIR), not elsewhere.
    assert.ok(env.DENO_DIR.startsWith(`${workdir}/`), env.DENO_DIR);
    await Deno.stat(`${env.DENO_DIR}/npm`);

    // `docker run`: ENTRYPOINT + CMD, offline.
    const runEnv = { ...env, ...OFFLINE };
    const words = [...entry, ...cmd].map(map);
    assert.ok(!words.some((w) => w.includes("0.0.0.0")), words.join(" "));
    assert.equal(words[0], "deno");
    words[0] = DENO;
    const [client, , metrics] = exposed.map((p) => portOf.get(p));
    const node = new Child(words, workdir, runEnv);
    try {
      await node.waitFor(
        new RegExp(
          `registry n1 listening on tcp://127\\.0\\.0\\.1:${client}\\b`,
        ),
        30_000,
      );
      assert.ok(
        node.output.includes(`data ${root}/var/lib/rafter/n1)`),
        node.output,
      );
      const healthWords = health.map(map);
      assert.equal(healthWords[0], "deno");
      healthWords[0] = DENO;
      assert.ok(healthWords.includes(`http://127.0.0.1:${metrics}/metrics`));
      const healthy = await run(healthWords, workdir, runEnv);
      assert.equal(
        healthy.code,
        0,
        `HEALTHCHECK while running:\n${healthy.output}`,
      );

      // The CLI the image caches answers with the bootstrap admin token.
      await node.waitFor(/n1: leader of term \d+/, 20_000);
      const token = await Deno.readTextFile(
        `${root}/var/lib/rafter/n1/admin_token`,
      );
      const status = await run(
        [
          DENO,
          "run",
          "--cached-only",
          "-A",
          "cli/main.ts",
          "status",
          "--registry",
          `tcp://127.0.0.1:${client}`,
        ],
        workdir,
        { ...runEnv, RAFTER_TOKEN: token.trim() },
      );
      assert.equal(status.code, 0, status.output);
      assert.match(
        status.output,
        /^leader n1, term \d+; 1 of 1 members answered$/m,
      );

      // `docker stop`: STOPSIGNAL, then SIGKILL after 10 s.
      const signal = one("STOPSIGNAL") as Deno.Signal;
      assert.equal(signal, "SIGTERM");
      node.process.kill(signal);
      const stopped = await node.exitWithin(10_000);
      assert.ok(
        stopped !== undefined,
        `not stopped within 10 s:\n${node.output}`,
      );
      assert.equal(stopped.code, 0, node.output);
      assert.match(node.output, /registry n1 stopped\n$/);

      const unhealthy = await run(healthWords, workdir, runEnv);
      assert.equal(unhealthy.code, 1, unhealthy.output);
      assert.match(
        unhealthy.output,
        /^healthcheck: http:\/\/127\.0\.0\.1:\d+\/metrics did not answer/,
      );
    } finally {
      await node.kill();
    }
  }, "rafter_image_");
});

// --- the systemd unit ----------------------------------------------------------

const UNIT = "rafter-registry@.service";
const INSTANCE = "n1";

/** The `[Service]` settings of a unit file, in order, as systemd reads them. */
function serviceSettings(text: string): [string, string][] {
  const settings: [string, string][] = [];
  let section = "";
  for (const line of text.replace(/\\\n/g, " ").split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "" || /^[#;]/.test(trimmed)) continue;
    const header = /^\[(.+)\]$/.exec(trimmed);
    if (header !== null) {
      section = header[1];
      continue;
    }
    const eq = trimmed.indexOf("=");
    assert.ok(eq > 0, `not a setting: ${trimmed}`);
    if (section === "Service") {
      settings.push([
        trimmed.slice(0, eq).trim(),
        trimmed.slice(eq + 1).trim(),
      ]);
    }
  }
  return settings;
}

/** Specifiers of `rafter-registry@n1.service`: `%i`, `%I` and `%%`. */
function specifiers(value: string): string {
  return value.replace(/%(.)/g, (all, ch) => {
    if (ch === "i" || ch === "I") return INSTANCE;
    if (ch === "%") return "%";
    throw new Error(
      `this test does not expand the specifier ${all} in ${value}`,
    );
  });
}

/** Words as systemd splits a command line: spaces, quotes, backslashes. */
function unitWords(line: string): string[] {
  const words: string[] = [];
  for (
    const match of line.matchAll(
      /"((?:[^"\\]|\\.)*)"|'([^']*)'|((?:[^\s"'\\]|\\.)+)/g,
    )
  ) {
    words.push((match[1] ?? match[2] ?? match[3]).replace(/\\(.)/g, "$1"));
  }
  return words;
}

/** `KEY=VALUE` lines of an environment file (quotes removed). */
function environmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n").map((l) => l.trim())) {
    if (line === "" || /^[#;]/.test(line)) continue;
    const eq = line.indexOf("=");
    const value = line.slice(eq + 1).trim();
    env[line.slice(0, eq).trim()] = /^(["']).*\1$/.test(value)
      ? value.slice(1, -1)
      : value;
  }
  return env;
}

/** `30s`, `1min`, `500ms` or `30` (seconds) as ms. */
function timeSpan(value: string): number {
  const match = /^(\d+)\s*(ms|s|min)?$/.exec(value);
  assert.ok(match !== null, `this test does not read the time span ${value}`);
  return Number(match[1]) * { ms: 1, s: 1000, min: 60_000 }[match[2] ?? "s"]!;
}

Deno.test("the systemd unit's command line, as systemd runs rafter-registry@n1, starts node n1 and stops on its KillSignal", async () => {
  const settings = serviceSettings(
    await Deno.readTextFile(`${DEPLOY}/${UNIT}`),
  );
  const all = (key: string) =>
    settings.filter(([k]) => k === key).map(([, v]) => specifiers(v));
  const one = (key: string, fallback?: string) => {
    const values = all(key);
    assert.ok(values.length <= 1, `${key} is set ${values.length} times`);
    const value = values[0] ?? fallback;
    assert.ok(value !== undefined, `the unit has no ${key}`);
    return value;
  };
  const [client, peer, metrics] = freePorts(3);

  await withTempDir(async (root) => {
    // `root` stands for `/`: the unit's and the README's paths map into
    // it; the unit's deno is this test's deno.
    const map = (word: string) =>
      word === "/usr/local/bin/deno"
        ? DENO
        : word.replace(/(^|=)\/(opt|var|etc)(?=\/)/g, `$1${root}/$2`);

    // The README's install: the checkout in /opt/rafter (the files a
    // clone has: those the dockerignore keeps), then its `deno cache`.
    const ignore = parseDockerignore(
      await Deno.readTextFile(`${DEPLOY}/Dockerfile.dockerignore`),
    );
    await copyContext(REPO, `${root}/opt/rafter`, ignore);
    const readme = await Deno.readTextFile(`${DEPLOY}/README.md`);
    const install = /^cd \/opt\/rafter && sudo (.+)$/m.exec(readme)?.[1];
    assert.ok(install !== undefined, "the README has no install step");
    const installWords = unitWords(install).map(map);
    const installEnv: Record<string, string> = {};
    while (/^\w+=/.test(installWords[0])) {
      const [key, ...value] = installWords.shift()!.split("=");
      installEnv[key] = value.join("=");
    }
    assert.equal(installWords[0], "deno");
    const installed = await run(
      [DENO, ...installWords.slice(1)],
      `${root}/opt/rafter`,
      installEnv,
      true,
    );
    assert.equal(installed.code, 0, `${install}:\n${installed.output}`);

    // What systemd makes before it starts the service.
    const state = map(`/var/lib/${one("StateDirectory")}`);
    await Deno.mkdir(state, { recursive: true });
    await Deno.chmod(state, parseInt(one("StateDirectoryMode", "0755"), 8));
    await Deno.mkdir(map(`/var/cache/${one("CacheDirectory")}`), {
      recursive: true,
    });
    const envFiles = all("EnvironmentFile");
    assert.deepEqual(envFiles, [`-/etc/rafter/${INSTANCE}.env`]);
    // The per-node options, as the README's /etc/rafter/ID.env: here the
    // addresses, free ports on 127.0.0.1.
    await Deno.mkdir(`${root}/etc/rafter`, { recursive: true });
    await Deno.writeTextFile(
      map(envFiles[0].slice(1)),
      `# node ${INSTANCE}\nRAFTER_ARGS="--listen 127.0.0.1:${client} --peer-listen 127.0.0.1:${peer} --advertise 127.0.0.1:${client} --metrics-listen 127.0.0.1:${metrics}"\n`,
    );

    // The service's environment: systemd's PATH, the User='s (the README's
    // useradd), Environment=, then EnvironmentFile= (which overrides).
    const env: Record<string, string> = {
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
      HOME: `${root}/var/lib/rafter`,
      USER: one("User"),
      LOGNAME: one("User"),
      SHELL: "/usr/sbin/nologin",
    };
    for (const line of all("Environment")) {
      for (const word of unitWords(line)) {
        const eq = word.indexOf("=");
        env[word.slice(0, eq)] = map(word.slice(eq + 1));
      }
    }
    assert.equal(env.DENO_DIR, `${root}/var/cache/rafter`);
    for (const file of envFiles) {
      const path = map(file.replace(/^-/, ""));
      const text = await Deno.readTextFile(path).catch((error) => {
        if (file.startsWith("-") && error instanceof Deno.errors.NotFound) {
          return "";
        }
        throw error;
      });
      Object.assign(env, environmentFile(text));
    }

    // ExecStart: `$NAME` alone is the variable's words, `${NAME}` one word.
    const execStart = one("ExecStart");
    assert.match(execStart, /^[^@\-:+!]/, "no ExecStart prefixes to honour");
    const words = unitWords(execStart).flatMap((word) => {
      const alone = /^\$(\w+)$/.exec(word);
      if (alone !== null) {
        return (env[alone[1]] ?? "").split(/\s+/).filter((w) => w);
      }
      return [word.replace(/\$\{(\w+)\}/g, (_, name) => env[name] ?? "")];
    }).map(map);
    assert.equal(words[0], DENO, "the unit runs /usr/local/bin/deno");
    assert.ok(words.includes(`--allow-write=${state}`), words.join(" "));
    const cwd = map(one("WorkingDirectory"));
    assert.equal(cwd, `${root}/opt/rafter`);

    const signal = one("KillSignal", "SIGTERM") as Deno.Signal;
    const stopWithin = timeSpan(one("TimeoutStopSec", "90s"));
    const node = new Child(words, cwd, { ...env, ...OFFLINE });
    try {
      await node.waitFor(
        new RegExp(
          `registry n1 listening on tcp://127\\.0\\.0\\.1:${client}, peers on tcp://127\\.0\\.0\\.1:${peer}\\b.*data ${state}\\)`,
        ),
        30_000,
      );
      await node.waitFor(/n1: leader of term \d+/, 20_000);
      const status = await run(
        [
          DENO,
          "run",
          "-A",
          `${REPO}/cli/main.ts`,
          "status",
          "--registry",
          `tcp://127.0.0.1:${client}`,
        ],
        REPO,
        {},
        true,
      );
      assert.equal(status.code, 0, status.output);
      assert.match(
        status.output,
        /^leader n1, term \d+; 1 of 1 members answered$/m,
      );

      node.process.kill(signal);
      const stopped = await node.exitWithin(stopWithin);
      assert.ok(
        stopped !== undefined,
        `not stopped within ${stopWithin} ms:\n${node.output}`,
      );
      assert.equal(stopped.code, 0, node.output);
      assert.match(node.output, /registry n1 stopped\n$/);
    } finally {
      await node.kill();
    }

    // Bad options exit 2, which RestartPreventExitStatus= does not restart.
    assert.equal(one("RestartPreventExitStatus"), "2");
    const badWords = words.map((w) =>
      w === `127.0.0.1:${client}` ? "nowhere" : w
    );
    const bad = await run(badWords, cwd, { ...env, ...OFFLINE });
    assert.equal(bad.code, 2, bad.output);
    assert.match(
      bad.output,
      /^registry: --listen: invalid listen address "nowhere"/m,
    );
  }, "rafter_unit_");
});
