// planPlacement: the layer → device assignment as llama.cpp 80fb11ac's load_tensors computes
// it (expected values below are worked by hand from src/llama-model.cpp, not taken from the
// code under test), the KV estimate, the shares, and a model that fits no placement.
//
// Qwen3-235B-A22B (the runbook's 142.1 GB Q4_K_M): 94 layers, 64 query heads, 4 KV heads
// (model card, huggingface.co/Qwen/Qwen3-235B-A22B), hidden size 4096 and head_dim 128
// (its config.json: head_dim is NOT hidden/heads = 64), max_position_embeddings 40960.
import { describe, expect, it, vi } from "vitest";
import { LLAMA_MAX_LAYERS } from "../../components/model/header";
import {
  assertFits,
  assignLayers,
  kvBytesPerLayer,
  kvTokens,
  placementNodes,
  planPlacement,
  usableMemory,
} from "../../components/serving/placement";
import { GB10, QWEN3_235B, SERVER as server, sparks, TINY } from "../support/serving-fixtures";

describe("assignLayers (llama.cpp load_tensors)", () => {
  it("splits 94 layers + output over two equal devices: il/95 < 0.5 → device 0", () => {
    // i_gpu_start = max(95 - 99, 0) = 0, act = min(99, 95) = 95; il < 47.5 → 0.
    const a = assignLayers(94, 99, [0.5, 0.5]);
    expect(a.length).toBe(95);
    expect(a.filter((d) => d === 0).length).toBe(48);
    expect(a.indexOf(1)).toBe(48);
    expect(a[94]).toBe(1); // the output layer goes with the last range
  });

  it("puts the layers below i_gpu_start on the CPU (-1)", () => {
    // ngl 50 of 95: i_gpu_start 45; (il-45)/50 < 0.5 → il < 70.
    const a = assignLayers(94, 50, [1, 1]);
    expect(a.slice(0, 45).every((d) => d === -1)).toBe(true);
    expect(a.slice(45, 70).every((d) => d === 0)).toBe(true);
    expect(a.slice(70).every((d) => d === 1)).toBe(true);
  });

  it("compares in float32 as llama.cpp does: 1/3 lands on the second device", () => {
    // splits {1,2} → {0.33333334f, 1}; layer 1: 1.0f/3 = 0.33333334f, upper_bound → 1.
    // In float64 the same comparison would put layer 1 on device 0.
    expect(assignLayers(2, 3, [1, 2])).toEqual([0, 1, 1]);
  });

  it("gives everything to the CPU with n_gpu_layers 0 or no device", () => {
    expect(assignLayers(3, 0, [1])).toEqual([-1, -1, -1, -1]);
    expect(assignLayers(3, 99, [])).toEqual([-1, -1, -1, -1]);
  });

  it("skips a device with a zero share", () => {
    expect(assignLayers(3, 4, [1, 0, 1])).toEqual([0, 0, 2, 2]);
  });
});

describe("KV cache estimate", () => {
  it("pads as llama-context.cpp does: n_ctx and n_ctx_seq to 256", () => {
    expect(kvTokens(4096, 1)).toBe(4096);
    expect(kvTokens(300, 1)).toBe(512);
    expect(kvTokens(1000, 3)).toBe(3072); // n_ctx 3000 → 3072, seq 1024
    expect(kvTokens(1000, 5)).toBe(5120);
    expect(kvTokens(100, 4)).toBe(1024); // n_ctx 400 → 512, seq 128 → 256, × 4
  });

  it("is tokens × KV heads × (key + value length) × bytes per layer", () => {
    // Qwen3-235B at 4096 tokens f16: 4096 × 4 × 256 × 2 = 8 MiB a layer.
    expect(kvBytesPerLayer(QWEN3_235B, server)).toBe(8 * 2 ** 20);
    expect(kvBytesPerLayer(QWEN3_235B, { ...server, cacheType: "q8_0" })).toBe(
      (8 * 2 ** 20 * 34) / 64,
    );
    expect(kvBytesPerLayer(QWEN3_235B, { ...server, context: 32768, parallel: 8 })).toBe(
      64 * 8 * 2 ** 20,
    );
    // Without key_length in the header: embedding / heads (tiny: 64).
    expect(kvBytesPerLayer(TINY, server)).toBe(4096 * 1 * 128 * 2);
  });
});

