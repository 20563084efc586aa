// Serving end to end (issue 13): the real pulumi CLI runs test/e2e/serving/ (Nodes, Trees,
// Builds, Model, the worker stage and the serving stage) with the repository's policy pack
// against a simulated pair: llama-server on spark-1 (CPU backend), ggml-rpc-server on spark-2,
// the generated test model, TCP. Assertions read the stack's outputs, the nodes (systemd, the
// kernel's socket table, the server's log) and the engine's event log.
//
// One sim, one build; the policy cases are previews (nothing runs on a node). spark-1's
// compiler cache is seeded from SPARKFORM_E2E_NODE_CCACHE when set (and saved back after the
// first `up`), as in native-build.test.ts; spark-2 is seeded from spark-1 by NativeBuild.
import {
  appendFileSync,
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
import {
  type HfEndpoint,
  type PublishedRepo,
  publishTestModel,
  startHfEndpoint,
} from "../../sim/hub";
import { extractLlamaSource } from "../../sim/llama/index";
import { simDown, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../support/pulumi-cli";
import { asUser, listeningPorts, nodeCcache } from "../support/sim-node";
import { startSshAgent, type TestAgent } from "../support/ssh-agent";
import { policyPackArgs } from "../../setup/pulumi/policy";

const isRoot = process.getuid?.() === 0;
const work = mkdtempSync(path.join(tmpdir(), "sparkform-serving-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const projectDir = path.join(__dirname, "serving");
const stack = `serving-${process.pid}`;
const treeDir = path.join(work, "llama.cpp");
const PORT = 8080;
const WORKER_PORT = 50052;
const UNIT = `sparkform-llama-server-${PORT}`;
/** The RSS guard beside the server (issue 22 item 14): the client holds most of a split model. */
const SERVER_GUARD = `sparkform-llama-guard-${PORT}`;
const SERVER_LOG = `/home/spark/.cache/sparkform/serving/server-${PORT}.log`;
const warmCache = process.env.SPARKFORM_E2E_NODE_CCACHE;
/** A cold llama.cpp build (llama-server included) on a simulated node sharing 2 busy cores. */
const COLD_BUILD_MS = 60 * 60_000;
const STEP_MS = 20 * 60_000;
// Simulated like the local stack: its policy config (setup/pulumi/policy.ts).
const POLICIES = policyPackArgs("local");
const SMOKE = { prompt: "The capital of France is", tokens: 12, seed: 42 };

let cluster: SimCluster;
let agent: TestAgent | undefined;
let cli: PulumiCli;
let ep: HfEndpoint;
let pub: PublishedRepo & { model: { path: string } };

interface ServingOut {
  plan: { fits: boolean; known: boolean; devices: string[]; layers: { device: string }[] };
  renderings: { llamaCppEx: string; llamaServer: string[]; llamaCli: string[]; json: string };
  server: { node: string; url: string; unit: string; health: string };
  placement: { device: string; layers: number; modelBufferMiB: number }[];
  smoke: {
    tokens: number[];
    tokensPerSecond: number;
    chat: { completionTokens: number; finishReason: string };
    reference: { tokens: number[]; tokensPerSecond: number };
    identical: boolean;
    graphCompute: number;
    graphRecompute: number;
    fabricBytes: number;
    fabricEnds: { node: string; iface: string; bytes: number }[];
  };
}

/** The stack file: the sim's nodes (no fabric stage), tree, build, model, worker, server. */
function writeStackConfig(server: string[] = []): void {
  const file = path.join(projectDir, `Pulumi.${stack}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const rendered = renderStackConfig(cluster).trimEnd().split("\n");
  const fabricAt = rendered.indexOf("  sparkform:fabric:");
  const settings = [
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
    "    retries: 0",
    "  sparkform:worker:",
    "    nodes: [spark-2]",
    `    port: ${WORKER_PORT}`,
    "  sparkform:server:",
    `    port: ${PORT}`,
    "    context: 256",
    `    smoke: {prompt: ${JSON.stringify(SMOKE.prompt)}, tokens: ${SMOKE.tokens}, seed: ${SMOKE.seed}}`,
    ...server,
  ];
  writeFileSync(
    file,
    `${[...salt, ...(fabricAt >= 0 ? rendered.slice(0, fabricAt) : rendered), ...settings].join("\n")}\n`,
  );
}

const sparkformUnits = (n: string) =>
  asUser(n, "systemctl --user list-units --all --no-legend --plain 'sparkform-*'");

const unitState = (n: string, unit: string) =>
  asUser(
    n,
    `echo "$(systemctl --user show -p ActiveState --value ${unit})/$(systemctl --user show -p SubState --value ${unit})"`,
  );

async function stackOutput<T>(name: string): Promise<T> {
  const out = await cli.run(["stack", "output", "--json", "-s", stack]);
  return (JSON.parse(out.output) as Record<string, T>)[name] as T;
}

async function urnOf(type: string): Promise<string> {
  const out = await cli.run(["stack", "export", "-s", stack]);
  const r = (
    JSON.parse(out.output) as { deployment: { resources?: { urn: string; type: string }[] } }
  ).deployment.resources?.find((x) => x.type === type);
  if (!r) throw new Error(`no ${type} in the state`);
  return r.urn;
}

const up = (extra: string[] = [], opts: { expectFailure?: boolean } = {}) =>
  cli.run(["up", "--yes", "-s", stack, ...POLICIES, ...extra], opts);
const preview = (opts: { expectFailure?: boolean } = {}) =>
  cli.run(["preview", "-s", stack, ...POLICIES], opts);
const log = (s: string) => process.stderr.write(`[serving] ${s}\n`);

/** The smoke request on spark-1 itself (the server is on loopback): token ids back. */
async function completionOnSpark1(): Promise<{ tokens: number[]; content: string }> {
  const body = JSON.stringify({
    prompt: SMOKE.prompt,
    n_predict: SMOKE.tokens,
    seed: SMOKE.seed,
    temperature: 0,
    top_k: 1,
    cache_prompt: false,
    return_tokens: true,
  });
  const out = await asUser(
    "spark-1",
    `curl -sS --max-time 120 -H 'Content-Type: application/json' -d '${body}' http://127.0.0.1:${PORT}/completion`,
  );
  return JSON.parse(out) as { tokens: number[]; content: string };
}

describe.skipIf(!isRoot)("serving on a simulated pair (real pulumi CLI, policy pack)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    extractLlamaSource(treeDir);
    pub = publishTestModel(path.join(work, "hub"));
    ep = await startHfEndpoint({
      root: path.join(work, "hub"),
      host: cluster.controlAddress,
      port: 0,
    });
    agent = await startSshAgent(work, cluster.sshKeyPath);
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(projectDir, {
      PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
      SSH_AUTH_SOCK: agent.socket,
    });
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig();
    nodeCcache(cluster, warmCache).seed();
  }, STEP_MS);

  afterAll(async () => {
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(projectDir, `Pulumi.${stack}.yaml`), { force: true });
    await ep?.close();
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }, STEP_MS);

  it(
    "preview refuses what must not serve: a model larger than the declared memory, tensorSplit without devices, splitMode row",
    async () => {
      // The nodes' memory declared smaller than the model (sparkform:server.memory), not the facts.
      writeStackConfig(["    memory: {spark-1: 1048576, spark-2: 1048576}"]);
      const tooLarge = await preview({ expectFailure: true });
      expect(tooLarge.output).toMatch(/model-fits/);
      writeStackConfig(["    tensorSplit: [1, 1]"]);
      expect((await preview({ expectFailure: true })).output).toMatch(/devices-named/);
      writeStackConfig(["    splitMode: row"]);
      expect((await preview({ expectFailure: true })).output).toMatch(/layer-split-across-hosts/);
      writeStackConfig();
      // Nothing started on any node.
      for (const n of ["spark-1", "spark-2"]) {
        expect(await sparkformUnits(n)).toBe("");
        expect(await listeningPorts(n)).toEqual([cluster.nodes.find((x) => x.name === n)?.sshPort]);
      }
    },
    STEP_MS,
  );

  it(
    "up: the plan and three renderings in outputs; spark-1 answers a completion; layers on CPU and RPC0; smoke equals one node; graph_recompute > 0",
    async () => {
      try {
        await up();
      } finally {
        nodeCcache(cluster, warmCache).save();
      }
      const s = await stackOutput<ServingOut>("serving");
      log(JSON.stringify({ placement: s.placement, smoke: s.smoke, server: s.server }));
      expect(s.plan.fits).toBe(true);
      expect(s.plan.known).toBe(true);
      expect(s.renderings.llamaServer).toContain("--rpc");
      expect(s.renderings.llamaCli.length).toBeGreaterThan(0);
      expect(s.renderings.llamaCppEx).toContain("LlamaCppEx.Server.start_link");
      expect(JSON.parse(s.renderings.json)).toMatchObject({ devices: s.plan.devices });
      expect(s.server).toMatchObject({
        node: "spark-1",
        url: `http://127.0.0.1:${PORT}`,
        unit: UNIT,
      });
      // The completion through the server's HTTP API, from spark-1 itself.
      const c = await completionOnSpark1();
      expect(c.tokens).toEqual(s.smoke.tokens);
      // Its log: model buffers and KV cache shares on both CPU and RPC0 (verbosity 4), and
      // nothing a client sent or was sent, after the request above.
      const serverLog = await asUser("spark-1", `cat ${SERVER_LOG}`);
      expect(serverLog).toMatch(/CPU KV buffer size =\s+[\d.]+ MiB/);
      expect(serverLog).toMatch(/RPC0\[[\d.]+:50052\] KV buffer size =\s+[\d.]+ MiB/);
      expect(serverLog).toMatch(/RPC0\[[\d.]+:50052\] model buffer size =\s+[\d.]+ MiB/);
      expect(serverLog).not.toContain(SMOKE.prompt);
      expect(serverLog).not.toMatch(/next token|converted request/);
      expect(await asUser("spark-1", `stat -c %a ${SERVER_LOG}`)).toBe("600");
      const devices = s.placement.map((p) => p.device).sort();
      expect(devices).toEqual(["CPU", "RPC0"]);
      for (const p of s.placement) {
        expect(p.layers).toBeGreaterThan(0);
        expect(p.modelBufferMiB).toBeGreaterThan(0);
      }
      expect(s.smoke.tokens).toHaveLength(SMOKE.tokens);
      expect(s.smoke.reference.tokens).toEqual(s.smoke.tokens);
      expect(s.smoke.identical).toBe(true);
      expect(s.smoke.chat.completionTokens).toBeGreaterThan(0);
      expect(s.smoke.tokensPerSecond).toBeGreaterThan(0);
      expect(s.smoke.reference.tokensPerSecond).toBeGreaterThan(0);
      expect(s.smoke.graphCompute).toBeGreaterThan(0);
      expect(s.smoke.graphRecompute).toBeGreaterThan(0);
      // Proof at the wire: the split's traffic crossed the fabric veth on both ends.
      expect(s.smoke.fabricEnds.map((e) => [e.node, e.iface])).toEqual([
        ["spark-1", "fabric0"],
        ["spark-2", "fabric0"],
      ]);
      for (const e of s.smoke.fabricEnds) expect(e.bytes).toBeGreaterThan(0);
      expect(s.smoke.fabricBytes).toBe(s.smoke.fabricEnds[0]?.bytes);
      // The reference was stopped: only the server listens besides ssh.
      expect(await listeningPorts("spark-1")).toContain(PORT);
      expect(await listeningPorts("spark-1")).not.toContain(PORT + 1);
      // The server's RSS guard runs beside it, watching its unit at the default 92%.
      expect(await unitState("spark-1", SERVER_GUARD)).toBe("active/running");
      const guardExec = await asUser(
        "spark-1",
        `systemctl --user show -p ExecStart --value ${SERVER_GUARD}`,
      );
      expect(guardExec).toContain(`--unit ${UNIT}.service --percent 92 `);
    },
    COLD_BUILD_MS,
  );

  it(
    "the server's guard stopped by hand: refresh records it as drift, up restarts server and guard, the next refresh is quiet",
    async () => {
      await asUser("spark-1", `systemctl --user stop ${SERVER_GUARD}`);
      const drifted = await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack], {
        expectFailure: true,
      });
      expect(drifted.output).toMatch(/LlamaServer/);
      const exported = await cli.run(["stack", "export", "-s", stack]);
      expect(exported.output).toContain(
        "RSS guard unit is inactive/dead (result success): nothing stops llama-server before the node runs out of memory",
      );
      await up();
      expect(await unitState("spark-1", SERVER_GUARD)).toBe("active/running");
      expect(await unitState("spark-1", UNIT)).toBe("active/running");
      expect((await completionOnSpark1()).tokens).toHaveLength(SMOKE.tokens);
      await cli.run(["refresh", "--yes", "--expect-no-changes", "-s", stack]);
    },
    STEP_MS,
  );

  it(
    "the worker stopped before the server starts: the create fails naming RPC0, nothing serves on one node",
    async () => {
      const server = await urnOf("pulumi-nodejs:dynamic/sparkform:LlamaServer");
      await cli.run(["destroy", "--yes", "-s", stack, "--target", server]);
      await asUser("spark-2", `systemctl --user stop sparkform-rpc-worker-${WORKER_PORT}`);
      const failed = await up(["--target", server], { expectFailure: true });
      expect(failed.output).toMatch(/RPC0 \(spark-2, [\d.]+:50052\) was not reached/);
      expect(failed.output).toMatch(/planned: .*RPC0/);
      expect(await listeningPorts("spark-1")).not.toContain(PORT);
      // up --refresh sees the stopped worker, restarts it, then starts the server.
      await up(["--refresh"]);
      expect((await stackOutput<ServingOut>("serving")).smoke.identical).toBe(true);
    },
    STEP_MS,
  );

  it(
    "a source edit, then up: the server stopped before the worker restarted, started after it; the smoke passes again",
    async () => {
      // A string the linker keeps in ggml-rpc-server: the worker's binary changes.
      appendFileSync(
        path.join(treeDir, "tools", "rpc", "rpc-server.cpp"),
        '\n__attribute__((used)) static const char sparkform_e2e_edit[] = "serving e2e edit";\n',
      );
      // `up --json` streams the engine's events, one JSON object a line, in the engine's order.
      const run = await up(["--json"]);
      const lines = run.output
        .split("\n")
        // (after the preview's one pretty-printed object: the update's events carry a sequence)
        .filter((l) => l.startsWith('{"sequence"'))
        .map(
          (l) =>
            JSON.parse(l) as {
              resourcePreEvent?: { metadata: { type: string; op: string } };
              resOutputsEvent?: { metadata: { type: string; op: string } };
            },
        );
      const at = (kind: "resourcePreEvent" | "resOutputsEvent", type: string) =>
        lines.findIndex((e) => {
          const m = e[kind]?.metadata;
          return m !== undefined && m.op === "update" && m.type === type;
        });
      const drained = at("resOutputsEvent", "pulumi-nodejs:dynamic/sparkform:ServingDrain");
      const workerStart = at("resourcePreEvent", "pulumi-nodejs:dynamic/sparkform:RpcWorker");
      const workerDone = at("resOutputsEvent", "pulumi-nodejs:dynamic/sparkform:RpcWorker");
      const serverStart = at("resourcePreEvent", "pulumi-nodejs:dynamic/sparkform:LlamaServer");
      log(JSON.stringify({ drained, workerStart, workerDone, serverStart }));
      expect(drained).toBeGreaterThanOrEqual(0);
      expect(workerStart).toBeGreaterThan(drained);
      expect(serverStart).toBeGreaterThan(workerDone);
      const s = await stackOutput<ServingOut>("serving");
      expect(s.smoke.identical).toBe(true);
      expect(s.smoke.graphRecompute).toBeGreaterThan(0);
    },
    STEP_MS,
  );

  it(
    "destroy leaves no sparkform unit and no listener but ssh on any node",
    async () => {
      await cli.run(["destroy", "--yes", "-s", stack]);
      for (const n of ["spark-1", "spark-2"]) {
        expect(await sparkformUnits(n)).toBe("");
        expect(await listeningPorts(n)).toEqual([cluster.nodes.find((x) => x.name === n)?.sshPort]);
      }
    },
    STEP_MS,
  );
});
