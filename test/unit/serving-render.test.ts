// The renderings: the runbook's LlamaCppEx.Server.start_link options, llama-server and
// llama-cli argv that parse back (node's util.parseArgs with llama.cpp's option names) to the
// plan's values, and the plan as JSON.
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { planPlacement, type PlacementNode } from "../../components/serving/placement";
import { llamaDevices, renderings } from "../../components/serving/render";
import { QWEN3_235B, SERVER as server, sparks, TINY } from "../support/serving-fixtures";

const pair = sparks(2);
const MODEL = "/home/spark/models/unsloth/Qwen3-235B-A22B-GGUF/abc/Q4_K_M/m-00001-of-00003.gguf";

/** llama.cpp's options that the renderings use (common/arg.cpp names), all taking a value. */
const LLAMA_OPTIONS = Object.fromEntries(
  [
    "model",
    "rpc",
    "n-gpu-layers",
    "device",
    "split-mode",
    "tensor-split",
    "cache-type-k",
    "cache-type-v",
    "fit",
    "ctx-size",
    "parallel",
    "host",
    "port",
    "api-key-file",
  ].map((k) => [k, { type: "string" as const }]),
);
const parse = (argv: string[]) =>
  parseArgs({ args: argv, options: LLAMA_OPTIONS, strict: true, allowPositionals: false }).values;

describe("renderings on the pair", () => {
  const plan = planPlacement({
    model: QWEN3_235B,
    nodes: pair,
    server: { ...server, parallel: 8 },
  });
  const r = renderings(plan, MODEL);

  it("writes LlamaCppEx.Server.start_link as the runbook does", () => {
    expect(r.llamaCppEx).toBe(
      [
        "LlamaCppEx.Server.start_link(",
        `  model_path: ${JSON.stringify(MODEL)},`,
        '  rpc_servers: ["10.100.64.2:50052"],',
        "  n_gpu_layers: 99,                      # always. n_gpu_layers: 0 costs 57% of decode",
        '  devices: ["CUDA0", "RPC0"],            # name them: devices/0 order is not tensor_split order',
        "  split_mode: :layer,",
        "  tensor_split: [0.5, 0.5],",
        "  n_parallel: 8,",
        "  n_ctx: 4096 * 8",
        ")",
      ].join("\n"),
    );
  });

  it("a home-relative model path is expanded by Elixir (File does not expand ~)", () => {
    const home = renderings(plan, "~/models/m/abc/m.gguf").llamaCppEx;
    expect(home).toContain('  model_path: Path.expand("~/models/m/abc/m.gguf"),');
  });

  it("llama-server argv parses back to the plan: devices named, layer split, n_gpu_layers 99", () => {
    const v = parse(r.llamaServer);
    expect(v).toEqual({
      model: MODEL,
      rpc: "10.100.64.2:50052",
      "n-gpu-layers": "99",
      device: "CUDA0,RPC0",
      "split-mode": "layer",
      "tensor-split": "0.5,0.5",
      "cache-type-k": "f16",
      "cache-type-v": "f16",
      fit: "off",
      "ctx-size": String(4096 * 8),
      parallel: "8",
      host: "127.0.0.1",
      port: "8080",
    });
    expect(v.device?.split(",")).toEqual(plan.devices);
    expect(v["tensor-split"]?.split(",").map(Number)).toEqual(plan.tensorSplit);
  });

  it("llama-cli argv: the same placement, one slot's context, no server options", () => {
    const v = parse(r.llamaCli);
    expect(v).toMatchObject({ device: "CUDA0,RPC0", "n-gpu-layers": "99", "ctx-size": "4096" });
    expect(v.host).toBeUndefined();
    expect(v.parallel).toBeUndefined();
  });

  it("json is the plan", () => {
    expect(JSON.parse(r.json)).toEqual(JSON.parse(JSON.stringify(plan)));
  });

  it("a management bind takes the key from a file, never on the command line", () => {
    const s = renderings(plan, MODEL, { bind: "10.0.0.2", port: 8443, apiKeyFile: "/run/k" });
    expect(parse(s.llamaServer)).toMatchObject({
      host: "10.0.0.2",
      port: "8443",
      "api-key-file": "/run/k",
    });
  });
});

describe("renderings in the simulated cluster (CPU-only client)", () => {
  const nodes: PlacementNode[] = [
    { node: "spark-1", role: "client", device: "CPU", usableBytes: 8e9, source: "facts" },
    {
      node: "spark-2",
      role: "worker",
      device: "RPC0",
      endpoint: "192.168.100.12:50052",
      usableBytes: 8e9,
      source: "facts",
    },
  ];
  const tiny = TINY;
  const plan = planPlacement({ model: tiny, nodes, server: { ...server, context: 256 } });
  const r = renderings(plan, "/m.gguf");

  it("never names CPU as a --device: its share is n_gpu_layers < n_layer + 1", () => {
    expect(llamaDevices(plan)).toEqual({ devices: ["RPC0"], tensorSplit: [0.5] });
    const v = parse(r.llamaServer);
    expect(v.device).toBe("RPC0");
    expect(v["n-gpu-layers"]).toBe(String(plan.nGpuLayers));
    expect(Number(v["n-gpu-layers"])).toBeLessThan(tiny.blockCount + 1);
    expect(v["tensor-split"]).toBeUndefined(); // one llama.cpp device: nothing to split
    expect(v.rpc).toBe("192.168.100.12:50052");
    expect(r.llamaCppEx).toContain('devices: ["RPC0"]');
    expect(r.llamaCppEx).not.toContain("tensor_split:");
    expect(r.llamaCppEx).toContain("n_gpu_layers: 4,");
  });

  it("a quantized KV cache is passed to both K and V, and noted for llama_cpp_ex", () => {
    const q = planPlacement({ model: tiny, nodes, server: { ...server, cacheType: "q8_0" } });
    const s = renderings(q, "/m.gguf");
    expect(parse(s.llamaServer)).toMatchObject({ "cache-type-k": "q8_0", "cache-type-v": "q8_0" });
    expect(s.llamaCppEx.split("\n")[0]).toMatch(/^# KV cache type q8_0/);
  });
});

describe("llama_cpp_ex's tensor_split is Elixir whatever the shares' size", () => {
  it("1e21 renders as an Elixir float (1.0e21), never JavaScript's 1e+21", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: pair,
      server: { ...server, tensorSplit: [1e21, 1], devices: ["CUDA0", "RPC0"] },
    });
    const line = renderings(plan, MODEL)
      .llamaCppEx.split("\n")
      .find((l) => l.startsWith("  tensor_split:"));
    expect(line).toBe("  tensor_split: [1.0e21, 1.0],");
    // Elixir's float grammar: digits, a dot, digits, an optional exponent without '+'.
    for (const f of /\[(.*)\]/.exec(line ?? "")?.[1]?.split(", ") ?? [])
      expect(f).toMatch(/^\d+\.\d+(e-?\d+)?$/);
  });
});
