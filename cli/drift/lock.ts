// Whether an operator's `up`, `refresh` or `destroy` holds the stack. On a file:// backend the
// pulumi CLI writes one file per holder under <backend>/.pulumi/locks/<org>/<project>/<stack>/
// (`<uuid>.json`: {"pid","username","hostname","timestamp"}; the older flat layout kept them
// under locks/<stack>/), and removes it when the update ends. `preview` takes no lock (checked
// against the real CLI in test/integration/drift-lock.test.ts), so the check must look: a
// preview during an `up` compares the program with half-written state and would call the
// update in flight drift. On a postgres:// backend (a team's, cli/team/backend.ts) the same
// file is a row of pulumi_state keyed by the same path. Pulumi's lock has no lease: an `up`
// whose control node died leaves its lock until `pulumi cancel`, so a reader says whether the
// holder is still alive where it can tell: on the holder's own host by its pid, and from any
// host on PostgreSQL by the holder's session (cli/team/session.ts).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Backend, PostgresBackend } from "../team/backend";
import { rowText, stateRows } from "../team/psql";
import { type HolderSessions, holderSessions, sessionName } from "../team/session";

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
  return lockRows(backend, (key) => isLockKey(key, project, stack), env);
}

/** The lock rows of a postgres backend whose key `keep` takes, oldest first. */
async function lockRows(
  pg: PostgresBackend,
  keep: (key: string) => boolean,
  env: NodeJS.ProcessEnv | undefined,
): Promise<StackLock[]> {
  const rows = await stateRows(pg, "/.pulumi/locks/", env);
  return rows
    .filter((r) => keep(r.key))
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
    return isZombie(lock.pid);
  } catch (err) {
    // EPERM: the pid runs, as another user.
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * Whether `pid` has ended and waits to be reaped: a holder killed with the process that started
 * it is one until init reaps it (where init reaps nothing, in a container, for good), and it
 * runs nothing.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false; // no procfs: the signal's answer stands
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

/** What is known of a lock's holder, and why. */
export interface Life {
  readonly life: "live" | "stale" | "unknown";
  readonly why: string;
}

/**
 * A session opens just after its pulumi starts, and pulumi takes the lock after loading (or
 * after an operator's confirmation, hours later): a lock this young may have its session still
 * opening.
 */
export const SESSION_GRACE_MS = 10_000;

/** How much later than the lock a holder's session may have opened (pulumi took it at once). */
const OPENED_AFTER_LOCK_MS = 60_000;

/**
 * What is known of `lock`'s holder, judged from `host` (this host unless told otherwise) at
 * `now`. On the holder's own host, its pid says. Elsewhere, on PostgreSQL (`sessions` given),
 * its sparkform session says: open, live; opened and gone, stale (the control node died, or
 * lost the network, without releasing the lock). A lock with no session recorded was taken
 * outside sparkform (plain `pulumi`), and nothing here can tell whether it still runs.
 */
export function lockLife(
  lock: StackLock,
  o: { host?: string; sessions?: HolderSessions; now?: number } = {},
): Life {
  const host = o.host ?? os.hostname();
  const pid = lock.pid;
  if (pid === undefined) return { life: "unknown", why: "the lock names no pid" };
  const local = isStale(lock, host);
  if (local === false) return { life: "live", why: `pid ${pid} still runs on ${host}` };
  if (local === true) return { life: "stale", why: `pid ${pid} no longer runs on ${host}` };
  if (!o.sessions)
    return { life: "unknown", why: `taken on another host: only ${lock.host} can tell` };
  if (o.sessions.open.includes(sessionName(lock.host, pid)))
    return { life: "live", why: "its sparkform session to the backend is open" };
  const since = Date.parse(lock.since);
  const opened = o.sessions.opened.some(
    (s) =>
      s.host === lock.host &&
      s.pid === pid &&
      !(Date.parse(s.started) > since + OPENED_AFTER_LOCK_MS),
  );
  if (opened)
    return {
      life: "stale",
      why:
        "its sparkform session ended without the lock being released " +
        "(the control node died, was killed or lost the network mid-update)",
    };
  const age = (o.now ?? Date.now()) - since;
  if (age < SESSION_GRACE_MS)
    return { life: "unknown", why: "taken just now, its session may still be opening: look again" };
  return { life: "unknown", why: "taken outside sparkform: no session to check" };
}

/** The stack a lock key names (`.pulumi/locks/<org>/<project>/<stack>/<id>.json`), if it does. */
function lockStack(file: string): string | undefined {
  const m = /\.pulumi\/locks\/(.+)\.json$/.exec(file);
  const rel = m ? m[1]!.split("/") : [];
  return rel.length === 4 ? rel[2] : rel.length === 2 ? rel[0] : undefined;
}

/**
 * "USER@HOST (pid N) since TIME: LIFE, why; what to do": the line an operator whose command was
 * refused reads to choose between waiting, asking the holder, and the recovery of
 * test/integration/team-backend.test.ts (cancel, refresh dropping the pending creates, up).
 */
export function judgedHolderLine(lock: StackLock, life: Life): string {
  const pid = lock.pid === undefined ? "" : ` (pid ${lock.pid})`;
  const stack = lockStack(lock.file);
  const s = stack ? ` -s ${stack}` : "";
  const holder = `${lock.user}@${lock.host}`;
  const todo =
    life.life === "live"
      ? `wait for it to end, or ask ${holder}`
      : life.life === "stale"
        ? `remove it: \`npm run pulumi -- cancel --yes${s}\`, then ` +
          `\`npm run pulumi -- refresh --clear-pending-creates --yes${s}\` (drops the creates it left ` +
          `pending), then \`npm run pulumi -- up${s}\``
        : `ask ${holder} whether it still runs; only once it does not, remove it: ` +
          `\`npm run pulumi -- cancel --yes${s}\`, then ` +
          `\`npm run pulumi -- refresh --clear-pending-creates --yes${s}\`, then \`npm run pulumi -- up${s}\``;
  const what = life.life === "unknown" ? `unknown (${life.why})` : `${life.life}, ${life.why}`;
  return `${holder}${pid} since ${lock.since}: ${what}; ${todo}`;
}

/**
 * The locks of a postgres backend whose key ends in one of `keys` (as the pulumi CLI names
 * them), each with what is known of its holder, judged from `host`. The sessions are read
 * before the locks (see holderSessions).
 */
export async function judgedLocks(
  pg: PostgresBackend,
  keys: readonly string[],
  o: { host?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ lock: StackLock; life: Life }[]> {
  const sessions = await holderSessions(pg, o.env);
  const locks = await lockRows(pg, (key) => keys.some((k) => key.endsWith(k)), o.env);
  return locks.map((lock) => ({ lock, life: lockLife(lock, { host: o.host, sessions }) }));
}

/**
 * The lock keys (`.pulumi/locks/….json`) a pulumi refusal names, when `text` (its output) says
 * the stack is locked; undefined when it does not. The CLI words it as
 * "the stack is currently locked by N lock(s). …" and then, per lock,
 * "  <backend url>/<key>: created by USER@HOST (pid N) at TIME".
 */
export function lockedRefusal(text: string): string[] | undefined {
  if (!/the stack is currently locked by \d+ lock\(s\)/.test(text)) return undefined;
  // The URL may carry a query (`?sslmode=…`) after the key.
  const keys = [...text.matchAll(/(\.pulumi\/locks\/[^\s?]+\.json)(?:\?\S*)?: created by /g)].map(
    (m) => m[1]!,
  );
  return [...new Set(keys)];
}
