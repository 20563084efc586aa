// The serving plan: which device holds which layers, with what memory, before anything starts.
// Pure: the GGUF header and file size (Model stage), each node's memory (declared, else its total
// from the fact sheet or the worker's GET_DEVICE_MEMORY), its usable memory (declared, else the
// fact sheet's MemAvailable or the worker's free bytes) and `sparkform:server` in; the plan out.
//
// The plan is a LlamaServer input, recorded in state and rendered into its flags, so it is made
// only of values that do not move between two runs on an unchanged cluster (issue 32): the split
// follows each node's memory (declared or total), and the plan records those bytes. Usable
// memory is a reading (free memory moves with page cache, builds, other processes): it decides
// the fit, a verdict, and the plan records its bytes only in the reason of a plan that does not
// fit (which stops `up`).
//
// The layer → device assignment is llama.cpp 80fb11ac's own (src/llama-model.cpp,
// llama_model_base::load_tensors), computed the same way so the server's log can be checked
// against it line by line (`load_tensors: layer N assigned to device D`):
//   - the input layer (token embeddings) always stays on the CPU;
//   - i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0): layers below it are on the CPU;
//   - act_gpu_layers = min(n_gpu_layers, n_layer + 1) layers from there (the output layer is
//     index n_layer and counts as one) go to the devices: layer il goes to the first device d
//     with (il - i_gpu_start) / act_gpu_layers < splits[d], splits being the cumulative
//     normalised tensor_split, in float32;
//   - CPU is refused as a --device (common/arg.cpp parse_device_list), so a CPU-only client
//     (the simulated cluster) can hold its share only as the first i_gpu_start layers: the
//     plan then sets n_gpu_layers = the workers' layers + 1 (the output layer).
// Weights per layer are estimated as fileBytes / (n_layer + 1) (the output layer as one
// layer's worth, the embeddings with the first layer): the log's `model buffer size` lines are
// the measurement.
//
// KV cache per node (llama-kv-cache.cpp: K and V tensors of n_embd_k_gqa × kv_size × n_stream
// per layer, on the layer's device):
//   kvBytes = kvTokens × layers on the node × headCountKv × (keyLength + valueLength) × bytes(cacheType)
// where kvTokens = n_parallel × pad256(n_ctx / n_parallel) with n_ctx = pad256(context ×
// parallel) (llama-context.cpp pads both to 256): i.e. context × parallel × layers × kv heads ×
// head dim × 2 (K and V) × bytes of the cache type, for head dims equal for K and V.
//
// A model that fits no placement is NOT an exception: the plan says `fits: false` with the
// numbers, the policy `model-fits` stops preview, and the server's create refuses through
// `assertFits`. Two nodes buy capacity, not speed: pipeline parallelism is off with an RPC
// device, so the nodes run one after the other (runbook "What two nodes actually buy you").
import type { GgufSummary } from "../model/resolve";
import type { StackServer } from "./config";
import { LLAMA_MAX_LAYERS } from "../model/header";
import { CACHE_TYPE_BYTES, type CacheType, SPLIT_SHARE_MAX, SPLIT_SHARE_MIN } from "./config";

export interface PlacementNode {
  node: string;
  role: "client" | "worker";
  /** llama.cpp device name: the client's own ("CUDA0" on a Spark, "CPU" in the CPU-only sim), a worker's "RPC<k>" in rpcServers order. */
  device: string;
  /** worker only: fabric endpoint host:port */
  endpoint?: string;
  /**
   * Usable bytes, what the fit is judged against: declared, else a reading (the fact sheet's
   * MemAvailable, the worker's free device memory); undefined = not known yet (preview before
   * the node exists).
   */
  usableBytes?: number;
  /**
   * The node's memory as a fact that does not move (its total: the fact sheet's MemTotal, the
   * worker's device total). Given, the split follows it and the plan records it instead of
   * `usableBytes`, a reading, which then only decides the fit. Absent (declared memory), the
   * split follows `usableBytes` and the plan records it.
   */
  memoryBytes?: number;
  source: "declared" | "facts" | "worker";
}

