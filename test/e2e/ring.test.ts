// Three Sparks in a ring (issue 37 item 1) end to end: `sim up --ring` cables three simulated
// nodes as NVIDIA's playbook does (each pair its own veth and /24, each node's fabric0 to the
// next node and fabric1 to the one before) and the real pulumi CLI runs the main program on
// it with `sparkform:fabric.topology: ring`. Asserted: the fabric report lists three cables,
// each healthy; a server on every node (the client's llama-server and a replica on each worker
// node, each replica bound to its end of the cable to the client); the official OpenAI SDK
// answered through `sparkform endpoint`; one cable cut is that cable down, by name, and the
// other two healthy.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa, type ResultPromise } from "execa";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HfEndpoint,
  type PublishedRepo,
  publishTestModel,
  startHfEndpoint,
} from "../../sim/hub";
import { simDown, simLink, simUp } from "../../sim/index";
import { extractLlamaSource } from "../../sim/llama/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { nodeCcache } from "../../sim/world/ccache";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { repoRoot } from "../../setup/pulumi/env";
import { policyPackArgs } from "../../setup/pulumi/policy";
import { parseOutputsRecord } from "../../stack-outputs";
import { type AnyResource, readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const work = mkdtempSync(path.join(tmpdir(), "sparkform-ring-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const stack = `ring-${process.pid}`;
const treeDir = path.join(work, "llama.cpp");
/** `sparkform endpoint`'s port on this machine. */
const LOCAL_PORT = 18091;
const warmCache = process.env.SPARKFORM_E2E_NODE_CCACHE;
/** Cold llama.cpp builds on three simulated nodes sharing the host's few cores. */
const COLD_BUILD_MS = 90 * 60_000;
const STEP_MS = 20 * 60_000;
const POLICIES = policyPackArgs("local");

/** The ring's three cables as the fabric stage names them (components/fabric/config.ts linkKey). */
const CABLES = {
  "spark-1↔spark-2": "fabric-spark-1-rail0-spark-2-rail1",
  "spark-1↔spark-3": "fabric-spark-1-rail1-spark-3-rail0",
  "spark-2↔spark-3": "fabric-spark-2-rail0-spark-3-rail1",
} as const;

let cluster: SimCluster;
let agent: TestAgent | undefined;
let cli: PulumiCli;
let ep: HfEndpoint;
let pub: PublishedRepo & { model: { path: string } };
let endpoint: ResultPromise | undefined;

const log = (s: string) => process.stderr.write(`[ring] ${s}\n`);

/** The stack file: the sim's nodes and ring fabric, the toolchain, tree, build, model, worker, server. */
function writeStackConfig(): void {
  const file = path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const settings = [
    "  sparkform:toolchain:",
    "    path: ~/.sparktool",
    "    binDirs: [installs/sparktool/1.0.0/bin]",
    "    probe: [sparktool, --version]",
    "    expect: sparktool 1.0.0",
    "  sparkform:tree:",
    `    source: ${JSON.stringify(treeDir)}`,
    `    dest: "~/src/llama.cpp"`,
    '    exclude: [{path: ".git", reason: "history the build does not need"}]',
    "  sparkform:build:",
    "    preset: sim",
    "  sparkform:model:",
    `    repo: ${JSON.stringify(pub.repo)}`,
    `    revision: ${JSON.stringify(pub.commit)}`,
    `    files: [${JSON.stringify(pub.model.path)}]`,
    `    endpoint: ${JSON.stringify(ep.url)}`,
    "  sparkform:worker:",
    "    nodes: [spark-2, spark-3]",
    "  sparkform:server:",
    "    context: 256",
    // A replica on every worker node: a server on each of the ring's nodes.
    "    topology: replicas",
  ];
  writeFileSync(
    file,
    `${[...salt, renderStackConfig(cluster).trimEnd(), ...settings].join("\n")}\n`,
  );
}

async function resources(): Promise<readonly AnyResource[]> {
  const out = await cli.run(["stack", "export", "-s", stack]);
  return readState(out.output, stack).resources;
}

async function outputsOf(suffix: string): Promise<Record<string, unknown>> {
  const r = (await resources()).find((x) => x.urn.endsWith(`::${stack}-${suffix}`));
  if (!r) throw new Error(`no state for ${stack}-${suffix}`);
  return r.outputs;
}

async function stackOutput<T>(name: string): Promise<T> {
  const out = await cli.run(["stack", "output", "--json", "-s", stack]);
  return parseOutputsRecord(out.output, stack)[name] as T;
}

/** `sparkform …` against this test's backend and state dir. */
async function sparkform(args: string[]) {
  const r = await execa(process.execPath, [path.join(repoRoot, "bin", "sparkform.js"), ...args], {
    cwd: repoRoot,
    env: cli.env,
    extendEnv: false,
    reject: false,
  });
  log(`$ sparkform ${args.join(" ")}  [exit ${r.exitCode}]\n${r.stdout}\n${r.stderr}`);
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** A node's address on the cable to `peer` (the subnet the two share). */
function cableAddress(node: string, peer: string): string {
  const rails = (n: string) => cluster.nodes.find((x) => x.name === n)?.rails ?? [];
  const theirs = new Set(rails(peer).map((r) => r.subnet));
  const mine = rails(node).find((r) => theirs.has(r.subnet));
  if (!mine) throw new Error(`no cable joins ${node} and ${peer}`);
  return mine.address.split("/")[0] as string;
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated ring needs namespaces, mounts and containers"),
)("three Sparks in a ring (sim up --ring, real pulumi CLI)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 3, ring: true });
    extractLlamaSource(treeDir);
    pub = publishTestModel(path.join(work, "hub"));
    ep = await startHfEndpoint({
      root: path.join(work, "hub"),
      host: cluster.controlAddress,
      port: 0,
    });
    agent = await startSshAgent(work, cluster.sshKeyPath);
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      repoRoot,
      { PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`, SSH_AUTH_SOCK: agent.socket },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig();
    nodeCcache(cluster, warmCache).seed();
  }, STEP_MS);

  afterAll(async () => {
    if (endpoint?.pid) process.kill(-endpoint.pid, "SIGINT");
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`), { force: true });
    await ep?.close();
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }, STEP_MS);

  it(
    "up measures the three cables, each healthy, and the report lists them and draws the triangle",
    async () => {
      expect(cluster.fabricTopology).toBe("ring");
      await cli.run(["up", "--yes", "-s", stack, ...POLICIES]);
      const links = (await resources()).filter((r) => r.type.endsWith("FabricLink"));
      expect(links.map((r) => r.urn.split("::").pop()).sort()).toEqual(
        Object.values(CABLES).map((k) => `${stack}-${k}`),
      );
      for (const key of Object.values(CABLES)) {
        const o = await outputsOf(key);
        expect(o.topology).toBe("ring");
        expect(o.healthy).toBe(true);
        expect(o.class).toBe("healthy");
      }
      const dir = path.join(work, "report");
      const r = await sparkform(["report", "fabric", "--stack", stack, "--out", dir]);
      expect(r.exitCode).toBe(0);
      const md = readFileSync(path.join(dir, "fabric.md"), "utf8");
      expect(md).toContain(
        "3 nodes, a ring (a cable per pair of nodes, each its own subnet), 2 rails, 3 links measured: all healthy.",
      );
      expect(md).toContain("| spark-1↔spark-2 | 0↔1 |");
      expect(md).toContain("| spark-1↔spark-3 | 1↔0 |");
      expect(md).toContain("| spark-2↔spark-3 | 0↔1 |");
      const svg = readFileSync(path.join(dir, "fabric.svg"), "utf8");
      expect(svg.match(/<line /g)).toHaveLength(3);
      expect(existsSync(path.join(dir, "fabric.png"))).toBe(true);
    },
    COLD_BUILD_MS,
  );

  it(
    "a server on every node, each replica bound to its end of the cable to the client",
    async () => {
      const s = await stackOutput<{
        topology: string;
        servers: { node: string; url: string; health: string }[];
      }>("serving");
      log(JSON.stringify(s.servers));
      expect(s.topology).toBe("replicas");
      expect(s.servers.map((x) => x.node).sort()).toEqual(["spark-1", "spark-2", "spark-3"]);
      // Each server's own /health body, as its status probe read it.
      for (const x of s.servers) expect(JSON.parse(x.health)).toEqual({ status: "ok" });
      for (const node of ["spark-2", "spark-3"]) {
        const url = s.servers.find((x) => x.node === node)?.url ?? "";
        expect(new URL(url).hostname).toBe(cableAddress(node, "spark-1"));
      }
    },
    STEP_MS,
  );

  it(
    "the official OpenAI SDK answers through `sparkform endpoint`",
    async () => {
      endpoint = execa(
        process.execPath,
        [
          path.join(repoRoot, "bin", "sparkform.js"),
          "endpoint",
          "--stack",
          stack,
          "--port",
          String(LOCAL_PORT),
        ],
        { cwd: repoRoot, env: cli.env, all: true, reject: false, detached: true },
      );
      let said = "";
      endpoint.all?.on("data", (d: Buffer) => (said += d.toString()));
      for (let i = 0; i < 600 && !said.includes("/v1"); i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(said).toContain(`http://127.0.0.1:${LOCAL_PORT}/v1`);
      const key = (
        await cli.run(["stack", "output", "--show-secrets", "serverApiKey", "-s", stack])
      ).output.trim();
      const client = new OpenAI({
        baseURL: `http://127.0.0.1:${LOCAL_PORT}/v1`,
        apiKey: key,
        maxRetries: 0,
        timeout: 60_000,
      });
      const models = await client.models.list();
      const model = models.data[0]?.id ?? "local";
      // Several chats: the router spreads them over the three servers, across two cables.
      for (let i = 0; i < 3; i++) {
        const chat = await client.chat.completions.create({
          model,
          messages: [{ role: "user", content: `ring ${i}: the capital of Italy is` }],
          max_tokens: 6,
        });
        expect(chat.usage?.completion_tokens).toBeGreaterThan(0);
      }
      if (endpoint.pid) process.kill(-endpoint.pid, "SIGINT");
      await endpoint.catch(() => undefined);
      endpoint = undefined;
    },
    STEP_MS,
  );

  it(
    "one cable cut: that cable is down by name, the other two stay healthy",
    async () => {
      await simLink("spark-2", "spark-3", "down");
      try {
        await cli.run(["refresh", "--yes", "-s", stack]);
        const cut = await outputsOf(CABLES["spark-2↔spark-3"]);
        expect(cut.healthy).toBe(false);
        expect(cut.class).toBe("down");
        const failed = (cut.checks as { check: string; ok: boolean; message: string }[]).filter(
          (c) => !c.ok,
        );
        expect(failed.map((c) => c.check)).toContain("reachable");
        expect(failed.map((c) => c.message).join("\n")).toMatch(/spark-2↔spark-3 rail 0↔1/);
        for (const other of [CABLES["spark-1↔spark-2"], CABLES["spark-1↔spark-3"]])
          expect((await outputsOf(other)).healthy).toBe(true);
        const dir = path.join(work, "report-cut");
        expect(
          (await sparkform(["report", "fabric", "--stack", stack, "--out", dir])).exitCode,
        ).toBe(0);
        expect(readFileSync(path.join(dir, "fabric.md"), "utf8")).toContain(
          "3 links measured: **1 failing**.",
        );
      } finally {
        await simLink("spark-2", "spark-3", "up");
      }
      await cli.run(["up", "--yes", "-s", stack, ...POLICIES]);
      for (const key of Object.values(CABLES)) expect((await outputsOf(key)).healthy).toBe(true);
    },
    STEP_MS,
  );
});
