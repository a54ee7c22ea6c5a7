/**
 * The deployment examples in `examples/deploy/` match the real node: the
 * registry options their command lines pass parse as `registry/main.ts`
 * parses them, the Deno flags are flags `deno run` knows, the ports the
 * Dockerfile exposes are the ones its command listens on, and the systemd
 * unit passes `systemd-analyze verify` (skipped when it is not installed).
 * `tests/deploy_try_e2e_test.ts` runs them (the image built without
 * docker, the unit's command line without systemd);
 * `examples/deploy/README.md` says what remains untried.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath as fromFileUrl } from "node:url";
import { parseRegistryArgs } from "../registry/node/args.ts";
import { exposureOf, exposureProblems } from "../registry/node/exposure.ts";

const DEPLOY = fromFileUrl(new URL("../examples/deploy/", import.meta.url));
const REPO = fromFileUrl(new URL("../", import.meta.url));
const UNIT = "rafter-registry@.service";

/** A command's words: Deno's flags, the script, and the script's words. */
interface Invocation {
  denoFlags: string[];
  script: string;
  args: string[];
}

function invocation(words: string[]): Invocation {
  const at = words.findIndex((word) => word.endsWith(".ts"));
  assert.ok(at > 0, `no .ts script in ${JSON.stringify(words)}`);
  assert.match(words[0], /(^|\/)deno$/);
  assert.equal(words[1], "run");
  return {
    denoFlags: words.slice(2, at),
    script: words[at],
    args: words.slice(at + 1),
  };
}

/** The JSON array of the Dockerfile instruction `name` (`CMD` after `HEALTHCHECK` too). */
function dockerfileArray(text: string, name: string): string[] {
  const joined = text.replace(/\\\n\s*/g, " ");
  const line = joined.split("\n").find((l) => l.startsWith(`${name} `));
  assert.ok(line !== undefined, `the Dockerfile has no ${name}`);
  const json = line.slice(line.indexOf("["));
  const words: unknown = JSON.parse(json);
  assert.ok(Array.isArray(words) && words.every((w) => typeof w === "string"));
  return words;
}

let denoRunHelp: string | undefined;
async function knownDenoFlags(): Promise<string> {
  if (denoRunHelp === undefined) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--help"],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, "deno run --help failed");
    denoRunHelp = new TextDecoder().decode(out.stdout);
  }
  return denoRunHelp;
}

async function assertDenoFlags(flags: string[]): Promise<void> {
  const help = await knownDenoFlags();
  for (const flag of flags) {
    const name = flag.replace(/=.*$/, "");
    assert.match(name, /^--[a-z-]+$/, `not a deno flag: ${flag}`);
    assert.ok(
      new RegExp(`(^|[\\s,])${name}([=\\s\\[<]|$)`, "m").test(help),
      `deno run does not know ${name}`,
    );
  }
}

/** The registry's own parser; it throws on a flag it does not know. */
const assertRegistryArgs = parseRegistryArgs;

