// cli/team/backend.ts and the postgres half of cli/drift/lock.ts without a server: which backend
// a URL names, what psql is handed (the password never in argv, nor in the URL a message
// shows), the keys of a stack's lock rows, a row as Pulumi's postgres driver stores it, and a
// lock's holder line, stale or alive. The real server and CLI: test/integration/team-backend.test.ts.
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { holderLine, isLockKey, isStale, parseLock } from "../../cli/drift/lock";
import { backendUrl, parseBackend } from "../../cli/team/backend";
import { psql, psqlEnv, rowText } from "../../cli/team/psql";
import { stateDir } from "../../setup/pulumi/env";

// As the pulumi CLI wrote it on PostgreSQL during an `up` (the row's `data`).
const LOCK =
  '{"pid":13388,"username":"root","hostname":"vm","timestamp":"2026-12-07T19:06:02.123456789Z"}';
const ROW = { data: Buffer.from(LOCK).toString("base64") };

describe("a backend URL", () => {
  it("file:// with an absolute directory is the file backend; a relative one is not readable here", () => {
    expect(parseBackend("file:///srv/state")).toEqual({ kind: "file", dir: "/srv/state" });
    expect(parseBackend("file://state")).toEqual({ kind: "other", url: "file://state" });
    expect(parseBackend("https://api.pulumi.com")).toEqual({
      kind: "other",
      url: "https://api.pulumi.com",
    });
  });

  it("the default is the checkout's own file backend (as pulumiEnv sets it)", () => {
    expect(backendUrl({})).toBe(`file://${path.join(stateDir(), "backend")}`);
    expect(backendUrl({ PULUMI_BACKEND_URL: "postgres://h/db" })).toBe("postgres://h/db");
  });

  it("postgres://: host, port, database, user and sslmode; no password in the URL it shows", () => {
    expect(parseBackend("postgres://sparkform@127.0.0.1:5433/pulumi?sslmode=disable")).toEqual({
      kind: "postgres",
      url: "postgres://sparkform@127.0.0.1:5433/pulumi?sslmode=disable",
      host: "127.0.0.1",
      port: 5433,
      database: "pulumi",
      user: "sparkform",
      sslmode: "disable",
      table: "pulumi_state",
      password: undefined,
    });
    const withPassword = parseBackend("postgresql://ops:s%3Acret@db.lab:5432/state");
    expect(withPassword).toMatchObject({
      kind: "postgres",
      url: "postgresql://ops@db.lab:5432/state",
      host: "db.lab",
      port: 5432,
      database: "state",
      user: "ops",
      sslmode: undefined,
      password: "s:cret",
    });
    expect(parseBackend("postgres://[::1]/pulumi?table=team_state")).toMatchObject({
      host: "::1",
      port: undefined,
      table: "team_state",
    });
  });

  it("`postgres://` alone: the connection is the operator's PG* variables, as for the pulumi CLI", () => {
    const pg = parseBackend("postgres://");
    expect(pg).toMatchObject({ kind: "postgres", host: undefined, database: undefined });
    if (pg.kind !== "postgres") throw new Error("not postgres");
    const env = psqlEnv(pg, { PGHOST: "db.lab", PGDATABASE: "state", PGUSER: "ops" });
    expect(env).toMatchObject({ PGHOST: "db.lab", PGDATABASE: "state", PGUSER: "ops" });
    expect(env.PGPORT).toBeUndefined();
  });

  it("psql's environment: the connection in PG* variables, the operator's PGPASSFILE kept, nothing else inherited", () => {
    const pg = parseBackend("postgres://ops:secret@db.lab:6000/state?sslmode=verify-full");
    if (pg.kind !== "postgres") throw new Error("not postgres");
    const env = psqlEnv(pg, {
      PATH: "/usr/bin",
      PGPASSFILE: "/home/ops/.pgpass",
      PULUMI_CONFIG: '{"secret":"x"}',
      PULUMI_CONFIG_PASSPHRASE: "p",
    });
    expect(env).toMatchObject({
      PATH: "/usr/bin",
      PGHOST: "db.lab",
      PGPORT: "6000",
      PGDATABASE: "state",
      PGUSER: "ops",
      PGSSLMODE: "verify-full",
      PGPASSWORD: "secret",
      PGPASSFILE: "/home/ops/.pgpass",
      PGCONNECT_TIMEOUT: "5",
    });
    expect(env.PULUMI_CONFIG).toBeUndefined();
    expect(env.PULUMI_CONFIG_PASSPHRASE).toBeUndefined();
  });
});

