// The CLI's stack cache against the real pulumi CLI, on a stack of its own (a temporary project,
// backend and state directory): a read goes through pulumi once, later reads come from the
// cache, and each way the stack can change (config set, a new state, a new CLI build, the
// selected stack) is seen by the next read. No secret is ever written to the cache.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readOutputs, readStack } from "../../cli/stack";
import { selectedStackName, setCliBuild } from "../../cli/stack-cache";
import { repoRoot } from "../../setup/pulumi/env";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { readState } from "../../stack-state";
import { requireOrSkip } from "../support/requires";

const hasPulumi = fs.existsSync(path.join(repoRoot, ".sparkform", "toolchain.env"));
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHotKQgqqiemTGB/6SmyM/G48iZRmJFDHA58qr3L3Kc3";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "cli-stack-cache-"));
const project = path.join(work, "project");
const stack = "t";
const cacheFile = (kind: string) => path.join(work, "state", "cache", `${kind}-${stack}.json`);
/** The entry's file identity: unchanged on a cache hit, a new file (rename) on each miss. */
const entryId = (kind: string) => {
  const st = fs.statSync(cacheFile(kind), { bigint: true });
  return `${st.ino}:${st.mtimeNs}`;
};

const saved = { ...process.env };
let pulumi: PulumiCli;

describe.skipIf(
  requireOrSkip(
    "the pulumi toolchain",
    hasPulumi,
    "`npm run setup` writes .sparkform/toolchain.env",
  ),
)("the CLI's stack cache, with the real pulumi CLI", () => {
  beforeAll(async () => {
    fs.mkdirSync(project);
    fs.writeFileSync(
      path.join(project, "Pulumi.yaml"),
      "name: cachetest\nruntime: nodejs\nstackConfigDir: stacks\n",
    );
    process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
    fs.mkdirSync(path.join(work, "backend"));
    process.env.PULUMI_BACKEND_URL = `file://${path.join(work, "backend")}`;
    delete process.env.PULUMI_HOME;
    pulumi = pulumiCli(project);
    await pulumi.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    const node = "sparkform:nodes[0]";
    for (const [k, v] of [
      ["name", "spark-1"],
      ["host", "10.0.0.1"],
      ["user", "spark"],
      ["hostKey", HOST_KEY],
    ])
      await pulumi.run(["config", "set", "--path", `${node}.${k}`, v as string, "-s", stack]);
    setCliBuild("sparkform-test-build-1");
  }, 120_000);

  afterAll(() => {
    setCliBuild(undefined);
    process.env = saved;
  });

  it("reads through pulumi once, then from the cache while nothing changed", () => {
    const first = readStack(stack, project);
    expect(first.target("spark-1")).toMatchObject({ host: "10.0.0.1", user: "spark", port: 22 });
    // The outputs are read when a command first asks for them (sync never does).
    expect(fs.existsSync(cacheFile("outputs"))).toBe(false);
    expect(first.outputs).toEqual({});
    const ids = [entryId("config"), entryId("outputs")];
    const again = readStack(stack, project);
    expect(again.outputs).toEqual(first.outputs);
    expect([entryId("config"), entryId("outputs")]).toEqual(ids);
    expect(again.config).toEqual(first.config);
    expect(again.target("spark-1")).toEqual(first.target("spark-1"));
  });

  it("`pulumi config set` is seen by the next read", async () => {
    await pulumi.run([
      "config",
      "set",
      "--path",
      "sparkform:nodes[0].host",
      "10.0.0.9",
      "-s",
      stack,
    ]);
    expect(readStack(stack, project).target("spark-1").host).toBe("10.0.0.9");
  });

  it("a new state (another update's outputs) is seen by the next read", async () => {
    expect(readOutputs(stack, project)).toEqual({});
    const { document } = readState((await pulumi.run(["stack", "export", "-s", stack])).output);
    const urn = `urn:pulumi:${stack}::cachetest::pulumi:pulumi:Stack::cachetest-${stack}`;
    const exported = {
      ...document,
      deployment: {
        ...document.deployment,
        resources: [{ urn, custom: false, type: "pulumi:pulumi:Stack", outputs: { answer: 42 } }],
      },
    };
    const file = path.join(work, "export.json");
    fs.writeFileSync(file, JSON.stringify(exported));
    await pulumi.run(["stack", "import", "--file", file, "-s", stack]);
    expect(readOutputs(stack, project)).toEqual({ answer: 42 });
  });

  it("another CLI build parses the config again (the parse is the code's)", () => {
    readStack(stack, project);
    const before = entryId("config");
    setCliBuild("sparkform-test-build-2");
    readStack(stack, project);
    expect(entryId("config")).not.toBe(before);
  });

  it("the selected stack, from pulumi's workspace file, is the one `pulumi stack` shows", async () => {
    await pulumi.run(["stack", "select", stack]);
    const shown = (await pulumi.run(["stack", "--show-name"])).output.trim();
    expect(selectedStackName(project)).toBe(shown);
  });

  it("a secret private key is never written to the cache, and is read when connecting", async () => {
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(work, "k")]);
    const key = fs.readFileSync(path.join(work, "k"), "utf8");
    await pulumi.run(["config", "set", "--secret", "sparkform:privateKey", "-s", stack], {
      stdin: key,
    });
    const view = readStack(stack, project);
    expect(view.target("spark-1").privateKey?.trim()).toBe(key.trim());
    const body = key.split("\n")[1] as string;
    for (const kind of ["config", "outputs"])
      expect(fs.readFileSync(cacheFile(kind), "utf8")).not.toContain(body);
  });
});
