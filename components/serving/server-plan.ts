// Pure parts of the LlamaServer resource: unit names, the argv the unit runs, what
// llama-server's log says about where the model landed, how that compares with the plan, and
// when the measured server is drift. Node programs: the supervised unit's (native/unit/:
// start.sh, stop.sh, status.py, rss-guard.py, shared with the worker) and native/serving/
// (smoke.py, worker-log.py).
import type { RemoteScript } from "../transport";
import {
  UNIT_PROGRAMS,
  type UnitProgramRefs,
  unitStatusCommand,
  unitStopCommand,
} from "../unit/commands";
import { guardUnitName, unitLogPath, unitName } from "../unit/names";
import { type Started, type UnitState, unitDrift } from "../unit/status";
import type { ServingPlan } from "./placement";

export const SERVER_PROGRAMS = {
  /** start.sh starts the RSS guard beside the server as sparkform-llama-guard-<port>. */
  ...UNIT_PROGRAMS,
  smoke: "serving/smoke.py",
  workerLog: "serving/worker-log.py",
} as const;

/** The installed server, relative to NativeBuild's installDir. */
export const SERVER_ARTIFACT = "bin/llama-server";

/** The server's unit on the client node (one per port). */
export const serverUnit = (port: number): string => unitName("server", port);
/** The RSS guard's unit beside the server (stops it at `rssLimitPercent` of the node's RAM). */
export const guardUnit = (port: number): string => guardUnitName("server", port);
/** Where the reference listens: the next port, on loopback. */
export const referencePort = (port: number): number => (port < 65535 ? port + 1 : port - 1);
/** The single-node reference the smoke compares with: a unit of its own on its own port. */
export const referenceUnit = (port: number): string => unitName("reference", referencePort(port));
/** What a sparkform before start.sh named the reference: by the server's port, log in serving/. */
const legacyReferenceUnit = (port: number): string => `sparkform-llama-reference-${port}`;

/**
 * The lines of llama-server's log that say where the model landed (model buffers, KV cache
 * shares) and why a load failed: kept from the log's head by status.py, and what it keeps when
 * it cuts a log past 64 MiB.
 */
export const SERVER_LOG_MARKS = [
  "load_tensors:",
  "llama_kv_cache:",
  "llama_model_load",
  "error",
  "failed",
  "rpc",
  "RPC",
];

/** status.py for the server: the unit's reading plus GET /health at its bind, log bounded. */
export function serverStatusCommand(
  i: { readonly port: number; readonly binary: string; readonly bind: string },
  programs: UnitProgramRefs,
): RemoteScript {
  return unitStatusCommand(
    {
      role: "server",
      port: i.port,
      binary: i.binary,
      marks: SERVER_LOG_MARKS,
      keep: 200,
      health: i.bind,
      bound: true,
    },
    programs,
    `llama-server status :${i.port}`,
  );
}

/**
 * stop.sh for the server: its guard, the smoke's single-node reference if one was left, then
 * the server; the ports waited for are only those our own units held. With `owner`, another
 * stack's server on the port is left running, with its files.
 */
export function serverStopCommand(
  port: number,
  programs: UnitProgramRefs,
  display = `stop ${serverUnit(port)}`,
  owner?: string,
): RemoteScript {
  const legacy = legacyReferenceUnit(port);
  return unitStopCommand({ role: "server", port }, programs, {
    display,
    // The reference's files are in its own directory (its stop removes them).
    also: [
      { unit: referenceUnit(port), port: referencePort(port), files: [] },
      { unit: legacy, port: referencePort(port), files: [`${legacy}.log`] },
    ],
    ...(owner ? { owner } : {}),
  });
}
/** The worker's log (components/rpc-worker: StandardOutput=append: of its unit). */
export const workerLogPath = (port: number): string => unitLogPath("worker", port);

/**
 * The flags the unit adds to the plan's: the address, and verbosity 4 (TRACE). libllama's INFO
 * lines, which say where the model landed (each device's model buffer and KV cache share:
 * parsePlacement), are TRACE to common/log.cpp (common_log_get_verbosity), so the server's
 * default 3 drops them; 5 (DEBUG) would add the per-layer lines but also what clients send and
 * receive (`converted request: {…}`, `next token: 88 'U'`), which no log of ours keeps.
 */
