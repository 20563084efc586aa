// How sparkform starts psql. Every CLI command that reads a stack on PostgreSQL asks the
// checkpoint's update time through here, synchronously (cli/stack-cache.ts computes its keys
// so): spawnSync, not psql.ts's execa, whose queries are async.
// The connection goes in libpq's variables: a password is never put on a command line, where
// `ps` on the control node shows it.
import { spawnSync } from "node:child_process";
import { childEnv } from "../../components/transport";
import type { PostgresBackend } from "./backend";

/**
 * libpq's variables that choose how psql authenticates and verifies the server: the operator's
 * own (their password file, client certificate), passed through unchanged.
 */
const LIBPQ_PASS = [
  "PGHOST",
  "PGHOSTADDR",
  "PGPORT",
  "PGDATABASE",
  "PGUSER",
  "PGSSLMODE",
  "PGPASSFILE",
  "PGPASSWORD",
  "PGSERVICE",
  "PGSERVICEFILE",
  "PGSSLCERT",
  "PGSSLKEY",
  "PGSSLROOTCERT",
  "PGSSLCRL",
  "PGCONNECT_TIMEOUT",
] as const;

/** psql's environment for `pg`: the connection in PG* variables, nothing of it in argv. */
export function psqlEnv(
  pg: PostgresBackend,
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const set: Record<string, string> = {
    // A server that does not answer must not hang a CLI command.
    PGCONNECT_TIMEOUT: from.PGCONNECT_TIMEOUT ?? "5",
  };
  if (pg.host) set.PGHOST = pg.host;
  if (pg.port) set.PGPORT = String(pg.port);
  if (pg.database) set.PGDATABASE = pg.database;
  if (pg.user) set.PGUSER = pg.user;
  if (pg.sslmode) set.PGSSLMODE = pg.sslmode;
  if (pg.password) set.PGPASSWORD = pg.password;
  return childEnv({ pass: [...LIBPQ_PASS], set }, from);
}

/** psql's arguments for one query: unaligned, tuples only, no ~/.psqlrc, stop on an error. */
export function psqlArgs(query: string): string[] {
  return ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-c", query];
}

/** `text` as an SQL string literal. */
export const sqlText = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** The backend's table as an SQL identifier. */
export const sqlTable = (pg: PostgresBackend) => `"${pg.table.replace(/"/g, '""')}"`;

/**
 * The query of the stack's checkpoint rows (their keys and update times): the project-scoped
 * layout and the older flat one, each plain or gzipped, as the file backend keeps them.
 */
export function checkpointQuery(pg: PostgresBackend, project: string, stack: string): string {
  const suffixes = [`/.pulumi/stacks/${project}/${stack}`, `/.pulumi/stacks/${stack}`].flatMap(
    (s) => [`${s}.json`, `${s}.json.gz`],
  );
  // right(), not LIKE: a stack's name may hold `_`, which LIKE reads as any character.
  const where = suffixes.map((s) => `right(key, ${[...s].length}) = ${sqlText(s)}`).join(" or ");
  return (
    "select json_agg(json_build_array(key, updated_at) order by key) " +
    `from ${sqlTable(pg)} where ${where}`
  );
}

/**
 * The keys and update times (the server's timestamptz, to the microsecond) of the stack's
 * checkpoint rows (checkpointQuery), as JSON. Every `up`, `refresh` or `import`, from this
 * checkout or another, rewrites the row and so changes its time. Undefined when there is none
 * (a stack whose layout this does not know must not be cached on a time that never changes) or
 * when psql cannot answer (not installed, the server down or refusing): the caller then reads
 * through pulumi, which says what is wrong in its own words.
 */
export function checkpointStampSync(
  pg: PostgresBackend,
  project: string,
  stack: string,
  from: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const r = spawnSync("psql", psqlArgs(checkpointQuery(pg, project, stack)), {
    env: psqlEnv(pg, from),
    encoding: "utf8",
    timeout: 15_000,
  });
  if (r.error || r.status !== 0) return undefined;
  const out = r.stdout.trim();
  return out.startsWith("[") ? out : undefined;
}