describe("psql", () => {
  it("missing: says so, what needs it and how to install it", async () => {
    const pg = parseBackend("postgres://ops@db.lab/state");
    if (pg.kind !== "postgres") throw new Error("not postgres");
    await expect(psql(pg, "select 1", { PATH: "/nonexistent" })).rejects.toThrow(
      "psql is not installed, and the stack's state is on PostgreSQL (postgres://ops@db.lab/state): " +
        "sparkform reads its locks with psql. Install Debian's postgresql-client",
    );
  });
});

describe("a stack's lock rows", () => {
  it("the project-scoped key and the older flat one are the stack's; others' are not", () => {
    const key = "pulumi/.pulumi/locks/organization/driftprobe/u/f06d1fa7.json";
    expect(isLockKey(key, "driftprobe", "u")).toBe(true);
    expect(isLockKey(".pulumi/locks/organization/driftprobe/u/x.json", "driftprobe", "u")).toBe(
      true,
    );
    expect(isLockKey("pulumi/.pulumi/locks/u/x.json", "driftprobe", "u")).toBe(true);
    expect(isLockKey(key, "driftprobe", "t")).toBe(false);
    expect(isLockKey(key, "other", "u")).toBe(false);
    expect(isLockKey(`${key}.bak`, "driftprobe", "u")).toBe(false);
    expect(isLockKey("pulumi/.pulumi/stacks/driftprobe/u.json", "driftprobe", "u")).toBe(false);
    expect(isLockKey("pulumi/.pulumi/locks/organization/driftprobe/u", "driftprobe", "u")).toBe(
      false,
    );
  });

  it("a row as the driver stores it (base64 in `data`) reads as the lock file it stands for", () => {
    expect(rowText(ROW)).toBe(LOCK);
    expect(parseLock(rowText(ROW), "k")).toEqual({
      user: "root",
      host: "vm",
      pid: 13388,
      since: "2026-12-07T19:06:02.123456789Z",
      file: "k",
    });
    // A `bytea` column (later CLIs), as json_build_object renders it.
    expect(rowText(`\\x${Buffer.from(LOCK).toString("hex")}`)).toBe(LOCK);
    // A row written as the JSON itself (another driver version) is read the same.
    expect(rowText(JSON.parse(LOCK))).toBe(LOCK);
    expect(parseLock(rowText(null), "k")).toMatchObject({ user: "?", host: "?", pid: undefined });
  });
});

describe("a lock's holder", () => {
  const lock = (host: string, pid: number | undefined) => ({
    ...parseLock(LOCK, "k"),
    host,
    pid,
  });

  it("on this host, by a pid that runs: alive", () => {
    const l = lock(os.hostname(), process.pid);
    expect(isStale(l)).toBe(false);
    expect(holderLine(l)).toBe(
      `root@${os.hostname()} (pid ${process.pid}) since 2026-12-07T19:06:02.123456789Z: its process still runs on this host`,
    );
  });

  it("on this host, by a pid that no longer runs: stale, and the command that removes it", () => {
    // Above any pid_max Linux allows (2^22): never a running process.
    const l = lock(os.hostname(), 5_000_000);
    expect(isStale(l)).toBe(true);
    expect(holderLine(l)).toBe(
      `root@${os.hostname()} (pid 5000000) since 2026-12-07T19:06:02.123456789Z: stale, pid 5000000 no longer runs on ${os.hostname()}; \`pulumi cancel --yes\` removes it`,
    );
  });

  it("on another host, or without a pid: not known here", () => {
    expect(isStale(lock("elsewhere", 1))).toBeUndefined();
    expect(isStale(lock(os.hostname(), undefined))).toBeUndefined();
    expect(holderLine(lock("elsewhere", 1), "here")).toBe(
      "root@elsewhere (pid 1) since 2026-12-07T19:06:02.123456789Z",
    );
  });
});
