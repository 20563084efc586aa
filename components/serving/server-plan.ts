// Pure parts of the LlamaServer resource: unit names, the argv the unit runs, what
// llama-server's log says about where the model landed, how that compares with the plan, and
// when the measured server is drift. Node programs: native/serving/.
import type { ServingPlan } from "./placement";

export const SERVER_PROGRAMS = {
  start: "serving/start.sh",
  stop: "serving/stop.sh",
  status: "serving/status.py",
  smoke: "serving/smoke.py",
  workerLog: "serving/worker-log.py",
} as const;

/** The installed server, relative to NativeBuild's installDir. */
export const SERVER_ARTIFACT = "bin/llama-server";

/** The server's unit on the client node (one per port). */
export const serverUnit = (port: number): string => `sparkform-llama-server-${port}`;
/** The single-node reference the smoke compares with (started and stopped by the smoke). */
export const referenceUnit = (port: number): string => `sparkform-llama-reference-${port}`;
/** Where the reference listens: the next port, on loopback. */
export const referencePort = (port: number): number => (port < 65535 ? port + 1 : port - 1);
/** The worker's log (components/rpc-worker: StandardOutput=append: of its unit). */
export const workerLogPath = (port: number): string =>
  `~/.cache/sparkform/rpc-worker/worker-${port}.log`;

/**
 * The flags the unit adds to the plan's: the address, and the log verbosity that prints
 * `load_tensors: layer N assigned to device X` (LLAMA_LOG_DEBUG, shown at -lv 5 and above:
 * common/log.cpp drops debug lines below LOG_DEFAULT_DEBUG).
 */
export function serverArgv(o: {
  placement: readonly string[];
  bind: string;
  port: number;
  apiKeyFile?: string;
}): string[] {
  const own = new Set(["--host", "--port", "-lv", "--verbosity", "--api-key", "--api-key-file"]);
  const kept: string[] = [];
  for (let i = 0; i < o.placement.length; i++) {
    const a = o.placement[i] as string;
    if (own.has(a)) {
      i++; // and its value
      continue;
    }
    kept.push(a);
  }
  return [
    ...kept,
    "--host",
    o.bind,
    "--port",
    String(o.port),
    "-lv",
    "5",
    ...(o.apiKeyFile ? ["--api-key-file", o.apiKeyFile] : []),
  ];
}

/** The single-node reference: the same model and context, only the client's own device. */
export function referenceArgv(o: {
  modelPath: string;
  plan: Pick<ServingPlan, "context" | "cacheType">;
  clientDevice: string;
  port: number;
}): string[] {
  return [
    "-m",
    o.modelPath,
    "-c",
    String(o.plan.context),
    "-np",
    "1",
    "-ctk",
    o.plan.cacheType,
    "-ctv",
    o.plan.cacheType,
    ...(o.clientDevice === "CPU" ? ["-ngl", "0"] : ["--device", o.clientDevice, "-ngl", "99"]),
    "--host",
    "127.0.0.1",
    "--port",
    String(o.port),
  ];
}

/** Per device, what llama-server's log shows: its layers and its model buffers. */
export interface SeenDevice {
  device: string;
  layers: number;
  modelBufferMiB: number;
}

export interface SeenPlacement {
  devices: SeenDevice[];
  /** layer index → device, from `load_tensors: layer N assigned to device X`. */
  layerDevice: Record<number, string>;
  /** The endpoints of RPC buffers (`RPC0[10.0.0.2:50052]`). */
  rpcEndpoints: Record<string, string>;
}

// src/llama-model.cpp (80fb11ac), load_tensors:
//   LLAMA_LOG_DEBUG("load_tensors: layer %3d assigned to device %s, is_swa = %d\n", …)
//   LLAMA_LOG_INFO("%s: %12s model buffer size = %8.2f MiB\n", __func__, buffer name, MiB)
// A buffer's name is its type's: "CPU", "CPU_Mapped", "CPU_REPACK", "CUDA0", "CUDA_Host",
// "RPC0[host:port]" (ggml-rpc.cpp: "RPC" + device + "[" + endpoint + "]").
const LAYER_LINE = /load_tensors:\s+layer\s+(\d+)\s+assigned to device\s+([^\s,]+)/;
const BUFFER_LINE = /load_tensors:\s+(\S+)\s+model buffer size\s*=\s*([\d.]+)\s*MiB/;