describe("planPlacement on two Sparks (the runbook's 235B)", () => {
  const plan = planPlacement({ model: QWEN3_235B, nodes: sparks(2), server });

  it("names the devices in placement order, layer split, n_gpu_layers 99, the workers' endpoints", () => {
    expect(plan).toMatchObject({
      known: true,
      fits: true,
      devices: ["CUDA0", "RPC0"],
      splitMode: "layer",
      tensorSplit: [0.5, 0.5],
      nGpuLayers: 99,
      rpcServers: ["10.100.64.2:50052"],
      configured: { splitMode: "layer" },
    });
    expect(plan.reason).toBeUndefined();
  });

  it("expects layers 0-47 on CUDA0 and 48-93 plus the output layer on RPC0", () => {
    expect(plan.layers).toEqual([
      { device: "CUDA0", node: "spark-1", first: 0, count: 48 },
      { device: "RPC0", node: "spark-2", first: 48, count: 47 },
    ]);
  });

  it("accounts weights, KV and margin per node", () => {
    const perLayer = 142.1e9 / 95;
    expect(plan.perNode).toEqual([
      {
        node: "spark-1",
        device: "CUDA0",
        usableBytes: GB10,
        weightsBytes: Math.round(48 * perLayer),
        kvBytes: 48 * 8 * 2 ** 20,
        marginBytes: 1024 ** 3,
      },
      {
        node: "spark-2",
        device: "RPC0",
        usableBytes: GB10,
        weightsBytes: Math.round(47 * perLayer),
        kvBytes: 46 * 8 * 2 ** 20,
        marginBytes: 1024 ** 3,
      },
    ]);
    expect(plan.totals).toEqual({
      weightsBytes: 142.1e9,
      kvBytes: 94 * 8 * 2 ** 20,
      marginBytes: 2 * 1024 ** 3,
    });
  });

  it("spreads over four Sparks: about 24 layers each", () => {
    const quad = planPlacement({ model: QWEN3_235B, nodes: sparks(4), server });
    expect(quad.fits).toBe(true);
    expect(quad.devices).toEqual(["CUDA0", "RPC0", "RPC1", "RPC2"]);
    expect(quad.tensorSplit).toEqual([0.25, 0.25, 0.25, 0.25]);
    // il/95 < 0.25 → il ≤ 23; < 0.5 → ≤ 47; < 0.75 → ≤ 71.
    expect(quad.layers.map((l) => [l.device, l.first, l.count])).toEqual([
      ["CUDA0", 0, 24],
      ["RPC0", 24, 24],
      ["RPC1", 48, 24],
      ["RPC2", 72, 23],
    ]);
  });
});

describe("a model that fits no placement", () => {
  it("one 130 GB Spark and the 142.1 GB model: fits false with the numbers, no exception", () => {
    const plan = planPlacement({ model: QWEN3_235B, nodes: sparks(1), server });
    expect(plan.fits).toBe(false);
    expect(plan.known).toBe(true);
    expect(plan.layers).toEqual([{ device: "CUDA0", node: "spark-1", first: 0, count: 95 }]);
    const r = plan.reason ?? "";
    expect(r).toContain("142.1 GB weights + 0.8 GB KV (4096 tokens × 1 slot, f16) + 1.1 GB");
    expect(r).toContain(
      "spark-1 (CUDA0): 142.1 GB weights + 0.8 GB KV + 1.1 GB margin = 144.0 GB of 130.0 GB usable",
    );
    expect(r).toContain("OOMs the box");
    expect(r).toContain(
      "two nodes buy capacity, not speed: pipeline parallelism is off with an RPC device",
    );
    expect(() => assertFits(plan)).toThrow(r);
  });

  it("two nodes too small: every node's numbers", () => {
    const plan = planPlacement({ model: QWEN3_235B, nodes: sparks(2, 60e9), server });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toMatch(
      /spark-1 \(CUDA0\): 71\.8 GB weights .* of 60\.0 GB usable; spark-2 \(RPC0\): 70\.3 GB weights .* of 60\.0 GB usable/,
    );
    expect(plan.reason).toContain("the 2 nodes have 120.0 GB usable in all");
  });

  it("room in the cluster but a skewed tensorSplit: says to shift the shares", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: sparks(2),
      server: { ...server, tensorSplit: [0.95, 0.05] },
    });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toContain("spark-1 would be over while the cluster has room");
  });

  it("a long context is what does not fit: the KV number says so", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: sparks(2),
      server: { ...server, context: 131072, parallel: 8 },
    });
    // 1048576 tokens × 94 layers × 2 KiB = 201.9 GB of KV.
    expect(plan.fits).toBe(false);
    expect(plan.reason).toContain("201.9 GB KV (131072 tokens × 8 slots, f16)");
  });
});

