// The stack cache's keys (cli/stack-cache.ts): what each entry depends on, and when nothing may
// be cached at all. test/integration/cli-stack-cache.test.ts runs it with the real pulumi CLI.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  cached,
  configKey,
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
