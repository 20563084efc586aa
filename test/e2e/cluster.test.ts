// SparkNode, Toolchain and TreeSync end to end: the real pulumi CLI runs the sparkform program
// against a simulated pair; assertions read the nodes themselves and the stack's state.
// Convergence (a second up, refresh and preview with --expect-no-changes) and a clean destroy
// are the acceptance suite's (test/acceptance), on the whole local stack; this file keeps what
// only it shows: drift and repair per stage, the fabric gate, sync/run, secrets, bad input.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeFactsOutput } from "../../components/outputs";
import { localTreeDigest, nodeTreeDigestCacheFile } from "../../components/tree/digest";
import { repoRoot } from "../../setup/pulumi/env";
import { policyPackArgs } from "../../setup/pulumi/policy";
import { simDown, simExec, simLink, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { parseOutputsRecord } from "../../stack-outputs";
import { type AnyResource, readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-e2e-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const stack = `e2e-${process.pid}`;
const treeDir = path.join(work, "tree");
const treeDest = `~/src/e2e-${process.pid}`;
const exclude = [
  { path: ".git", reason: "history the build does not need" },
  { name: "*.o", reason: "build output" },
];
const toolchainSettings = [
  "  sparkform:toolchain:",
  "    path: ~/.sparktool",
  "    binDirs: [installs/sparktool/1.0.0/bin]",
  "    probe: [sparktool, --version]",
  "    expect: sparktool 1.0.0",
];

let cluster: SimCluster;
let agent: TestAgent | undefined;
let agentSocket = "";
let cli: PulumiCli;

function makeTree(): void {
  mkdirSync(path.join(treeDir, "src/nested"), { recursive: true });
  mkdirSync(path.join(treeDir, ".git"), { recursive: true });
  mkdirSync(path.join(treeDir, "bin"));
  writeFileSync(path.join(treeDir, "src/main.c"), "int main(void) { return 0; }\n");
  writeFileSync(path.join(treeDir, "src/nested/data.bin"), Buffer.alloc(300_000, 7));
  writeFileSync(path.join(treeDir, "src/stale.o"), "object");
  writeFileSync(path.join(treeDir, ".git/HEAD"), "ref: refs/heads/main\n");
  writeFileSync(path.join(treeDir, "bin/run"), "#!/bin/sh\necho run\n");
  chmodSync(path.join(treeDir, "bin/run"), 0o755);
  symlinkSync("src/main.c", path.join(treeDir, "main-link"));
}

/** The stack config file: the sim's node values plus this test's tree and toolchain. */
function writeStackConfig(name: string, edit: (text: string) => string = (t) => t): void {
  const file = path.join(repoRoot, "stacks", `Pulumi.${name}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const settings = [
    ...toolchainSettings,
    "  sparkform:tree:",
    `    source: ${JSON.stringify(treeDir)}`,
    `    dest: ${JSON.stringify(treeDest)}`,
    `    exclude: ${JSON.stringify(exclude)}`,
  ];
  const text = `${[...salt, renderStackConfig(cluster).trimEnd(), ...settings].join("\n")}\n`;
  writeFileSync(file, edit(text));
}

async function resources(name = stack): Promise<readonly AnyResource[]> {
  const out = await cli.run(["stack", "export", "-s", name]);
  return readState(out.output, name).resources;
}

async function outputsOf(suffix: string): Promise<Record<string, unknown>> {
  const r = (await resources()).find((x) => x.urn.endsWith(`::${stack}-${suffix}`));
  if (!r) throw new Error(`no state for ${suffix}`);
  return r.outputs;
}

async function onNode(node: string, script: string): Promise<string> {
  const r = await simExec(node, ["sh", "-c", script]);
  return r.stdout.trim();
}

const withAgent = () => ({ env: { SSH_AUTH_SOCK: agentSocket } });

/** `sparkform …` against this test's backend and state dir. */
async function sparkform(args: string[]) {
  const r = await execa(process.execPath, [path.join(repoRoot, "bin", "sparkform.js"), ...args], {
    cwd: repoRoot,
    env: { ...cli.env, SSH_AUTH_SOCK: "" },
    extendEnv: false,
    reject: false,
  });
  console.log(`$ sparkform ${args.join(" ")}  [exit ${r.exitCode}]\n${r.stdout}\n${r.stderr}`);
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("sparkform on a simulated pair (real pulumi CLI)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    makeTree();
    agent = await startSshAgent(work, cluster.sshKeyPath);
    agentSocket = agent.socket;
    // A private backend; no agent by default (each test says whether it forwards one).
    cli = pulumiCli(
      repoRoot,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: "",
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    mkdirSync(path.join(work, "backend"));
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig(stack);
  });

  afterAll(async () => {
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`), { force: true });
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  });

  it("up: facts from both nodes, the toolchain copied node to node, the tree proven on both", async () => {
    await cli.run(["up", "--yes", "-s", stack, ...policyPackArgs(stack)], withAgent());
    const text = (await cli.run(["stack", "output", "--json", "-s", stack])).output;
    const out = parseOutputsRecord(text, stack) as {
      facts: Record<string, NodeFactsOutput>;
      toolchain: Record<string, { digest: string; probe: string; copiedBy: string }>;
      tree: {
        expected: { digest: string; files: number };
        nodes: Record<string, { digest: string; files: number }>;
      };
    };
    for (const node of ["spark-1", "spark-2"]) {
      // The facts `up` prints (components/outputs.ts); the whole sheet stays in the state.
      const facts = out.facts[node];
      expect(facts?.arch).toBeTruthy();
      expect(facts?.memoryBytes).toBeGreaterThan(0);
    }
    expect(out.toolchain["spark-1"]).toMatchObject({
      copiedBy: "present",
      probe: "sparktool 1.0.0",
    });
    expect(out.toolchain["spark-2"]).toMatchObject({
      copiedBy: "fabric",
      probe: "sparktool 1.0.0",
    });
    expect(out.toolchain["spark-2"]?.digest).toBe(out.toolchain["spark-1"]?.digest);
    // The copy runs from the copied prefix on spark-2 itself.
    expect(
      await onNode(
        "spark-2",
        "/home/spark/.sparktool/installs/sparktool/1.0.0/bin/sparktool --version",
      ),
    ).toBe("sparktool 1.0.0");

    const control = localTreeDigest(treeDir, exclude);
    expect(out.tree.expected).toMatchObject({ digest: control.digest, files: 3 });
    expect(out.tree.nodes["spark-1"]).toMatchObject({ digest: control.digest, files: 3 });
    expect(out.tree.nodes["spark-2"]).toMatchObject({ digest: control.digest, files: 3 });
    const dest = `/home/spark/src/e2e-${process.pid}`;
    expect(await onNode("spark-2", `test -x ${dest}/bin/run && readlink ${dest}/main-link`)).toBe(
      "src/main.c",
    );
    expect(await onNode("spark-2", `ls -A ${dest}`)).not.toMatch(/\.git/);
  });

  it("a byte changed on spark-2 is drift on that node's TreeSync only; up repairs it", async () => {
    const file = `/home/spark/src/e2e-${process.pid}/src/main.c`;
    // The node keeps file hashes by (inode, size, mtime, ctime): make sure this file's is kept,
    // then change a byte in place and put size and mtime back, as rsync's quick check would not
    // notice. Only the ctime tells, and the refresh must still see the edit.
    const cacheFile = nodeTreeDigestCacheFile(treeDest, exclude).replace(/^~/, "/home/spark");
    const cached = async () =>
      (await onNode("spark-2", `cat ${cacheFile}`)).includes('"src/main.c"');
    if (!(await cached())) await cli.run(["refresh", "--yes", "--skip-preview", "-s", stack]);
    expect(await cached()).toBe(true);
    await onNode(
      "spark-2",
      `t=$(stat -c %Y ${file}) && printf X | dd of=${file} bs=1 seek=4 conv=notrunc status=none && touch -m -d @$t ${file}`,
    );
    await cli.run(["refresh", "--yes", "-s", stack]);
    const expected = localTreeDigest(treeDir, exclude).digest;
    expect((await outputsOf("tree-spark-2")).digest).not.toBe(expected);
    expect((await outputsOf("tree-spark-1")).digest).toBe(expected);
    const preview = await cli.run(["preview", "--expect-no-changes", "-s", stack], {
      expectFailure: true,
    });
    expect(preview.output).toMatch(
      new RegExp(
        `~\\s+pulumi-nodejs:dynamic/sparkform:TreeSync\\s+${stack}-tree-spark-2\\s+update`,
      ),
    );
    expect(preview.output).not.toMatch(new RegExp(`${stack}-tree-spark-1\\s+update`));
    expect(preview.output).not.toMatch(/toolchain-spark-\d\s+update/);
    await cli.run(["up", "--yes", "-s", stack]);
    expect(await onNode("spark-2", `cat ${file}`)).toBe("int main(void) { return 0; }");
    expect((await outputsOf("tree-spark-2")).digest).toBe(expected);
    await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
  });

  it("a deleted toolchain on spark-2 is drift; up copies it again (relayed without an agent)", async () => {
    await onNode("spark-2", "rm -rf /home/spark/.sparktool");
    await cli.run(["refresh", "--yes", "-s", stack]);
    expect((await outputsOf("toolchain-spark-2")).digest).toBe("");
    const preview = await cli.run(["preview", "--expect-no-changes", "-s", stack], {
      expectFailure: true,
    });
    expect(preview.output).toMatch(new RegExp(`${stack}-toolchain-spark-2\\s+update`));
    await cli.run(["up", "--yes", "-s", stack]);
    const tc = await outputsOf("toolchain-spark-2");
    expect(tc).toMatchObject({ copiedBy: "relay", probeOutput: "sparktool 1.0.0" });
    expect(tc.digest).toBe((await outputsOf("toolchain-spark-1")).digest);
    await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
  });

  it("a cut rail is drift on that rail's link only, and the fabric gate stops up until the rail is back", async () => {
    // This stack has no policy config of its own: every policy at its default level.
    const policies = policyPackArgs(stack);
    const rail = (n: number) => `fabric-spark-1-spark-2-rail${n}`;
    expect((await outputsOf(rail(1))).healthy).toBe(true);
    await simLink("spark-1", "spark-2", "down", 1);
    try {
      const refresh = await cli.run(["refresh", "--yes", "-s", stack]);
      expect(refresh.output).toMatch(new RegExp(`${stack}-${rail(1)}\\s+updated`));
      expect(refresh.output).not.toMatch(new RegExp(`${stack}-${rail(0)}\\s+updated`));
      const cut = await outputsOf(rail(1));
      expect(cut.healthy).toBe(false);
      const failed = (cut.checks as { check: string; ok: boolean; message: string }[]).filter(
        (c) => !c.ok,
      );
      expect(failed.map((c) => c.check)).toContain("reachable");
      expect(failed.map((c) => c.message).join("\n")).toMatch(/rail 1/);
      expect((await outputsOf(rail(0))).healthy).toBe(true);
      // up re-measures the unhealthy link; the gate judges it measured, and refuses.
      const gated = await cli.run(["up", "--yes", "-s", stack, ...policies], {
        expectFailure: true,
      });
      expect(gated.output).toContain("fabric-healthy");
      expect(gated.output).toMatch(/spark-1↔spark-2 rail 1 /);
    } finally {
      await simLink("spark-1", "spark-2", "up", 1);
    }
    await cli.run(["up", "--yes", "-s", stack, ...policies]);
    expect((await outputsOf(rail(1))).healthy).toBe(true);
    await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
  });

  it("sparkform sync puts an edit on both nodes with the digest proof; refresh then agrees", async () => {
    const file = path.join(treeDir, "src/synced.c");
    writeFileSync(file, "/* synced by sparkform sync */\n");
    try {
      const r = await sparkform(["sync", "--stack", stack]);
      expect(r.exitCode).toBe(0);
      const digest = localTreeDigest(treeDir, exclude).digest;
      for (const node of ["spark-1", "spark-2"]) {
        expect(r.stdout).toMatch(
          new RegExp(
            `^${node}: 4 files, .* digest ${digest.slice(0, 16)} = the control node's, recorded$`,
            "m",
          ),
        );
        expect(await onNode(node, `cat /home/spark/src/e2e-${process.pid}/src/synced.c`)).toBe(
          "/* synced by sparkform sync */",
        );
      }
      // Recorded by the sync's targeted refresh: the state holds the synced tree as expected.
      for (const node of ["spark-1", "spark-2"]) {
        const o = await outputsOf(`tree-${node}`);
        expect([o.digest, o.expectedDigest]).toEqual([digest, digest]);
      }
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    } finally {
      rmSync(file, { force: true });
      await cli.run(["up", "--yes", "-s", stack], withAgent());
    }
  });

  it("a private key given as a secret connects, and never appears in output or state", async () => {
    const key = readFileSync(cluster.sshKeyPath, "utf8");
    const keyBody = key.split("\n")[1] ?? ""; // a line of the base64 body
    expect(keyBody.length).toBeGreaterThan(20);
    writeStackConfig(stack, (t) => t.replace(/^ {2}sparkform:sshKeyPath: .*\n/m, ""));
    await cli.run(["config", "set", "--secret", "-s", stack, "sparkform:privateKey"], {
      stdin: key,
    });
    const up = await cli.run(["up", "--yes", "-s", stack]);
    expect(up.output).toMatch(/updated/); // every resource's connection changed
    const state = (await cli.run(["stack", "export", "-s", stack])).output;
    expect(state).not.toContain(keyBody);
    expect(up.output).not.toContain(keyBody);
    const tree = (await resources()).find((r) => r.urn.endsWith(`::${stack}-tree-spark-2`));
    expect(JSON.stringify(tree?.outputs?.target)).toContain("4dabf18193072939515e22adb298388d"); // the secret sig
    // sync on this stack: its targets are ciphertext in the exported state; the refresh that
    // records the synced tree writes the tree's inputs again, and they stay encrypted.
    const edited = path.join(treeDir, "src/secret-key-sync.c");
    writeFileSync(edited, "/* synced with a secret key */\n");
    try {
      const synced = await sparkform(["sync", "--stack", stack]);
      expect(synced.exitCode).toBe(0);
      expect(synced.stdout).toMatch(/^spark-2: .* = the control node's, recorded$/m);
      const after = (await cli.run(["stack", "export", "-s", stack])).output;
      expect(after).not.toContain(keyBody);
      const recorded = (await resources()).find((r) => r.urn.endsWith(`::${stack}-tree-spark-2`));
      expect(JSON.stringify(recorded?.outputs?.target)).toContain(
        "4dabf18193072939515e22adb298388d",
      );
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    } finally {
      rmSync(edited, { force: true });
    }
    // Back to the key file for the tests that follow.
    writeStackConfig(stack);
    await cli.run(["up", "--yes", "-s", stack]);
  });

  describe("bad input fails before anything changes on a node", () => {
    const bad = `${stack}-bad`;
    const badDest = `/home/spark/src/e2e-${process.pid}-bad`;
    const configFor = (edit: (t: string) => string) =>
      writeStackConfig(bad, (t) => edit(t).replaceAll(treeDest, `${treeDest}-bad`));
    const nothingChanged = async () => {
      for (const node of ["spark-1", "spark-2"]) {
        expect(await onNode(node, `test -e ${badDest} && echo present || echo absent`)).toBe(
          "absent",
        );
      }
    };

    beforeAll(async () => {
      await cli.run(["stack", "init", bad, "--secrets-provider", "passphrase"]);
    });
    afterAll(async () => {
      await cli.run(["stack", "rm", "--yes", "--force", "-s", bad]).catch(() => undefined);
      rmSync(path.join(repoRoot, "stacks", `Pulumi.${bad}.yaml`), { force: true });
    });

    it("an unknown host key", async () => {
      const wrongKey = execFileSync(
        "sh",
        ["-c", `ssh-keygen -q -t ed25519 -N '' -f ${work}/wrong && cat ${work}/wrong.pub`],
        {
          encoding: "utf8",
        },
      )
        .trim()
        .split(" ")
        .slice(0, 2)
        .join(" ");
      const spark2Key = cluster.nodes[1]?.hostKey ?? "";
      configFor((t) => t.replace(spark2Key, wrongKey));
      const up = await cli.run(["up", "--yes", "-s", bad], { expectFailure: true });
      expect(up.output).toContain("[spark-2]");
      expect(up.output).toMatch(/host key verification failed/i);
      await nothingChanged();
    });

    it("a host that does not answer", async () => {
      const spark2 = cluster.nodes[1]?.mgmtAddress ?? "";
      const silent = spark2.replace(/\.\d+$/, ".99");
      configFor((t) => t.replace(`"${spark2}"`, `"${silent}"`));
      const started = Date.now();
      const up = await cli.run(["up", "--yes", "-s", bad], { expectFailure: true });
      expect(up.output).toContain("[spark-2]");
      expect(up.output).toMatch(/unreachable|No route to host|timed out/i);
      expect(Date.now() - started).toBeLessThan(90_000);
      await nothingChanged();
    });

    it("a tree path that does not exist", async () => {
      configFor((t) => t.replace(JSON.stringify(treeDir), JSON.stringify(`${treeDir}-missing`)));
      const preview = await cli.run(["preview", "-s", bad], { expectFailure: true });
      expect(preview.output).toContain(
        `sparkform:tree.source: "${treeDir}-missing" is not a directory`,
      );
      await nothingChanged();
    });

    it("config values with shell metacharacters", async () => {
      const marker = `/tmp/sparkform-pwned-${process.pid}`;
      configFor((t) => t.replace('user: "spark"', `user: "spark;touch ${marker}"`));
      let preview = await cli.run(["preview", "-s", bad], { expectFailure: true });
      expect(preview.output).toContain("sparkform:nodes[0].user: is not a valid user name");
      configFor((t) =>
        t.replace(JSON.stringify(treeDest), JSON.stringify(`${treeDest}$(touch ${marker})`)),
      );
      preview = await cli.run(["preview", "-s", bad], { expectFailure: true });
      expect(preview.output).toContain("sparkform:tree.dest: may contain only letters, digits");
      expect(existsSync(marker)).toBe(false);
      for (const node of ["spark-1", "spark-2"]) {
        expect(await onNode(node, `test -e ${marker} && echo present || echo absent`)).toBe(
          "absent",
        );
      }
      await nothingChanged();
    });
  });

  it("a build command runs with the toolchain's install directories on PATH (mix from ~/.asdf)", async () => {
    // A second stack: the toolchain, the stand-in llama_cpp_ex tree and a build command that
    // asks the toolchain for its version first, as `mix compile` needs Elixir from ~/.asdf.
    const cmd = `${stack}-cmd`;
    const fake = path.join(work, "fake-llama");
    cpSync(path.join(repoRoot, "test", "fixtures", "build-command"), fake, { recursive: true });
    await cli.run(["stack", "init", cmd, "--secrets-provider", "passphrase"]);
    try {
      writeStackConfig(cmd, (t) =>
        t.replace(
          /^ {2}sparkform:tree:[\s\S]*$/m,
          [
            "  sparkform:tree:",
            `    source: ${JSON.stringify(fake)}`,
            `    dest: "~/src/fake-llama-${process.pid}"`,
            "    exclude: [{path: _build, reason: build output}, {path: priv, reason: build output}]",
            "  sparkform:build:",
            "    preset: sim",
            `    commit: ${"c".repeat(40)}`,
            "    command:",
            "      run: [sh, -c, 'mkdir -p priv && sparktool --version > priv/toolchain && make -s']",
            "      buildDir: _build/obj/llama_build-*",
            "    artifacts: [priv/toolchain, priv/ggml-rpc-server]",
            "",
          ].join("\n"),
        ),
      );
      await cli.run(["up", "--yes", "-s", cmd, ...policyPackArgs(cmd)], withAgent());
      const state = await resources(cmd);
      for (const node of ["spark-1", "spark-2"]) {
        const build = state.find((r) => r.urn.endsWith(`::${cmd}-build-${node}`))?.outputs;
        const installDir = String(build?.installDir ?? "");
        expect(installDir).toMatch(/^\/home\/spark\/\.cache\/sparkform\/llama-build\/out\//);
        // spark-2's toolchain is the copy from spark-1, found on PATH without shims.
        expect(await onNode(node, `cat ${installDir}/priv/toolchain`)).toBe("sparktool 1.0.0");
        expect(await onNode(node, `${installDir}/priv/ggml-rpc-server`)).toBe(
          `fake ggml-rpc-server ${"c".repeat(40)} sum=36`,
        );
      }
      // `sparkform run`: the same contract and PATH for a command of the user's, in the tree,
      // without a login shell (the copied toolchain found on spark-2 too); its exit code.
      const shown = await sparkform([
        "run",
        "spark-2",
        "--stack",
        cmd,
        "--",
        "sh",
        "-c",
        'echo "$LLAMA_BACKEND $LLAMA_RPC $LLAMA_COMMIT"; command -v sparktool; pwd; exit 3',
      ]);
      expect(shown.exitCode).toBe(3);
      expect(shown.stdout.split("\n")).toEqual([
        `cpu 1 ${"c".repeat(40)}`,
        "/home/spark/.sparktool/installs/sparktool/1.0.0/bin/sparktool",
        `/home/spark/src/fake-llama-${process.pid}`,
      ]);
      const printed = await sparkform(["run", "spark-1", "--stack", cmd, "--print", "--", "make"]);
      expect(printed.exitCode).toBe(0);
      expect(printed.stdout).toContain("LLAMA_BACKEND=cpu");
      expect(printed.stdout).toContain('PATH="$HOME"/.sparktool/installs/sparktool/1.0.0/bin:');
      const big = await sparkform(["run", "spark-1", "--stack", cmd, "--big-cores", "--", "true"]);
      expect(big.exitCode).toBe(1);
      expect(big.stderr).toContain("--big-cores: spark-1's fact sheet lists no performance cores");
    } finally {
      await cli.run(["destroy", "--yes", "-s", cmd], withAgent()).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", cmd]).catch(() => undefined);
      rmSync(path.join(repoRoot, "stacks", `Pulumi.${cmd}.yaml`), { force: true });
    }
  });

  it("destroy removes the synced trees and the copied toolchain, not the source's", async () => {
    await cli.run(["destroy", "--yes", "-s", stack]);
    const dest = `/home/spark/src/e2e-${process.pid}`;
    const cacheFile = nodeTreeDigestCacheFile(treeDest, exclude).replace(/^~/, "/home/spark");
    for (const node of ["spark-1", "spark-2"]) {
      expect(await onNode(node, `test -e ${dest} && echo present || echo absent`)).toBe("absent");
      // The node's file hashes for the tree went with it, and their directory (no other tree).
      for (const p of [cacheFile, path.dirname(cacheFile)]) {
        expect(await onNode(node, `test -e ${p} && echo present || echo absent`)).toBe("absent");
      }
    }
    expect(
      await onNode("spark-2", "test -e /home/spark/.sparktool && echo present || echo absent"),
    ).toBe("absent");
    expect(
      await onNode("spark-1", "test -e /home/spark/.sparktool && echo present || echo absent"),
    ).toBe("present");
  });
});
