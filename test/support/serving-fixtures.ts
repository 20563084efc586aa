// The models, server settings and nodes the serving tests plan with.
import type { PlacementInput, PlacementNode } from "../../components/serving/placement";
import type { ServerStatus } from "../../components/serving/state";
import { TINY_LLAMA_DIMS } from "../../sim/gguf/tiny-llama";

/**
 * Qwen3-235B-A22B (the runbook's 142.1 GB Q4_K_M): 94 layers, 64 query heads, 4 KV heads
 * (model card, huggingface.co/Qwen/Qwen3-235B-A22B), hidden size 4096 and head_dim 128 (its
 * config.json: head_dim is NOT hidden / heads = 64), max_position_embeddings 40960.
 */
export const QWEN3_235B = {
  architecture: "qwen3moe",
  blockCount: 94,
  headCount: 64,
  headCountKv: 4,
  embeddingLength: 4096,
  keyLength: 128,
  valueLength: 128,
  contextLength: 40960,
  fileBytes: 142.1e9,
};

/** The simulated cluster's generated model (sim/gguf/tiny-llama.ts TINY_LLAMA_DIMS). */
export const TINY = {
  blockCount: TINY_LLAMA_DIMS.nLayer,
  headCount: TINY_LLAMA_DIMS.nHead,
  headCountKv: TINY_LLAMA_DIMS.nHeadKv,
  embeddingLength: TINY_LLAMA_DIMS.nEmbd,
  fileBytes: 2.4e6,
};

/** sparkform:server's defaults (components/serving/config.ts), as the plan reads them. */
export const SERVER: PlacementInput["server"] = {
  context: 4096,
  parallel: 1,
  cacheType: "f16",
  computeMarginBytes: 1024 ** 3,
  splitMode: "layer",
  gpuLayers: 99,
};

/** The runbook's GB10: 130.0 GB of unified memory per node ("121 GiB is 130.0 GB"). */
export const GB10 = 130.0e9;

/**
 * `n` Sparks: spark-1 the client (CUDA0), the others workers RPC0.. at 10.100.64.<i+1>:50052,
 * each with `usableBytes` (null: not known yet).
 */
export function sparks(n: number, usableBytes: number | null = GB10): PlacementNode[] {
  return Array.from({ length: n }, (_, i) => ({
    node: `spark-${i + 1}`,
    role: i === 0 ? "client" : "worker",
    device: i === 0 ? "CUDA0" : `RPC${i - 1}`,
    ...(i > 0 ? { endpoint: `10.100.64.${i + 1}:50052` } : {}),
    ...(usableBytes !== null ? { usableBytes } : {}),
    source: "declared",
  }));
}

/** A unit as status.py reports a running one (the server's; its guard differs in id and PID). */
const RUNNING_UNIT: ServerStatus["unit"] = {
  ActiveState: "active",
  SubState: "running",
  Result: "success",
  NRestarts: "0",
  InvocationID: "abcd1234ef",
  MainPID: "42",
};

/** status.py's report of a healthy server on 127.0.0.1 with its guard running, then `over`. */
export function runningServerStatus(over: Partial<ServerStatus> = {}): ServerStatus {
  return {
    unit: RUNNING_UNIT,
    guard: { ...RUNNING_UNIT, InvocationID: "feed", MainPID: "43" },
    runningDigest: "a".repeat(64),
    binaryDigest: "a".repeat(64),
    listening: ["127.0.0.1"],
    health: { status: 200, body: '{"status":"ok"}' },
    log: [],
    ...over,
  };
}