/** llama-server's `-lv`: TRACE, below DEBUG (see serverArgv). */
export const SERVER_VERBOSITY = 4;

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
    String(SERVER_VERBOSITY),
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
  /**
   * Its layers: from the per-layer debug lines when the log has them (the output layer
   * included), else its repeating layers, counted from its share of the KV cache.
   */
  layers: number;
  modelBufferMiB: number;
  /** Its KV cache buffer (MiB), when the log has one. */
  kvMiB?: number;
}

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

/**
 * Why the seen placement is not the plan's ([] = it is): every planned device has a model
 * buffer, every planned layer is on its planned device (per layer from debug lines, else per
 * device by its KV share: layer split gives each device one contiguous range in plan order, so
 * the count per device fixes the ranges), and each RPC device's buffer is on the endpoint the
 * plan names.
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
  if (Object.keys(seen.layerDevice).length > 0) {
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
  } else if (Object.keys(seen.kvLayers).length === 0) {
    r.push("the log shows no KV cache buffers, so where the layers landed is not known");
  } else {
    // The plan's last index is the output layer, which holds no KV cache.
    const output = Math.max(...plan.layers.map((l) => l.first + l.count - 1));
    const want = new Map<string, number>();
    for (const l of plan.layers) {
      const repeating = Math.max(0, Math.min(l.first + l.count, output) - l.first);
      want.set(l.device, (want.get(l.device) ?? 0) + repeating);
    }
    for (const device of new Set([...want.keys(), ...Object.keys(seen.kvLayers)])) {
      const w = want.get(device) ?? 0;
      const got = seen.kvLayers[device] ?? 0;
      if (w !== got) {
        const node = plan.layers.find((l) => l.device === device)?.node;
        r.push(
          `${device}${node ? ` (${node})` : ""} holds the KV cache of ${got} repeating layers, the plan puts ${w} there`,
        );
      }
    }
    for (const device of seen.kvUneven)
      r.push(`${device}'s KV cache is not a whole number of layers`);
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
  const perLayer = Object.keys(seen.layerDevice).length > 0;
  return seen.devices
    .map(
      (d) =>
        `${d.device}: ${d.layers} ${perLayer ? "layers" : "repeating layers (by KV cache)"}, model buffer ${d.modelBufferMiB} MiB`,
    )
    .join("; ");
}

/** The worker's debug log: how many graphs it computed, and whether it reused them. */
export interface RpcGraphCounts {
  graphCompute: number;
  graphRecompute: number;
  /** Line of the first `[graph_recompute]` is after the first `[graph_compute]`. */
  recomputeAfterCompute: boolean;
}

/** `systemctl --user show` of one unit, as the server's `status` output keeps it. */
export type ServerUnitState = Pick<
  UnitState,
  "ActiveState" | "SubState" | "Result" | "NRestarts" | "InvocationID" | "MainPID"
>;

/** `systemctl --user show` of the server's unit (and what status.py measures beside it). */
export interface ServerStatus {
  unit: ServerUnitState;
  /** The RSS guard's unit (guardUnit); absent from state written before the server had one. */
  guard?: ServerUnitState;
  runningDigest: string;
  binaryDigest: string;
  listening: string[];
  health: { status: number; body: string };
  log: string[];
  /** The stack the unit records ("" for none): read for the drift, never kept in state. */
  owner?: string;
}

export type ServerStarted = Started;

