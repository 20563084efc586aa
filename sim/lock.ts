// A lock file: created with O_EXCL, holding the owner's pid; a lock whose owner died is taken over.
import * as fs from "node:fs";
import * as path from "node:path";
import { sleep } from "./exec";

function ownerAlive(lockPath: string): boolean {
  let pid: number;
  try {
    pid = Number.parseInt(fs.readFileSync(lockPath, "utf8").trim(), 10);
  } catch {
    return true; // being written right now: treat as held
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Runs `fn` while holding the lock at `lockPath`; waits up to `timeoutMs` for it. */
export async function withLock<T>(
  lockPath: string,
  what: string,
  fn: () => Promise<T>,
  timeoutMs = 30 * 60_000,
): Promise<T> {
  fs.mkdirSync(path.dirname(lockPath), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  let said = false;
  for (;;) {
    try {
      const fd = fs.openSync(lockPath, "wx", 0o644);
      fs.writeSync(fd, `${process.pid}\n`);
      fs.closeSync(fd);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      if (!ownerAlive(lockPath)) {
        // Stale: move it aside atomically so that only one waiter takes it over.
        const aside = `${lockPath}.stale.${process.pid}`;
        try {
          fs.renameSync(lockPath, aside);
          fs.rmSync(aside, { force: true });
        } catch {
          /* another waiter got there first */
        }
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for the ${what} lock ${lockPath} (held by another sim)`);
      }
      if (!said && process.env.SPARKFORM_SIM_QUIET !== "1") {
        process.stderr.write(`sim: waiting for the ${what} lock ${lockPath}\n`);
        said = true;
      }
      await sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockPath, { force: true });
  }
}
