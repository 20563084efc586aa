// The CLI's stack cache (cli/stack-cache.ts) on a real PostgreSQL (issue 36, the fast CLI for a
// shared backend): the real pulumi CLI runs the tiny program of test/fixtures/drift-probe, with
// one stack output added, against a server of the test's own (test/support/postgres.ts). An
// `up` writes the checkpoint row; the first read goes through pulumi, the second comes from the
// cache (the entry's file is not rewritten, as test/integration/cli-stack-cache.test.ts shows on
// file://). An `up` from another checkout (another project directory and state directory, the
// same database) rewrites the row, and this checkout's next read is fresh. With the server down,
// nothing is served from the cache: the read goes through pulumi, which fails in its own words.
// Each read below stands for one CLI process: forgetCheckpoints() drops what the last one read
// of the row, as a process's end does.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readOutputs } from "../../cli/stack";
import { forgetCheckpoints, outputsKey } from "../../cli/stack-cache";
import { checkpointStampSync } from "../../cli/team/libpq";
import { repoRoot } from "../../setup/pulumi/env";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import {
  type Postgres,
  skipWithoutPulumiAndPostgres,
  startPostgres,
  useBackend,
  endPostgresTest,
} from "../support/postgres";

const PROBE = path.join(repoRoot, "test", "fixtures", "drift-probe");
const PROJECT = "driftprobe";
const stack = "t";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "team-cli-cache-"));
/** This checkout and another one: each its own project and state directory. */
const here = { project: path.join(work, "here"), state: path.join(work, "here-state") };
const there = { project: path.join(work, "there"), state: path.join(work, "there-state") };
const files = path.join(work, "files");
const cacheFile = path.join(here.state, "cache", `outputs-${stack}.json`);
/** The entry's file identity: unchanged on a cache hit, a new file (rename) on each miss. */
const entryId = () => {
  const st = fs.statSync(cacheFile, { bigint: true });
  return `${st.ino}:${st.mtimeNs}`;
};
const saved = { ...process.env };
let pg: Postgres;
let pulumi: PulumiCli;

/** A read by a new CLI process of this checkout. */
function read(): Record<string, unknown> {
  forgetCheckpoints();
  return readOutputs(stack, here.project) as Record<string, unknown>;
}

function makeProject(dir: string): void {
  fs.mkdirSync(dir);
  fs.copyFileSync(path.join(PROBE, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
  // The probe's resources, and one output that says which `up` wrote the state.
  fs.writeFileSync(
    path.join(dir, "index.js"),
    fs.readFileSync(path.join(PROBE, "index.js"), "utf8") +
      '\nexports.probeValue = process.env.DRIFT_PROBE_VALUE || "one";\n',
  );
  fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
}

/** The pulumi CLI as checkout `c` runs it (its own state directory: PULUMI_HOME). */
function cliOf(c: typeof here, env: NodeJS.ProcessEnv = {}): PulumiCli {
  process.env.SPARKFORM_STATE_DIR = c.state;
  try {
    return pulumiCli(c.project, env);
  } finally {
    process.env.SPARKFORM_STATE_DIR = here.state;
  }
}

const skip = skipWithoutPulumiAndPostgres();

describe.skipIf(skip)("the CLI's stack cache on PostgreSQL, with the real pulumi CLI", () => {
  beforeAll(async () => {
    pg = await startPostgres({ dir: path.join(work, "pg") });
    makeProject(here.project);
    makeProject(there.project);
    for (const d of ["spark-1", "spark-2"]) fs.mkdirSync(path.join(files, d), { recursive: true });
    useBackend(pg, here.state, files);
    // The team's passphrase: both checkouts decrypt the same stack.
    process.env.PULUMI_CONFIG_PASSPHRASE = "team-cli-cache";
    delete process.env.DRIFT_PROBE_VALUE;
    pulumi = cliOf(here);
    await pulumi.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    // The other checkout has the stack's settings file (its salt) from the repository.
    fs.copyFileSync(
      path.join(here.project, `Pulumi.${stack}.yaml`),
      path.join(there.project, `Pulumi.${stack}.yaml`),
    );
  }, 300_000);

  afterAll(() => endPostgresTest(saved, pg, work));

  it("after an `up`, the first read goes through pulumi and the second comes from the cache", async () => {
    await pulumi.run(["up", "--yes", "--skip-preview", "-s", stack]);
    expect(checkpointStampSync(pg.backend, PROJECT, stack)).toBeDefined();
    expect(fs.existsSync(cacheFile)).toBe(false);
    expect(read()).toMatchObject({ probeValue: "one" });
    const id = entryId();
    expect(read()).toMatchObject({ probeValue: "one" });
    expect(entryId()).toBe(id);
    // The entry holds the URL without a password, and no secret of the connection at all.
    const password = fs.readFileSync(pg.pgpassFile, "utf8").trim().split(":")[4] as string;
    expect(fs.readFileSync(cacheFile, "utf8")).not.toContain(password);
  }, 120_000);

  it("an `up` from another checkout makes this checkout's next read fresh", async () => {
    const before = checkpointStampSync(pg.backend, PROJECT, stack);
    const id = entryId();
    await cliOf(there, { DRIFT_PROBE_VALUE: "two" }).run([
      "up",
      "--yes",
      "--skip-preview",
      "-s",
      stack,
    ]);
    expect(checkpointStampSync(pg.backend, PROJECT, stack)).not.toBe(before);
    expect(read()).toMatchObject({ probeValue: "two" });
    const fresh = entryId();
    expect(fresh).not.toBe(id);
    expect(read()).toMatchObject({ probeValue: "two" });
    expect(entryId()).toBe(fresh);
  }, 120_000);

  it("with the server down, nothing comes from the cache: pulumi's own error", async () => {
    await pg.stop();
    forgetCheckpoints();
    expect(outputsKey(stack, here.project)).toBeUndefined();
    expect(() => read()).toThrow();
  }, 120_000);
});
