// What the serving node programs print: the JSON (native/unit/status.py through the unit's parser,
// native/serving/smoke.py, worker-log.py), checked by ajv against the schema beside each
// program before anything reads it, and where llama-server's log says the model landed.
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { type UnitState, type UnitStatus, unitStatusParser } from "../unit/status";
import type {
  ApiProbe,
  SeenDevice,
  ServedApi,
  ServerStatus,
  ServerUnitState,
  SmokeChat,
} from "./state";

const fail = (what: string) => (node: string, path: string, detail: string) =>
  new NodeOutputError(what, node, path, detail);

/** The unit's properties the server's `status` output has kept since it was first written. */
const SERVER_UNIT_PROPS = [
  "ActiveState",
  "SubState",
  "Result",
  "NRestarts",
  "InvocationID",
  "MainPID",
] as const;

const serverUnitState = (u: UnitState): ServerUnitState =>
  Object.fromEntries(SERVER_UNIT_PROPS.map((k) => [k, u[k] ?? ""])) as ServerUnitState;

/**
 * native/unit/status.py's JSON (the one unit parser) as the server's `status` output keeps it:
 * six unit properties, the health answer, the log.
 */
export function serverStatusOf(u: UnitStatus): ServerStatus {
  return {
    unit: serverUnitState(u.unit),
    guard: serverUnitState(u.guard),
    runningDigest: u.runningDigest,
    binaryDigest: u.binaryDigest,
    listening: u.listening,
    health: u.health ?? { status: 0, body: "status.py was not asked for /health" },
    log: u.log,
    owner: u.owner ?? "",
    ...(u.boot ? { boot: u.boot } : {}),
  };
}

const parseUnitStatus = unitStatusParser("llama-server status (native/unit/status.py)");
export const parseServerStatus = (stdout: string, node: string): ServerStatus =>
  serverStatusOf(parseUnitStatus(stdout, node));

/** smoke.py's three modes, each a shape of native/serving/smoke.schema.json. */
export const parseSmoke = programJsonParser<SmokeRun>(
  "serving/smoke.py",
  fail("smoke generation (native/serving/smoke.py)"),
  "server",
);

/** smoke.py --reference: the single-node reference's /completion. */
export const parseReferenceRun = programJsonParser<CompletionRun>(
  "serving/smoke.py",
  fail("single-node reference generation (native/serving/smoke.py --reference)"),
  "reference",
);

/** smoke.py --apis: one token of each API besides the OpenAI chat (components/serving/apis.ts). */
export const parseApiProbes = programJsonParser<Record<ServedApi, ApiProbe>>(
  "serving/smoke.py",
  fail("API check (native/serving/smoke.py --apis)"),
  "apis",
);

/** worker-log.py's two modes, each a shape of native/serving/worker-log.schema.json. */
export const parseWorkerLogSize = programJsonParser<{ size: number } & WireCounters>(
  "serving/worker-log.py",
  fail("worker log size (native/serving/worker-log.py)"),
  "size",
);

export const parseWorkerLog = programJsonParser<
  RpcGraphCounts & { size: number; shrunk: boolean } & WireCounters
>(
  "serving/worker-log.py",
  fail("worker debug log counts (native/serving/worker-log.py)"),
  "counts",
);

export interface SeenPlacement {
  devices: SeenDevice[];
  /** layer index → device, from `load_tensors: layer N assigned to device X` (debug level). */
  layerDevice: Record<number, string>;
  /** The endpoints of RPC buffers (`RPC0[10.0.0.2:50052]`). */
  rpcEndpoints: Record<string, string>;
  /** Repeating layers per device from the KV cache buffers ({} when the log has none). */
  kvLayers: Record<string, number>;
  /** Devices whose KV share is not a whole number of layers (a cache that is not per layer). */
  kvUneven: string[];
}

