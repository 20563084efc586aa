// Whether an operator's `up`, `refresh` or `destroy` holds the stack. On a file:// backend the
// pulumi CLI writes one file per holder under <backend>/.pulumi/locks/<org>/<project>/<stack>/
// (`<uuid>.json`: {"pid","username","hostname","timestamp"}; the older flat layout kept them
// under locks/<stack>/), and removes it when the update ends. `preview` takes no lock (checked
// against the real CLI in test/integration/drift-lock.test.ts), so the check must look: a
// preview during an `up` compares the program with half-written state and would call the
// update in flight drift. On a postgres:// backend (a team's, cli/team/backend.ts) the same
// file is a row of pulumi_state keyed by the same path. Pulumi's lock has no lease: an `up`
// whose control node died leaves its lock until `pulumi cancel`, so a reader says whether the
// holder is still alive where it can tell (on the holder's own host).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Backend } from "../team/backend";
import { rowText, stateRows } from "../team/psql";

export interface StackLock {
  readonly user: string;
  readonly host: string;
  readonly pid: number | undefined;
  /** When the holder took the lock (ISO 8601, as the CLI wrote it). */
  readonly since: string;
  /** The lock file (or the backend's row key), for an operator who must remove a stale one by hand. */
  readonly file: string;
}

/** The lock in `text` (a lock file's content), found at `file`. */
export function parseLock(text: string, file: string): StackLock {
  let v: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === "object" && parsed !== null) v = parsed as Record<string, unknown>;
  } catch {
    // A lock being written, or one of a shape we do not know, is still a lock.
  }
  const field = (x: unknown) => (typeof x === "string" && x !== "" ? x : "?");
  return {
    user: field(v.username),
    host: field(v.hostname),
    pid: typeof v.pid === "number" ? v.pid : undefined,
    since: field(v.timestamp),
    file,
  };
}

const oldestFirst = (a: StackLock, b: StackLock) => a.since.localeCompare(b.since);

function read(file: string): StackLock {
  let text = "";
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    // Removed as we read it: parsed as a lock being written.
  }
  return parseLock(text, file);
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
  return dirs.flatMap(lockFiles).map(read).sort(oldestFirst);
}

/**
 * Whether `key` (a path in the backend, any prefix) is a lock of `stack` of `project`: in the
 * project-scoped layout, `.pulumi/locks/<org>/<project>/<stack>/<id>.json`, or the older flat
 * one, `.pulumi/locks/<stack>/<id>.json`.
 */
export function isLockKey(key: string, project: string, stack: string): boolean {
  const m = /(?:^|\/)\.pulumi\/locks\/(.+\.json)$/.exec(key);
  if (!m) return false;
  const rel = m[1]!.split("/");
  return rel.length === 4
    ? rel[1] === project && rel[2] === stack
    : rel.length === 2 && rel[0] === stack;
}

/**
 * The locks held on `stack` of `project` in `backend`, oldest first; [] when none, and for a
 * backend sparkform cannot read itself (Pulumi Cloud's locks are its own). Throws when a
 * postgres backend cannot be queried: a check that cannot see the lock must not run as if free.
 */
export async function backendLocks(
  backend: Backend,
  project: string,
  stack: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<StackLock[]> {
  if (backend.kind === "file") return stackLocks(backend.dir, project, stack);
  if (backend.kind !== "postgres") return [];
  const rows = await stateRows(backend, "/.pulumi/locks/", env);
  return rows
    .filter((r) => isLockKey(r.key, project, stack))
    .map((r) => parseLock(rowText(r.data), r.key))
    .sort(oldestFirst);
}

/**
 * Whether `lock`'s holder is gone: true when it was taken on this host by a pid that no longer
 * runs here, false when that pid runs, undefined when it was taken elsewhere (only that host
 * can tell) or names no pid.
 */
export function isStale(lock: StackLock, host = os.hostname()): boolean | undefined {
  if (lock.host !== host || lock.pid === undefined) return undefined;
  try {
    process.kill(lock.pid, 0);
    return false;
  } catch (err) {
    // EPERM: the pid runs, as another user.
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * "USER@HOST (pid N) since TIME", with what is known of the holder's life: what an operator
 * whose `up` was refused needs to decide between waiting and `pulumi cancel`.
 */
export function holderLine(lock: StackLock, host = os.hostname()): string {
  const pid = lock.pid === undefined ? "" : ` (pid ${lock.pid})`;
  const stale = isStale(lock, host);
  const life =
    stale === true
      ? `: stale, pid ${lock.pid} no longer runs on ${host}; \`pulumi cancel --yes\` removes it`
      : stale === false
        ? ": its process still runs on this host"
        : "";
  return `${lock.user}@${lock.host}${pid} since ${lock.since}${life}`;
}

/** "locked by USER@HOST since TIME" (the skip's reason, as the check prints it). */
export function lockedReason(lock: StackLock): string {
  return `locked by ${lock.user}@${lock.host} since ${lock.since}`;
}
