// A lock holder's session on PostgreSQL (issue 36, "two control nodes, one stack"). Pulumi's
// lock row has no lease, and its pid says something only on the holder's own host: another
// control node cannot tell a running `up` from one whose control node died. So while
// `npm run pulumi` runs a verb that takes the lock, it keeps one psql connection open whose
// application_name names the holder (`sparkform-lock pid=<pulumi's pid> host=<hostname>`, the
// lock row's own pid and hostname), and records in `sparkform_lock_sessions` that it opened one.
// The connection dies with the control node: psql is in the wrapper's process group and reads
// its stdin from the wrapper (a SIGKILL ends it, and the kernel closes its socket), and the
// server's TCP keepalives end it within seconds of a network cut. Any control node then reads
// pg_stat_activity: a lock whose session is open is live; one whose session was opened and is
// gone is stale; one that never had a session was taken outside sparkform (plain `pulumi`), and
// nothing here can tell whether its holder runs.
import { type ChildProcess, spawn } from "node:child_process";
import type { PostgresBackend } from "./backend";
import { sqlText } from "./libpq";
import { psqlEnv, psqlJson } from "./psql";

/** The table of sessions opened: what tells "its session ended" from "it never had one". */
export const SESSIONS_TABLE = "sparkform_lock_sessions";

/** The server keeps at most this many bytes of application_name (NAMEDATALEN - 1). */
const APPNAME_MAX = 63;

/**
 * The application_name of the session for pulumi process `pid` on `host`: the pid first, so a
 * long hostname the server clips still leaves the pid whole.
 */
export function sessionName(host: string, pid: number): string {
  // The server replaces what is not printable ASCII with `?`; so does this, so both sides agree.
  return `sparkform-lock pid=${pid} host=${host}`
    .replace(/[^\x20-\x7e]/g, "?")
    .slice(0, APPNAME_MAX);
}

/**
 * The pulumi verbs that take the stack's lock on a DIY backend (preview takes none, nor
 * `cancel`, which deletes the locks); `update` is `up`'s other name.
 */
const LOCKING = new Set(["up", "update", "refresh", "destroy", "import", "watch"]);

/** Global flags of the pulumi CLI that take a value as the next argument. */
const VALUED = new Set(["-C", "--cwd", "--color", "--tracing", "--profiling", "--logflow"]);

/** The verb of a pulumi argv (its first positional argument), if any. */
export function pulumiVerb(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (VALUED.has(a)) i++;
    else if (!a.startsWith("-")) return a;
  }
  return undefined;
}

/** Whether `argv` runs a verb that takes the stack's lock. */
export const takesLock = (argv: readonly string[]) => LOCKING.has(pulumiVerb(argv) ?? "");

/** A sparkform session the server has a record of. */
export interface OpenedSession {
  readonly host: string;
  readonly pid: number;
  /** When it opened, by the holder's clock (the same clock that timed the lock). */
  readonly started: string;
}

/** What the backend tells of lock holders' sessions. */
export interface HolderSessions {
  /** The application_names of the sparkform lock sessions open now. */
  readonly open: readonly string[];
  /** The sessions opened and not closed by their wrapper: those whose control node died. */
  readonly opened: readonly OpenedSession[];
}

/**
 * The open sessions (pg_stat_activity shows every role's application_name to any role) and the
 * recorded ones. Read before the lock rows: a holder ends its lock before its session, so a
 * session seen gone here cannot belong to a lock that is read afterwards and still released
 * normally.
 */
export async function holderSessions(
  pg: PostgresBackend,
  env: NodeJS.ProcessEnv = process.env,
): Promise<HolderSessions> {
  const now = (await psqlJson(
    pg,
    "select json_build_object('open', (select coalesce(json_agg(application_name), '[]') " +
      "from pg_stat_activity where application_name like 'sparkform-lock %'), " +
      `'recorded', to_regclass(${sqlText(SESSIONS_TABLE)}) is not null)`,
    env,
  )) as { open: string[]; recorded: boolean };
  const opened = now.recorded
    ? ((await psqlJson(
        pg,
        "select coalesce(json_agg(json_build_object('host', host, 'pid', pid, 'started', started)), '[]') " +
          `from ${SESSIONS_TABLE}`,
        env,
      )) as OpenedSession[])
    : [];
  return { open: now.open, opened };
}

