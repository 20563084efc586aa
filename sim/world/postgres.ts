// A real PostgreSQL of a test's or a bench's own (test/integration/team-*.test.ts through
// test/support/postgres.ts, bench/team-cli.ts; Debian's package, `npm run setup` installs it as
// root): initdb in a temporary directory, the server on a free loopback port and a socket in that
// directory, password authentication (scram-sha-256) for the one role `sparkform`, stopped and
// removed by stop(). initdb refuses to run as root, so as root the cluster belongs to the
// `postgres` system user. The password reaches clients only through a 0600 PGPASSFILE: never a
// URL or a command line.
import { execa } from "execa";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { freePort } from "./free-port";

/** initdb refuses to run as root: then the cluster belongs to the `postgres` system user. */
const isRoot = process.getuid?.() === 0;

const USER = "sparkform";
const DATABASE = "pulumi";

/** Where initdb and pg_ctl are: on PATH, else Debian's versioned directory. */
export function postgresBinDir(): string | undefined {
  const onPath = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" });
  if (onPath.status === 0 && onPath.stdout.trim()) return path.dirname(onPath.stdout.trim());
  const lib = "/usr/lib/postgresql";
  const versions = fs.existsSync(lib)
    ? fs
        .readdirSync(lib)
        .filter((v) => fs.existsSync(path.join(lib, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  return versions[0] ? path.join(lib, versions[0], "bin") : undefined;
}

const havePsql = () => spawnSync("sh", ["-c", "command -v psql"]).status === 0;
const haveSystemUser = () => spawnSync("id", ["-u", "postgres"]).status === 0;

/** Whether a test can start its own server here (initdb, pg_ctl, psql; as root, the `postgres` user). */
export const havePostgres = () =>
  postgresBinDir() !== undefined && havePsql() && (!isRoot || haveSystemUser());

export interface Postgres {
  /** postgres://sparkform@127.0.0.1:PORT/pulumi?sslmode=disable: no password in it. */
  readonly url: string;
  /** The 0600 libpq password file a client names in PGPASSFILE. */
  readonly pgpassFile: string;
  readonly database: string;
  /** The environment a client adds: PGPASSFILE. */
  readonly env: Record<string, string>;
  /** Runs `query` as `sparkform`; each output line split on `|` (psql -At). */
  sql(query: string): Promise<string[][]>;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

/**
 * Starts a server whose data, socket and password files live under `dir` (created; removed by
 * stop()). Throws with the server's log when it does not start.
 */
export async function startPostgres(o: { dir: string }): Promise<Postgres> {
  const bin = postgresBinDir();
  if (!bin)
    throw new Error(
      "initdb is not installed: run `npm run setup` as root (it installs postgresql)",
    );
  fs.mkdirSync(o.dir, { recursive: true });
  const server = fs.mkdtempSync(path.join(o.dir, "pg-"));
  const data = path.join(server, "data");
  const pwfile = path.join(server, "pwfile");
  const password = randomBytes(18).toString("base64url");
  fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  // As root the server runs as `postgres`, which must own its directory and read the pwfile.
  const owner = isRoot ? { uid: uidOf("postgres"), gid: gidOf("postgres") } : undefined;
  if (owner) {
    // `postgres` must reach the directory: a test's mkdtemp parent is 0700.
    for (let d = o.dir; d !== path.dirname(d); d = path.dirname(d)) {
      const mode = fs.statSync(d).mode;
      if ((mode & 0o001) === 0) fs.chmodSync(d, (mode & 0o7777) | 0o011);
    }
    fs.chownSync(server, owner.uid, owner.gid);
    fs.chownSync(pwfile, owner.uid, owner.gid);
  }
  const as = (cmd: string, args: string[]) =>
    execa(isRoot ? "runuser" : cmd, isRoot ? ["-u", "postgres", "--", cmd, ...args] : args, {
      reject: false,
      all: true,
      env: { PATH: process.env.PATH ?? "", LANG: "C.UTF-8" },
      extendEnv: false,
    });
  const port = await freePort();
  const log = path.join(server, "server.log");
  const init = await as(path.join(bin, "initdb"), [
    "-D",
    data,
    "-A",
    "scram-sha-256",
    "-U",
    USER,
    `--pwfile=${pwfile}`,
    "-E",
    "UTF8",
    "--no-sync",
  ]);
  fs.rmSync(pwfile, { force: true });
  if (init.exitCode !== 0) throw new Error(`initdb failed (exit ${init.exitCode}):\n${init.all}`);
  const opts = `-c listen_addresses=127.0.0.1 -p ${port} -k ${server} -c fsync=off`;
  const start = await as(path.join(bin, "pg_ctl"), [
    "-D",
    data,
    "-l",
    log,
    "-o",
    opts,
    "-w",
    "start",
  ]);
  if (start.exitCode !== 0) {
    const text = fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "";
    throw new Error(`pg_ctl start failed (exit ${start.exitCode}):\n${start.all}\n${text}`);
  }
  const stop = async () => {
    await as(path.join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"]);
    fs.rmSync(server, { recursive: true, force: true });
  };
  // Root's own file (psql runs as the test), beside the server's directory.
  const pgpassFile = path.join(o.dir, `pgpass-${port}`);
  fs.writeFileSync(pgpassFile, `127.0.0.1:${port}:*:${USER}:${password}\n`, { mode: 0o600 });
  const url = `postgres://${USER}@127.0.0.1:${port}/${DATABASE}?sslmode=disable`;
  const env = { PGPASSFILE: pgpassFile };
  // psql as `sparkform`, the connection in libpq's variables (sim/ loads nothing of cli/, whose
  // psql the tests' wrapper, test/support/postgres.ts, adds).
  const run = async (database: string, query: string) => {
    const r = await execa("psql", ["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-c", query], {
      env: {
        PATH: process.env.PATH ?? "",
        LANG: "C.UTF-8",
        PGHOST: "127.0.0.1",
        PGPORT: String(port),
        PGUSER: USER,
        PGDATABASE: database,
        PGSSLMODE: "disable",
        PGPASSFILE: pgpassFile,
      },
      extendEnv: false,
      reject: false,
      all: true,
    });
    if (r.exitCode !== 0)
      throw new Error(`psql failed (exit ${r.exitCode}) on ${query}:\n${r.all}`);
    return r.stdout;
  };
  try {
    await run("postgres", `create database ${DATABASE}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    pgpassFile,
    database: DATABASE,
    env,
    async sql(query) {
      const out = await run(DATABASE, query);
      return out === "" ? [] : out.split("\n").map((l) => l.split("|"));
    },
    async stop() {
      await stop();
      fs.rmSync(pgpassFile, { force: true });
    },
  };
}

function uidOf(user: string): number {
  return Number(spawnSync("id", ["-u", user], { encoding: "utf8" }).stdout.trim());
}

function gidOf(user: string): number {
  return Number(spawnSync("id", ["-g", user], { encoding: "utf8" }).stdout.trim());
}