describe("the CPU-only client of the simulated cluster", () => {
  const nodes = placementNodes({
    client: "spark-1",
    clientDevice: "CPU",
    workers: [{ node: "spark-2", endpoint: "192.168.100.12:50052" }],
    usable: () => ({ usableBytes: 8e9, source: "facts" }),
  });

  it("gives the CPU the first layers through n_gpu_layers < n_layer + 1, and RPC0 the rest", () => {
    const plan = planPlacement({ model: TINY, nodes, server });
    // Equal memory: the CPU's share round(0.5 × 9) = 5 layers (0-4); n_gpu_layers = 9 - 5.
    expect(plan.devices).toEqual(["CPU", "RPC0"]);
    expect(plan.nGpuLayers).toBe(4);
    expect(plan.layers).toEqual([
      { device: "CPU", node: "spark-1", first: 0, count: 5 },
      { device: "RPC0", node: "spark-2", first: 5, count: 4 },
    ]);
    expect(plan.fits).toBe(true);
    // llama.cpp's own assignment with those flags agrees: i_gpu_start = 9 - 4 = 5.
    expect(assignLayers(8, plan.nGpuLayers, [1])).toEqual([-1, -1, -1, -1, -1, 0, 0, 0, 0]);
  });

  it("follows a configured share: [1, 3] puts a quarter on the CPU", () => {
    const plan = planPlacement({
      model: TINY,
      nodes,
      server: { ...server, tensorSplit: [1, 3], devices: ["CPU", "RPC0"] },
    });
    expect(plan.layers.map((l) => [l.device, l.count])).toEqual([
      ["CPU", 2],
      ["RPC0", 7],
    ]);
    expect(plan.nGpuLayers).toBe(7);
  });

  it("refuses CPU anywhere but first", () => {
    const plan = planPlacement({
      model: TINY,
      nodes,
      server: { ...server, devices: ["RPC0", "CPU"] },
    });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toContain("list CPU first");
  });
});

describe("inputs and shares", () => {
  it("unknown memory: known false, equal shares, judged at up (not refused)", () => {
    const plan = planPlacement({ model: QWEN3_235B, nodes: sparks(2, null), server });
    expect(plan.known).toBe(false);
    expect(plan.fits).toBe(true);
    expect(plan.tensorSplit).toEqual([0.5, 0.5]);
    expect(plan.perNode.map((p) => p.usableBytes)).toEqual([undefined, undefined]);
    expect(() => assertFits(plan)).toThrow(/unknown inputs/);
  });

  it("tensor_split follows usable memory", () => {
    const nodes = sparks(2);
    nodes[1] = { ...nodes[1]!, usableBytes: GB10 / 2 };
    const plan = planPlacement({ model: QWEN3_235B, nodes, server });
    expect(plan.tensorSplit).toEqual([0.667, 0.333]);
    // il/95 < 0.667f → il ≤ 63.
    expect(plan.layers.map((l) => l.count)).toEqual([64, 31]);
  });

  it("devices as configured: placement follows that order and tensorSplit indexes it", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: sparks(2),
      server: { ...server, devices: ["RPC0", "CUDA0"], tensorSplit: [0.25, 0.75] },
    });
    expect(plan.devices).toEqual(["RPC0", "CUDA0"]);
    expect(plan.configured).toEqual({
      devices: ["RPC0", "CUDA0"],
      tensorSplit: [0.25, 0.75],
      splitMode: "layer",
    });
    // il/95 < 0.25 → il ≤ 23 on RPC0.
    expect(plan.layers).toEqual([
      { device: "RPC0", node: "spark-2", first: 0, count: 24 },
      { device: "CUDA0", node: "spark-1", first: 24, count: 71 },
    ]);
  });

  it("a configured device that is not in the placement: fits false, naming both lists", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: sparks(2),
      server: { ...server, devices: ["CUDA0", "CUDA1"] },
    });
    expect(plan.fits).toBe(false);
    expect(plan.reason).toContain(
      "sparkform:server.devices is [CUDA0, CUDA1], but this placement's devices are [CUDA0, RPC0]",
    );
  });

  it("n_gpu_layers below n_layer on a Spark: the first layers stay on the client's CPU", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: sparks(2),
      server: { ...server, gpuLayers: 50 },
    });
    expect(plan.layers).toEqual([
      { device: "CPU", node: "spark-1", first: 0, count: 45 },
      { device: "CUDA0", node: "spark-1", first: 45, count: 25 },
      { device: "RPC0", node: "spark-2", first: 70, count: 25 },
    ]);
    expect(plan.perNode[0]?.weightsBytes).toBe(Math.round(70 * (142.1e9 / 95)));
  });

  it("row and tensor: weights by share, no layer ranges (the policy refuses them across hosts)", () => {
    for (const splitMode of ["row", "tensor"] as const) {
      const plan = planPlacement({
        model: QWEN3_235B,
        nodes: sparks(2),
        server: { ...server, splitMode },
      });
      expect(plan.splitMode).toBe(splitMode);
      expect(plan.layers).toEqual([]);
      expect(plan.perNode.map((p) => p.weightsBytes)).toEqual([71.05e9, 71.05e9]);
    }
  });

  it("none: one device holds everything", () => {
    const plan = planPlacement({
      model: TINY,
      nodes: sparks(2, 8e9),
      server: { ...server, splitMode: "none" },
    });
    expect(plan.layers).toEqual([{ device: "CUDA0", node: "spark-1", first: 0, count: 9 }]);
  });

  it("usable memory: declared, else the fact sheet's MemAvailable, else the worker's free bytes", () => {
    expect(usableMemory({ declared: 1, factsAvailable: 2, workerFree: 3 })).toEqual({
      usableBytes: 1,
      source: "declared",
    });
    expect(usableMemory({ factsAvailable: 2, workerFree: 3 })).toEqual({
      usableBytes: 2,
      source: "facts",
    });
    expect(usableMemory({ factsAvailable: null, workerFree: 3 })).toEqual({
      usableBytes: 3,
      source: "worker",
    });
    expect(usableMemory({})).toEqual({ source: "facts" });
    // With the total from the same source: the memory the split follows (issue 32).
    expect(usableMemory({ factsAvailable: 2, factsTotal: 4, workerFree: 3 })).toEqual({
      usableBytes: 2,
      memoryBytes: 4,
      source: "facts",
    });
    expect(usableMemory({ workerFree: 3, workerTotal: 5 })).toEqual({
      usableBytes: 3,
      memoryBytes: 5,
      source: "worker",
    });
    expect(usableMemory({ declared: 1, factsAvailable: 2, factsTotal: 4 })).toEqual({
      usableBytes: 1,
      source: "declared",
    });
  });

  it("memory given: the split follows it and the plan records it, the usable bytes (a reading) decide only the fit", () => {
    const withMemory = (usable: readonly number[]) =>
      planPlacement({
        model: QWEN3_235B,
        nodes: sparks(2).map((n, i) => ({ ...n, usableBytes: usable[i], memoryBytes: 128e9 })),
        server,
      });
    const a = withMemory([121.3e9, 119.8e9]);
    expect(a.tensorSplit).toEqual([0.5, 0.5]);
    expect(a.perNode.map((p) => [p.memoryBytes, p.usableBytes])).toEqual([
      [128e9, undefined],
      [128e9, undefined],
    ]);
    expect(a).toMatchObject({ fits: true, wholeFitsClient: false });
    expect(withMemory([118.4e9, 124.1e9])).toEqual(a);
    const over = withMemory([60e9, 124.1e9]);
    expect(over.fits).toBe(false);
    expect(over.reason).toContain("of 60.0 GB usable");
    expect(over.reason).toContain(
      "the split follows each node's total memory, not what is free now",
    );
  });
});