export interface LayerRange {
  device: string;
  node: string;
  /** First layer index; n_layer is the output layer. */
  first: number;
  count: number;
}

export interface NodeShare {
  node: string;
  device: string;
  /** Declared usable bytes (PlacementNode.usableBytes with no `memoryBytes`). */
  usableBytes?: number;
  /** The node's total memory the split followed (PlacementNode.memoryBytes): never a reading. */
  memoryBytes?: number;
  weightsBytes: number;
  kvBytes: number;
  marginBytes: number;
}

export interface ServingPlan {
  /** false when some input is unknown (policies say "checked at up") */
  known: boolean;
  fits: boolean;
  /** when !fits: the hard error with the numbers (weights, KV, margin, per node) */
  reason?: string;
  /** in placement order */
  devices: string[];
  configured: { devices?: string[]; tensorSplit?: number[]; splitMode: string };
  splitMode: "layer" | "row" | "tensor" | "none";
  /** same order as devices */
  tensorSplit: number[];
  nGpuLayers: number;
  /** host:port, worker order */
  rpcServers: string[];
  context: number;
  parallel: number;
  cacheType: string;
  /**
   * Expected layer → device assignment as llama.cpp 80fb11ac's load_tensors computes it
   * (src/llama-model.cpp: i_gpu_start, splits, and how CPU gets layers when nGpuLayers < n_layer).
   */
  layers: LayerRange[];
  perNode: NodeShare[];
  totals: { weightsBytes: number; kvBytes: number; marginBytes: number };
  /**
   * Whether the whole model (its weights, the KV cache of every layer, one margin) fits the
   * client's usable memory alone: the single-node reference of the smoke runs only then
   * (referenceFits). A verdict, set when perNode records the client's memory, not its usable
   * bytes (which are a reading); absent when the client's usable memory is not known.
   */
  wholeFitsClient?: boolean;
}

/** What the plan reads of the model: the header summary and the bytes on disk (all shards). */
export type PlacementModel = Pick<
  GgufSummary,
  "blockCount" | "headCount" | "headCountKv" | "embeddingLength" | "keyLength" | "valueLength"
> &
  Partial<GgufSummary> & { fileBytes: number };

export interface PlacementInput {
  model: PlacementModel;
  /** client first, then workers in rpcServers order */
  nodes: PlacementNode[];
  server: Pick<
    StackServer,
    | "context"
    | "parallel"
    | "cacheType"
    | "computeMarginBytes"
    | "splitMode"
    | "tensorSplit"
    | "devices"
    | "gpuLayers"
  >;
}

/** The llama.cpp device a CPU-only build's client holds layers on (never a --device). */
export const CPU_DEVICE = "CPU";

const GB = 1e9;
/** Bytes as the runbook writes them: "142.1 GB". */
export function gb(bytes: number): string {
  return `${(bytes / GB).toFixed(1)} GB`;
}

const pad256 = (n: number) => Math.ceil(n / 256) * 256;

/** Tokens of KV cache llama.cpp allocates for `context` tokens per slot and `parallel` slots. */
export function kvTokens(context: number, parallel: number): number {
  const nCtx = pad256(context * parallel);
  return parallel * pad256(nCtx / parallel);
}

/** K+V bytes of one layer's cache (see the formula at the top). */
export function kvBytesPerLayer(
  model: PlacementModel,
  server: Pick<StackServer, "context" | "parallel" | "cacheType">,
): number {
  const perHead = model.headCount > 0 ? Math.floor(model.embeddingLength / model.headCount) : 0;
  const k = model.keyLength ?? perHead;
  const v = model.valueLength ?? perHead;
  const bytes = CACHE_TYPE_BYTES[server.cacheType as CacheType] ?? 2;
  return Math.ceil(kvTokens(server.context, server.parallel) * model.headCountKv * (k + v) * bytes);
}

