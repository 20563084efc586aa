// "Build once, fan out" end to end (sparkform:build.distribute fan-out): the real pulumi CLI runs
// test/e2e/native-build/ (the main program's stack on a tree+build config) against a simulated
// pair. spark-1 (the cache source) compiles, verifies and installs; spark-2 compiles nothing: it
// copies spark-1's installed artifacts over the fabric, checks each sha256 against spark-1's and
// installs them in its own store entry.
//
// A simulated node has no GPU: the sim's CPU build stands in for the CUDA build that fan-out is
// the default for (on real Sparks nvcc's objects differ between build directories and machines,
// bench/cuda-proof.md; here distribute: fan-out is set explicitly). Only ggml-rpc-server is built,
// to keep the build small. SPARKFORM_E2E_NODE_CCACHE, when set, names a compiler cache on the
// control node copied into spark-1 before the first up (read only: it is not written back).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractLlamaSource } from "../../sim/llama/index";
import { simDown, simExec, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { byName, readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-fo-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const projectDir = path.join(__dirname, "native-build");
const stack = `fo-${process.pid}`;
const treeDir = path.join(work, "llama.cpp");
const rpcSource = path.join(treeDir, "tools/rpc/rpc-server.cpp");
const RPC = "bin/ggml-rpc-server";
const warmCache = process.env.SPARKFORM_E2E_NODE_CCACHE;
const COLD_BUILD_MS = 45 * 60_000;
const REBUILD_MS = 20 * 60_000;

let cluster: SimCluster;
let agent: TestAgent | undefined;
let cli: PulumiCli;

interface BuildState {
  builtBy: string;
  builtOn: string;
  buildKey: string;
  buildDir: string;
  installDir: string;
  installed: Record<string, string>;
  artifacts: Record<string, string>;
  checks: { name: string; ok: boolean; detail: string; node?: string }[];
  instructions: Record<string, number>;
  cache: { hits: number; misses: number; seededBy: string };
  seconds: Record<string, number>;
}

function writeStackConfig(): void {
  const file = path.join(projectDir, `Pulumi.${stack}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const settings = [
    "  sparkform:tree:",
    `    source: ${JSON.stringify(treeDir)}`,
    '    dest: "~/src/llama.cpp"',
    '    exclude: [{path: ".git", reason: "history the build does not need"}]',
    "  sparkform:build:",
    "    preset: sim",
    "    distribute: fan-out",
    "    targets: [ggml-rpc-server]",
    `    artifacts: [${RPC}]`,
  ];
  writeFileSync(
    file,
    `${[...salt, renderStackConfig(cluster).trimEnd(), ...settings].join("\n")}\n`,
  );
}

async function stateOf(node: string): Promise<BuildState> {
  const out = await cli.run(["stack", "export", "-s", stack]);
  const r = byName(readState(out.output, stack).resources)[`${stack}-build-${node}`];
  if (!r) throw new Error(`no state for ${stack}-build-${node}`);
  return r.outputs as unknown as BuildState;
}

async function onNode(node: string, script: string): Promise<string> {
  return (await simExec(node, ["sh", "-c", script])).stdout.trim();
}

const log = (s: string) => process.stderr.write(`[build-fan-out] ${s}\n`);

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("build once, fan out on a simulated pair (real pulumi CLI)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    extractLlamaSource(treeDir);
    agent = await startSshAgent(work, cluster.sshKeyPath);
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      projectDir,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: agent.socket,
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig();
    if (warmCache && existsSync(warmCache)) {
      const ssh = ["-e", `ssh -F ${cluster.sshConfigPath}`];
      execFileSync("ssh", [
        "-F",
        cluster.sshConfigPath,
        "spark-1",
        "mkdir -p .cache/sparkform/ccache",
      ]);
      execFileSync("rsync", [
        "-a",
        ...ssh,
        `${warmCache}/`,
        "spark@spark-1:.cache/sparkform/ccache/",
      ]);
    }
  });

  afterAll(async () => {
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(projectDir, `Pulumi.${stack}.yaml`), { force: true });
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  });

  let first: { a: BuildState; b: BuildState };

  it(
    "up: spark-1 compiles; spark-2 compiles nothing and installs spark-1's verified artifacts",
    async () => {
      const up = await cli.run(["up", "--yes", "-s", stack]);
      const [a, b] = [await stateOf("spark-1"), await stateOf("spark-2")];
      first = { a, b };
      log(`spark-1: ${JSON.stringify(a.seconds)}; spark-2: ${JSON.stringify(b.seconds)}`);
      expect([a.builtBy, a.builtOn]).toEqual(["self", "spark-1"]);
      expect([b.builtBy, b.builtOn]).toEqual(["fan-out", "spark-1"]);
      expect(a.artifacts[RPC]).toMatch(/^[0-9a-f]{64}$/);
      expect(b.artifacts).toEqual(a.artifacts);
      expect(b.installed).toEqual(a.installed);
      expect(b.buildKey).toBe(a.buildKey);
      // spark-1's verification, carried as spark-1's, plus spark-2's own digest check.
      expect(b.checks.map((c) => [c.name, c.ok, c.node])).toEqual([
        ...a.checks.map((c) => [c.name, c.ok, "spark-1"]),
        ["fan-out-digests", true, "spark-2"],
      ]);
      expect(b.instructions).toEqual(a.instructions);
      // No compiler ran on spark-2: no configure or build phase, no build directory, no cache.
      expect(Object.keys(b.seconds).sort()).toEqual(["copy", "install", "probe", "total"]);
      expect(b.buildDir).toBe("");
      expect(b.cache).toEqual({ hits: 0, misses: 0, seededBy: "none" });
      expect(up.output).toMatch(/\[spark-1\] build: build done in/);
      expect(up.output).not.toMatch(/\[spark-2\] build: (configure|build) done/);
      expect(up.output).toMatch(
        /\[spark-2\] build: fan-out: 1 artifacts from spark-1 over the fabric, sha256 equal to spark-1's/,
      );
      expect(await onNode("spark-2", "ls -A /home/spark/.cache/sparkform/llama-build")).toBe("out");
      expect(
        await onNode("spark-2", "ls -A /home/spark/.cache/sparkform/ccache 2>/dev/null | wc -l"),
      ).toBe("0");
      // The received binary runs on spark-2, from its own store entry.
      expect(await onNode("spark-2", `${b.installDir}/${RPC} --help 2>&1 || true`)).toMatch(
        /usage/i,
      );
      expect(await onNode("spark-2", `readlink ${b.installDir}`)).toMatch(
        new RegExp(`^\\.store/${a.buildKey}-`),
      );
      await cli.run(["preview", "--expect-no-changes", "-s", stack]);
    },
    COLD_BUILD_MS,
  );

  it(
    "spark-2's artifact deleted: refresh shows drift, up copies it again (no rebuild; relayed, no agent)",
    async () => {
      await onNode("spark-2", `rm -f ${first.b.installDir}/${RPC}`);
      const refresh = await cli.run(["refresh", "--yes", "-s", stack]);
      expect(refresh.output).toMatch(/build-spark-2\s+updated/);
      expect((await stateOf("spark-2")).artifacts).toEqual({ [RPC]: "" });
      // No agent to forward this time: the artifacts are relayed through the control node.
      const up = await cli.run(["up", "--yes", "-s", stack], { env: { SSH_AUTH_SOCK: "" } });
      expect(up.output).not.toMatch(/build-spark-1\s+updated/);
      expect(up.output).toMatch(
        /\[spark-2\] build: fan-out: 1 artifacts from spark-1 via the control node, sha256 equal to spark-1's/,
      );
      const b = await stateOf("spark-2");
      expect(b.builtBy).toBe("fan-out");
      expect(b.artifacts).toEqual(first.a.artifacts);
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    },
    REBUILD_MS,
  );

  it(
    "a tree edit rebuilds spark-1 and re-copies to spark-2",
    async () => {
      const original = readFileSync(rpcSource, "utf8");
      writeFileSync(
        rpcSource,
        original.replace("show this help message and exit", "show this help message and exit (fo)"),
      );
      const up = await cli.run(["up", "--yes", "-s", stack]);
      for (const n of ["build-spark-1", "build-spark-2"]) {
        expect(up.output).toMatch(
          new RegExp(
            `~\\s+pulumi-nodejs:dynamic/sparkform:NativeBuild\\s+${stack}-${n}\\s+updated`,
          ),
        );
      }
      const [a, b] = [await stateOf("spark-1"), await stateOf("spark-2")];
      expect(a.artifacts[RPC]).not.toBe(first.a.artifacts[RPC]);
      expect(b.artifacts).toEqual(a.artifacts);
      expect(b.builtBy).toBe("fan-out");
      expect(up.output).not.toMatch(/\[spark-2\] build: (configure|build) done/);
      expect(await onNode("spark-2", `${b.installDir}/${RPC} --help 2>&1 || true`)).toContain(
        "show this help message and exit (fo)",
      );
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    },
    REBUILD_MS,
  );
});
