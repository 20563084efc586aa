// Issue 36's groundwork: a stack's state on a real PostgreSQL (Pulumi's DIY postgres backend,
// test/support/postgres.ts starts the server), driven by the real pulumi CLI with the tiny
// program of test/fixtures/drift-probe (as test/integration/drift-lock.test.ts does for
// file://). The password reaches the CLI and psql through PGPASSFILE only. Shown: `up` writes the
// checkpoint row; a second `up` during the first is refused within 5 s naming user@host (pid
// N); the lock reader (cli/drift/lock.ts) sees the holder while it runs and nothing after, and
// `sparkform drift` meanwhile is skipped as locked; the export holds each resource once; an `up`
// SIGKILLed mid-create leaves a lock row the reader calls stale, and the recovery (`pulumi cancel
// --yes`, `refresh --clear-pending-creates`, `up`) brings the stack back with nothing pending.
// Through the wrapper (`npm run pulumi`, setup/pulumi/main.ts) the holder's session
// (cli/team/session.ts) tells any host whether the holder lives: open during an `up`, named in
// a refused `up`'s holder line as live; gone within seconds of the control node's SIGKILL, the
// lock then stale as judged from another host, and the line's recovery, run through the
// wrapper, works; a lock taken by plain pulumi has no session, and is unknown, not stale.
// No simulated cluster: every resource lives in a temp dir of this machine.
import { execa } from "execa";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkDrift } from "../../cli/drift/check";
import {
  backendLocks,
  holderLine,
  isStale,
  lockedReason,
  lockLife,
  SESSION_GRACE_MS,
} from "../../cli/drift/lock";
import { checkpointStampSync } from "../../cli/team/libpq";
import { rowText, stateRows } from "../../cli/team/psql";
import { holderSessions, sessionName } from "../../cli/team/session";
import { pulumiBinary, repoRoot } from "../../setup/pulumi/env";
import { readState } from "../../stack-state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import {
  type Postgres,
  skipWithoutPulumiAndPostgres,
  startPostgres,
  useBackend,
  endPostgresTest,
  probeProject,
} from "../support/postgres";

const PROJECT = "driftprobe";
const NODES = ["spark-1", "spark-2"];
const work = fs.mkdtempSync(path.join(os.tmpdir(), "team-backend-"));
const project = path.join(work, "project");
const files = path.join(work, "files");
const saved = { ...process.env };
let pulumi: PulumiCli;
let pg: Postgres;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const locks = (stack: string) => backendLocks(pg.backend, PROJECT, stack);
const setSleep = (seconds: number) =>
  fs.writeFileSync(path.join(files, "spark-1", "create-sleep"), String(seconds));

/**
 * `npm run pulumi -- <args>` as npm runs it (package.json's "pulumi" script, INIT_CWD the
 * project), in a process group of its own: the control node a test may SIGKILL whole.
 */
function wrapper(args: string[]) {
  return execa(process.execPath, [path.join(repoRoot, "setup", "pulumi", "run.js"), ...args], {
    cwd: repoRoot,
    env: { INIT_CWD: project },
    reject: false,
    all: true,
    detached: true,
  });
}

/** Whether the backend shows the session of pulumi `pid` on this host. */
const sessionOpen = async (pid: number) =>
  (await holderSessions(pg.backend)).open.includes(sessionName(os.hostname(), pid));