/**
 * The cumulative split points llama.cpp computes from tensor_split, in float32 as it does,
 * so a layer on a boundary lands where llama.cpp puts it.
 */
function splitPoints(split: readonly number[]): number[] {
  const f = Math.fround;
  let sum = f(0);
  const cum = split.map((x) => (sum = f(sum + f(x))));
  return cum.map((c) => f(c / sum));
}

/**
 * llama.cpp's layer → device index for layers 0..n_layer (n_layer = the output layer): -1 is
 * the CPU. `split` is over the llama.cpp devices (CPU never among them).
 */
export function assignLayers(
  nLayer: number,
  nGpuLayers: number,
  split: readonly number[],
): number[] {
  const iGpuStart = Math.max(nLayer + 1 - nGpuLayers, 0);
  const act = split.length === 0 ? 0 : Math.min(nGpuLayers, nLayer + 1);
  const points = splitPoints(split);
  return Array.from({ length: nLayer + 1 }, (_, il) => {
    if (il < iGpuStart || il - iGpuStart >= act) return -1;
    const x = Math.fround((il - iGpuStart) / act);
    // std::upper_bound: the first split point strictly greater than x.
    const d = points.findIndex((p) => p > x);
    return d === -1 ? points.length : d;
  });
}

/** Contiguous runs of the same device, as the plan lists them. */
function ranges(
  assignment: readonly number[],
  name: (d: number) => { device: string; node: string },
): LayerRange[] {
  const out: LayerRange[] = [];
  assignment.forEach((d, il) => {
    const { device, node } = name(d);
    const last = out[out.length - 1];
    if (last && last.device === device) last.count++;
    else out.push({ device, node, first: il, count: 1 });
  });
  return out;
}

/** Shares rounded for display and flags, in proportion to `weights`, summing to ~1. */
function proportional(weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum <= 0) return weights.map(() => Math.round(1000 / weights.length) / 1000);
  return weights.map((w) => Math.round((w / sum) * 1000) / 1000);
}

/** A plan that cannot be judged or placed: the devices as configured, every number zero. */
function problem(base: Omit<ServingPlan, "fits" | "reason">, reason: string): ServingPlan {
  return { ...base, fits: false, reason };
}

/**
 * The serving plan for `input` (see the top of this file). Never throws for a model that does
 * not fit: `fits` is false and `reason` has the numbers.
 */
