// The tests' PostgreSQL server (sim/world/postgres.ts, shared with the benches), with the
// backend the product's readers take (cli/team: sim/ loads nothing of cli/).
import { parseBackend, type PostgresBackend } from "../../cli/team/backend";
import { type Postgres as Server, startPostgres as startServer } from "../../sim/world/postgres";

export { havePostgres, postgresBinDir } from "../../sim/world/postgres";

export interface Postgres extends Server {
  /** The server as cli/team reads it (parseBackend of its URL). */
  readonly backend: PostgresBackend;
}

export async function startPostgres(o: { dir: string }): Promise<Postgres> {
  const pg = await startServer(o);
  return { ...pg, backend: parseBackend(pg.url) as PostgresBackend };
}