async function until(what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * Ends the processes (by pid) that run in `dir`, this test's own project: the language host and
 * provider a SIGKILLed pulumi CLI leaves behind.
 */
function endOrphansIn(dir: string): void {
  for (const pid of fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    let cwd = "";
    try {
      cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue; // gone, or another user's
    }
    if (cwd !== dir && !cwd.startsWith(`${dir}/`)) continue;
    try {
      process.kill(Number(pid), "SIGKILL");
    } catch {
      // ended meanwhile
    }
  }
}

/** The stack's checkpoint row, decoded: what the CLI last saved mid-update. */
async function checkpoint(stack: string): Promise<string> {
  const suffix = `/.pulumi/stacks/${PROJECT}/${stack}.json`;
  const row = (await stateRows(pg.backend, suffix)).find((r) => r.key.endsWith(suffix));
  return row ? rowText(row.data) : "";
}

/** Each resource's URN in the stack's export, with how often it is there. */
async function urnCounts(stack: string): Promise<Map<string, number>> {
  const out = await pulumi.run(["stack", "export", "-s", stack]);
  const counts = new Map<string, number>();
  for (const r of readState(out.output, stack).resources)
    counts.set(r.urn, (counts.get(r.urn) ?? 0) + 1);
  return counts;
}

async function expectEachResourceOnce(stack: string): Promise<void> {
  const counts = await urnCounts(stack);
  const probes = [...counts.keys()].filter((u) => u.includes("::probe-")).sort();
  expect(probes.map((u) => u.slice(u.lastIndexOf("::") + 2))).toEqual([
    "probe-spark-1",
    "probe-spark-2",
  ]);
  expect([...counts.values()].every((n) => n === 1)).toBe(true);
}

const skip = skipWithoutPulumiAndPostgres();

describe.skipIf(skip)("a stack on PostgreSQL, driven by the real pulumi CLI", () => {
  beforeAll(async () => {
    pg = await startPostgres({ dir: path.join(work, "pg") });
    probeProject(project, files);
    useBackend(pg, path.join(work, "state"), files);
    pulumi = pulumiCli(project);
    for (const s of ["t", "u", "k", "w", "x", "p"])
      await pulumi.run(["stack", "init", s, "--secrets-provider", "passphrase"]);
  }, 300_000);

  afterAll(() => endPostgresTest(saved, pg, work));

  it("`stack init` makes the table; `up` writes the checkpoint row, its time moving with each update", async () => {
    expect(pg.url).not.toMatch(/:[^/@]*@/);
    const keys = (await pg.sql("select key from pulumi_state order by key")).map((r) => r[0]);
    expect(keys).toContain(`pulumi/.pulumi/stacks/${PROJECT}/t.json`);
    const before = checkpointStampSync(pg.backend, PROJECT, "t");
    expect(before).toBeDefined();
    await pulumi.run(["up", "--yes", "--skip-preview", "-s", "t"]);
    const after = checkpointStampSync(pg.backend, PROJECT, "t");
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
    expect(checkpointStampSync(pg.backend, PROJECT, "absent")).toBeUndefined();
    await expectEachResourceOnce("t");
    expect(await locks("t")).toEqual([]);
  });

  it("a second `up` during the first is refused within 5 s naming user@host (pid N); the reader sees the holder, then nothing", async () => {
    setSleep(10);
    const first = pulumi.run(["up", "--yes", "--skip-preview", "-s", "u"]);
    await until("the first up's lock row", async () => (await locks("u")).length > 0);
    const [lock] = await locks("u");
    expect(lock).toMatchObject({ user: os.userInfo().username, host: os.hostname() });
    expect(lock!.pid).toEqual(expect.any(Number));
    expect(lock!.file).toMatch(new RegExp(`/\\.pulumi/locks/[^/]+/${PROJECT}/u/[^/]+\\.json$`));
    expect(isStale(lock!)).toBe(false);
    expect(holderLine(lock!)).toBe(
      `${lock!.user}@${lock!.host} (pid ${lock!.pid}) since ${lock!.since}: its process still runs on this host`,
    );

    // `sparkform drift` during the `up` reads the lock row: skipped, never drift.
    const drift = await checkDrift({ stack: "u", projectDir: project, nodes: () => NODES });
    expect(drift.verdict).toBe("skipped");
    expect(drift.skipped).toEqual({ reason: "locked", detail: `skipped: ${lockedReason(lock!)}` });

    const started = Date.now();
    const second = await pulumi.run(["up", "--yes", "--skip-preview", "-s", "u"], {
      expectFailure: true,
    });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(second.output).toContain("the stack is currently locked by 1 lock(s)");
    expect(second.output).toContain(`created by ${lock!.user}@${lock!.host} (pid ${lock!.pid})`);
    // The password is in no message: the URL the CLI prints masks the user too.
    expect(second.output).not.toContain(
      fs.readFileSync(pg.pgpassFile, "utf8").split(":")[4]!.trim(),
    );

    expect((await first).exitCode).toBe(0);
    expect(await locks("u")).toEqual([]);
    await expectEachResourceOnce("u");
  }, 120_000);

  it("an `up` SIGKILLed mid-create leaves a stale lock row; `pulumi cancel --yes`, then `up`, recovers", async () => {
    setSleep(60);
    const child = execa(
      pulumiBinary(),
      ["up", "--yes", "--skip-preview", "-s", "k", "--non-interactive"],
      { cwd: project, env: pulumi.env, extendEnv: false, reject: false, all: true },
    );
    const pid = child.pid!;
    try {
      await until("the up's lock row", async () => (await locks("k")).length > 0);
      // The create has begun (and its pending operation is in the checkpoint) before the kill.
      await until(
        "the create's pending operation in the checkpoint",
        async () => (await checkpoint("k")).includes('"pending_operations"'),
        30_000,
      );
      process.kill(pid, "SIGKILL");
      await child;
    } finally {
      // The plugins the dead CLI started live on in process groups of their own: end them.
      endOrphansIn(project);
    }
    console.log(`killed up (pid ${pid}):\n${(await child).all ?? ""}`);

    const left = await locks("k");
    expect(left).toHaveLength(1);
    expect(left[0]!.pid).toBe(pid);
    expect(isStale(left[0]!)).toBe(true);
    const line = holderLine(left[0]!);
    console.log(`lock reader: ${line}`);
    expect(line).toContain(`(pid ${pid})`);
    expect(line).toContain(`stale, pid ${pid} no longer runs on ${os.hostname()}`);

    const refused = await pulumi.run(["up", "--yes", "--skip-preview", "-s", "k"], {
      expectFailure: true,
    });
    expect(refused.output).toContain(`(pid ${pid})`);

    setSleep(0);
    // The documented recovery: the holder is gone (above), so cancel; the create it left
    // pending is dropped by the refresh (an `up` alone leaves it, warning on every update).
    expect(await checkpoint("k")).toContain('"pending_operations"');
    await pulumi.run(["cancel", "--yes", "-s", "k"]);
    expect(await locks("k")).toEqual([]);
    await pulumi.run(["refresh", "--yes", "--skip-preview", "--clear-pending-creates", "-s", "k"]);
    expect(await checkpoint("k")).not.toContain('"pending_operations"');
    await pulumi.run(["up", "--yes", "--skip-preview", "-s", "k"]);
    expect(await locks("k")).toEqual([]);
    await expectEachResourceOnce("k");
    const quiet = await pulumi.run([
      "up",
      "--yes",
      "--skip-preview",
      "--expect-no-changes",
      "-s",
      "k",
    ]);
    expect(quiet.output).not.toContain("pending operations");
  }, 180_000);

  it("through the wrapper, an `up`'s session names its host and pid; a second `up` is refused within 5 s naming the holder live", async () => {
    setSleep(10);
    const first = wrapper(["up", "--yes", "--skip-preview", "-s", "w"]);
    await until("the first up's lock row", async () => (await locks("w")).length > 0);
    const [lock] = await locks("w");
    await until("its session", () => sessionOpen(lock!.pid!), 10_000);
    const rows = await pg.sql("select application_name from pg_stat_activity");
    expect(rows.map((r) => r[0])).toContain(
      `sparkform-lock pid=${lock!.pid} host=${os.hostname()}`.slice(0, 63),
    );
    const sessions = await holderSessions(pg.backend);
    expect(lockLife(lock!, { host: "elsewhere", sessions })).toEqual({
      life: "live",
      why: "its sparkform session to the backend is open",
    });
    expect(lockLife(lock!, { sessions }).life).toBe("live");

    const started = Date.now();
    const second = await wrapper(["up", "--yes", "--skip-preview", "-s", "w"]);
    const took = Date.now() - started;
    console.log(`refused up through the wrapper (${took} ms):\n${second.all ?? ""}`);
    expect(second.exitCode).not.toBe(0);
    expect(took).toBeLessThan(5000);
    expect(second.all).toContain("the stack is currently locked by 1 lock(s)");
    expect(second.all).toContain("sparkform: the stack's lock holder:");
    expect(second.all).toContain(
      `${lock!.user}@${lock!.host} (pid ${lock!.pid}) since ${lock!.since}: live, pid ${lock!.pid} still runs on ${os.hostname()}; wait for it to end, or ask ${lock!.user}@${lock!.host}`,
    );

    const done = await first;
    expect(done.exitCode).toBe(0);
    expect(await locks("w")).toEqual([]);
    // Closed with its command, and its record with it: nothing left to call stale.
    expect(await sessionOpen(lock!.pid!)).toBe(false);
    expect((await holderSessions(pg.backend)).opened.filter((o) => o.pid === lock!.pid)).toEqual(
      [],
    );
    await expectEachResourceOnce("w");
  }, 120_000);

  it("the control node SIGKILLed mid-up: its session ends within seconds, the lock is stale from any host, and the recovery it names works", async () => {
    setSleep(60);
    const node = wrapper(["up", "--yes", "--skip-preview", "-s", "x"]);
    let pid = 0;
    try {
      await until("the up's lock row", async () => (await locks("x")).length > 0);
      pid = (await locks("x"))[0]!.pid!;
      await until("its session", () => sessionOpen(pid), 10_000);
      await until(
        "the create's pending operation in the checkpoint",
        async () => (await checkpoint("x")).includes('"pending_operations"'),
        30_000,
      );
      process.kill(-node.pid!, "SIGKILL");
      await node;
    } finally {
      endOrphansIn(project);
    }
    const killed = Date.now();
    await until("the session's end", async () => !(await sessionOpen(pid)), 5000);
    console.log(`session gone ${Date.now() - killed} ms after the SIGKILL`);

    const [lock] = await locks("x");
    expect(lock!.pid).toBe(pid);
    const sessions = await holderSessions(pg.backend);
    // As another control node sees it: the pid means nothing there, the session's end does.
    expect(lockLife(lock!, { host: "elsewhere", sessions })).toMatchObject({ life: "stale" });
    expect(lockLife(lock!, { sessions })).toEqual({
      life: "stale",
      why: `pid ${pid} no longer runs on ${os.hostname()}`,
    });

    const refused = await wrapper(["up", "--yes", "--skip-preview", "-s", "x"]);
    console.log(`refused up after the kill:\n${refused.all ?? ""}`);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.all).toContain(`(pid ${pid}) since ${lock!.since}: stale`);
    expect(refused.all).toContain("`npm run pulumi -- cancel --yes -s x`");
    expect(refused.all).toContain("`npm run pulumi -- refresh --clear-pending-creates --yes -s x`");

    // The recovery the line names, through the wrapper.
    setSleep(0);
    for (const args of [
      ["cancel", "--yes", "-s", "x"],
      ["refresh", "--clear-pending-creates", "--yes", "--skip-preview", "-s", "x"],
      ["up", "--yes", "--skip-preview", "-s", "x"],
    ]) {
      const r = await wrapper(args);
      expect(r.exitCode, r.all).toBe(0);
    }
    expect(await locks("x")).toEqual([]);
    expect(await checkpoint("x")).not.toContain('"pending_operations"');
    await expectEachResourceOnce("x");
  }, 180_000);

  it("a lock taken by plain pulumi has no session: from another host, unknown, never stale", async () => {
    setSleep(SESSION_GRACE_MS / 1000 + 5);
    const plain = pulumi.run(["up", "--yes", "--skip-preview", "-s", "p"]);
    await until("the up's lock row", async () => (await locks("p")).length > 0);
    const [lock] = await locks("p");
    await sleep(SESSION_GRACE_MS + 500 - (Date.now() - Date.parse(lock!.since)));
    const sessions = await holderSessions(pg.backend);
    expect(lockLife(lock!, { host: "elsewhere", sessions })).toEqual({
      life: "unknown",
      why: "taken outside sparkform: no session to check",
    });
    // On its own host, its pid still says.
    expect(lockLife(lock!, { sessions }).life).toBe("live");
    expect((await plain).exitCode).toBe(0);
  }, 120_000);
});
