// The real-hardware stacks' resource graphs under Pulumi's mocks: SparkCluster built from
// stacks/Pulumi.spark-pair.yaml and Pulumi.spark-quad.yaml (read by the real pulumi CLI, the
// placeholders filled), registering every stage's resources, and the LlamaServer's plan input
// placing the 142.1 GB Qwen3-235B-A22B Q4_K_M on >= 2 nodes, layer split, devices named.
//
// What is not real here: the mocks stand in for the nodes (each SparkNode's fact sheet says
// MemAvailable 130.0 GB, the runbook's per-node figure; each worker's GET_DEVICE_MEMORY the
// same), and a metadata-only hub on loopback answers the model's two API calls (commit, and
// each shard's size and LFS sha256) with the published shard sizes summing to 142.1 GB; the
// GGUF header summary is in the control node's header cache (keyed by the shards' sha256s),
// with Qwen3-235B-A22B's dimensions, so no header bytes are fetched (the hub has none to give).
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServingPlan } from "../../components/serving/placement";
import type { TopologyChoice } from "../../components/serving/topology";
import { filled, removeScratch, SHARDS, stackConfig } from "../support/real-stacks";

const work = mkdtempSync(path.join(tmpdir(), "sf-stacks-graph-"));
const REPO = "unsloth/Qwen3-235B-A22B-GGUF";
const SIZES_235B = [47_400_000_000, 47_400_000_000, 47_300_000_000]; // 142.1 GB in all
/** The same shards published at 63.4 GB in all: a model that fits one Spark. */
const SIZES_63 = [21_200_000_000, 21_100_000_000, 21_100_000_000];
/** What the hub publishes now (a describe switches it before it builds its graph). */
let SIZES = SIZES_235B;
const GB10_AVAILABLE = 130.0e9;
/** What the Fabric and Serving stages read of a Spark's fact sheet (the rest left out). */
const GB10_FACTS = {
  sysfsRoot: "/sys",
  arch: "aarch64",
  memory: { totalBytes: GB10_AVAILABLE, availableBytes: GB10_AVAILABLE, reason: null },
  cpu: { performanceCores: [5, 6, 7, 8, 9, 15, 16, 17, 18, 19] },
  netdevs: ["enp1s0f1np1", "enP2p1s0f1np1", "enp1s0f0np0"].map((name) => ({
    name,
    mtu: 9000,
    operstate: "up",
    addresses: [],
  })),
  rdma: { devices: [], reason: "absent in this mock" },
};

interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const registered: Registered[] = [];

let hub: http.Server;
let hubUrl: string;
const hubLog: string[] = [];

/** The model's shards with the sha256s the filled stack pins (test/support/real-stacks.ts). */
function shardsOf(raw: Record<string, unknown>) {
  const sha = (filled(raw).model as { sha256: Record<string, string> }).sha256;
  return SHARDS.map((p, i) => ({ path: p, size: SIZES[i] ?? 0, sha256: sha[p] ?? "" }));
}

