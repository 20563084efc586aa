// The Pulumi toolchain end to end: the real CLI, the Node.js language host, a dynamic
// provider whose read re-measures, and policy packs (the proof stack's own and sparkform's),
// on a private local file backend.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PulumiCli, pulumiCli } from "../../../sim/world/pulumi-cli";
import { POLICY_PACK } from "../../../setup/pulumi/policy";
import { parseOutputsRecord } from "../../../stack-outputs";
import { byName, readState } from "../../../stack-state";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const projectDir = path.join(__dirname, "proof");
// The proof stack's own pack guards its FileDigest (sha256-pinned); sparkform's pack runs beside
// it, so the real CLI loads it too (it finds no sparkform resources here and reports nothing).
const proofPolicies = path.join(__dirname, "proof-policies");
const policyPacks = ["--policy-pack", POLICY_PACK, "--policy-pack", proofPolicies];

describe("pulumi toolchain proof stack", () => {
  const work = mkdtempSync(path.join(tmpdir(), "sparkform-proof-"));
  const file = path.join(work, "managed.txt");
  const content = "sparkform proof\n";
  const stack = `proof-${process.pid}`;
  let cli: PulumiCli;

  const outputs = async () =>
    parseOutputsRecord((await cli.run(["stack", "output", "--json", "-s", stack])).output) as {
      path: string;
      sha256: string;
      size: number;
    };

  // Stack outputs only change when the program runs; refresh updates the resource's state.
  const resourceState = async () => {
    const state = readState((await cli.run(["stack", "export", "-s", stack])).output, stack);
    return byName(state.resources)["proof-file"]?.outputs as { sha256?: string } | undefined;
  };

  beforeAll(async () => {
    // A private backend per run: concurrent runs and the user's own stacks never collide.
    cli = pulumiCli(projectDir, { PULUMI_BACKEND_URL: `file://${work}/backend` });
    rmSync(path.join(work, "backend"), { recursive: true, force: true });
    mkdirSync(path.join(work, "backend"));
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    await cli.run(["config", "set", "-s", stack, "file", file]);
    await cli.run(["config", "set", "-s", stack, "content", content]);
    await cli.run(["config", "set", "-s", stack, "pinnedSha256", sha256(content)]);
  });

  afterAll(async () => {
    await cli?.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  });

  it("reports the versions of the CLI and the language host it runs", async () => {
    const version = await cli.run(["version"]);
    expect(version.output.trim()).toMatch(/^v3\.\d+\.\d+/);
    const about = await cli.run(["about", "-s", stack]);
    expect(about.output).toMatch(/language\s+nodejs/);
  });

  it("previews the creation without touching the file", async () => {
    const preview = await cli.run(["preview", "-s", stack, ...policyPacks]);
    expect(preview.output).toMatch(/\+\s+pulumi-nodejs:dynamic:Resource\s+proof-file\s+create/);
    expect(preview.output).toMatch(/sparkform@v0\.1\.0/);
    expect(preview.output).toMatch(/sparkform-proof@v0\.1\.0/);
    expect(existsSync(file)).toBe(false);
  });

  it("creates the file and outputs its measured digest", async () => {
    await cli.run(["up", "--yes", "-s", stack, ...policyPacks]);
    expect(readFileSync(file, "utf8")).toBe(content);
    const out = await outputs();
    expect(out).toEqual({ path: file, sha256: sha256(content), size: Buffer.byteLength(content) });
  });

  it("is converged: a second up changes nothing and refresh finds no drift", async () => {
    const again = await cli.run(["up", "--yes", "-s", stack]);
    expect(again.output).toMatch(/2 unchanged/);
    await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    await cli.run(["preview", "--expect-no-changes", "-s", stack]);
  });

  it("records an edited file as drift on refresh, and up repairs it", async () => {
    writeFileSync(file, "tampered\n");
    await cli.run(["refresh", "--yes", "-s", stack]);
    expect((await resourceState())?.sha256).toBe(sha256("tampered\n"));
    const preview = await cli.run(["preview", "--expect-no-changes", "-s", stack], {
      expectFailure: true,
    });
    expect(preview.output).toMatch(/~\s+pulumi-nodejs:dynamic:Resource\s+proof-file\s+update/);
    await cli.run(["up", "--yes", "-s", stack]);
    expect(readFileSync(file, "utf8")).toBe(content);
    expect((await resourceState())?.sha256).toBe(sha256(content));
    expect((await outputs()).sha256).toBe(sha256(content));
  });

  it("stops a preview on a mandatory policy violation, with the policy's message", async () => {
    await cli.run(["config", "set", "-s", stack, "pinnedSha256", ""]);
    const preview = await cli.run(["preview", "-s", stack, ...policyPacks], {
      expectFailure: true,
    });
    expect(preview.output).toMatch(/\[mandatory\]\s+sha256-pinned/);
    expect(preview.output).toContain(`Pin the SHA-256 of ${file}: set pinnedSha256`);
    const up = await cli.run(["up", "--yes", "-s", stack, ...policyPacks], {
      expectFailure: true,
    });
    expect(up.output).toContain("sha256-pinned");
    expect(readFileSync(file, "utf8")).toBe(content);
    await cli.run(["config", "set", "-s", stack, "pinnedSha256", sha256(content)]);
  });

  it("destroy removes what the stack created", async () => {
    await cli.run(["destroy", "--yes", "-s", stack]);
    expect(existsSync(file)).toBe(false);
    const state = readState((await cli.run(["stack", "export", "-s", stack])).output, stack);
    expect(state.resources).toHaveLength(0);
  });
});