export function planPlacement(input: PlacementInput): ServingPlan {
  const { model, nodes, server } = input;
  const nLayer = model.blockCount;
  const known = nodes.every((n) => n.usableBytes !== undefined);
  const client = nodes.find((n) => n.role === "client") ?? nodes[0];
  const cpuClient = client?.device === CPU_DEVICE;
  const defaultOrder = nodes.map((n) => n.device);
  const configured = {
    ...(server.devices ? { devices: [...server.devices] } : {}),
    ...(server.tensorSplit ? { tensorSplit: [...server.tensorSplit] } : {}),
    splitMode: server.splitMode,
  };
  const devices = server.devices ? [...server.devices] : defaultOrder;
  const byDevice = new Map(nodes.map((n) => [n.device, n]));
  const margin = server.computeMarginBytes;
  const base: Omit<ServingPlan, "fits" | "reason"> = {
    known,
    devices,
    configured,
    splitMode: server.splitMode,
    tensorSplit: [],
    nGpuLayers: server.gpuLayers,
    rpcServers: nodes.flatMap((n) => (n.role === "worker" && n.endpoint ? [n.endpoint] : [])),
    context: server.context,
    parallel: server.parallel,
    cacheType: server.cacheType,
    layers: [],
    perNode: [],
    totals: { weightsBytes: model.fileBytes, kvBytes: 0, marginBytes: margin * nodes.length },
  };

  if (nodes.length === 0 || client === undefined)
    return problem(
      base,
      "no node to place the model on: configure sparkform:nodes and sparkform:worker",
    );
  if (nLayer === 0)
    return problem(
      base,
      "the model's GGUF header has no block_count: it is not a model llama.cpp can split by layer",
    );
  // Checked where the model stage reads the header too; here before an array of nLayer + 1.
  if (!Number.isInteger(nLayer) || nLayer < 1 || nLayer > LLAMA_MAX_LAYERS)
    return problem(
      base,
      `the model's GGUF header has block_count ${String(nLayer)}, not a whole number of layers ` +
        `from 1 to ${LLAMA_MAX_LAYERS} (llama.cpp's LLAMA_MAX_LAYERS): it is not a model ` +
        "llama.cpp can split by layer",
    );
  const unknownDevices = devices.filter((d) => !byDevice.has(d));
  const missing = defaultOrder.filter((d) => !devices.includes(d));
  if (unknownDevices.length > 0 || missing.length > 0)
    return problem(
      base,
      `sparkform:server.devices is [${devices.join(", ")}], but this placement's devices are ` +
        `[${defaultOrder.join(", ")}] (${nodes.map((n) => `${n.device} on ${n.node}`).join(", ")}): ` +
        "name each of them once, in placement order",
    );
  if (cpuClient && devices[0] !== CPU_DEVICE)
    return problem(
      base,
      `sparkform:server.devices puts ${CPU_DEVICE} at position ${devices.indexOf(CPU_DEVICE) + 1}, but a ` +
        "CPU-only client's layers are always the first ones (llama.cpp gives the CPU the layers " +
        `below i_gpu_start): list ${CPU_DEVICE} first`,
    );
  if (server.tensorSplit && server.tensorSplit.length !== devices.length)
    return problem(
      base,
      `sparkform:server.tensorSplit has ${server.tensorSplit.length} proportions for the ` +
        `${devices.length} devices [${devices.join(", ")}]: give one per device, in that order`,
    );

  // The shares: as configured, else proportional to each node's memory (equal while unknown):
  // its total where known, which does not move, else its declared usable bytes.
  const memory = devices.map((d) => memoryOf(byDevice.get(d)));
  const tensorSplit = server.tensorSplit
    ? [...server.tensorSplit]
    : proportional(
        memory.every((u) => u !== undefined) ? (memory as number[]) : devices.map(() => 1),
      );

  const mode = server.splitMode;
  // The split llama.cpp is given (a CPU client's share is not in it), as its float32 split
  // points: a share that overflows float32 makes them NaN, and every layer would land on no
  // device while the plan said it fits.
  const given = cpuClient && mode !== "none" ? tensorSplit.slice(1) : tensorSplit;
  const points = given.some((x) => x > 0) ? splitPoints(given) : [];
  if (!tensorSplit.every((x) => Number.isFinite(x) && x >= 0) || !points.every(Number.isFinite))
    return problem(
      base,
      `${server.tensorSplit ? "sparkform:server.tensorSplit" : "the split from the nodes' memory"} ` +
        `[${tensorSplit.map(String).join(", ")}] gives split points [${points.map(String).join(", ")}] ` +
        "in float32, as llama.cpp sums them: every layer would land on no device; give shares " +
        `from ${SPLIT_SHARE_MIN} to ${SPLIT_SHARE_MAX}, e.g. [1, 1]`,
    );

  // Layer indices 0..nLayer per plan device index (-1 = CPU on a GPU client).
  let assignment: number[];
  let nGpuLayers = server.gpuLayers;
  if (mode === "none") {
    // One device: llama.cpp keeps only main_gpu (0, the first named); a CPU client keeps all.
    if (cpuClient) nGpuLayers = 0;
    assignment = cpuClient
      ? Array.from({ length: nLayer + 1 }, () => 0)
      : assignLayers(nLayer, nGpuLayers, [1]);
  } else if (cpuClient) {
    // The CPU's share is the first layers; the workers' devices get the rest (output included).
    const sum = tensorSplit.reduce((a, b) => a + b, 0);
    const cpuLayers = Math.min(Math.round(((tensorSplit[0] ?? 0) / sum) * (nLayer + 1)), nLayer);
    nGpuLayers = nLayer + 1 - cpuLayers;
    const gpuSplit = tensorSplit.slice(1);
    assignment = gpuSplit.every((s) => s === 0)
      ? Array.from({ length: nLayer + 1 }, () => 0)
      : assignLayers(nLayer, nGpuLayers, gpuSplit).map((d) => (d === -1 ? 0 : d + 1));
  } else {
    assignment = assignLayers(nLayer, nGpuLayers, tensorSplit);
  }

  const nameOf = (d: number) => {
    if (d === -1) return { device: CPU_DEVICE, node: client.node };
    const device = devices[d] as string;
    return { device, node: byDevice.get(device)?.node ?? client.node };
  };
  const layers = mode === "row" || mode === "tensor" ? [] : ranges(assignment, nameOf);

  // Memory per node: weights and KV by the layers it holds (row/tensor: by its share).
  const perLayer = model.fileBytes / (nLayer + 1);
  const kvLayer = kvBytesPerLayer(model, server);
  const slots = new Map<string, { weights: number; kvLayers: number }>();
  for (const n of nodes) slots.set(n.node, { weights: 0, kvLayers: 0 });
  if (mode === "row" || mode === "tensor") {
    const sum = tensorSplit.reduce((a, b) => a + b, 0);
    devices.forEach((d, i) => {
      const s = slots.get(byDevice.get(d)?.node ?? client.node);
      const f = (tensorSplit[i] ?? 0) / sum;
      if (s) {
        s.weights += model.fileBytes * f;
        s.kvLayers += nLayer * f;
      }
    });
  } else {
    assignment.forEach((d, il) => {
      const s = slots.get(nameOf(d).node);
      if (!s) return;
      s.weights += perLayer;
      if (il < nLayer) s.kvLayers++;
    });
  }
  const perNode: NodeShare[] = nodes.map((n) => {
    const s = slots.get(n.node) ?? { weights: 0, kvLayers: 0 };
    return {
      node: n.node,
      device: n.device,
      // The bytes that do not move: the node's total, else its declared usable memory.
      ...(n.memoryBytes !== undefined
        ? { memoryBytes: n.memoryBytes }
        : n.usableBytes !== undefined
          ? { usableBytes: n.usableBytes }
          : {}),
      weightsBytes: Math.round(s.weights),
      kvBytes: Math.round(s.kvLayers * kvLayer),
      marginBytes: margin,
    };
  });
  const totals = {
    weightsBytes: model.fileBytes,
    kvBytes: perNode.reduce((a, p) => a + p.kvBytes, 0),
    marginBytes: margin * nodes.length,
  };
  // The fit is judged against usable memory, a reading where not declared: only its verdict
  // is recorded (and its bytes in the reason of a plan that does not fit, which stops `up`).
  const usable = new Map(nodes.map((n) => [n.node, n.usableBytes]));
  const clientUsable = client.usableBytes;
  const wholeFitsClient =
    client.memoryBytes !== undefined && clientUsable !== undefined
      ? { wholeFitsClient: totals.weightsBytes + totals.kvBytes + margin <= clientUsable }
      : {};
  const plan: Omit<ServingPlan, "fits" | "reason"> = {
    ...base,
    tensorSplit,
    nGpuLayers,
    layers,
    perNode,
    totals,
    ...wholeFitsClient,
  };
  const over = perNode.filter((p) => {
    const u = usable.get(p.node);
    return u !== undefined && p.weightsBytes + p.kvBytes + p.marginBytes > u;
  });
  if (over.length === 0) return { ...plan, fits: true };
  return { ...plan, fits: false, reason: misfitReason(plan, over, usable, configured) };
}