export interface LockSession {
  /** Ends the session (recording that it closed normally) and waits for psql to exit. */
  close(): Promise<void>;
}

/** Server-side keepalives: a control node cut off the network is seen gone in about 11 s. */
const KEEPALIVE = { idle: 5, interval: 2, count: 3 };

/**
 * Opens the session of pulumi process `pid` on `host`. It never fails the command it serves:
 * the lock still works without it, only another control node's verdict on it is lost, so a
 * session that cannot open says so once, with the fix, on `warn`.
 */
export function openLockSession(
  pg: PostgresBackend,
  holder: { host: string; pid: number },
  env: NodeJS.ProcessEnv = process.env,
  warn: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): LockSession {
  const { host, pid } = holder;
  const started = new Date().toISOString();
  // Keepalives are connection parameters libpq reads from no variable: a conninfo string in
  // place of the database name, holding no secret (the rest still comes from the PG* variables).
  const conninfo =
    `keepalives=1 keepalives_idle=${KEEPALIVE.idle} ` +
    `keepalives_interval=${KEEPALIVE.interval} keepalives_count=${KEEPALIVE.count}`;
  let child: ChildProcess;
  try {
    child = spawn("psql", ["-X", "-q", "-d", conninfo], {
      env: { ...psqlEnv(pg, env), PGAPPNAME: sessionName(host, pid) },
      stdio: ["pipe", "ignore", "pipe"],
    });
  } catch (err) {
    warn(`sparkform: could not open the lock session: ${(err as Error).message}`);
    return { close: async () => {} };
  }
  let stderr = "";
  let closing = false;
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000);
  });
  const exited = new Promise<void>((resolve) => {
    child.on("error", (err) => {
      warn(
        `sparkform: could not open the lock session (${(err as NodeJS.ErrnoException).code ?? err.message}): ` +
          `another control node cannot tell whether this command still holds the stack's lock. ` +
          `Install Debian's postgresql-client for the next run.`,
      );
      resolve();
    });
    child.on("exit", (code) => {
      if (!closing && code !== 0)
        warn(
          `sparkform: the lock session to ${pg.url} ended (psql exit ${code}: ${stderr.trim()}); ` +
            `another control node will take this command's lock for stale. The command itself goes on.`,
        );
      resolve();
    });
  });
  child.stdin?.on("error", () => {
    // psql gone: reported by its exit.
  });
  const row = `${SESSIONS_TABLE} where host = ${sqlText(host)} and pid = ${pid}`;
  child.stdin?.write(
    [
      `set tcp_keepalives_idle = ${KEEPALIVE.idle};`,
      `set tcp_keepalives_interval = ${KEEPALIVE.interval};`,
      `set tcp_keepalives_count = ${KEEPALIVE.count};`,
      // The record outlives the session; made by whoever opens the first, readable and
      // writable by every operator's role (a non-owner's grant only warns).
      `create table if not exists ${SESSIONS_TABLE} (host text not null, pid integer not null, ` +
        `started timestamptz not null, primary key (host, pid, started));`,
      `grant select, insert, delete on ${SESSIONS_TABLE} to public;`,
      // Records of dead control nodes whose locks were long since cancelled.
      `delete from ${SESSIONS_TABLE} where started < now() - interval '30 days';`,
      `insert into ${SESSIONS_TABLE} values (${sqlText(host)}, ${pid}, ${sqlText(started)});`,
      "",
    ].join("\n"),
  );
  return {
    async close() {
      closing = true;
      if (child.exitCode === null && child.stdin?.writable) {
        child.stdin.write(`delete from ${row};\n\\q\n`);
        child.stdin.end();
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
