// What libpq's refusals mean for a stack on PostgreSQL, each as one line and the one thing to
// do: psql (./psql.ts) throws them, `sparkform doctor` reports them (cli/doctor/backend.ts).
// libpq's own words say what failed but not where the operator's password or server lives; the
// fix says that. No password ever reaches a message: libpq does not print it, and any the URL or
// PGPASSWORD carried is taken out of the text before it is shown.
import type { PostgresBackend } from "./backend";

export type PgProblemKind =
  "psql-missing" | "password" | "unreachable" | "database" | "role" | "hba" | "tls" | "other";

export interface PgProblem {
  readonly kind: PgProblemKind;
  /** What happened, in libpq's words where it gave any (one line). */
  readonly what: string;
  /** What to do. */
  readonly fix: string;
}

/** Where psql connects: the URL's host and port, else libpq's variables, else its defaults. */
export interface PgAddress {
  /** A host name, an address, or a unix socket's directory (starts with `/`). */
  readonly host: string;
  readonly port: number;
}

export function pgAddress(pg: PostgresBackend, env: NodeJS.ProcessEnv = process.env): PgAddress {
  // Debian's libpq, without a host, uses the socket in /var/run/postgresql.
  const host = pg.host || env.PGHOST || "/var/run/postgresql";
  const port = pg.port ?? (env.PGPORT ? Number(env.PGPORT) : 5432);
  return { host, port };
}

/** `host:port`, or the socket's path, as an operator would look for it. */
export function addressText(a: PgAddress): string {
  return a.host.startsWith("/") ? `${a.host}/.s.PGSQL.${a.port}` : `${a.host}:${a.port}`;
}

/**
 * Whether the connection never leaves this machine: a unix socket, localhost, 127.0.0.0/8 or
 * ::1. Plain text there is read by nobody a TLS connection would keep out.
 */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return (
    h === "" ||
    h.startsWith("/") ||
    h === "localhost" ||
    h === "::1" ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) ||
    /^::ffff:127\./.test(h)
  );
}

/** `text` with every password this connection could carry replaced by `***`. */
export function withoutPasswords(
  text: string,
  pg: PostgresBackend,
  env: NodeJS.ProcessEnv = process.env,
): string {
  let out = text;
  for (const p of [pg.password, env.PGPASSWORD])
    if (p && p.length >= 1) out = out.split(p).join("***");
  return out;
}

/** psql's stderr as one line: its `psql: error:` prefix and libpq's FATAL markers left out. */
function oneLine(stderr: string): string {
  return stderr
    .replace(/^psql:\s*(error:\s*)?/gm, "")
    .replace(/\b(FATAL|ERROR):\s+/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

const PGPASS_FIX =
  "put this user's password in the file PGPASSFILE names (default ~/.pgpass), one line " +
  "host:port:database:user:password, mode 0600 (chmod 600 it: libpq ignores a file others can " +
  "read); the team's password comes from your secret store, never the URL";

/** The problem psql's `stderr` names, for backend `pg`. */
export function pgProblem(
  stderr: string,
  pg: PostgresBackend,
  env: NodeJS.ProcessEnv = process.env,
): PgProblem {
  const a = pgAddress(pg, env);
  const at = addressText(a);
  const said = withoutPasswords(oneLine(stderr), pg, env);
  const what = `${pg.url}: ${said || "psql failed without a message"}`;
  const user = pg.user ?? env.PGUSER ?? "(your login name)";
  const database = pg.database ?? env.PGDATABASE ?? user;
  if (
    /password authentication failed|no password supplied|password is required|authentication failed for user/i.test(
      said,
    )
  )
    return { kind: "password", what, fix: PGPASS_FIX };
  if (/could not translate host name/i.test(said))
    return {
      kind: "unreachable",
      what,
      fix: `the host name ${a.host} does not resolve here: correct the backend URL's host (.sparkform/team.json, or PULUMI_BACKEND_URL) or this machine's DNS`,
    };
  if (
    /connection refused|timeout expired|timed out|no route to host|network is unreachable|no such file or directory|is the server running/i.test(
      said,
    )
  )
    return {
      kind: "unreachable",
      what,
      fix:
        `is the server running at ${at}? On the database host: \`systemctl status postgresql\` ` +
        `(or \`pg_ctl status -D <data directory>\`); then check its listen_addresses and port, ` +
        `and any firewall between here and port ${a.port}`,
    };
  if (/database "[^"]*" does not exist/i.test(said))
    return {
      kind: "database",
      what,
      fix:
        `create it on the server (\`createdb -O ${user} ${database}\` as the postgres superuser), ` +
        `or correct the database the backend URL names`,
    };
  if (/role "[^"]*" does not exist/i.test(said))
    return {
      kind: "role",
      what,
      fix: `create the role on the server (\`createuser --pwprompt ${user}\` as the postgres superuser), or correct the user the backend URL names`,
    };
  if (/no pg_hba\.conf entry/i.test(said))
    return {
      kind: "hba",
      what,
      fix:
        `the server does not let ${user} in from this host: add a line to its pg_hba.conf ` +
        `(\`hostssl ${database} ${user} <this host's address>/32 scram-sha-256\`), then ` +
        `\`systemctl reload postgresql\``,
    };
  if (/\bSSL\b|certificate|sslmode/i.test(said))
    return {
      kind: "tls",
      what,
      fix:
        "turn TLS on at the server (ssl=on with its certificate) and give this machine the CA " +
        "that signed it (PGSSLROOTCERT, default ~/.postgresql/root.crt) for ?sslmode=verify-full",
    };
  return {
    kind: "other",
    what,
    fix:
      `check that the server at ${at} is running and reachable, and that PGPASSFILE (or a ` +
      `~/.pgpass line host:port:database:user:password, mode 0600) holds this user's password`,
  };
}

/** psql is not on PATH. */
export function psqlMissing(pg: PostgresBackend): PgProblem {
  return {
    kind: "psql-missing",
    what: `psql is not installed, and the stack's state is on PostgreSQL (${pg.url})`,
    fix: "install Debian's postgresql-client (or run `npm run setup` as root)",
  };
}

/** A psql run that failed, with what it means. */
export class PsqlError extends Error {
  constructor(
    message: string,
    readonly problem: PgProblem,
  ) {
    super(message);
    this.name = "PsqlError";
  }
}
