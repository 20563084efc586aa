// What sparkform reads of a stack on PostgreSQL (the lock rows, doctor's facts; the checkpoint's
// update time, which the stack cache reads synchronously, is ./libpq.ts's),
// through psql with the connection in libpq's variables: a password is never put on a command
// line, where `ps` on the control node shows it, nor in a message (the URL shown has none).
import { execa } from "execa";
import type { PostgresBackend } from "./backend";
import { pgProblem, PsqlError, psqlMissing } from "./errors";
import { psqlArgs, psqlEnv, sqlTable, sqlText } from "./libpq";

export { psqlEnv };

/**
 * Runs one query with psql (unaligned, tuples only, no ~/.psqlrc) and returns its output;
 * throws a PsqlError with psql's own words and the fix (./errors.ts) when the server refuses or
 * is not there.
 */
export async function psql(
  pg: PostgresBackend,
  query: string,
  from: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const r = await execa("psql", psqlArgs(query), {
    env: psqlEnv(pg, from),
    extendEnv: false,
    reject: false,
    timeout: 30_000,
  });
  if ((r as { code?: string }).code === "ENOENT")
    throw new PsqlError(
      `psql is not installed, and the stack's state is on PostgreSQL (${pg.url}): sparkform ` +
        `reads its locks with psql. Install Debian's postgresql-client (or run \`npm run setup\` ` +
        `as root), then run the command again.`,
      psqlMissing(pg),
    );
  if (r.exitCode !== 0 || r.failed) {
    const problem = pgProblem(r.stderr || r.shortMessage || "", pg, from);
    throw new PsqlError(
      `could not query the stack's PostgreSQL backend ${problem.what}. To fix: ${problem.fix}.`,
      problem,
    );
  }
  return r.stdout;
}

/** A query's one JSON value (`select json_agg(…)`), or undefined when it is SQL NULL. */
export async function psqlJson(
  pg: PostgresBackend,
  query: string,
  from: NodeJS.ProcessEnv = process.env,
): Promise<unknown> {
  const out = (await psql(pg, query, from)).trim();
  return out === "" ? undefined : (JSON.parse(out) as unknown);
}

/** A row of the backend's table, its `data` as the driver stored it. */
export interface StateRow {
  readonly key: string;
  readonly data: unknown;
  readonly updated_at: string;
}

/** The table's rows whose key contains `fragment` (a plain string: no LIKE pattern). */
export async function stateRows(
  pg: PostgresBackend,
  fragment: string,
  from: NodeJS.ProcessEnv = process.env,
): Promise<StateRow[]> {
  // strpos, not LIKE: a stack's name may hold `_`, which LIKE reads as any character.
  const literal = sqlText(fragment);
  const table = sqlTable(pg);
  const rows = await psqlJson(
    pg,
    "select json_agg(json_build_object('key', key, 'data', data, 'updated_at', updated_at) " +
      `order by key) from ${table} where strpos(key, ${literal}) > 0`,
    from,
  );
  return Array.isArray(rows) ? (rows as StateRow[]) : [];
}

/**
 * A blob as Pulumi's postgres driver stored it: in a `json` column (CLI 3.248),
 * `{"data": "<base64 of the file's bytes>"}`; in a `bytea` one (later CLIs), the bytes, which
 * json_build_object renders as "\\x<hex>". A row of another shape is taken as the file's JSON.
 */
export function rowText(data: unknown): string {
  if (typeof data === "object" && data !== null && "data" in data) {
    const inner = (data as { data: unknown }).data;
    if (typeof inner === "string") return Buffer.from(inner, "base64").toString("utf8");
  }
  if (typeof data === "string" && /^\\x([0-9a-f]{2})*$/i.test(data))
    return Buffer.from(data.slice(2), "hex").toString("utf8");
  return typeof data === "string" ? data : JSON.stringify(data ?? null);
}
