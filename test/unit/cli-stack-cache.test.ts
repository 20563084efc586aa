// The stack cache's keys (cli/stack-cache.ts): what each entry depends on, and when nothing may
// be cached at all. test/integration/cli-stack-cache.test.ts runs it with the real pulumi CLI,
// test/integration/team-cli-cache.test.ts on a real PostgreSQL; here a stand-in psql on PATH
// answers the checkpoint query and records how it was started.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  cached,
  configKey,
  forgetCheckpoints,
  outputsKey,
  selectedStackName,
  setCliBuild,
} from "../../cli/stack-cache";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "stack-cache-"));
const project = path.join(work, "project");
const backend = path.join(work, "backend");
const stackFile = path.join(project, "stacks", "Pulumi.s.yaml");
const state = path.join(backend, ".pulumi", "stacks", "proj", "s.json");
const saved = { ...process.env };

/** Rewrite `file` with other bytes of the same length and put its mtime back. */
function sameSizeEdit(file: string): void {
  const st = fs.statSync(file);
  const text = fs.readFileSync(file, "utf8");
  fs.writeFileSync(file, text.replace(/1/g, "2"));
  fs.utimesSync(file, st.atime, st.mtime);
}

describe("stack cache keys", () => {
  beforeAll(() => {
    fs.mkdirSync(path.dirname(stackFile), { recursive: true });
    fs.mkdirSync(path.dirname(state), { recursive: true });
    fs.writeFileSync(path.join(project, "Pulumi.yaml"), "name: proj\nstackConfigDir: stacks\n");
    fs.writeFileSync(stackFile, "config:\n  sparkform:x: 1\n");
    fs.writeFileSync(state, '{"version": 1}\n');
    process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
    process.env.PULUMI_BACKEND_URL = `file://${backend}`;
    process.env.PULUMI_HOME = path.join(work, "home");
  });
  afterEach(() => setCliBuild(undefined));
  afterAll(() => {
    process.env = saved;
  });

  it("config: only for a CLI build, and per build", () => {
    expect(configKey("s", project)).toBeUndefined();
    setCliBuild("sparkform-a");
    const a = configKey("s", project);
    setCliBuild("sparkform-b");
    expect(a).toBeDefined();
    expect(configKey("s", project)?.key).not.toBe(a?.key);
  });

  it("config: a stack file edit that keeps size and mtime changes the key", () => {
    setCliBuild("sparkform-a");
    const before = configKey("s", project)?.key;
    expect(configKey("s", project)?.key).toBe(before);
    sameSizeEdit(stackFile);
    expect(configKey("s", project)?.key).not.toBe(before);
  });

  it("outputs: a new state file of the same size and mtime changes the key", () => {
    const before = outputsKey("s", project)?.key;
    expect(before).toBeDefined();
    sameSizeEdit(state);
    expect(outputsKey("s", project)?.key).not.toBe(before);
  });

  it("nothing is cached for an ESC environment, a remote backend or an odd stack name", () => {
    setCliBuild("sparkform-a");
    fs.writeFileSync(path.join(project, "stacks", "Pulumi.esc.yaml"), "environment:\n  - dev\n");
    expect(configKey("esc", project)).toBeUndefined();
    expect(outputsKey("org/proj/s", project)).toBeUndefined();
    process.env.PULUMI_BACKEND_URL = "s3://bucket";
    try {
      expect(outputsKey("s", project)).toBeUndefined();
      expect(configKey("s", project)).toBeUndefined();
    } finally {
      process.env.PULUMI_BACKEND_URL = `file://${backend}`;
    }
  });

  it("cached() reads once per key and stores the entry 0600", () => {
    let reads = 0;
    const k = outputsKey("s", project);
    const read = () => ({ n: ++reads });
    expect(cached(k, read)).toEqual({ n: 1 });
    expect(cached(k, read)).toEqual({ n: 1 });
    expect(fs.statSync(k?.file as string).mode & 0o777).toBe(0o600);
    sameSizeEdit(state);
    expect(cached(outputsKey("s", project), read)).toEqual({ n: 2 });
  });

  it("the selected stack comes from pulumi's workspace file for this project", () => {
    expect(selectedStackName(project)).toBeUndefined();
    const hash = createHash("sha1").update(path.join(project, "Pulumi.yaml")).digest("hex");
    const ws = path.join(work, "home", "workspaces", `proj-${hash}-workspace.json`);
    fs.mkdirSync(path.dirname(ws), { recursive: true });
    fs.writeFileSync(ws, '{"stack": "organization/proj/s"}');
    expect(selectedStackName(project)).toBe("s");
  });
});

