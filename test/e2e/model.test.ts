// The Model component end to end: the real pulumi CLI runs test/e2e/model/ (the component for
// the nodes of a simulated pair) against the test HF endpoint, which this test starts on the
// control address the nodes reach. Assertions read the nodes, the endpoint's request log and the
// stack's state.
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  publishRepo,
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type HfLogEntry,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";
import { repoRoot } from "../../setup/pulumi/env";
import { TINY_LLAMA_DIMS } from "../../sim/gguf/tiny-llama";
import { simDown, simExec, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { parseOutputsRecord } from "../../stack-outputs";
import { byName, readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-model-e2e-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const project = path.join(repoRoot, "test", "e2e", "model");
const stack = `model-${process.pid}`;
const TOKEN = `hf_e2e_${createHash("sha256").update(String(process.pid)).digest("hex").slice(0, 32)}`;

let cluster: SimCluster;
let ep: HfEndpoint;
let pub: PublishedRepo & { model: PublishedFile };
let agent: TestAgent | undefined;
let agentSocket = "";
let cli: PulumiCli;
const outputs: string[] = [];

const modelPath = () => `/home/spark/models/${pub.repo}/${pub.commit}/${pub.model.path}`;
const withAgent = () => ({ env: { SSH_AUTH_SOCK: agentSocket } });

async function onNode(node: string, script: string): Promise<string> {
  const r = await simExec(node, ["sh", "-c", script]);
  return r.stdout.trim();
}

async function pulumi(
  args: string[],
  opts: { expectFailure?: boolean; env?: NodeJS.ProcessEnv; stdin?: string } = {},
) {
  const r = await cli.run(args, { ...withAgent(), ...opts });
  outputs.push(r.output);
  return r;
}

function writeStackConfig(name: string, model: Record<string, unknown>): void {
  const text = [
    renderStackConfig(cluster).trimEnd(),
    "  sparkform:model:",
    ...Object.entries(model).map(([k, v]) => `    ${k}: ${JSON.stringify(v)}`),
    "",
  ].join("\n");
  writeFileSync(path.join(project, `Pulumi.${name}.yaml`), text);
}

async function exported(name = stack): Promise<string> {
  return (await cli.run(["stack", "export", "-s", name])).output;
}

async function replica(node: string): Promise<Record<string, unknown>> {
  const res = byName(readState(await exported(), stack).resources)[`${stack}-model-${node}`];
  if (!res) throw new Error(`no state for ${node}`);
  return res.outputs;
}

const nodeAddr = (i: number) => cluster.nodes[i]?.mgmtAddress ?? "";
/** Requests for the model file made by nodes (the control node reads only headers). */
const nodeGets = (): HfLogEntry[] =>
  ep
    .log()
    .filter(
      (e) =>
        e.method === "GET" &&
        e.path.includes(`/resolve/`) &&
        e.path.endsWith(pub.model.path) &&
        e.remote !== cluster.controlAddress,
    );

async function sha256On(node: string): Promise<string> {
  return (await onNode(node, `sha256sum ${modelPath()} | cut -d' ' -f1`)) || "(missing)";
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("Model on a simulated pair (real pulumi CLI, local HF endpoint)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    pub = publishTestModel(path.join(work, "hub"));
    ep = await startHfEndpoint({
      root: path.join(work, "hub"),
      host: cluster.controlAddress,
      port: 0,
      token: TOKEN,
    });
    agent = await startSshAgent(work, cluster.sshKeyPath);
    agentSocket = agent.socket;
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      project,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: "",
        // Its own GGUF header cache, so the first up reads the header from the endpoint.
        XDG_CACHE_HOME: path.join(work, "xdg-cache"),
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig(stack, {
      repo: pub.repo,
      revision: pub.commit,
      files: [pub.model.path],
      endpoint: ep.url,
      retries: 0,
    });
    // From stdin: the token is never on a command line, not even the test's.
    await cli.run(["config", "set", "--secret", "sparkform:hfToken", "-s", stack], {
      stdin: TOKEN,
    });
  });

  afterAll(async () => {
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack], withAgent()).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(project, `Pulumi.${stack}.yaml`), { force: true });
    await ep?.close();
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  });

  it("up: the model on both nodes, one hub download, the second copy over the fabric", async () => {
    const t0 = Date.now();
    const up = await pulumi(["up", "--yes", "-s", stack]);
    const upMs = Date.now() - t0;
    for (const node of ["spark-1", "spark-2"]) expect(await sha256On(node)).toBe(pub.model.sha256);
    expect(await onNode("spark-2", `stat -c %s ${modelPath()}`)).toBe(String(pub.model.size));
    // One full download, by spark-1; nothing at all from spark-2.
    expect(nodeGets()).toMatchObject([
      { status: 200, range: null, bytes: pub.model.size, complete: true, remote: nodeAddr(0) },
    ]);
    expect(ep.log().some((e) => e.remote === nodeAddr(1))).toBe(false);
    // The control node read only the GGUF header, with range requests.
    const header = ep
      .log()
      .filter((e) => e.path.includes("/resolve/") && e.remote === cluster.controlAddress);
    expect(header.length).toBeGreaterThan(0);
    expect(header.every((e) => e.status === 206 && e.range?.startsWith("bytes=0-"))).toBe(true);

    expect(await replica("spark-1")).toMatchObject({ fetchedBy: "hub", created: [pub.model.path] });
    expect(await replica("spark-2")).toMatchObject({
      fetchedBy: "fabric",
      created: [pub.model.path],
    });
    const text = (await cli.run(["stack", "output", "--json", "-s", stack])).output;
    const out = parseOutputsRecord(text, stack) as {
      commit: string;
      files: unknown[];
      gguf: Record<string, unknown>;
    };
    expect(out.commit).toBe(pub.commit);
    expect(out.files).toEqual([
      { path: pub.model.path, size: pub.model.size, sha256: pub.model.sha256 },
    ]);
    // The header as the generator wrote it (sim/gguf: head size 64, so CUDA has a kernel for it).
    expect(out.gguf).toMatchObject({
      architecture: "llama",
      blockCount: TINY_LLAMA_DIMS.nLayer,
      contextLength: TINY_LLAMA_DIMS.nCtx,
      embeddingLength: TINY_LLAMA_DIMS.nEmbd,
      headCount: TINY_LLAMA_DIMS.nHead,
      headCountKv: TINY_LLAMA_DIMS.nHeadKv,
      quantization: "F16",
    });
    expect(up.output).toMatch(/\[spark-1\] model sparkform\/tiny-llama: downloaded 1 file\(s\)/);
    expect(up.output).toMatch(
      /\[spark-2\] model sparkform\/tiny-llama: copied 1 file\(s\), .* from spark-1 over the fabric/,
    );
    const dl = /downloaded 1 file\(s\), [\d.]+ [KMG]iB from the hub in ([\d.]+) s/.exec(up.output);
    const cp = /over the fabric in ([\d.]+) s/.exec(up.output);
    console.log(
      `MEASURED: up ${upMs} ms; hub download ${dl?.[1]} s; fabric copy ${cp?.[1]} s; ` +
        `model ${pub.model.size} bytes`,
    );
  });

  it("is converged: up changes nothing, refresh --expect-no-changes passes", async () => {
    const again = await pulumi(["up", "--yes", "-s", stack]);
    expect(again.output).toMatch(new RegExp(`\\b${await cli.resourceCount(stack)} unchanged`));
    expect(again.output).not.toMatch(/\b(created|updated|deleted)\b/);
    await pulumi(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    expect(nodeGets().length).toBe(1);
  });

  it("one byte corrupted on spark-2 (mtime kept): full refresh sees it, up repairs only spark-2", async () => {
    await pulumi(["config", "set", "--path", "sparkform:model.verify", "full", "-s", stack]);
    await pulumi(["up", "--yes", "-s", stack]);
    const before1 = await onNode("spark-1", `stat -c %Y.%y ${modelPath()}`);
    await onNode(
      "spark-2",
      `cp -p ${modelPath()} /tmp/ref && printf 'Z' | dd of=${modelPath()} bs=1 seek=4096 conv=notrunc status=none && touch -r /tmp/ref ${modelPath()}`,
    );
    expect(await sha256On("spark-2")).not.toBe(pub.model.sha256);
    await pulumi(["refresh", "--yes", "-s", stack]);
    const s2 = (await replica("spark-2")).nodeFiles as Array<{ sha256: string }>;
    expect(s2[0]?.sha256).toBe(await sha256On("spark-2"));
    const preview = await pulumi(["preview", "--expect-no-changes", "-s", stack], {
      expectFailure: true,
    });
    expect(preview.output).toMatch(
      new RegExp(
        `~\\s+pulumi-nodejs:dynamic/sparkform:ModelReplica\\s+${stack}-model-spark-2\\s+update`,
      ),
    );
    expect(preview.output).not.toMatch(new RegExp(`${stack}-model-spark-1\\s+update`));
    ep.clearLog();
    const up = await pulumi(["up", "--yes", "-s", stack]);
    expect(up.output).toMatch(/\[spark-2\].*wrong bytes: repairing it from the peer/);
    expect(await sha256On("spark-2")).toBe(pub.model.sha256);
    expect(await onNode("spark-1", `stat -c %Y.%y ${modelPath()}`)).toBe(before1);
    expect(nodeGets()).toEqual([]); // repaired from spark-1, not from the hub
    await pulumi(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
  });

  it("no agent to forward: spark-2's copy is relayed through the control node, verified there", async () => {
    await onNode("spark-2", `rm -f ${modelPath()}`);
    ep.clearLog();
    const up = await pulumi(["up", "--refresh", "--yes", "-s", stack], {
      env: { SSH_AUTH_SOCK: "" },
    });
    expect(up.output).toMatch(
      /\[spark-2\] model sparkform\/tiny-llama: copied 1 file\(s\), .* from spark-1 relayed through the control node/,
    );
    expect(await replica("spark-2")).toMatchObject({ fetchedBy: "relay" });
    expect(await sha256On("spark-2")).toBe(pub.model.sha256);
    expect(nodeGets()).toEqual([]);
    await pulumi(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
  });

  it("cut at ~50%: up fails keeping the .part; the next up resumes it with Range (token never in ps)", async () => {
    await onNode("spark-1", `rm -f ${modelPath()}`);
    const half = Math.floor(pub.model.size / 2);
    ep.setFaults({ cutAfterBytes: half, cutMode: "once" });
    ep.clearLog();
    const failed = await pulumi(["up", "--refresh", "--yes", "-s", stack], { expectFailure: true });
    expect(failed.output).toContain(`download interrupted at byte ${half} of ${pub.model.size}`);
    expect(await onNode("spark-1", `stat -c %s ${modelPath()}.part`)).toBe(String(half));
    expect(await onNode("spark-1", `test -e ${modelPath()} && echo yes || echo no`)).toBe("no");

    // Resume, throttled so the download runs long enough to watch the node's process list.
    ep.setFaults({ throttleBytesPerSec: 40_000 });
    let watching = true;
    let sawFetch = false;
    const leaks: string[] = [];
    const watcher = (async () => {
      while (watching) {
        const ps = await onNode(
          "spark-1",
          "ps -eo args; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null",
        );
        if (/python3 - fetch/.test(ps)) sawFetch = true;
        if (ps.includes(TOKEN)) leaks.push(ps);
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const resumed = await pulumi(["up", "--refresh", "--yes", "-s", stack]);
    watching = false;
    await watcher;
    expect(sawFetch).toBe(true);
    expect(leaks).toEqual([]);
    expect(resumed.output).toMatch(/\[spark-1\].*resuming the \.part from byte \d+/);
    expect(resumed.output).toMatch(
      /\[spark-1\] model .*: [1-9]\d% \([\d.]+ [KMG]iB of [\d.]+ [KMG]iB\) at [\d.]+ [KMG]iB\/s, ETA \d+ s/,
    );
    expect(nodeGets().map((e) => [e.status, e.range, e.bytes, e.remote])).toEqual([
      // (The endpoint logs no remote address for a connection it cut: the socket is gone.)
      [200, null, half, null],
      [206, `bytes=${half}-`, pub.model.size - half, nodeAddr(0)],
    ]);
    expect(await sha256On("spark-1")).toBe(pub.model.sha256);
    expect(await onNode("spark-1", `test -e ${modelPath()}.part && echo yes || echo no`)).toBe(
      "no",
    );
    ep.setFaults({});
  });

  it("Range ignored: the .part is restarted from byte 0, no appended file", async () => {
    await onNode("spark-1", `rm -f ${modelPath()}`);
    ep.setFaults({ cutAfterBytes: 100_000, cutMode: "once" });
    await pulumi(["up", "--refresh", "--yes", "-s", stack], { expectFailure: true });
    expect(await onNode("spark-1", `stat -c %s ${modelPath()}.part`)).toBe("100000");
    ep.setFaults({ ignoreRange: true });
    ep.clearLog();
    const up = await pulumi(["up", "--refresh", "--yes", "-s", stack]);
    expect(up.output).toMatch(
      /the server ignored Range \(asked from byte 100000\): restarting from byte 0/,
    );
    expect(nodeGets()).toMatchObject([
      { status: 200, range: "bytes=100000-", bytes: pub.model.size },
    ]);
    expect(await onNode("spark-1", `stat -c %s ${modelPath()}`)).toBe(String(pub.model.size));
    expect(await sha256On("spark-1")).toBe(pub.model.sha256);
    ep.setFaults({});
  });

  it("wrong bytes: a hard failure, nothing renamed into place, the .part removed", async () => {
    await onNode("spark-1", `rm -f ${modelPath()}`);
    ep.setFaults({ wrongBytes: true });
    const failed = await pulumi(["up", "--refresh", "--yes", "-s", stack], { expectFailure: true });
    expect(failed.output).toContain(`SHA-256 mismatch for ${pub.model.path}`);
    expect(failed.output).toContain(`but the hub says ${pub.model.sha256}`);
    expect(failed.output).toContain("nothing was placed");
    expect(await onNode("spark-1", `ls -A /home/spark/models/${pub.repo}/${pub.commit}/`)).toBe("");
    ep.setFaults({});
    await pulumi(["up", "--refresh", "--yes", "-s", stack]);
    expect(await sha256On("spark-1")).toBe(pub.model.sha256);
  });

  it("not enough disk: fails before downloading, with the numbers", async () => {
    const small = `${stack}-small`;
    await cli.run(["stack", "init", small, "--secrets-provider", "passphrase"]);
    try {
      // A real 1 MiB filesystem on spark-1, filled so that less than the model is free.
      await onNode(
        "spark-1",
        "mkdir -p /home/spark/small-models && mount -t tmpfs -o size=1m,uid=1000,gid=1000 tmpfs /home/spark/small-models && " +
          "fallocate -l 512k /home/spark/small-models/filler && chown spark /home/spark/small-models/filler",
      );
      const free = Number(
        await onNode("spark-1", "df -B1 --output=avail /home/spark/small-models | tail -1"),
      );
      expect(free).toBeLessThan(pub.model.size);
      writeStackConfig(small, {
        repo: pub.repo,
        revision: pub.commit,
        files: [pub.model.path],
        endpoint: ep.url,
        modelsDir: "~/small-models",
        nodes: ["spark-1"],
      });
      await cli.run(["config", "set", "--secret", "sparkform:hfToken", "-s", small], {
        stdin: TOKEN,
      });
      ep.clearLog();
      const failed = await pulumi(["up", "--yes", "-s", small], { expectFailure: true });
      expect(failed.output).toMatch(
        new RegExp(
          `not enough free space for ${pub.model.path} under ~/small-models/.*: need ${pub.model.size} ` +
            `bytes \\([\\d.]+ [KMG]iB\\), ${free} bytes \\([\\d.]+ [KMG]iB\\) free; nothing was downloaded`,
        ),
      );
      expect(nodeGets()).toEqual([]);
      expect(await onNode("spark-1", "ls -A /home/spark/small-models")).toBe("filler");
    } finally {
      await onNode("spark-1", "umount /home/spark/small-models; rmdir /home/spark/small-models");
      await cli.run(["stack", "rm", "--yes", "--force", "-s", small]).catch(() => undefined);
      rmSync(path.join(project, `Pulumi.${small}.yaml`), { force: true });
    }
  });

  it("a followed branch records its commit; the branch moving shows in preview as a replace", async () => {
    await pulumi(["config", "set", "--path", "sparkform:model.revision", "main", "-s", stack]);
    await pulumi(["config", "set", "--path", "sparkform:model.allowBranch", "true", "-s", stack]);
    await pulumi(["preview", "--expect-no-changes", "-s", stack]); // main is still that commit
    const moved = publishTestModel(path.join(work, "hub"), {
      files: [
        { path: pub.model.path, source: path.join(pub.dir, pub.model.path) },
        { path: "README.md", bytes: Buffer.from("moved\n") },
      ],
    });
    expect(moved.commit).not.toBe(pub.commit);
    try {
      const preview = await pulumi(["preview", "--expect-no-changes", "-s", stack], {
        expectFailure: true,
      });
      for (const node of ["spark-1", "spark-2"]) {
        expect(preview.output).toMatch(
          new RegExp(
            `\\+-\\s+pulumi-nodejs:dynamic/sparkform:ModelReplica\\s+${stack}-model-${node}\\s+replace`,
          ),
        );
      }
    } finally {
      publishRepo(path.join(work, "hub"), {
        repo: pub.repo,
        files: [],
        branch: "main",
        commit: pub.commit,
      });
      await pulumi([
        "config",
        "set",
        "--path",
        "sparkform:model.revision",
        pub.commit,
        "-s",
        stack,
      ]);
      await pulumi([
        "config",
        "set",
        "--path",
        "sparkform:model.allowBranch",
        "false",
        "-s",
        stack,
      ]);
    }
    await pulumi(["preview", "--expect-no-changes", "-s", stack]);
  });

  it("the token is in no Pulumi output and not in plain state", async () => {
    const state = await exported();
    expect(state).toMatch(/"token":\s*\{\s*"4dabf18193072939515e22adb298388d"/); // a secret
    expect(state).not.toContain(TOKEN);
    for (const o of outputs) expect(o).not.toContain(TOKEN);
    // Every hub request carried it, though.
    expect(ep.log().every((e) => e.auth)).toBe(true);
  });

  it("destroy removes the files it created, not another revision's", async () => {
    const other = `/home/spark/models/${pub.repo}/${"0".repeat(40)}/keep.gguf`;
    await onNode(
      "spark-2",
      `mkdir -p $(dirname ${other}) && echo keep > ${other} && chown -R spark /home/spark/models`,
    );
    await pulumi(["destroy", "--yes", "-s", stack]);
    for (const node of ["spark-1", "spark-2"]) {
      expect(
        await onNode(
          node,
          `test -e /home/spark/models/${pub.repo}/${pub.commit} && echo yes || echo no`,
        ),
      ).toBe("no");
    }
    expect(await onNode("spark-2", `cat ${other}`)).toBe("keep");
  });
});