/** Why the measured server is not the one `up` started ([] = none). */
export function serverDrift(o: {
  status: Omit<ServerStatus, "log" | "owner">;
  started: ServerStarted;
  expectedDigest: string;
  bind: string;
  /** The server has a guard (rssLimitPercent > 0): its unit must run beside it. */
  guardOn: boolean;
}): string[] {
  const u = o.status.unit;
  const h = o.status.health;
  return unitDrift({
    words: { what: "server", binary: "llama-server", guarded: "llama-server" },
    status: o.status,
    started: o.started,
    expectedDigest: o.expectedDigest,
    bind: o.bind,
    guardOn: o.guardOn,
    served:
      h.status !== 200 && u.ActiveState === "active"
        ? [`GET /health answers ${h.status || "nothing"} ${h.body}`]
        : [],
  });
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

/** One end of the client↔worker rail, and the bytes it carried during the smoke (rx + tx). */
export interface WireEnd {
  node: string;
  /** The interface ("" when the worker's address is on none: a finding of its own). */
  iface: string;
  bytes: number;
}

/** The byte counters of one interface, as a node program read them. */
export interface WireCounters {
  iface: string;
  rxBytes: number;
  txBytes: number;
}

/**
 * Each worker's end of the proof from its counters before and after the smoke. An interface that
 * changed in between (or none) proves nothing: 0 bytes.
 */
export function wireEnds(
  workers: readonly { node: string }[],
  before: readonly WireCounters[],
  after: readonly WireCounters[],
): WireEnd[] {
  return workers.map((w, k) => {
    const a = after[k];
    const b = before[k];
    const same = a !== undefined && b !== undefined && a.iface !== "" && a.iface === b.iface;
    return {
      node: w.node,
      iface: a?.iface ?? "",
      bytes: same ? a.rxBytes + a.txBytes - b.rxBytes - b.txBytes : 0,
    };
  });
}

/** Per node, its rails as sparkform:fabric.rails configures them (the Fabric stage's). */
export type FabricRails = Record<string, readonly { rail: number; iface: string }[]>;

/**
 * The fewest bytes (rx + tx, at one end) each token the smoke generated must move over the
 * fabric in a layer split. Every decode step sends the worker its input activations (SET_TENSOR:
 * a ~300-byte rpc_tensor plus n_embd × 4 bytes) and a graph (GRAPH_COMPUTE, or the few bytes of
 * GRAPH_RECOMPUTE), and reads its output back (GET_TENSOR, n_embd × 4 bytes), each message in
 * TCP segments with 66 bytes of headers: over 1 KiB already for the smallest model here (the
 * sim's tiny llama, n_embd 128), 8 KiB and more for a real one (n_embd ≥ 2048). Measured: the
 * sim's split smoke (3 requests × 16 tokens, test/fixtures/stack-outputs-local-serving.json)
 * moved 725,296 bytes at the client's end, about 15 KB a token: 1 KiB is 15 times under it.
 */
export const WIRE_BYTES_PER_TOKEN = 1024;
/** And a floor whatever the count: a few stray packets (ARP, a keep-alive) never prove a split. */
export const WIRE_MIN_BYTES = 4096;

/** The fewest bytes an end must have carried for a smoke that generated `tokens` tokens. */
export const wireFloor = (tokens = 0): number =>
  Math.max(WIRE_MIN_BYTES, tokens * WIRE_BYTES_PER_TOKEN);

/** What every wire-proof failure ends with: where the split's bytes are decided. */
const ROUTE_FIX =
  "Check the worker's bind (its fabricAddress) and the client's route to it " +
  "(`ip route get <worker address>` on the client node), then `up` again.";

/** The rails `a` and `b` share (the same rail number on both): `a`'s interfaces of them. */
function pairRails(rails: FabricRails, a: string, b: string) {
  const theirs = new Set((rails[b] ?? []).map((r) => r.rail));
  return (rails[a] ?? []).filter((r) => theirs.has(r.rail));
}

const railList = (rs: readonly { rail: number; iface: string }[]) =>
  rs.length
    ? rs.map((r) => `${r.iface} (rail ${r.rail})`).join(" or ")
    : "none: they share no rail";

/**
 * Each end on a non-rail interface: the client's route (one interface per worker, joined by
 * "+") must leave through a rail it shares with that worker, and the worker's address must be
 * on a rail it shares with the client.
 */
function offRail(client: WireEnd, workers: readonly WireEnd[], rails: FabricRails): string[] {
  const out: string[] = [];
  const clientIfaces = client.iface.split("+").filter((x) => x !== "");
  const clientRails = workers.flatMap((w) => pairRails(rails, client.node, w.node));
  for (const iface of clientIfaces) {
    if (clientRails.some((r) => r.iface === iface)) continue;
    const peers = workers.map((w) => w.node).join(", ");
    out.push(
      `${client.node} ${iface} is not a rail between ${client.node} and ${peers} (expected ${railList(
        [...new Map(clientRails.map((r) => [r.iface, r])).values()],
      )})`,
    );
  }
  for (const w of workers) {
    const mine = pairRails(rails, w.node, client.node);
    if (w.iface === "" || mine.some((r) => r.iface === w.iface)) continue;
    out.push(
      `${w.node} ${w.iface} is not a rail between ${client.node} and ${w.node} (expected ${railList(mine)})`,
    );
  }
  return out;
}

/**
 * Proof at the wire: with workers, the smoke's generation must have moved bytes over the
 * client's route to them and over each worker's fabric interface: at least what its `tokens`
 * must move (wireFloor), and, with the Fabric stage's `rails`, each end on a rail that pair
 * shares (one byte on eth0 proves nothing: the management network is not the fabric). Null
 * when it did; else what each end carried, so the message shows every number. Without `rails`
 * (no sparkform:fabric) the interfaces are not judged: wireRailNote says so.
 */
export function wireProofFailure(
  client: WireEnd,
  workers: readonly WireEnd[],
  check: { rails?: FabricRails; tokens?: number } = {},
): string | null {
  if (workers.length === 0) return null;
  const ends = [client, ...workers];
  const floor = wireFloor(check.tokens);
  const off = check.rails ? offRail(client, workers, check.rails) : [];
  const said = ends
    .map(
      (e) =>
        `${e.node} ${e.iface || "(no interface holds the worker's address)"}: ${e.bytes} bytes`,
    )
    .join(", ");
  if (off.length > 0)
    return (
      `the smoke's generation did not cross the fabric's rails (${said}): ${off.join("; ")}; ` +
      "the management network is not the fabric, and a split must run over a rail sparkform:fabric " +
      "configures for both nodes. Check sparkform:fabric.rails (each node's rail interfaces and " +
      "addresses), that the worker's fabricAddress (sparkform:nodes[].fabricAddress) is its address " +
      "on such a rail, and the client's route to it (`ip route get <worker address>` on the client " +
      "node), then `up` again."
    );
  if (ends.every((e) => e.iface !== "" && e.bytes >= floor)) return null;
  if (ends.every((e) => e.iface !== "" && e.bytes > 0))
    return (
      `the smoke's generation did not cross the fabric (${said}): its ${check.tokens ?? 0} tokens move ` +
      `at least ${floor} bytes at each end (${WIRE_BYTES_PER_TOKEN} a token, ${WIRE_MIN_BYTES} at the least), ` +
      "so the bytes counted were other traffic and the layers on the workers were not computed over " +
      `this rail. ${ROUTE_FIX}`
    );
  return (
    `the smoke's generation did not cross the fabric (${said}): the layers on the workers were ` +
    `computed, but not over the rail between the nodes. ${ROUTE_FIX}`
  );
}

/** What the wire proof's verdict adds without a Fabric stage: the rails were not checked. */
export function wireRailNote(rails: FabricRails | undefined): string {
  return rails
    ? ""
    : "the rails could not be checked: no Fabric stage (sparkform:fabric is not configured), so " +
        "bytes on any interface, the management network's too, passed the wire proof";
}

/**
 * The decode fast path from a worker's debug log (worker-log.py): null when proven, or when the
 * worker computed nothing to judge; a log cut since the smoke began (`shrunk`) proves nothing.
 */
export function workerLogFailure(
  w: { node: string; endpoint: string; port: number },
  c: RpcGraphCounts & { shrunk: boolean },
): string | null {
  const log = workerLogPath(w.port);
  if (c.shrunk)
    return (
      `could not prove the decode fast path on the worker ${w.node} (${w.endpoint}): its debug log ` +
      `${log} is shorter than when the smoke began (a status read cut it past 64 MiB, in place), ` +
      "so the smoke's lines cannot be told from older ones and none were counted. Nothing is wrong " +
      "with the split for that; `up` again to run the smoke on a log with room."
    );
  if (c.graphCompute > 0 && !c.recomputeAfterCompute)
    return (
      `the worker ${w.node} (${w.endpoint}) computed ${c.graphCompute} graphs and reused none ` +
      `(no [graph_recompute] after the first [graph_compute] in ${log}): the decode fast path is off, ` +
      "every token re-sends its graph. Check that the worker and the client run the same build."
    );
  return null;
}

/** A chat completion's verdict (the message's length, never its text). */
export interface SmokeChat {
  completionTokens: number;
  finishReason: string;
  characters: number;
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

/** Where a llama-server answers: `http://<bind>:<port>` (an IPv6 bind in brackets). */
export function serverUrl(i: { bind: string; port: number }): string {
  return `http://${i.bind.includes(":") ? `[${i.bind}]` : i.bind}:${i.port}`;
}
