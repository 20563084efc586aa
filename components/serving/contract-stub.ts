// TEMPORARY: the serving contract's types and a minimal planPlacement/renderings, written
// against /work/helpers/SERVING-CONTRACT.md until helper "plan"'s placement.ts, render.ts and
// config.ts land (then this file is deleted and the imports point there).
import type { GgufSummary } from "../model/resolve";

export interface StackServer {
  node: string;
  port: number;
  bind: string;
  context: number;
  parallel: number;
  cacheType: string;
  computeMarginBytes: number;
  splitMode: "layer" | "row" | "tensor" | "none";
  tensorSplit?: number[];
  devices?: string[];
  gpuLayers: number;
  memory?: Record<string, number>;
  smoke: { prompt: string; tokens: number; seed: number };
}

export interface PlacementNode {
  node: string;
  role: "client" | "worker";
  device: string;
  endpoint?: string;
  usableBytes?: number;
  source: "declared" | "facts" | "worker";
}

export interface ServingPlan {
  known: boolean;
  fits: boolean;
  reason?: string;
  devices: string[];
  configured: { devices?: string[]; tensorSplit?: number[]; splitMode: string };
  splitMode: "layer" | "row" | "tensor" | "none";
  tensorSplit: number[];
  nGpuLayers: number;
  rpcServers: string[];
  context: number;
  parallel: number;
  cacheType: string;
  layers: { device: string; node: string; first: number; count: number }[];
  perNode: {
    node: string;
    device: string;
    usableBytes?: number;
    weightsBytes: number;
    kvBytes: number;
    marginBytes: number;
  }[];
  totals: { weightsBytes: number; kvBytes: number; marginBytes: number };
}

export const SERVER_DEFAULTS: Omit<StackServer, "node"> = {
  port: 8080,
  bind: "127.0.0.1",
  context: 4096,
  parallel: 1,
  cacheType: "f16",
  computeMarginBytes: 512 * 2 ** 20,
  splitMode: "layer",
  gpuLayers: 99,
  smoke: { prompt: "The capital of France is", tokens: 16, seed: 42 },
};

export function planPlacement(input: {
  model: GgufSummary & { fileBytes: number };
  nodes: PlacementNode[];
  server: StackServer;
}): ServingPlan {
  const { model, nodes, server } = input;
  const n = model.blockCount;
  const client = nodes[0] as PlacementNode;
  const workers = nodes.slice(1);
  const cpuClient = client.device === "CPU";
  const devices = cpuClient ? workers.map((w) => w.device) : nodes.map((x) => x.device);
  const clientLayers = cpuClient ? Math.floor(n / 2) : 0;
  const nGpuLayers = cpuClient ? n + 1 - clientLayers : server.gpuLayers;
  const share = (n - clientLayers) / Math.max(1, devices.length);
  const layers = [
    ...(clientLayers > 0
      ? [{ device: "CPU", node: client.node, first: 0, count: clientLayers }]
      : []),
    ...devices.map((d, i) => ({
      device: d,
      node: nodes.find((x) => x.device === d)?.node ?? "",
      first: clientLayers + Math.round(i * share),
      count: Math.round((i + 1) * share) - Math.round(i * share),
    })),
  ];
  const weights = model.fileBytes;
  return {
    known: nodes.every((x) => x.usableBytes !== undefined),
    fits: true,
    devices,
    configured: { splitMode: server.splitMode },
    splitMode: server.splitMode,
    tensorSplit: devices.map(() => 1),
    nGpuLayers,
    rpcServers: workers.map((w) => w.endpoint ?? ""),
    context: server.context,
    parallel: server.parallel,
    cacheType: server.cacheType,
    layers,
    perNode: nodes.map((x) => ({
      node: x.node,
      device: x.device,
      ...(x.usableBytes !== undefined ? { usableBytes: x.usableBytes } : {}),
      weightsBytes: Math.round(weights / nodes.length),
      kvBytes: 0,
      marginBytes: server.computeMarginBytes,
    })),
    totals: { weightsBytes: weights, kvBytes: 0, marginBytes: server.computeMarginBytes },
  };
}

export function renderings(
  plan: ServingPlan,
  modelPath: string,
): { llamaCppEx: string; llamaServer: string[]; llamaCli: string[]; json: string } {
  const flags = [
    "-m",
    modelPath,
    ...(plan.rpcServers.length ? ["--rpc", plan.rpcServers.join(",")] : []),
    ...(plan.devices.length ? ["--device", plan.devices.join(",")] : []),
    "-ngl",
    String(plan.nGpuLayers),
    "-sm",
    plan.splitMode,
    ...(plan.tensorSplit.length ? ["-ts", plan.tensorSplit.join(",")] : []),
    "-c",
    String(plan.context),
    "-np",
    String(plan.parallel),
    "-ctk",
    plan.cacheType,
    "-ctv",
    plan.cacheType,
  ];
  return {
    llamaCppEx: `[model_path: ${JSON.stringify(modelPath)}, n_gpu_layers: ${plan.nGpuLayers}]`,
    llamaServer: flags,
    llamaCli: flags,
    json: JSON.stringify(plan),
  };
}