/** The bytes the split follows: the node's memory (total), else its declared usable bytes. */
const memoryOf = (n: PlacementNode | undefined): number | undefined =>
  n?.memoryBytes ?? n?.usableBytes;

/** The hard error of a model that does not fit, with the numbers (runbook trap 4). */
function misfitReason(
  plan: Omit<ServingPlan, "fits" | "reason">,
  over: readonly NodeShare[],
  usable: ReadonlyMap<string, number | undefined>,
  configured: ServingPlan["configured"],
): string {
  const { totals, perNode } = plan;
  const need = totals.weightsBytes + totals.kvBytes + totals.marginBytes;
  const have = perNode.reduce((a, p) => a + (usable.get(p.node) ?? 0), 0);
  const each = perNode
    .map((p) => {
      const u = usable.get(p.node);
      return (
        `${p.node} (${p.device}): ${gb(p.weightsBytes)} weights + ${gb(p.kvBytes)} KV + ` +
        `${gb(p.marginBytes)} margin = ${gb(p.weightsBytes + p.kvBytes + p.marginBytes)} of ` +
        `${u === undefined ? "unknown" : gb(u)} usable`
      );
    })
    .join("; ");
  const fix =
    need > have
      ? `${perNode.length === 1 ? "the one node has" : `the ${perNode.length} nodes have`} ${gb(have)} usable in all: ` +
        "add a worker node (two nodes buy capacity, not speed: pipeline parallelism is off with an " +
        "RPC device), or choose a smaller quantization, or lower sparkform:server.context/parallel"
      : `${over.map((o) => o.node).join(", ")} would be over while the cluster has room: ` +
        (configured.tensorSplit
          ? "leave sparkform:server.tensorSplit out (it follows each node's memory) or shift the shares"
          : "the split follows each node's total memory, not what is free now; shift the shares " +
            "off it with sparkform:server.tensorSplit (and devices), or declare " +
            "sparkform:server.memory, or free memory on it");
  return (
    `The model does not fit: ${gb(totals.weightsBytes)} weights + ${gb(totals.kvBytes)} KV ` +
    `(${plan.context} tokens × ${plan.parallel} slot${plan.parallel === 1 ? "" : "s"}, ${plan.cacheType}) + ${gb(totals.marginBytes)} ` +
    `compute margin = ${gb(need)}; ${each}. A model that does not fit does not degrade, it OOMs ` +
    "the box: Qwen3-235B-A22B Q4_K_M (142.1 GB) on one ~130 GB Spark had the OOM killer take out " +
    `an unrelated service (unified memory: no VRAM to spill into, mmap cannot save you). So ${fix}.`
  );
}