describe("a header or split the plan cannot place is refused, never placed on device undefined", () => {
  const pair = sparks(2);
  it("tensor split shares whose float32 sum overflows: the split points are not finite", () => {
    const plan = planPlacement({
      model: QWEN3_235B,
      nodes: pair,
      server: { ...server, tensorSplit: [1e39, 1], devices: ["CUDA0", "RPC0"] },
    });
    expect(plan.fits).toBe(false);
    expect(plan.layers).toEqual([]);
    expect(plan.reason).toBe(
      "sparkform:server.tensorSplit [1e+39, 1] gives split points [NaN, NaN] in float32, as " +
        "llama.cpp sums them: every layer would land on no device; give shares from 0.001 to " +
        "1000000, e.g. [1, 1]",
    );
    // Refused before any share was placed: no split, no node's share.
    expect(plan.tensorSplit).toEqual([]);
    expect(plan.perNode).toEqual([]);
  });
  it.each([
    [Number.NaN, "NaN"],
    [1e8, "100000000"],
    [2 ** 32 - 1, "4294967295"],
    [2.5, "2.5"],
  ])("block_count %s: no plan, no per-layer array, and no fits: true", (blockCount, shown) => {
    // What took the time: an array of block_count + 1 layers. None is built beyond llama.cpp's.
    const from = vi.spyOn(Array, "from");
    let plan: ReturnType<typeof planPlacement>;
    let lengths: number[];
    try {
      plan = planPlacement({ model: { ...QWEN3_235B, blockCount }, nodes: pair, server });
      lengths = from.mock.calls.map(([src]) => Number((src as { length?: unknown }).length ?? 0));
    } finally {
      from.mockRestore();
    }
    expect(lengths.filter((n) => !(n <= LLAMA_MAX_LAYERS + 1))).toEqual([]);
    expect(plan.fits).toBe(false);
    expect(plan.layers).toEqual([]);
    expect(plan.reason).toBe(
      `the model's GGUF header has block_count ${shown}, not a whole number of layers from 1 ` +
        "to 512 (llama.cpp's LLAMA_MAX_LAYERS): it is not a model llama.cpp can split by layer",
    );
    expect(plan.perNode).toEqual([]);
  });
});
