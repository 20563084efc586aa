// `sparkform team move` and `login` (issue 36), through the real CLI entry, against a real
// PostgreSQL (test/support/postgres.ts) and the real pulumi CLI on the tiny program of
// test/fixtures/drift-probe: a stack with a secret moved from a checkout's file:// state to the
// server (every resource, output and secret the same, the old copy gone, its export kept, the
// setting written, the next preview quiet), back again, and a second checkout's `login` refused
// with a wrong passphrase, naming the fix, then accepted with the team's. The password reaches
// pulumi and psql through PGPASSFILE only; a URL that holds one is refused.
import { execa } from "execa";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../setup/pulumi/env";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { readState } from "../../stack-state";
import {
  type Postgres,
  skipWithoutPulumiAndPostgres,
  startPostgres,
  endPostgresTest,
  probeProject,
} from "../support/postgres";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "team-move-"));
const project = path.join(work, "project");
const files = path.join(work, "files");
const stateA = path.join(work, "checkout-a");
const stateB = path.join(work, "checkout-b");
const saved = { ...process.env };
let pg: Postgres;
let pulumi: PulumiCli;

/** `sparkform team ARGS` as the operator of the checkout whose state is `state` runs it. */
async function team(state: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = await execa(
    process.execPath,
    [path.join(repoRoot, "bin", "sparkform.js"), "team", ...args],
    {
      cwd: project,
      env: { ...process.env, SPARKFORM_STATE_DIR: state, ...env },
      all: true,
      reject: false,
    },
  );
  console.log(`$ sparkform team ${args.join(" ")}  [exit ${r.exitCode}]\n${r.all ?? ""}`);
  return { code: r.exitCode, out: r.all ?? "" };
}

/** The stack's export with its secrets in the clear, from the checkout whose state is `state`. */
async function plainExport(state: string) {
  const cli = pulumiCli(project, { SPARKFORM_STATE_DIR: state });
  const r = await cli.run(["stack", "export", "--show-secrets", "-s", "dev"]);
  return readState(r.output, "dev");
}

