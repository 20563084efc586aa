// doctor's backend checks without a server: libpq's refusals, as psql prints them, each mapped
// to one line and its fix (cli/team/errors.ts), with no password in either; which hosts are this
// machine (plain text is fine there) and the TLS finding; the passphrase checked against a stack's
// encryptionsalt as the pulumi CLI checks it. The real server and CLI:
// test/integration/team-doctor.test.ts.
import { describe, expect, it } from "vitest";
import { passphraseOpensSalt, postgresFindings, tlsFinding } from "../../cli/doctor/backend";
import { parseBackend, type PostgresBackend } from "../../cli/team/backend";
import { isLoopback, pgAddress, pgProblem, withoutPasswords } from "../../cli/team/errors";

const pg = (url: string) => parseBackend(url) as PostgresBackend;
const TEAM = pg("postgres://ops@db.lab:5433/state?sslmode=verify-full");

// libpq 15's words, as psql printed them.
const AT = 'psql: error: connection to server at "db.lab" (10.0.0.5), port 5433 failed: ';
const REFUSALS = {
  password: `${AT}FATAL:  password authentication failed for user "ops"`,
  nopassword: `${AT}fe_sendauth: no password supplied`,
  refused: `${AT}Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?`,
  timeout: `${AT}timeout expired`,
  socket:
    'psql: error: connection to server on socket "/var/run/postgresql/.s.PGSQL.5432" failed: No such file or directory\n\tIs the server running locally and accepting connections on that socket?',
  dns: 'psql: error: could not translate host name "db.lab" to address: Name or service not known',
  database: `${AT}FATAL:  database "state" does not exist`,
  role: `${AT}FATAL:  role "ops" does not exist`,
  hba: `${AT}FATAL:  no pg_hba.conf entry for host "10.0.0.7", user "ops", database "state", no encryption`,
  tls: `${AT}server does not support SSL, but SSL was required`,
};

describe("libpq's refusals, one line and one fix each", () => {
  it("a wrong or missing password names PGPASSFILE and the ~/.pgpass line's format", () => {
    for (const said of [REFUSALS.password, REFUSALS.nopassword]) {
      const p = pgProblem(said, TEAM, {});
      expect(p.kind).toBe("password");
      expect(p.what).not.toContain("\n");
      expect(p.what.startsWith("postgres://ops@db.lab:5433/state")).toBe(true);
      expect(p.fix).toContain("PGPASSFILE");
      expect(p.fix).toContain("host:port:database:user:password, mode 0600");
    }
    expect(pgProblem(REFUSALS.password, TEAM, {}).what).toContain(
      'password authentication failed for user "ops"',
    );
  });

  it("a server that does not answer asks whether it runs at host:port, how to see, and the firewall", () => {
    for (const said of [REFUSALS.refused, REFUSALS.timeout]) {
      const p = pgProblem(said, TEAM, {});
      expect(p.kind).toBe("unreachable");
      expect(p.fix).toContain("is the server running at db.lab:5433?");
      expect(p.fix).toContain("systemctl status postgresql");
      expect(p.fix).toContain("pg_ctl status");
      expect(p.fix).toContain("firewall");
    }
    const socket = pgProblem(REFUSALS.socket, pg("postgres:///state"), {});
    expect(socket.kind).toBe("unreachable");
    expect(socket.fix).toContain("/var/run/postgresql/.s.PGSQL.5432");
    const dns = pgProblem(REFUSALS.dns, TEAM, {});
    expect(dns.kind).toBe("unreachable");
    expect(dns.fix).toContain("db.lab does not resolve");
  });

  it("a missing database, role or pg_hba.conf entry, and a server without TLS, each name their fix", () => {
    const cases = [
      [REFUSALS.database, "database", "createdb -O ops state"],
      [REFUSALS.role, "role", "createuser --pwprompt ops"],
      [REFUSALS.hba, "hba", "pg_hba.conf"],
      [REFUSALS.tls, "tls", "ssl=on"],
    ] as const;
    for (const [said, kind, fix] of cases)
      expect(pgProblem(said, TEAM, {})).toMatchObject({ kind, fix: expect.stringContaining(fix) });
  });

  it("no password reaches a line: one in the URL or PGPASSWORD is masked wherever it appears", () => {
    const withPw = pg("postgres://ops:hunter2@db.lab/state");
    expect(withPw.url).not.toContain("hunter2");
    const p = pgProblem(`${AT}FATAL:  role "hunter2" and s3cret do not exist`, withPw, {
      PGPASSWORD: "s3cret",
    });
    expect(`${p.what} ${p.fix}`).not.toMatch(/hunter2|s3cret/);
    expect(withoutPasswords("a hunter2 b", withPw, {})).toBe("a *** b");
  });

  it("the address: the URL's, else PGHOST and PGPORT, else Debian's socket and 5432", () => {
    expect(pgAddress(TEAM, { PGHOST: "x", PGPORT: "1" })).toEqual({ host: "db.lab", port: 5433 });
    expect(pgAddress(pg("postgres:///s"), { PGHOST: "h", PGPORT: "6000" })).toEqual({
      host: "h",
      port: 6000,
    });
    expect(pgAddress(pg("postgres:///s"), {})).toEqual({
      host: "/var/run/postgresql",
      port: 5432,
    });
  });
});

describe("no psql on this machine", () => {
  it("is the one backend line, naming Debian's postgresql-client and `npm run setup`", async () => {
    const findings = await postgresFindings(TEAM, { PATH: "/nonexistent" });
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ check: "backend", status: "fail" });
    expect(findings[0]!.what).toContain("psql is not installed");
    expect(findings[0]!.fix).toContain("postgresql-client");
    expect(findings[0]!.fix).toContain("npm run setup");
  });
});

describe("TLS: plain text only where it never leaves this machine", () => {
  it("loopback: 127.0.0.0/8, ::1, localhost, a unix socket's directory", () => {
    for (const h of ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost", "/run/postgresql"])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ["db.lab", "10.0.0.5", "128.0.0.1", "::2", "localhost.lab", "127.0.0.1.nip.io"])
      expect(isLoopback(h), h).toBe(false);
  });

  it("plain text to another host is a warn naming sslmode=verify-full and ssl=on; loopback or TLS pass", () => {
    const off = tlsFinding("db.lab", false, undefined);
    expect(off.status).toBe("warn");
    expect(off.fix).toContain("?sslmode=verify-full");
    expect(off.fix).toContain("ssl=on");
    expect(tlsFinding("127.0.0.1", false, "disable").status).toBe("pass");
    expect(tlsFinding("/run/postgresql", false, undefined).status).toBe("pass");
    expect(tlsFinding("db.lab", true, "verify-full")).toMatchObject({
      status: "pass",
      what: "the connection is encrypted (TLS, sslmode=verify-full)",
    });
  });
});

describe("the passphrase against a stack's encryptionsalt", () => {
  // What `pulumi stack init --secrets-provider passphrase` (3.248) wrote with the passphrase "right".
  const SALT = "v1:HNwEvSSQWnQ=:v1:Uc5qHXyGZbD9O6GS:GS67CqUOgtPG3lSaKEcshWtxCHoqtQ==";

  it("the passphrase that made it opens it; another, or a malformed salt, does not", async () => {
    expect(await passphraseOpensSalt("right", SALT)).toBe(true);
    expect(await passphraseOpensSalt("wrong", SALT)).toBe(false);
    expect(await passphraseOpensSalt("right", "v1:garbage")).toBe(false);
  });
});