Deno.test("the Dockerfile's entrypoint and command are the node's flags", async () => {
  const text = await Deno.readTextFile(`${DEPLOY}Dockerfile`);
  const entry = invocation(dockerfileArray(text, "ENTRYPOINT"));
  assert.equal(entry.script, "registry/main.ts");
  assert.deepEqual(entry.args, []);
  await assertDenoFlags(entry.denoFlags);
  assert.ok(!entry.denoFlags.includes("-A"), "the image runs without -A");

  const cmd = dockerfileArray(text, "CMD");
  const args = assertRegistryArgs(cmd);
  assert.equal(args.id, "n1");
  assert.equal(args.dataDir, "/var/lib/rafter/n1");
  assert.ok(args.auth);
  // It starts (the start checks pass) although it listens on 0.0.0.0.
  assert.deepEqual(exposureProblems(exposureOf(args, args)), []);
  // It may write only under the volume, and its data folder is there.
  assert.ok(entry.denoFlags.includes("--allow-write=/var/lib/rafter"));
  assert.match(text, /^VOLUME \["\/var\/lib\/rafter"\]$/m);

  // EXPOSE lists exactly the client, peer and metrics ports it listens on.
  const exposed = /^EXPOSE (.+)$/m.exec(text)?.[1].split(/\s+/).map(Number);
  assert.deepEqual(exposed, [
    args.listen.port,
    args.peerListen.port,
    Number(cmd[cmd.indexOf("--metrics-listen") + 1].split(":")[1]),
  ]);
  assert.match(text, /^USER deno$/m, "runs as a non-root user");

  const health = invocation(dockerfileArray(text, "HEALTHCHECK"));
  await assertDenoFlags(health.denoFlags);
  await Deno.stat(`${REPO}${health.script}`);
  assert.equal(
    health.args[0],
    `http://127.0.0.1:${exposed?.[2]}/metrics`,
    "the health check asks the metrics port",
  );
  // Every script the image runs is cached at build time.
  const cached = /^RUN deno cache (.+)$/m.exec(text)?.[1].split(/\s+/);
  for (const script of [entry.script, health.script, "cli/main.ts"]) {
    assert.ok(cached?.includes(script), `${script} is not cached`);
    await Deno.stat(`${REPO}${script}`);
  }
});

Deno.test("the systemd unit's ExecStart is the node's flags", async () => {
  const text = await Deno.readTextFile(`${DEPLOY}${UNIT}`);
  const line = /^ExecStart=(.+)$/m.exec(text)?.[1];
  assert.ok(line !== undefined);
  const words = line.replaceAll("%i", "n1").split(/\s+/)
    .filter((word) => word !== "$RAFTER_ARGS");
  const run = invocation(words);
  assert.equal(run.script, "/opt/rafter/registry/main.ts");
  await assertDenoFlags(run.denoFlags);
  const args = assertRegistryArgs(run.args);
  assert.equal(args.id, "n1");
  assert.equal(args.dataDir, "/var/lib/rafter/n1");
  assert.ok(run.denoFlags.includes("--allow-write=/var/lib/rafter/n1"));
  assert.match(text, /^StateDirectory=rafter\/%i$/m);
  for (const setting of ["Restart=on-failure", "NoNewPrivileges=yes"]) {
    assert.ok(text.includes(`\n${setting}\n`), `no ${setting}`);
  }
});

const UNIT_DENO = /^ExecStart=(\S+)/m.exec(
  await Deno.readTextFile(`${DEPLOY}${UNIT}`),
)?.[1];
/** Why the verify test cannot run here, or undefined when it can. */
const verifySkip = await (async () => {
  try {
    await new Deno.Command("systemd-analyze", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
  } catch {
    return "systemd-analyze is not installed";
  }
  // verify checks that ExecStart's program exists.
  if (
    UNIT_DENO === undefined || !(await Deno.stat(UNIT_DENO).catch(() => null))
  ) {
    return `${UNIT_DENO} (the unit's deno) does not exist here`;
  }
  return undefined;
})();
if (verifySkip !== undefined) {
  console.log(`systemd-analyze verify skipped: ${verifySkip}`);
}

Deno.test({
  name: "the systemd unit passes systemd-analyze verify",
  ignore: verifySkip !== undefined,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    try {
      await Deno.copyFile(`${DEPLOY}${UNIT}`, `${dir}/${UNIT}`);
      const out = await new Deno.Command("systemd-analyze", {
        args: ["verify", `${dir}/rafter-registry@n1.service`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const said = new TextDecoder().decode(out.stderr) +
        new TextDecoder().decode(out.stdout);
      // Warnings (an unknown key, a bad value) leave the exit code 0.
      const about = said.split("\n").filter((l) => l.includes(UNIT));
      assert.deepEqual(about, [], said);
      assert.ok(out.success, said);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