beforeAll(async () => {
  const raw = stackConfig("spark-pair");
  const commit = (filled(raw).model as { revision: string }).revision;
  hub = http.createServer((req, res) => {
    hubLog.push(`${req.method} ${req.url}`);
    const json = (body: unknown) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const url = new URL(req.url ?? "/", "http://hub");
    if (req.method === "GET" && url.pathname === `/api/models/${REPO}/revision/${commit}`)
      return json({ _id: "0".repeat(24), id: REPO, modelId: REPO, sha: commit, private: false });
    if (req.method === "POST" && url.pathname === `/api/models/${REPO}/paths-info/${commit}`) {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const asked = (JSON.parse(body) as { paths: string[] }).paths;
        json(
          shardsOf(raw)
            .filter((s) => asked.includes(s.path))
            .map((s) => ({
              type: "file",
              oid: createHash("sha1").update(s.path).digest("hex"),
              size: s.size,
              path: s.path,
              lfs: { oid: s.sha256, size: s.size, pointerSize: 134 },
            })),
        );
      });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => hub.listen(0, "127.0.0.1", r));
  hubUrl = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;

  // The header summary resolve.ts would have cached from the published model's first read.
  process.env.XDG_CACHE_HOME = path.join(work, "xdg");
  process.env.SPARKFORM_CACHE_DIR = path.join(work, "cache");
  const headers = path.join(work, "xdg", "sparkform", "gguf-headers");
  mkdirSync(headers, { recursive: true });
  for (const sizes of [SIZES_235B, SIZES_63]) {
    SIZES = sizes;
    const published = shardsOf(raw);
    const key = createHash("sha256")
      .update(published.map((s) => `${s.sha256} ${s.size}\n`).join(""))
      .digest("hex");
    writeFileSync(
      path.join(headers, `${key}.json`),
      JSON.stringify({
        architecture: "qwen3moe",
        blockCount: 94,
        contextLength: 40960,
        embeddingLength: 4096,
        headCount: 64,
        headCountKv: 4,
        keyLength: 128,
        valueLength: 128,
        quantization: "MOSTLY_Q4_K_M",
        tensorCount: 1131,
        tensorDataBytes: published.reduce((a, x) => a + x.size, 0) - 10e6,
        parameterCount: 235e9,
        shards: 3,
      }),
    );
  }
  SIZES = SIZES_235B;
  // The llama_cpp_ex tree the stacks sync (tree.source ../llama_cpp_ex from the project).
  mkdirSync(path.join(work, "llama_cpp_ex"), { recursive: true });
  writeFileSync(
    path.join(work, "llama_cpp_ex", "mix.exs"),
    "defmodule LlamaCppEx.MixProject do end\n",
  );
  mkdirSync(path.join(work, "project"), { recursive: true });

  await pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        registered.push({
          type: args.type,
          name: args.name,
          inputs: args.inputs as Record<string, unknown>,
        });
        const node = (args.inputs as { target?: { name?: string } }).target?.name ?? "";
        return {
          id: `${args.name}-id`,
          state: {
            ...args.inputs,
            // A FabricLink "measured" healthy, its ports as the program computed them.
            ...(args.type.endsWith(":FabricLink")
              ? {
                  ports: { a: args.inputs.a?.port, b: args.inputs.b?.port },
                  class: "healthy",
                  healthy: true,
                }
              : {}),
            digest: `digest-of-${args.name}`,
            facts: GB10_FACTS,
            deviceMemory: [{ device: 0, free: GB10_AVAILABLE, total: GB10_AVAILABLE }],
            nodeFiles: [],
            dir: `/home/spark/models/${REPO}/c`,
            installDir: "/home/spark/.cache/sparkform/llama-build/out/key",
            artifacts: {
              "bin/ggml-rpc-server": "0".repeat(64),
              "bin/llama-server": "1".repeat(64),
            },
            commit: "80fb11ac73e66d89eae2c6a91d8a77428fa733ed",
            treeDigest: "a".repeat(64),
            compiler: `gcc 13.3.0 on ${node}`,
            compilerDigests: { cxx: "c".repeat(64), nvcc: "", nvccVersion: "" },
            // An RpcWorker's: answered HELLO over RDMA.
            health: { state: "ok", detail: "HELLO 3.0.0" },
            version: "3.0.0",
            transport: { transport: "RDMA", evidence: "RDMA activated" },
            started: { invocationId: `invocation-of-${args.name}`, nRestarts: "0" },
          },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "spark-pair",
    false,
  );
});

afterAll(async () => {
  await new Promise((r) => hub?.close(r));
  rmSync(work, { recursive: true, force: true });
  removeScratch();
});

const value = <T>(o: pulumi.Output<T>): Promise<T> => new Promise((resolve) => o.apply(resolve));