/** The device a model buffer belongs to: host buffers are the CPU's. */
export function bufferDevice(name: string): { device: string; endpoint?: string } {
  const rpc = /^(RPC\d+)\[(.+)\]$/.exec(name);
  if (rpc) return { device: rpc[1] as string, endpoint: rpc[2] as string };
  if (/^CPU(_|$)/.test(name) || /_Host$/.test(name)) return { device: "CPU" };
  return { device: name };
}

/** Where the model landed, read from the server's log (the last load in it). */
export function parsePlacement(log: readonly string[]): SeenPlacement {
  // A restarted unit appends to the same log: only the last load counts.
  let start = 0;
  log.forEach((l, i) => {
    if (/load_tensors:\s+layer\s+0\s+assigned/.test(l)) start = i;
  });
  const layerDevice: Record<number, string> = {};
  const mib = new Map<string, number>();
  const rpcEndpoints: Record<string, string> = {};
  for (const line of log.slice(start)) {
    const l = LAYER_LINE.exec(line);
    if (l) layerDevice[Number(l[1])] = l[2] as string;
    const b = BUFFER_LINE.exec(line);
    if (b) {
      const { device, endpoint } = bufferDevice(b[1] as string);
      mib.set(device, (mib.get(device) ?? 0) + Number(b[2]));
      if (endpoint) rpcEndpoints[device] = endpoint;
    }
  }
  const names = [...new Set([...Object.values(layerDevice), ...mib.keys()])];
  const devices = names.map((device) => ({
    device,
    layers: Object.values(layerDevice).filter((d) => d === device).length,
    modelBufferMiB: Math.round((mib.get(device) ?? 0) * 100) / 100,
  }));
  return { devices, layerDevice, rpcEndpoints };
}

/**
 * Why the seen placement is not the plan's ([] = it is): every planned device has a model
 * buffer, every planned layer is on its planned device, and each RPC device's buffer is on the
 * endpoint the plan names.
 */
export function placementMismatch(
  plan: Pick<ServingPlan, "layers" | "rpcServers" | "devices">,
  seen: SeenPlacement,
): string[] {
  const r: string[] = [];
  const planned = [...new Set(plan.layers.map((l) => l.device))];
  for (const device of planned) {
    const s = seen.devices.find((d) => d.device === device);
    const node = plan.layers.find((l) => l.device === device)?.node ?? "";
    if (!s || s.modelBufferMiB <= 0)
      r.push(`${device} (${node}) has no model buffer: it was not reached or not used`);
  }
  for (const l of plan.layers) {
    const range = `layers ${l.first}–${l.first + l.count - 1} planned on ${l.device} (${l.node})`;
    const indices = Array.from({ length: l.count }, (_, k) => l.first + k);
    if (indices.every((i) => seen.layerDevice[i] === undefined)) {
      r.push(`${range}: none in the log`);
      continue;
    }
    const wrong: string[] = [];
    for (let i = l.first; i < l.first + l.count; i++) {
      const d = seen.layerDevice[i];
      if (d !== l.device) wrong.push(`${i} on ${d ?? "(not in the log)"}`);
    }
    if (wrong.length > 0) r.push(`${range}, seen ${wrong.join(", ")}`);
  }
  plan.devices.forEach((device) => {
    const m = /^RPC(\d+)$/.exec(device);
    if (!m) return;
    const want = plan.rpcServers[Number(m[1])];
    const got = seen.rpcEndpoints[device];
    if (want && got && want !== got) r.push(`${device} is ${got}, the plan's is ${want}`);
  });
  return r;
}

/**
 * The workers the client could not reach, from its log (ggml-rpc.cpp aborts with "Failed to
 * connect to <endpoint>"), as `RPC<k> (<node>, <endpoint>)`.
 */
