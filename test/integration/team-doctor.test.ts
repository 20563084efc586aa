// `sparkform doctor` on a stack whose state is on a real PostgreSQL (test/support/postgres.ts),
// made and read by the real pulumi CLI (issue 36): healthy, the backend's lines pass (reachable
// with the server's version, the table, plain text fine on loopback, the passphrase decrypts
// the stack); a wrong password in PGPASSFILE, a server that does not answer, or a wrong
// passphrase is exactly one fail line naming its fix, the password in no line, and doctor stops
// there: no config read, no node tried (the stack's one node is a host that cannot exist, which
// a healthy run does try). Also: a stack with no secret yet is checked against its
// encryptionsalt; a database without the state's table is a warn; and the real CLI entry's
// report and exit code. No simulated cluster, no program run.
import { execa } from "execa";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decryptFinding, postgresFindings } from "../../cli/doctor/backend";
import { doctor, EXIT, exitCode, renderFindings, type Finding } from "../../cli/doctor";
import { parseBackend, type PostgresBackend } from "../../cli/team/backend";
import { repoRoot } from "../../setup/pulumi/env";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { freePort } from "../support/prometheus";
import {
  type Postgres,
  skipWithoutPulumiAndPostgres,
  startPostgres,
  endPostgresTest,
} from "../support/postgres";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "team-doctor-"));
const projectDir = path.join(work, "project");
const passphrase = path.join(work, "team-passphrase");
const STACK = "t";
const NODE = "spark-1";
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHotKQgqqiemTGB/6SmyM/G48iZRmJFDHA58qr3L3Kc3";
const saved = { ...process.env };
let pulumi: PulumiCli;
let pg: Postgres;

/** The password startPostgres wrote into its PGPASSFILE: it must appear in no line doctor prints. */
const password = () => fs.readFileSync(pg.pgpassFile, "utf8").trim().split(":")[4]!;

async function run(): Promise<{ findings: Finding[]; text: string }> {
  const findings = await doctor({ stack: STACK, projectDir });
  const text = renderFindings(findings).join("\n");
  console.log(text);
  return { findings, text };
}

/** Doctor stopped at the backend: the one fail line, nothing of the config, no node tried. */
function expectStoppedAt(findings: Finding[], check: string): Finding {
  const fails = findings.filter((f) => f.status === "fail");
  expect(fails.map((f) => f.check)).toEqual([check]);
  expect(findings.filter((f) => f.where === NODE)).toEqual([]);
  expect(findings.filter((f) => f.where === "config")).toEqual([]);
  expect(findings.every((f) => f.where === "control node" || f.where === "backend")).toBe(true);
  expect(exitCode(findings)).toBe(EXIT.fail);
  return fails[0]!;
}

function withEnv<T>(set: Record<string, string>, f: () => Promise<T>): Promise<T> {
  const before = { ...process.env };
  Object.assign(process.env, set);
  return f().finally(() => {
    process.env = before;
  });
}