/** Thrown by the server's create when the plan does not fit (the policy should have said so). */
export class PlacementError extends Error {
  override name = "PlacementError";
}

/** For the LlamaServer provider: refuse to start a plan that does not fit, with its reason. */
export function assertFits(plan: Pick<ServingPlan, "fits" | "reason" | "known">): void {
  if (!plan.fits)
    throw new PlacementError(plan.reason ?? "The model does not fit the nodes' memory.");
  if (!plan.known)
    throw new PlacementError(
      "The serving plan still has unknown inputs (a node's usable memory): measure the nodes " +
        "(SparkNode facts, the worker's GET_DEVICE_MEMORY) before the server starts.",
    );
}

/**
 * A node's usable bytes by precedence: declared (`sparkform:server.memory`), else the fact
 * sheet's MemAvailable (nvidia-smi prints [N/A] on GB10's unified memory), else the worker's
 * GET_DEVICE_MEMORY free bytes; undefined while none is known. Not declared, its memory too:
 * the total from the same source (MemTotal, the device's total), which the split follows and
 * the plan records, where the usable bytes, a reading, move between two runs.
 */
export function usableMemory(o: {
  declared?: number;
  factsAvailable?: number | null;
  factsTotal?: number | null;
  workerFree?: number;
  workerTotal?: number;
}): Pick<PlacementNode, "usableBytes" | "memoryBytes" | "source"> {
  if (o.declared !== undefined) return { usableBytes: o.declared, source: "declared" };
  const total = (t: number | null | undefined) =>
    t !== undefined && t !== null ? { memoryBytes: t } : {};
  if (o.factsAvailable !== undefined && o.factsAvailable !== null)
    return { usableBytes: o.factsAvailable, ...total(o.factsTotal), source: "facts" };
  if (o.workerFree !== undefined)
    return { usableBytes: o.workerFree, ...total(o.workerTotal), source: "worker" };
  return { source: "facts" };
}