export function unreachedWorkers(
  plan: Pick<ServingPlan, "rpcServers" | "layers">,
  log: readonly string[],
): string[] {
  return plan.rpcServers.flatMap((ep, k) => {
    const device = `RPC${k}`;
    const node = plan.layers.find((l) => l.device === device)?.node ?? "";
    return log.some((l) => l.includes(`Failed to connect to ${ep}`))
      ? [
          `${device} (${node}, ${ep}) was not reached: the client's log says "Failed to connect to ${ep}"`,
        ]
      : [];
  });
}

/** A placement as one line per device, for messages. */
export function describePlanned(plan: Pick<ServingPlan, "layers">): string {
  return plan.layers
    .map((l) => `${l.device} (${l.node}): layers ${l.first}–${l.first + l.count - 1}`)
    .join("; ");
}

export function describeSeen(seen: SeenPlacement): string {
  if (seen.devices.length === 0) return "(no load_tensors lines in the log)";
  return seen.devices
    .map((d) => `${d.device}: ${d.layers} layers, model buffer ${d.modelBufferMiB} MiB`)
    .join("; ");
}

/** The worker's debug log: how many graphs it computed, and whether it reused them. */
export interface RpcGraphCounts {
  graphCompute: number;
  graphRecompute: number;
  /** Line of the first `[graph_recompute]` is after the first `[graph_compute]`. */
  recomputeAfterCompute: boolean;
}

/** `systemctl --user show` of the server's unit (and what status.py measures beside it). */
export interface ServerStatus {
  unit: Record<
    "ActiveState" | "SubState" | "Result" | "NRestarts" | "InvocationID" | "MainPID",
    string
  >;
  runningDigest: string;
  binaryDigest: string;
  listening: string[];
  health: { status: number; body: string };
  log: string[];
}

export interface ServerStarted {
  invocationId: string;
  nRestarts: string;
}

/** Why the measured server is not the one `up` started ([] = none). */
export function serverDrift(o: {
  status: ServerStatus;
  started: ServerStarted;
  expectedDigest: string;
  bind: string;
}): string[] {
  const r: string[] = [];
  const u = o.status.unit;
  if (u.ActiveState !== "active" || u.SubState !== "running")
    r.push(`server unit is ${u.ActiveState}/${u.SubState} (result ${u.Result})`);
  if (u.NRestarts !== o.started.nRestarts)
    r.push(`server restarted ${u.NRestarts} times (was ${o.started.nRestarts} at start)`);
  if (u.InvocationID !== o.started.invocationId)
    r.push(
      `server invocation changed (${o.started.invocationId.slice(0, 8)} → ${u.InvocationID.slice(0, 8) || "none"})`,
    );
  if (o.status.runningDigest && o.status.runningDigest !== o.expectedDigest)
    r.push(
      `running llama-server sha256 ${o.status.runningDigest.slice(0, 12)} is not the build's ${o.expectedDigest.slice(0, 12)}`,
    );
  if (o.status.health.status !== 200 && u.ActiveState === "active")
    r.push(`GET /health answers ${o.status.health.status || "nothing"} ${o.status.health.body}`);
  const others = o.status.listening.filter((a) => a !== o.bind);
  if (others.length > 0) r.push(`listening on ${others.join(", ")} besides ${o.bind}`);
  return r;
}

/** The smoke's result on the node (native/serving/smoke.py). */
export interface SmokeRun {
  tokens: number[];
  text: string;
  tokensPerSecond: number;
  /** The GBNF grammar both runs were constrained by ("" = none; see native/serving/smoke.py). */
  grammar: string;
  reference: { tokens: number[]; text: string; tokensPerSecond: number } | { skipped: string };
}

/** Whether the single-node reference fits the client alone (else it is not run). */
export function referenceFits(plan: Pick<ServingPlan, "perNode" | "totals">): string | undefined {
  const client = plan.perNode[0];
  if (!client || client.usableBytes === undefined) return "the client's usable memory is unknown";
  const need = plan.totals.weightsBytes + plan.totals.kvBytes + client.marginBytes;
  if (client.usableBytes < need)
    return `the model needs ${Math.round(need / 2 ** 20)} MiB on one node and ${client.node} has ${Math.round(client.usableBytes / 2 ** 20)} MiB usable`;
  return undefined;
}
