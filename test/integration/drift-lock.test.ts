// `sparkform drift`'s check against the real pulumi CLI on a throwaway file:// backend, with the
// tiny program of test/fixtures/drift-probe (dynamic resources whose read() reports a file, and
// whose create()/read() wait as long as a file says): clean, then drift when a file changes
// under a resource; during an operator's `up` the check reports "skipped: locked by …" and the
// `up` completes; the preview itself takes no lock, so an `up` started during a check is not
// blocked. No simulated cluster: every resource lives in a temp dir of this machine.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkDrift, exitCodeOf } from "../../cli/drift/check";
import { stackLocks } from "../../cli/drift/lock";
import { repoRoot } from "../../setup/pulumi/env";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { requireOrSkip } from "../support/requires";

const hasPulumi = fs.existsSync(path.join(repoRoot, ".sparkform", "toolchain.env"));
const PROBE = path.join(repoRoot, "test", "fixtures", "drift-probe");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "drift-lock-"));
const project = path.join(work, "project");
const backend = path.join(work, "backend");
const files = path.join(work, "files");
const NODES = ["spark-1", "spark-2"];
const saved = { ...process.env };
let pulumi: PulumiCli;

const write = (rel: string, text: string) => fs.writeFileSync(path.join(files, rel), text);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const check = (stack: string) => checkDrift({ stack, projectDir: project, nodes: () => NODES });

async function until(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe.skipIf(
  requireOrSkip(
    "the pulumi toolchain",
    hasPulumi,
    "`npm run setup` writes .sparkform/toolchain.env",
  ),
)("the drift check against the real pulumi CLI", () => {
  beforeAll(async () => {
    fs.mkdirSync(project);
    for (const f of ["Pulumi.yaml", "index.js"])
      fs.copyFileSync(path.join(PROBE, f), path.join(project, f));
    fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"));
    for (const d of ["spark-1", "spark-2"]) fs.mkdirSync(path.join(files, d), { recursive: true });
    fs.mkdirSync(backend);
    process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
    process.env.PULUMI_BACKEND_URL = `file://${backend}`;
    process.env.DRIFT_PROBE_DIR = files;
    delete process.env.PULUMI_HOME;
    pulumi = pulumiCli(project);
    for (const s of ["t", "u"])
      await pulumi.run(["stack", "init", s, "--secrets-provider", "passphrase"]);
    await pulumi.run(["up", "--yes", "--skip-preview", "-s", "t"]);
  }, 300_000);

  afterAll(() => {
    process.env = saved;
    fs.rmSync(work, { recursive: true, force: true });
  });

  it("clean, then drift when a node's file changes under a resource (exit 0, then 1)", async () => {
    const clean = await check("t");
    expect(clean).toMatchObject({ verdict: "clean", drifted: [] });
    expect(clean.seen.map((s) => s.name).sort()).toEqual(["probe-spark-1", "probe-spark-2"]);
    expect(exitCodeOf(clean)).toBe(0);

    write("spark-2/value", "two");
    const drift = await check("t");
    expect(drift.verdict).toBe("drift");
    expect(exitCodeOf(drift)).toBe(1);
    expect(drift.drifted).toEqual([
      expect.objectContaining({
        name: "probe-spark-2",
        node: "spark-2",
        op: "update",
        keys: ["drift", "value"],
        words: ["value is two, not one"],
        // The node's, not the program's: the preview that reads no node changes nothing.
        inputsChanged: [],
      }),
    ]);
    fs.rmSync(path.join(files, "spark-2", "value"));
  });

  it("a config change beside a node's drift: only the program's own input is called config", async () => {
    write("spark-2/value", "two");
    process.env.DRIFT_PROBE_VALUE = "three";
    try {
      const r = await check("t");
      expect(r.verdict).toBe("drift");
      const of = (n: string) => r.drifted.find((d) => d.name === n)?.inputsChanged;
      expect(of("probe-spark-1")).toEqual(["value"]);
      expect(of("probe-spark-2")).toEqual([]);
    } finally {
      delete process.env.DRIFT_PROBE_VALUE;
      fs.rmSync(path.join(files, "spark-2", "value"));
    }
  });

  it("during an operator's `up`: skipped, locked by user@host since …; the `up` completes", async () => {
    write("spark-1/create-sleep", "8");
    const up = pulumi.run(["up", "--yes", "--skip-preview", "-s", "u"]);
    await until("the up's lock", () => stackLocks(backend, "driftprobe", "u").length > 0);
    const lock = stackLocks(backend, "driftprobe", "u")[0]!;
    expect(lock.user).toBe(os.userInfo().username);
    expect(lock.host).toBe(os.hostname());
    const r = await check("u");
    expect(r.verdict).toBe("skipped");
    expect(r.skipped).toEqual({
      reason: "locked",
      detail: `skipped: locked by ${lock.user}@${lock.host} since ${lock.since}`,
    });
    expect(exitCodeOf(r)).toBe(2);
    expect((await up).exitCode).toBe(0);
    expect(stackLocks(backend, "driftprobe", "u")).toEqual([]);
    fs.rmSync(path.join(files, "spark-1", "create-sleep"));
    expect((await check("u")).verdict).toBe("clean");
  });

  it("takes no lock itself: an `up` started during a check is not blocked", async () => {
    write("spark-1/read-sleep", "6");
    let checkEnded = 0;
    const running = check("t").then((r) => {
      checkEnded = Date.now();
      return r;
    });
    // The preview is reading spark-1 (6 s): no lock file for the stack meanwhile.
    await sleep(2000);
    expect(stackLocks(backend, "driftprobe", "t")).toEqual([]);
    const up = await pulumi.run(["up", "--yes", "--skip-preview", "-s", "t"]);
    const upEnded = Date.now();
    expect(up.exitCode).toBe(0);
    const r = await running;
    expect(upEnded).toBeLessThan(checkEnded);
    // The preview ran beside the `up`; with nothing changed it is clean, never drift.
    expect(r.verdict).toBe("clean");
    fs.rmSync(path.join(files, "spark-1", "read-sleep"));
  });
});
