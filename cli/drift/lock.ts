// Whether an operator's `up`, `refresh` or `destroy` holds the stack. On a file:// backend the
// pulumi CLI writes one file per holder under <backend>/.pulumi/locks/<org>/<project>/<stack>/
// (`<uuid>.json`: {"pid","username","hostname","timestamp"}; the older flat layout kept them
// under locks/<stack>/), and removes it when the update ends. `preview` takes no lock (checked
// against the real CLI in test/integration/drift-lock.test.ts), so the check must look: a
// preview during an `up` compares the program with half-written state and would call the
// update in flight drift.
import * as fs from "node:fs";
import * as path from "node:path";

export interface StackLock {
  readonly user: string;
  readonly host: string;
  readonly pid: number | undefined;
  /** When the holder took the lock (ISO 8601, as the CLI wrote it). */
  readonly since: string;
  /** The lock file, for an operator who must remove a stale one by hand. */
  readonly file: string;
}

function read(file: string): StackLock {
  let v: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as unknown;
    if (typeof parsed === "object" && parsed !== null) v = parsed as Record<string, unknown>;
  } catch {
    // A lock being written, or one of a shape we do not know, is still a lock.
  }
  const text = (x: unknown) => (typeof x === "string" && x !== "" ? x : "?");
  return {
    user: text(v.username),
    host: text(v.hostname),
    pid: typeof v.pid === "number" ? v.pid : undefined,
    since: text(v.timestamp),
    file,
  };
}

function lockFiles(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith(".json"))
      .map((e) => path.join(dir, e.name));
  } catch {
    return [];
  }
}

function orgs(locks: string): string[] {
  try {
    return fs
      .readdirSync(locks, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

/**
 * The locks held on `stack` of `project` in the file backend at `backend` (a directory), oldest
 * first; [] when none.
 */
export function stackLocks(backend: string, project: string, stack: string): StackLock[] {
  const locks = path.join(backend, ".pulumi", "locks");
  const dirs = [
    ...orgs(locks).map((org) => path.join(locks, org, project, stack)),
    path.join(locks, stack),
  ];
  return dirs
    .flatMap(lockFiles)
    .map(read)
    .sort((a, b) => a.since.localeCompare(b.since));
}

/** "locked by USER@HOST since TIME" (the skip's reason, as the check prints it). */
export function lockedReason(lock: StackLock): string {
  return `locked by ${lock.user}@${lock.host} since ${lock.since}`;
}