describe.each([
  ["spark-pair", 2],
  ["spark-quad", 4],
])("the %s graph under mocks", (stack, n) => {
  let plan: ServingPlan;
  let server: Registered | undefined;
  let replicas: Registered[] = [];
  let topology: TopologyChoice;
  const types = () => registered.map((r) => r.type.replace("pulumi-nodejs:dynamic/sparkform:", ""));

  beforeAll(async () => {
    const { SparkCluster } = await import("../../components/cluster");
    const { parseStackConfig } = await import("../../components/stack-config");
    registered.length = 0;
    const raw = filled(stackConfig(stack));
    const config = parseStackConfig(
      { ...raw, model: { ...(raw.model as object), endpoint: hubUrl } },
      { projectDir: path.join(work, "project") },
    );
    const c = new SparkCluster(stack, { config, projectDir: path.join(work, "project") });
    if (!c.servingStage) throw new Error("no Serving stage");
    plan = await value(c.servingStage.plan);
    topology = await value(c.servingStage.topology);
    await value(c.servingStage.server.urn);
    await Promise.all(c.servingStage.replicas.map((r) => value(r.urn)));
    await value(c.servingStage.router.urn);
    server = registered.find((r) => r.name === `${stack}-serving-server`);
    replicas = registered.filter(
      (r) => r.type.endsWith(":LlamaServer") && r.name !== `${stack}-serving-server`,
    );
  });

  it("registers every stage's resources: a fact sheet, build and model copy per node, a worker per worker node, a server and a standby replica per worker node, the router", () => {
    const count = (k: string) => types().filter((t) => t === k).length;
    expect(count("SparkNode")).toBe(n);
    expect(count("NativeBuild")).toBe(n);
    expect(count("ModelReplica")).toBe(n);
    expect(count("TreeSync")).toBe(n);
    expect(count("Toolchain")).toBe(n);
    expect(count("RpcWorker")).toBe(n - 1);
    // topology auto (the stacks' default): a replica per worker node, on standby while the
    // plan splits by layer; one router.
    expect(count("LlamaServer")).toBe(n);
    expect(replicas.map((r) => [r.inputs.node, r.inputs.standby])).toEqual(
      Array.from({ length: n - 1 }, (_, k) => [`spark-${k + 2}`, true]),
    );
    expect(count("Router")).toBe(1);
    expect(server?.name).toBe(`${stack}-serving-server`);
    expect(server?.inputs.standby).toBe(false);
    expect(server?.inputs.node).toBe("spark-1");
    expect(server?.inputs.bind).toBe("127.0.0.1");
  });

  it("plans the 142.1 GB model on >= 2 nodes: layer split, devices named, the workers' fabric endpoints", () => {
    expect(topology.topology).toBe("layer-split");
    expect(topology.reason).toMatch(
      /^layer-split: the whole model needs 142\.1 GB weights \+ [\d.]+ GB KV .* more than any node has \(usable memory: spark-1 has not, spark-2 has not/,
    );
    expect(plan.known).toBe(true);
    expect(plan.fits).toBe(true);
    expect(plan.totals.weightsBytes).toBe(142.1e9);
    expect(plan.splitMode).toBe("layer");
    expect(plan.devices).toEqual(["CUDA0", ...Array.from({ length: n - 1 }, (_, k) => `RPC${k}`)]);
    expect(plan.configured.devices).toEqual(plan.devices);
    expect(plan.nGpuLayers).toBe(99);
    const holding = new Set(plan.layers.map((l) => l.node));
    expect(holding.size).toBe(n);
    expect(holding.size).toBeGreaterThanOrEqual(2);
    expect(plan.rpcServers).toEqual(
      Array.from(
        { length: n - 1 },
        (_, k) => `${n === 2 ? "10.100.64" : "10.200.0"}.${k + 2}:50052`,
      ),
    );
    // The server's inputs carry that plan (the policies read it) and its flags.
    expect((server?.inputs.plan as ServingPlan).devices).toEqual(plan.devices);
    const flags = server?.inputs.flags as string[];
    expect(flags[flags.indexOf("--device") + 1]).toBe(plan.devices.join(","));
    expect(flags[flags.indexOf("--split-mode") + 1]).toBe("layer");
  });

  it("read only the model's metadata from the hub (the header came from the cache)", () => {
    expect(
      hubLog.every((l) => l.startsWith("GET /api/models/") || l.startsWith("POST /api/models/")),
    ).toBe(true);
  });
});

describe("a 63.4 GB model on the spark-pair graph under mocks", () => {
  let topology: TopologyChoice;
  let servers: Registered[] = [];
  let router: Registered | undefined;

  beforeAll(async () => {
    const { SparkCluster } = await import("../../components/cluster");
    const { parseStackConfig } = await import("../../components/stack-config");
    registered.length = 0;
    SIZES = SIZES_63;
    const raw = filled(stackConfig("spark-pair"));
    const config = parseStackConfig(
      { ...raw, model: { ...(raw.model as object), endpoint: hubUrl } },
      { projectDir: path.join(work, "project") },
    );
    const c = new SparkCluster("spark-pair-63", { config, projectDir: path.join(work, "project") });
    if (!c.servingStage) throw new Error("no Serving stage");
    topology = await value(c.servingStage.topology);
    await value(c.servingStage.server.urn);
    await Promise.all(c.servingStage.replicas.map((r) => value(r.urn)));
    await value(c.servingStage.router.urn);
    servers = registered.filter((r) => r.type.endsWith(":LlamaServer"));
    router = registered.find((r) => r.type.endsWith(":Router"));
    SIZES = SIZES_235B;
  });

  it("plans replicas: a llama-server with the whole model on each node, both behind the router", () => {
    expect(topology.topology).toBe("replicas");
    expect(topology.reason).toMatch(
      /^replicas: the whole model needs 63\.4 GB weights \+ [\d.]+ GB KV .* every serving node has room for it \(spark-1, spark-2\)/,
    );
    expect(servers.map((r) => [r.inputs.node, r.inputs.standby]).sort()).toEqual([
      ["spark-1", false],
      ["spark-2", false],
    ]);
    for (const r of servers) {
      const plan = r.inputs.plan as ServingPlan;
      expect(plan.fits).toBe(true);
      expect(plan.rpcServers).toEqual([]);
      expect(plan.devices).toEqual(["CUDA0"]);
      expect(r.inputs.flags as string[]).not.toContain("--rpc");
    }
    // spark-2's replica on its fabric address, where the router reaches it.
    expect(servers.find((r) => r.inputs.node === "spark-2")?.inputs.bind).toBe("10.100.64.2");
    expect(
      (router?.inputs.upstreams as { node: string; url: string }[]).map((u) => u.node),
    ).toEqual(["spark-1", "spark-2"]);
  });
});