// src/llama-model.cpp (80fb11ac), load_tensors:
//   LLAMA_LOG_DEBUG("load_tensors: layer %3d assigned to device %s, is_swa = %d\n", …)
//   LLAMA_LOG_INFO("%s: %12s model buffer size = %8.2f MiB\n", __func__, buffer name, MiB)
// src/llama-kv-cache.cpp (80fb11ac), at INFO, one buffer per device, each layer's K and V on
// the device of its layer (offload_kqv, the default):
//   LLAMA_LOG_INFO("%s: %10s KV buffer size = %8.2f MiB\n", __func__, buffer name, MiB)
//   LLAMA_LOG_INFO("%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), …", …)
// A buffer's name is its type's: "CPU", "CPU_Mapped", "CPU_REPACK", "CUDA0", "CUDA_Host",
// "RPC0[host:port]" (ggml-rpc.cpp: "RPC" + device + "[" + endpoint + "]").
const LAYER_LINE = /load_tensors:\s+layer\s+(\d+)\s+assigned to device\s+([^\s,]+)/;
const BUFFER_LINE = /load_tensors:\s+(\S+)\s+model buffer size\s*=\s*([\d.]+)\s*MiB/;
const KV_BUFFER_LINE = /llama_kv_cache:\s+(\S+)\s+KV buffer size\s*=\s*([\d.]+)\s*MiB/;
const KV_SIZE_LINE =
  /llama_kv_cache:\s+size\s*=\s*([\d.]+)\s*MiB\s*\(\s*\d+\s+cells,\s*(\d+)\s+layers/;
/** The line each model load starts with (INFO); a log of debug lines alone starts at layer 0. */
const LOAD_START = /load_tensors: loading model tensors/;
const LAYER_ZERO = /load_tensors:\s+layer\s+0\s+assigned/;

/** The device a model buffer belongs to: host buffers are the CPU's. */
export function bufferDevice(name: string): { device: string; endpoint?: string } {
  const rpc = /^(RPC\d+)\[(.+)\]$/.exec(name);
  if (rpc) return { device: rpc[1] as string, endpoint: rpc[2] as string };
  if (/^CPU(_|$)/.test(name) || /_Host$/.test(name)) return { device: "CPU" };
  return { device: name };
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Where the model landed, read from the server's log (the last load in it). */
export function parsePlacement(log: readonly string[]): SeenPlacement {
  // A restarted unit appends to the same log: only the last load counts.
  const last = (re: RegExp) => log.reduce((at, l, i) => (re.test(l) ? i : at), -1);
  const start = Math.max(0, last(LOAD_START) >= 0 ? last(LOAD_START) : last(LAYER_ZERO));
  const layerDevice: Record<number, string> = {};
  const mib = new Map<string, number>();
  const kv = new Map<string, number>();
  const rpcEndpoints: Record<string, string> = {};
  let kvTotal: { mib: number; layers: number } | undefined;
  for (const line of log.slice(start)) {
    const l = LAYER_LINE.exec(line);
    if (l) layerDevice[Number(l[1])] = l[2] as string;
    const b = BUFFER_LINE.exec(line) ?? KV_BUFFER_LINE.exec(line);
    if (b) {
      const { device, endpoint } = bufferDevice(b[1] as string);
      const into = BUFFER_LINE.test(line) ? mib : kv;
      into.set(device, (into.get(device) ?? 0) + Number(b[2]));
      if (endpoint) rpcEndpoints[device] = endpoint;
    }
    const t = KV_SIZE_LINE.exec(line);
    if (t) kvTotal = { mib: Number(t[1]), layers: Number(t[2]) };
  }
  // Every repeating layer holds the same KV share, so a device's share counts its layers.
  const kvLayers: Record<string, number> = {};
  const kvUneven: string[] = [];
  const kvSum = [...kv.values()].reduce((a, x) => a + x, 0);
  const layersWithKv = kvTotal?.layers ?? 0;
  if (layersWithKv > 0 && kvSum > 0) {
    const perLayer = kvSum / layersWithKv;
    for (const [device, m] of kv) {
      const n = m / perLayer;
      kvLayers[device] = Math.round(n);
      // %8.2f MiB per buffer: half a hundredth of a MiB of rounding on each side.
      if (Math.abs(n - Math.round(n)) * perLayer > 0.01) kvUneven.push(device);
    }
  }
  const debug = Object.keys(layerDevice).length > 0;
  const names = [...new Set([...Object.values(layerDevice), ...mib.keys(), ...kv.keys()])];
  const devices = names.map((device) => ({
    device,
    layers: debug
      ? Object.values(layerDevice).filter((d) => d === device).length
      : (kvLayers[device] ?? 0),
    modelBufferMiB: round2(mib.get(device) ?? 0),
    ...(kv.has(device) ? { kvMiB: round2(kv.get(device) ?? 0) } : {}),
  }));
  return { devices, layerDevice, rpcEndpoints, kvLayers, kvUneven };
}

/** The worker's debug log: how many graphs it computed, and whether it reused them. */
export interface RpcGraphCounts {
  graphCompute: number;
  graphRecompute: number;
  /** Line of the first `[graph_recompute]` is after the first `[graph_compute]`. */
  recomputeAfterCompute: boolean;
}

/** One /completion request's tokens and speed (smoke.py; with --reference, all it prints). */
export interface CompletionRun {
  tokens: number[];
  tokensPerSecond: number;
}

/** The smoke's result on the node (native/serving/smoke.py). */
export interface SmokeRun extends CompletionRun {
  /** The same prompt through the OpenAI-compatible chat endpoint: what it answered. */
  chat: SmokeChat;
  /** The client end of the fabric proof: the interfaces routing to the workers, bytes moved. */
  fabric: { ifaces: string[]; rxBytes: number; txBytes: number };
  /**
   * The server's first request, a streamed chat completion: seconds to its first event with
   * generated text (TTFT), and how many such events came.
   */
  stream: { firstTokenSeconds: number; tokenEvents: number };
}

/** The byte counters of one interface, as a node program read them. */
export interface WireCounters {
  iface: string;
  rxBytes: number;
  txBytes: number;
}