describe.skipIf(skipWithoutPulumiAndPostgres())(
  "sparkform team: a stack moved to PostgreSQL and back, a second checkout logged in",
  () => {
    beforeAll(async () => {
      pg = await startPostgres({ dir: path.join(work, "pg") });
      probeProject(project, files);
      process.env.SPARKFORM_STATE_DIR = stateA;
      process.env.SPARKFORM_PROJECT_DIR = project;
      process.env.PGPASSFILE = pg.pgpassFile;
      process.env.DRIFT_PROBE_DIR = files;
      for (const v of [
        "PULUMI_HOME",
        "PULUMI_BACKEND_URL",
        "PGPASSWORD",
        "PULUMI_CONFIG_PASSPHRASE",
      ])
        delete process.env[v];
      pulumi = pulumiCli(project);
      await pulumi.run(["stack", "init", "dev", "--secrets-provider", "passphrase"]);
      await pulumi.run(["config", "set", "--secret", "token", "the-team-secret", "-s", "dev"]);
      await pulumi.run(["up", "--yes", "--skip-preview", "-s", "dev"]);
    }, 300_000);

    afterAll(() => endPostgresTest(saved, pg, work));

    it("move: the same resources and secrets on PostgreSQL, the old copy gone, its export kept, the next preview quiet", async () => {
      const before = await plainExport(stateA);
      const moved = await team(stateA, ["move", pg.url, "--stack", "dev"]);
      expect(moved.code).toBe(0);
      expect(moved.out).toMatch(
        /dev on postgres:\/\/\S+: the same 4 resources, 0 outputs and \d+ secrets/,
      );
      // The setting names the server, never a password.
      const setting = JSON.parse(fs.readFileSync(path.join(stateA, "team.json"), "utf8")) as {
        backend: string;
      };
      expect(setting.backend).toBe(pg.url);
      expect((fs.statSync(path.join(stateA, "team.json")).mode & 0o777).toString(8)).toBe("600");
      // The state is a row of the server now, and the checkout's file has no stack left.
      const keys = (await pg.sql("select key from pulumi_state")).map((r) => r[0]);
      expect(keys).toContain("pulumi/.pulumi/stacks/driftprobe/dev.json");
      expect(
        fs.existsSync(path.join(stateA, "backend", ".pulumi", "stacks", "driftprobe", "dev.json")),
      ).toBe(false);
      const backup = fs.readdirSync(path.join(stateA, "team"));
      expect(backup).toHaveLength(1);
      // The secret went over as ciphertext and decrypts to the same value on the server.
      const after = await plainExport(stateA);
      expect(after.resources.map((r) => r.urn)).toEqual(before.resources.map((r) => r.urn));
      expect(JSON.stringify(after.resources)).toContain("the-team-secret");
      expect(fs.readFileSync(path.join(stateA, "team", backup[0]!), "utf8")).not.toContain(
        "the-team-secret",
      );
      const quiet = await pulumiCli(project).run(["preview", "--expect-no-changes", "-s", "dev"]);
      expect(quiet.output).toMatch(/3 unchanged/);
    });

    it("login from a second checkout: a wrong passphrase refused naming the fix, the team's accepted; a URL with a password refused", async () => {
      const wrong = path.join(work, "wrong-passphrase");
      fs.writeFileSync(wrong, "not the team's\n", { mode: 0o600 });
      const refused = await team(stateB, [
        "login",
        pg.url,
        "--stack",
        "dev",
        "--passphrase-file",
        wrong,
      ]);
      expect(refused.code).not.toBe(0);
      expect(refused.out).toMatch(
        /does not decrypt stack dev: incorrect passphrase.*PULUMI_CONFIG_PASSPHRASE_FILE/s,
      );
      expect(fs.existsSync(path.join(stateB, "team.json"))).toBe(false);

      const teams = path.join(work, "team-passphrase");
      fs.copyFileSync(path.join(stateA, "passphrase"), teams);
      fs.chmodSync(teams, 0o600);
      const ok = await team(stateB, [
        "login",
        pg.url,
        "--stack",
        "dev",
        "--passphrase-file",
        teams,
      ]);
      expect(ok.code).toBe(0);
      expect(JSON.parse(fs.readFileSync(path.join(stateB, "team.json"), "utf8"))).toEqual({
        backend: pg.url,
        passphraseFile: teams,
      });
      // Checkout B reads the stack through the setting alone: no PULUMI_BACKEND_URL anywhere.
      const fromB = await plainExport(stateB);
      expect(JSON.stringify(fromB.resources)).toContain("the-team-secret");

      const withPassword = pg.url.replace("sparkform@", "sparkform:hunter2@");
      const bad = await team(stateB, ["login", withPassword, "--stack", "dev"]);
      expect(bad.code).toBe(2);
      expect(bad.out).toMatch(/the URL holds a password.*PGPASSFILE/);
      expect(bad.out).not.toContain("hunter2");
    });

    it("move back to the checkout's own state: the setting gone, the stack whole, the next preview quiet", async () => {
      const back = await team(stateA, [
        "move",
        `file://${path.join(stateA, "backend")}`,
        "--stack",
        "dev",
      ]);
      expect(back.code).toBe(0);
      expect(back.out).toContain("this checkout uses its own state again");
      expect(fs.existsSync(path.join(stateA, "team.json"))).toBe(false);
      // The server's copy gone (the backend keeps a `.bak` of it, as the file backend does).
      const left = (await pg.sql("select key from pulumi_state where strpos(key, '/stacks/') > 0"))
        .map((r) => r[0])
        .filter((k) => k?.endsWith("/dev.json"));
      expect(left).toEqual([]);
      const quiet = await pulumiCli(project).run(["preview", "--expect-no-changes", "-s", "dev"]);
      expect(quiet.output).toMatch(/3 unchanged/);
      expect(JSON.stringify((await plainExport(stateA)).resources)).toContain("the-team-secret");
    });
  },
);