/**
 * The placement nodes for a cluster: the client (its device CUDA0 on a CUDA build, else CPU),
 * then each worker as RPC<k> with its fabric endpoint, in `workers` order.
 */
export function placementNodes(o: {
  client: string;
  clientDevice: string;
  workers: readonly { node: string; endpoint: string }[];
  usable: (node: string) => Pick<PlacementNode, "usableBytes" | "memoryBytes" | "source">;
}): PlacementNode[] {
  return [
    { node: o.client, role: "client", device: o.clientDevice, ...o.usable(o.client) },
    ...o.workers.map((w, k): PlacementNode => ({
      node: w.node,
      role: "worker",
      device: `RPC${k}`,
      endpoint: w.endpoint,
      ...o.usable(w.node),
    })),
  ];
}

/**
 * The LlamaServer resource's inputs that the policy pack reads (policies/serving.ts; the
 * contract in SERVING-CONTRACT.md): the plan and the evidence of every stage before it, so a
 * violation stops `up` before the server starts. The provider's inputs extend this.
 */
export interface LlamaServerGate {
  plan: ServingPlan;
  evidence: {
    builds: Record<
      string,
      {
        commit: string;
        treeDigest: string;
        artifacts: Record<string, string>;
        compiler?: { version: string; sha256: string };
      }
    >;
    models: Record<string, { files: { path: string; sha256: string }[] }>;
    workers: Record<string, { health: string; version: string; transport: string }>;
    fabric?: Record<string, unknown>;
  };
  node: string;
  bind: string;
  port: number;
  /** e.g. sparkform-llama-server-8080 */
  unit: string;
  /** The RSS guard's threshold, % of the node's RAM (0 = no guard; rss-guard-on refuses it). */
  rssLimitPercent: number;
  /** Measured once the server runs: its guard unit's state (rss-guard-on reads it). */
  status?: { guard?: { ActiveState: string } };
  /** A replica the chosen topology does not use: nothing runs, no policy judges its plan. */
  standby?: boolean;
  /** The stage's topology choice (layer-split-fits-one-node reads it). */
  topology?: { topology: string; reason: string; fitsEach: (boolean | undefined)[] };
}

/**
 * Whether the single-node reference fits the client alone (else it is not run): the plan's
 * verdict (wholeFitsClient), else its client's declared usable bytes.
 */
export function referenceFits(
  plan: Pick<ServingPlan, "perNode" | "totals" | "wholeFitsClient">,
): string | undefined {
  const client = plan.perNode[0];
  const need = plan.totals.weightsBytes + plan.totals.kvBytes + (client?.marginBytes ?? 0);
  if (plan.wholeFitsClient !== undefined)
    return plan.wholeFitsClient
      ? undefined
      : `the model needs ${Math.round(need / 2 ** 20)} MiB on one node, more than ${client?.node ?? "the client"} has usable`;
  if (!client || client.usableBytes === undefined) return "the client's usable memory is unknown";
  if (client.usableBytes < need)
    return `the model needs ${Math.round(need / 2 ** 20)} MiB on one node and ${client.node} has ${Math.round(client.usableBytes / 2 ** 20)} MiB usable`;
  return undefined;
}