describe("stack cache keys on a PostgreSQL backend", () => {
  const bin = path.join(work, "fake-bin");
  const log = path.join(work, "psql-log");
  const answer = path.join(work, "psql-answer");
  const status = path.join(work, "psql-status");
  const PASSWORD = "pg-secret-Zx9";
  const url = `postgres://ops:${PASSWORD}@db.lab:6000/state?sslmode=disable`;
  const stamp = (t: string) =>
    fs.writeFileSync(answer, `[[".pulumi/stacks/proj/s.json", "${t}"]]\n`);
  /** Each psql run's lines: its argv (NUL-separated), then its PGPASSWORD. */
  const lines = () =>
    fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter(Boolean) : [];
  const runs = () => lines().filter((l) => !l.startsWith("PGPASSWORD="));

  beforeAll(() => {
    fs.mkdirSync(bin, { recursive: true });
    fs.writeFileSync(
      path.join(bin, "psql"),
      "#!/bin/sh\n" +
        `printf '%s\\0' "$@" >> ${log}; printf '\\nPGPASSWORD=%s\\n' "$PGPASSWORD" >> ${log}\n` +
        `cat ${answer}\nexit "$(cat ${status})"\n`,
      { mode: 0o755 },
    );
    process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
    process.env.PULUMI_HOME = path.join(work, "home");
  });
  beforeEach(() => {
    process.env.PATH = `${bin}${path.delimiter}${saved.PATH ?? ""}`;
    process.env.PULUMI_BACKEND_URL = url;
    fs.rmSync(log, { force: true });
    fs.writeFileSync(status, "0");
    stamp("2026-12-07 10:00:00.000001+00");
    forgetCheckpoints();
  });
  afterEach(() => setCliBuild(undefined));
  afterAll(() => {
    process.env = saved;
  });

  it("outputs: keyed on the checkpoint row's updated_at, one psql for every kind", () => {
    const before = outputsKey("s", project);
    expect(before).toBeDefined();
    expect(outputsKey("s", project, "evidence")).toBeDefined();
    expect(outputsKey("s", project, "recorded")).toBeDefined();
    expect(outputsKey("s", project)?.key).toBe(before?.key);
    expect(runs()).toHaveLength(1);
    // Another checkout's `up` rewrites the row; this process reads it again after the engine ran.
    stamp("2026-12-07 10:00:00.000002+00");
    forgetCheckpoints();
    expect(outputsKey("s", project)?.key).not.toBe(before?.key);
    expect(runs()).toHaveLength(2);
  });

  it("the key is not the file backend's, and differs per URL and table", () => {
    const pg = outputsKey("s", project)?.key;
    process.env.PULUMI_BACKEND_URL = `${url}&table=other`;
    const otherTable = outputsKey("s", project)?.key;
    process.env.PULUMI_BACKEND_URL = `file://${backend}`;
    const file = outputsKey("s", project)?.key;
    expect(new Set([pg, otherTable, file]).size).toBe(3);
  });

  it("no cache when psql fails or the stack has no checkpoint row: every read goes through pulumi", () => {
    fs.writeFileSync(status, "2");
    expect(outputsKey("s", project)).toBeUndefined();
    let reads = 0;
    const read = () => ({ n: ++reads });
    cached(outputsKey("s", project), read);
    cached(outputsKey("s", project), read);
    expect(reads).toBe(2);
    forgetCheckpoints();
    fs.writeFileSync(status, "0");
    fs.writeFileSync(answer, "\n");
    expect(outputsKey("s", project)).toBeUndefined();
  });

  it("a stale entry is never served when the row cannot be read", () => {
    let reads = 0;
    const read = () => ({ n: ++reads });
    expect(cached(outputsKey("s", project), read)).toEqual({ n: 1 });
    expect(cached(outputsKey("s", project), read)).toEqual({ n: 1 });
    forgetCheckpoints();
    fs.writeFileSync(status, "2");
    expect(cached(outputsKey("s", project), read)).toEqual({ n: 2 });
  });

  it("the password reaches psql in PGPASSWORD only, never in its argv", () => {
    outputsKey("s", project);
    const [argv, env] = lines();
    expect(argv).toContain("select json_agg");
    expect(argv).not.toContain(PASSWORD);
    expect(argv).not.toContain("db.lab");
    expect(env).toBe(`PGPASSWORD=${PASSWORD}`);
  });

  it("config: the stack's files plus the backend, no psql", () => {
    setCliBuild("sparkform-a");
    const pg = configKey("s", project);
    expect(pg).toBeDefined();
    expect(runs()).toHaveLength(0);
    process.env.PULUMI_BACKEND_URL = `file://${backend}`;
    expect(configKey("s", project)?.key).not.toBe(pg?.key);
    process.env.PULUMI_BACKEND_URL = url;
    sameSizeEdit(stackFile);
    expect(configKey("s", project)?.key).not.toBe(pg?.key);
  });
});
