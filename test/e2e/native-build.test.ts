// NativeBuild end to end: the real pulumi CLI runs test/e2e/native-build/ (TreeSync + NativeBuild
// per node) against a simulated pair; assertions read the stack's outputs and the nodes.
//
// The first build on spark-1 is cold (a fresh simulated node has an empty compiler cache) unless
// SPARKFORM_E2E_NODE_CCACHE names a directory on the control node: then spark-1's cache is
// seeded from it before the first `up` and saved back after, to make repeated runs fast while
// developing. spark-2 is always seeded from spark-1 by NativeBuild itself.
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractLlamaSource } from "../../sim/llama/index";
import { simDown, simExec, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { nodeCcache } from "../../sim/world/ccache";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { parseOutputsRecord } from "../../stack-outputs";
import { byName, readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-nb-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const projectDir = path.join(__dirname, "native-build");
const stack = `nb-${process.pid}`;
const treeDir = path.join(work, "llama.cpp");
const treeDest = "~/src/llama.cpp";
const rpcSource = path.join(treeDir, "tools/rpc/rpc-server.cpp");
const RPC = "bin/ggml-rpc-server";
const CLIENT = "bin/llama-completion";
const LIB = "ggml/src/libggml-cpu.a";
const warmCache = process.env.SPARKFORM_E2E_NODE_CCACHE;
/** A cold llama.cpp build on a simulated node sharing 2 busy cores can take well over 10 min. */
const COLD_BUILD_MS = 45 * 60_000;
const REBUILD_MS = 20 * 60_000;

let cluster: SimCluster;
let agent: TestAgent | undefined;
let agentSocket = "";
let cli: PulumiCli;
let commit = "";

interface NodeResult {
  buildKey: string;
  commit: string;
  installDir: string;
  checks: { name: string; ok: boolean; detail: string }[];
  instructions: Record<string, number>;
  artifacts: Record<string, string>;
  cache: { hits: number; misses: number; seededBy: string };
  seconds: Record<string, number>;
}

function writeStackConfig(
  name: string,
  build: string[],
  tree: { source: string; dest: string; exclude?: string } = { source: treeDir, dest: treeDest },
): void {
  const file = path.join(projectDir, `Pulumi.${name}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const settings = [
    "  sparkform:tree:",
    `    source: ${JSON.stringify(tree.source)}`,
    `    dest: ${JSON.stringify(tree.dest)}`,
    `    exclude: ${tree.exclude ?? '[{path: ".git", reason: "history the build does not need"}]'}`,
    "  sparkform:build:",
    ...build,
  ];
  writeFileSync(
    file,
    `${[...salt, renderStackConfig(cluster).trimEnd(), ...settings].join("\n")}\n`,
  );
}

const SIM_BUILD = ["    preset: sim", `    artifacts: [${RPC}, ${CLIENT}, ${LIB}]`];

async function results(): Promise<Record<string, NodeResult>> {
  const out = await cli.run(["stack", "output", "--json", "-s", stack]);
  return parseOutputsRecord(out.output, stack).result as Record<string, NodeResult>;
}

async function stateOf(name: string): Promise<{ artifacts: Record<string, string> }> {
  const out = await cli.run(["stack", "export", "-s", stack]);
  const r = byName(readState(out.output, stack).resources)[`${stack}-${name}`];
  if (!r) throw new Error(`no state for ${name}`);
  return r.outputs as { artifacts: Record<string, string> };
}

async function onNode(node: string, script: string): Promise<string> {
  const r = await simExec(node, ["sh", "-c", script]);
  return r.stdout.trim();
}

const log = (s: string) => process.stderr.write(`[native-build] ${s}\n`);

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("NativeBuild on a simulated pair (real pulumi CLI)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    commit = extractLlamaSource(treeDir).commit;
    agent = await startSshAgent(work, cluster.sshKeyPath);
    agentSocket = agent.socket;
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      projectDir,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: agentSocket,
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig(stack, SIM_BUILD);
    nodeCcache(cluster, warmCache).seed();
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

  let first: Record<string, NodeResult> = {};

  it(
    "up: builds on both nodes, verified, with artifact digests equal across nodes",
    async () => {
      let up;
      try {
        up = await cli.run(["up", "--yes", "-s", stack]);
      } finally {
        nodeCcache(cluster, warmCache).save();
      }
      first = await results();
      const [a, b] = [first["spark-1"], first["spark-2"]] as [NodeResult, NodeResult];
      for (const r of [a, b]) {
        expect(r.commit).toBe(commit);
        expect(r.checks.map((c) => [c.name, c.ok])).toEqual([
          ["cpu-march", true],
          ["cpu-instructions", true],
          ["artifacts", true],
        ]);
        expect(r.checks[0]?.detail).toBe("ggml-cpu: -march=x86-64-v3");
        for (const k of ["avx2", "fma", "f16c"]) expect(r.instructions[k]).toBeGreaterThan(0);
        for (const p of [RPC, CLIENT, LIB]) expect(r.artifacts[p]).toMatch(/^[0-9a-f]{64}$/);
      }
      // Byte-identical builds: same key, same commit, same digests on both nodes.
      expect(b.buildKey).toBe(a.buildKey);
      expect(b.artifacts).toEqual(a.artifacts);
      // spark-2 built after spark-1, from spark-1's compiler cache copied over the fabric.
      expect(a.cache.seededBy).toBe("none");
      expect(b.cache.seededBy).toBe("fabric");
      expect(b.cache.hits).toBeGreaterThan(0);
      expect(b.cache.misses).toBe(0);
      log(`spark-1: ${JSON.stringify(a.seconds)} ccache ${JSON.stringify(a.cache)}`);
      log(`spark-2: ${JSON.stringify(b.seconds)} ccache ${JSON.stringify(b.cache)}`);
      // A line per phase with its elapsed time.
      for (const phase of [
        "configure done in",
        "build done in",
        "verified in",
        "installed 3 artifacts",
      ]) {
        expect(up.output).toContain(`[spark-2] build: ${phase}`);
      }
      // The installed binaries run, and carry the commit passed explicitly (the tree has no .git).
      const version = await onNode("spark-2", `${b.installDir}/${CLIENT} --version 2>&1 || true`);
      expect(version).toContain(commit);
      expect(await onNode("spark-2", `ls -A /home/spark/src/llama.cpp`)).not.toMatch(/\.git\b/);
    },
    COLD_BUILD_MS,
  );

  it("changing nothing rebuilds nothing", async () => {
    const again = await cli.run(["up", "--yes", "-s", stack]);
    expect(again.output).toMatch(new RegExp(`\\b${await cli.resourceCount(stack)} unchanged`));
    expect(again.output).not.toMatch(/\bupdated\b/);
    await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    await cli.run(["preview", "--expect-no-changes", "-s", stack]);
  });

  let second: Record<string, NodeResult> = {};

  it(
    "one source file changed on the control node: up re-syncs and rebuilds both nodes",
    async () => {
      const original = readFileSync(rpcSource, "utf8");
      writeFileSync(
        rpcSource,
        original.replace(
          "show this help message and exit",
          "show this help message and exit (e2e)",
        ),
      );
      const up = await cli.run(["up", "--yes", "-s", stack]);
      for (const [kind, n] of [
        ["TreeSync", "tree-spark-1"],
        ["TreeSync", "tree-spark-2"],
        ["NativeBuild", "build-spark-1"],
        ["NativeBuild", "build-spark-2"],
      ] as const) {
        expect(up.output).toMatch(
          new RegExp(`~\\s+pulumi-nodejs:dynamic/sparkform:${kind}\\s+${stack}-${n}\\s+updated`),
        );
      }
      second = await results();
      const [a, b] = [second["spark-1"], second["spark-2"]] as [NodeResult, NodeResult];
      expect(a.artifacts[RPC]).not.toBe(first["spark-1"]?.artifacts[RPC]);
      expect(a.artifacts[CLIENT]).toBe(first["spark-1"]?.artifacts[CLIENT]);
      expect(b.artifacts).toEqual(a.artifacts);
      log(`rebuild spark-1: ${JSON.stringify(a.seconds)} ccache ${JSON.stringify(a.cache)}`);
      log(`rebuild spark-2: ${JSON.stringify(b.seconds)} ccache ${JSON.stringify(b.cache)}`);
      const help = await onNode("spark-2", `${b.installDir}/${RPC} --help 2>&1 || true`);
      expect(help).toContain("show this help message and exit (e2e)");
    },
    REBUILD_MS,
  );

  it(
    "a build that fails reports the compiler output and leaves the installed artifacts",
    async () => {
      const good = readFileSync(rpcSource, "utf8");
      writeFileSync(rpcSource, `${good}\nthis is not C++;\n`);
      const up = await cli.run(["up", "--yes", "-s", stack], { expectFailure: true });
      expect(up.output).toContain("last compiler output");
      expect(up.output).toMatch(/FAILED: .*rpc-server\.cpp\.o/);
      expect(up.output).toMatch(/rpc-server\.cpp:\d+:\d+: error:/);
      expect(up.output).toContain("are unchanged");
      const installDir = second["spark-1"]?.installDir ?? "";
      expect(await onNode("spark-1", `sha256sum ${installDir}/${RPC} | cut -c1-64`)).toBe(
        second["spark-1"]?.artifacts[RPC],
      );
      writeFileSync(rpcSource, good);
      // Back to the tree that was built: the trees re-sync, the builds have nothing to do.
      const back = await cli.run(["up", "--yes", "-s", stack]);
      expect(back.output).toMatch(/\b2 updated/);
      expect(back.output).not.toMatch(/build-spark-\d\s+updated/);
      expect((await results())["spark-1"]?.artifacts).toEqual(second["spark-1"]?.artifacts);
    },
    REBUILD_MS,
  );

  it(
    "the rpc server deleted on spark-2: refresh shows drift, up rebuilds it (cache relayed, no agent)",
    async () => {
      const installDir = second["spark-2"]?.installDir ?? "";
      await onNode("spark-2", `rm -f ${installDir}/${RPC}`);
      const refresh = await cli.run(["refresh", "--yes", "-s", stack]);
      expect(refresh.output).toMatch(/build-spark-2\s+updated/);
      // Refresh updates the resource's state (stack outputs change only on up).
      expect((await stateOf("build-spark-2")).artifacts).toMatchObject({ [RPC]: "" });
      expect((await stateOf("build-spark-1")).artifacts).toEqual(second["spark-1"]?.artifacts);
      const preview = await cli.run(["preview", "--expect-no-changes", "-s", stack], {
        expectFailure: true,
      });
      expect(preview.output).toMatch(
        new RegExp(
          `~\\s+pulumi-nodejs:dynamic/sparkform:NativeBuild\\s+${stack}-build-spark-2\\s+update`,
        ),
      );
      expect(preview.output).not.toMatch(/build-spark-1\s+update/);
      // No agent to forward this time: spark-2's compiler cache is relayed through the control node.
      const up = await cli.run(["up", "--yes", "-s", stack], { env: { SSH_AUTH_SOCK: "" } });
      expect(up.output).toMatch(
        /\[spark-2\].*compiler cache seeded from spark-1 via the control node/,
      );
      const now = await results();
      expect(now["spark-2"]?.cache.seededBy).toBe("relay");
      expect(now["spark-2"]?.artifacts).toEqual(second["spark-2"]?.artifacts);
      expect(now["spark-2"]?.artifacts).toEqual(now["spark-1"]?.artifacts);
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    },
    REBUILD_MS,
  );

  it("a CPU arch without a CUDA arch on a CUDA build is refused before anything runs", async () => {
    const bad = `${stack}-bad`;
    await cli.run(["stack", "init", bad, "--secrets-provider", "passphrase"]);
    try {
      writeStackConfig(bad, ["    preset: spark", "    flags: {LLAMA_CUDA_ARCH: null}"]);
      const preview = await cli.run(["preview", "-s", bad], { expectFailure: true });
      expect(preview.output).toContain(
        "sparkform:build.flags.LLAMA_CUDA_ARCH: is required with LLAMA_CPU_ARM_ARCH on a CUDA build",
      );
      expect(preview.output).toContain("seven-architecture fat binary");
      expect(preview.output).not.toMatch(/\btree-spark-1\b.*create/);
    } finally {
      await cli.run(["stack", "rm", "--yes", "--force", "-s", bad]).catch(() => undefined);
      rmSync(path.join(projectDir, `Pulumi.${bad}.yaml`), { force: true });
    }
  });

  describe("with a build command (llama_cpp_ex's `mix compile`; here a Makefile like it)", () => {
    const cmd = `${stack}-cmd`;
    const fixture = path.join(work, "fake-llama");
    const FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567";
    const BIN = "priv/ggml-rpc-server";
    const COMMAND_BUILD = [
      "    preset: sim",
      `    commit: ${FAKE_COMMIT}`,
      "    command:",
      "      run: [make, --no-print-directory]",
      "      buildDir: _build/obj/llama_build-*",
      `    artifacts: [${BIN}]`,
    ];
    // As a llama_cpp_ex stack excludes _build/ and priv/: the command writes them on the node.
    const fakeTree = {
      source: fixture,
      dest: "~/src/fake-llama",
      exclude:
        '[{path: _build, reason: "build output, made on each node"}, {path: priv, reason: "artifacts, made on each node"}]',
    };
    let installDir = "";

    async function cmdResults(): Promise<Record<string, NodeResult>> {
      const out = await cli.run(["stack", "output", "--json", "-s", cmd]);
      return parseOutputsRecord(out.output, cmd).result as Record<string, NodeResult>;
    }

    beforeAll(async () => {
      cpSync(path.join(__dirname, "..", "fixtures", "build-command"), fixture, { recursive: true });
      await cli.run(["stack", "init", cmd, "--secrets-provider", "passphrase"]);
      writeStackConfig(cmd, COMMAND_BUILD, fakeTree);
    });

    afterAll(async () => {
      await cli.run(["destroy", "--yes", "-s", cmd]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", cmd]).catch(() => undefined);
      rmSync(path.join(projectDir, `Pulumi.${cmd}.yaml`), { force: true });
    });

    it("runs under the contract in the tree; its build directory is found and verified", async () => {
      const up = await cli.run(["up", "--yes", "-s", cmd]);
      const r = await cmdResults();
      const [a, b] = [r["spark-1"], r["spark-2"]] as [NodeResult, NodeResult];
      for (const x of [a, b]) {
        expect(x.commit).toBe(FAKE_COMMIT);
        // The Makefile generator this time: -march read from the target's flags.make.
        expect(x.checks.map((c) => [c.name, c.ok])).toEqual([
          ["cpu-march", true],
          ["cpu-instructions", true],
          ["artifacts", true],
        ]);
        expect(x.checks[0]?.detail).toMatch(/^ggml-cpu: -march=x86-64-v3/);
        for (const k of ["avx2", "fma", "f16c"]) expect(x.instructions[k]).toBeGreaterThan(0);
        expect(x.artifacts[BIN]).toMatch(/^[0-9a-f]{64}$/);
      }
      expect(b.artifacts).toEqual(a.artifacts);
      expect(a.buildKey).not.toBe(first["spark-1"]?.buildKey); // the command is in the key
      expect(up.output).toContain("[spark-1] build: key " + a.buildKey);
      expect(up.output).toMatch(
        /command make --no-print-directory in \/home\/spark\/src\/fake-llama/,
      );
      expect(up.output).toMatch(/\[spark-2\] build: installed 1 artifacts/);
      installDir = b.installDir;
      // The contract reached the build: the binary carries LLAMA_COMMIT from the environment.
      expect(await onNode("spark-2", `${installDir}/${BIN}`)).toBe(
        `fake ggml-rpc-server ${FAKE_COMMIT} sum=36`,
      );
      // The command's own build directory, keyed by the flags, inside the synced tree.
      expect(await onNode("spark-2", "ls /home/spark/src/fake-llama/_build/obj")).toMatch(
        /^llama_build-cpu-[0-9a-f]{8}$/,
      );
      const again = await cli.run(["up", "--yes", "-s", cmd]);
      expect(again.output).not.toMatch(/build-spark-\d\s+updated/);
    });

    it("a source change rebuilds both nodes through the command; drift is repaired", async () => {
      const src = path.join(fixture, "native", "rpc-server.c");
      writeFileSync(src, readFileSync(src, "utf8").replace("fake ggml-rpc-server", "fake rpc v2"));
      await cli.run(["up", "--yes", "-s", cmd]);
      const r = await cmdResults();
      expect(r["spark-2"]?.artifacts).toEqual(r["spark-1"]?.artifacts);
      expect(await onNode("spark-1", `${installDir}/${BIN}`)).toBe(
        `fake rpc v2 ${FAKE_COMMIT} sum=36`,
      );
      await onNode("spark-2", `rm -f ${installDir}/${BIN}`);
      const refresh = await cli.run(["refresh", "--yes", "-s", cmd]);
      expect(refresh.output).toMatch(/build-spark-2\s+updated/);
      await cli.run(["up", "--yes", "-s", cmd]);
      expect(await onNode("spark-2", `${installDir}/${BIN}`)).toBe(
        `fake rpc v2 ${FAKE_COMMIT} sum=36`,
      );
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", cmd]);
    });

    it("targets with a command, no artifacts, or its output not excluded from the tree: refused at preview", async () => {
      writeStackConfig(cmd, [...COMMAND_BUILD, "    targets: [ggml-rpc-server]"], fakeTree);
      const withTargets = await cli.run(["preview", "-s", cmd], { expectFailure: true });
      expect(withTargets.output).toContain(
        "sparkform:build.targets: is for sparkform's own CMake build; with build.command the command decides what it builds: remove it",
      );
      writeStackConfig(
        cmd,
        COMMAND_BUILD.filter((l) => !l.includes("artifacts")),
        fakeTree,
      );
      const noArtifacts = await cli.run(["preview", "-s", cmd], { expectFailure: true });
      expect(noArtifacts.output).toContain(
        "sparkform:build.artifacts: is required with build.command",
      );
      writeStackConfig(cmd, COMMAND_BUILD, { ...fakeTree, exclude: '[{path: priv, reason: "x"}]' });
      const notExcluded = await cli.run(["preview", "-s", cmd], { expectFailure: true });
      expect(notExcluded.output).toContain(
        "sparkform:build.command: writes _build/obj/llama_build-* in the synced tree, and sparkform:tree.exclude does not exclude it",
      );
      expect(notExcluded.output).toContain(
        'Add to sparkform:tree.exclude: {path: _build, reason: "build output, made on each node"}',
      );
      writeStackConfig(cmd, COMMAND_BUILD, fakeTree);
    });

    it("destroy removes the installed artifacts", async () => {
      await cli.run(["destroy", "--yes", "-s", cmd]);
      for (const node of ["spark-1", "spark-2"]) {
        expect(await onNode(node, `test -e ${installDir} && echo present || echo absent`)).toBe(
          "absent",
        );
      }
    });
  });

  it("destroy removes the build directories and installed artifacts, keeps the compiler cache", async () => {
    const installDir = second["spark-1"]?.installDir ?? "";
    await cli.run(["destroy", "--yes", "-s", stack]);
    for (const node of ["spark-1", "spark-2"]) {
      expect(await onNode(node, `ls /home/spark/.cache/sparkform/llama-build/`)).toBe("out");
      expect(await onNode(node, `test -e ${installDir} && echo present || echo absent`)).toBe(
        "absent",
      );
      expect(await onNode(node, "test -d /home/spark/.cache/sparkform/ccache && echo kept")).toBe(
        "kept",
      );
    }
  });
});