describe.skipIf(skipWithoutPulumiAndPostgres())("sparkform doctor on a stack on PostgreSQL", () => {
  beforeAll(async () => {
    pg = await startPostgres({ dir: path.join(work, "pg") });
    fs.mkdirSync(projectDir);
    fs.writeFileSync(
      path.join(projectDir, "Pulumi.yaml"),
      "name: sparkform-team-doctor\nruntime: nodejs\n" +
        "description: holds team-doctor.test.ts's stacks (no program runs)\n",
    );
    fs.writeFileSync(passphrase, "the team's passphrase\n", { mode: 0o600 });
    process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
    process.env.PULUMI_BACKEND_URL = pg.url;
    process.env.PGPASSFILE = pg.pgpassFile;
    process.env.PULUMI_CONFIG_PASSPHRASE_FILE = passphrase;
    for (const v of ["PULUMI_HOME", "PGPASSWORD", "PULUMI_CONFIG_PASSPHRASE"])
      delete process.env[v];
    pulumi = pulumiCli(projectDir);
    for (const s of [STACK, "e"])
      await pulumi.run(["stack", "init", s, "--secrets-provider", "passphrase"]);
    // One node no name service knows: a healthy doctor tries it (and fails it); a stopped
    // one must not.
    const node = { name: NODE, host: "spark-1.invalid", user: "spark", hostKey: KEY };
    for (const [key, value] of Object.entries(node))
      await pulumi.run([
        "config",
        "set",
        "--path",
        `sparkform:nodes[0].${key}`,
        value,
        "-s",
        STACK,
      ]);
    await pulumi.run(["config", "set", "--secret", "sparkform:hfToken", "hf_x", "-s", STACK]);
  }, 300_000);

  afterAll(() => endPostgresTest(saved, pg, work));

  it("healthy: the backend's lines pass, then the config and the node as before", async () => {
    const { findings } = await run();
    const backend = findings.filter((f) => f.where === "backend");
    expect(backend.map((f) => [f.check, f.status])).toEqual([
      ["backend", "pass"],
      ["backend-table", "pass"],
      ["backend-tls", "pass"],
      ["passphrase", "pass"],
    ]);
    const version = (await pg.sql("show server_version"))[0]![0]!;
    expect(backend[0]!.what).toContain(`PostgreSQL ${version}`);
    expect(backend[0]!.what).toContain(`127.0.0.1:${pg.backend.port}`);
    expect(backend[2]!.what).toContain("never leaves this machine");
    expect(backend[3]!.what).toContain("decrypts stack t's 1 secret");
    // The backend comes after the control node and before the config.
    const order = findings.map((f) => f.where);
    expect(order.lastIndexOf("control node")).toBeLessThan(order.indexOf("backend"));
    expect(order.lastIndexOf("backend")).toBeLessThan(order.indexOf("config"));
    // The node was tried: what the failures below must not do.
    expect(findings.some((f) => f.where === NODE)).toBe(true);
  }, 120_000);

  it("a wrong password in PGPASSFILE: one fail line naming PGPASSFILE, the password nowhere", async () => {
    const wrong = path.join(work, "pgpass-wrong");
    const real = password();
    fs.writeFileSync(
      wrong,
      `127.0.0.1:${pg.backend.port}:*:sparkform:not-${real.slice(0, 6)}-the-password\n`,
      { mode: 0o600 },
    );
    const { findings, text } = await withEnv({ PGPASSFILE: wrong }, run);
    const f = expectStoppedAt(findings, "backend");
    expect(f.what).toContain('password authentication failed for user "sparkform"');
    expect(f.fix).toContain("PGPASSFILE");
    expect(f.fix).toContain("host:port:database:user:password, mode 0600");
    expect(text).not.toContain(real);
    expect(text).not.toContain(`not-${real.slice(0, 6)}-the-password`);
    expect(text.match(/^FAIL/gm)).toHaveLength(1);
  }, 60_000);

  it("a server that does not answer: one fail line asking whether it runs at host:port", async () => {
    const port = await freePort();
    const url = pg.url.replace(`:${pg.backend.port}/`, `:${port}/`);
    const started = Date.now();
    const { findings, text } = await withEnv({ PULUMI_BACKEND_URL: url }, run);
    const f = expectStoppedAt(findings, "backend");
    expect(f.fix).toContain(`is the server running at 127.0.0.1:${port}?`);
    expect(f.fix).toContain("systemctl status postgresql");
    expect(text).not.toContain(password());
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 60_000);

  it("a wrong passphrase: one fail line naming PULUMI_CONFIG_PASSPHRASE_FILE", async () => {
    const wrong = path.join(work, "wrong-passphrase");
    fs.writeFileSync(wrong, "not the team's passphrase\n", { mode: 0o600 });
    const { findings, text } = await withEnv({ PULUMI_CONFIG_PASSPHRASE_FILE: wrong }, run);
    const f = expectStoppedAt(findings, "passphrase");
    expect(f.what).toContain(`PULUMI_CONFIG_PASSPHRASE_FILE (${wrong}) does not decrypt stack t`);
    expect(f.what).toContain("incorrect passphrase");
    expect(f.fix).toContain("PULUMI_CONFIG_PASSPHRASE_FILE");
    expect(f.fix).toContain('"passphraseFile"');
    // The server itself was fine.
    expect(findings.filter((x) => x.where === "backend" && x.status === "pass")).toHaveLength(3);
    expect(text).not.toContain("not the team's passphrase");
  }, 60_000);

  it("a stack with no secret yet: the passphrase is checked against its encryptionsalt", async () => {
    const right = await decryptFinding("e", { projectDir });
    expect(right).toMatchObject({ status: "pass" });
    expect(right.what).toContain("opens stack e's encryptionsalt");
    const wrong = path.join(work, "wrong-passphrase-e");
    fs.writeFileSync(wrong, "another\n", { mode: 0o600 });
    const bad = await decryptFinding("e", {
      projectDir,
      env: { ...process.env, PULUMI_CONFIG_PASSPHRASE_FILE: wrong },
    });
    expect(bad.status).toBe("fail");
    expect(bad.fix).toContain("PULUMI_CONFIG_PASSPHRASE_FILE");
  }, 60_000);

  it("a database without the state's table: a warn saying the first login and stack init make it", async () => {
    const other = parseBackend(`${pg.url}&table=not_there`) as PostgresBackend;
    const findings = await postgresFindings(other);
    const t = findings.find((f) => f.check === "backend-table");
    expect(t?.status).toBe("warn");
    expect(t?.what).toContain("no table not_there");
    expect(t?.fix).toContain("pulumi stack init");
  }, 30_000);

  it("the CLI entry: the report's one FAIL line with its fix, exit 2", async () => {
    const wrong = path.join(work, "wrong-passphrase-cli");
    fs.writeFileSync(wrong, "not it\n", { mode: 0o600 });
    const r = await execa(
      process.execPath,
      [path.join(repoRoot, "bin", "sparkform.js"), "doctor", "--stack", STACK],
      {
        env: {
          ...process.env,
          SPARKFORM_PROJECT_DIR: projectDir,
          PULUMI_CONFIG_PASSPHRASE_FILE: wrong,
        },
        reject: false,
        all: true,
      },
    );
    console.log(r.all);
    expect(r.exitCode).toBe(EXIT.fail);
    expect(r.stdout.match(/^FAIL/gm)).toHaveLength(1);
    expect(r.stdout).toMatch(/^FAIL\s+backend\s+passphrase\s/m);
    expect(r.stdout).toContain("fix: point PULUMI_CONFIG_PASSPHRASE_FILE at the file holding");
    expect(r.stdout).not.toContain(NODE);
  }, 180_000);
});
