// The tests' PostgreSQL server (sim/world/postgres.ts, shared with the benches), with the
// backend the product's readers take (cli/team: sim/ loads nothing of cli/).
import * as fs from "node:fs";
import * as path from "node:path";
import { parseBackend, type PostgresBackend } from "../../cli/team/backend";
import { repoRoot } from "../../setup/pulumi/env";
import {
  havePostgres,
  type Postgres as Server,
  startPostgres as startServer,
} from "../../sim/world/postgres";
import { requireOrSkip } from "./requires";

export { havePostgres, postgresBinDir } from "../../sim/world/postgres";

export interface Postgres extends Server {
  /** The server as cli/team reads it (parseBackend of its URL). */
  readonly backend: PostgresBackend;
}

export async function startPostgres(o: { dir: string }): Promise<Postgres> {
  const pg = await startServer(o);
  return { ...pg, backend: parseBackend(pg.url) as PostgresBackend };
}

/** Whether the tests of a stack on PostgreSQL, driven by the real pulumi CLI, must skip here. */
export function skipWithoutPulumiAndPostgres(): boolean {
  return (
    requireOrSkip(
      "the pulumi toolchain",
      fs.existsSync(path.join(repoRoot, ".sparkform", "toolchain.env")),
      "`npm run setup` writes .sparkform/toolchain.env",
    ) ||
    requireOrSkip(
      "PostgreSQL (initdb, pg_ctl, psql)",
      havePostgres(),
      "`npm run setup` as root installs Debian's postgresql",
    )
  );
}

/**
 * This process's environment for the pulumi CLI, psql and sparkform against `pg`, with its state
 * directory `stateDir` and test/fixtures/drift-probe's files under `probeDir`: the password
 * reaches them through PGPASSFILE only, and no PULUMI_HOME or PGPASSWORD of the caller's.
 */
export function useBackend(pg: Postgres, stateDir: string, probeDir: string): void {
  process.env.SPARKFORM_STATE_DIR = stateDir;
  process.env.PULUMI_BACKEND_URL = pg.url;
  process.env.PGPASSFILE = pg.pgpassFile;
  process.env.DRIFT_PROBE_DIR = probeDir;
  delete process.env.PULUMI_HOME;
  delete process.env.PGPASSWORD;
}

/**
 * test/fixtures/drift-probe copied to `project` (node_modules the checkout's), with the probe's
 * per-node directories under `files`: the program the team tests drive the real CLI with.
 */
export function probeProject(project: string, files: string): void {
  const probe = path.join(repoRoot, "test", "fixtures", "drift-probe");
  fs.mkdirSync(project, { recursive: true });
  for (const f of ["Pulumi.yaml", "index.js"])
    fs.copyFileSync(path.join(probe, f), path.join(project, f));
  fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"));
  for (const d of ["spark-1", "spark-2"]) fs.mkdirSync(path.join(files, d), { recursive: true });
}

/** A team test's end: the environment as it was, the server stopped, its directory removed. */
export async function endPostgresTest(
  saved: NodeJS.ProcessEnv,
  pg: Postgres | undefined,
  work: string,
): Promise<void> {
  process.env = saved;
  await pg?.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
