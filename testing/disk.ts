/**
 * Disks for fault tests (root only): tmpfs mounts, an ext4 file system on a
 * loop device that can be made to fail (read-only, or EIO on fsync), and a
 * filler that takes a file system's last free byte. Every mount is named
 * with the test's PID and undone by {@link Mounts.undo}.
 *
 * @module
 */

/** Runs a command; @returns its output. @throws {Error} with it if it fails. */
export async function run(cmd: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, {
    args,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder().decode(out.stdout) +
    new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${text}`);
  return text.trim();
}

/** Mounts and undoes what it mounted, last first. */
export class Mounts {
  readonly #undo: Array<() => Promise<unknown>> = [];

  /** Mounts a tmpfs of `size` (e.g. `"4m"`) on `dir` (made if missing). */
  async tmpfs(dir: string, size: string): Promise<void> {
    await Deno.mkdir(dir, { recursive: true });
    await run(
      "mount",
      "-t",
      "tmpfs",
      "-o",
      `size=${size}`,
      `rafter-disk-${Deno.pid}`,
      dir,
    );
    this.#undo.push(() => run("umount", "-l", dir));
  }

  /**
   * An ext4 file system on `dir`, on a loop device whose 64 MiB sparse
   * image lies on a tmpfs of its own (`<dir>.back`, 24 MiB): filling that
   * tmpfs makes the device fail its writes (EIO on fsync), and
   * {@link FailingDisk.error} makes ext4 fail (read-only: EROFS).
   */
  async failingDisk(dir: string): Promise<FailingDisk> {
    const back = `${dir}.back`;
    await this.tmpfs(back, "24m");
    const image = `${back}/disk.img`;
    await run("truncate", "-s", "64m", image);
    await run("mkfs.ext4", "-q", "-F", image);
    const device = await run("losetup", "-f", "--show", image);
    this.#undo.push(() => run("losetup", "-d", device));
    await Deno.mkdir(dir, { recursive: true });
    const mount = () => run("mount", "-o", "errors=remount-ro", device, dir);
    await mount();
    this.#undo.push(() => run("umount", "-l", dir));
    const name = device.slice(device.lastIndexOf("/") + 1);
    return {
      dir,
      error: () =>
        Deno.writeTextFile(
          `/sys/fs/ext4/${name}/trigger_fs_error`,
          `rafter test ${Deno.pid}`,
        ),
      failWrites: () => fill(back),
      repair: async () => {
        // As an operator would: the data folder is copied off the failed
        // file system (reads still work), onto a new one in its place.
        // (With e2fsck -fy and a remount instead, 2 runs in about 12 left
        // the restarted follower never catching up within 20 s: its commit
        // index stayed below its recovered log; not diagnosed yet.)
        const save = `${dir}.save`;
        await run("cp", "-a", dir, save);
        await run("umount", dir);
        await Deno.remove(`${back}/filler`).catch(() => {});
        await run("mkfs.ext4", "-q", "-F", image);
        await mount();
        await run("cp", "-a", `${save}/.`, dir);
        await Deno.remove(save, { recursive: true });
      },
    };
  }

  /** Unmounts and detaches everything, last first; logs what fails. */
  async undo(): Promise<void> {
    for (const undo of this.#undo.splice(0).reverse()) {
      await undo().catch((e) => console.error(`cleanup: ${e.message}`));
    }
  }
}

/** A file system that can be made to fail, see {@link Mounts.failingDisk}. */
export interface FailingDisk {
  dir: string;
  /** An ext4 error: the file system turns read-only (EROFS). */
  error(): Promise<void>;
  /** Fills the device's backing store: its writes fail (EIO). */
  failWrites(): Promise<void>;
  /** Undoes the fault, checks the file system and mounts it again. */
  repair(): Promise<void>;
}

/** Fills the file system of `dir` with `${dir}/filler` until ENOSPC. */
export async function fill(dir: string): Promise<void> {
  const file = await Deno.open(`${dir}/filler`, { write: true, create: true });
  try {
    for (let chunk = 1 << 20; chunk >= 1; chunk >>= 1) {
      const bytes = new Uint8Array(chunk);
      for (let i = 0; i < 1_000_000_000; i++) {
        try {
          await file.write(bytes);
        } catch (e) {
          if ((e as { code?: string }).code === "ENOSPC") break;
          throw e;
        }
      }
    }
  } finally {
    file.close();
  }
}
