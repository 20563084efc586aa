// Where a stack's state lives, read from the backend URL the pulumi CLI gets (setup/pulumi/env.ts
// decides it: PULUMI_BACKEND_URL, else the team setting, else the checkout's file:// directory). A team's stack lives on
// PostgreSQL (Pulumi's DIY postgres backend, issue 36): one table `pulumi_state(key, data,
// updated_at)` whose keys mirror the file backend's layout, read through psql (./psql.ts). Every
// CLI command loads this module (cli/stack-cache.ts asks it for the file backend), so it runs
// nothing and loads nothing that does.
import * as path from "node:path";
import { backendUrl } from "../../setup/pulumi/env";

export interface PostgresBackend {
  readonly kind: "postgres";
  /** The URL with any password taken out: what a message or a log may show. */
  readonly url: string;
  /**
   * What the URL names of the connection; what it leaves out (`postgres://` alone is valid)
   * comes from the operator's PGHOST, PGPORT, PGDATABASE and PGUSER, as for the pulumi CLI.
   */
  readonly host: string | undefined;
  readonly port: number | undefined;
  readonly database: string | undefined;
  readonly user: string | undefined;
  /** The URL's sslmode, when it names one (libpq's default, `prefer`, otherwise). */
  readonly sslmode: string | undefined;
  /** The state's table: the URL's `table`, else the backend's default. */
  readonly table: string;
  /** A password written into the URL (discouraged): handed to psql as PGPASSWORD only. */
  readonly password: string | undefined;
}

export type Backend =
  | { readonly kind: "file"; readonly dir: string }
  | PostgresBackend
  | { readonly kind: "other"; readonly url: string };

export { backendUrl };

/**
 * What `url` names: a file backend's directory (absolute only: a relative one depends on the
 * pulumi CLI's working directory), a PostgreSQL database, or another backend (Pulumi Cloud, a
 * bucket) that sparkform reads nothing of itself.
 */
export function parseBackend(url: string): Backend {
  if (url.startsWith("file://")) {
    const dir = url.slice("file://".length);
    return path.isAbsolute(dir) ? { kind: "file", dir } : { kind: "other", url };
  }
  if (!/^postgres(ql)?:\/\//.test(url)) return { kind: "other", url };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { kind: "other", url };
  }
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  u.password = "";
  const given = (x: string) => (x ? decodeURIComponent(x) : undefined);
  return {
    kind: "postgres",
    url: u.toString(),
    host: given(u.hostname.replace(/^\[(.*)\]$/, "$1")),
    port: u.port ? Number(u.port) : undefined,
    database: given(u.pathname.replace(/^\//, "")),
    user: given(u.username),
    sslmode: u.searchParams.get("sslmode") ?? undefined,
    table: u.searchParams.get("table") || "pulumi_state",
    password,
  };
}

/** The stack's backend, from the environment the pulumi CLI gets. */
export function currentBackend(env: NodeJS.ProcessEnv = process.env): Backend {
  return parseBackend(backendUrl(env));
}
