// What the server's refresh and diff judge: where the model landed against the plan, the wire
// proof and the decode fast path of the smoke, drift, and which changed inputs restart it and
// which only rewrite state. Reads the current shape only: older state is upgraded first
// (state-upgrade.ts).
import { changedKeys } from "../providers/diff";
import { keyDigest } from "../unit/api-key";
import { programsChange } from "../unit/programs";
import { steadyUnit, unitDrift } from "../unit/status";
import { workerLogPath } from "./commands";
import type { RpcGraphCounts, SeenPlacement, WireCounters } from "./node-output";
import type { ServingPlan } from "./placement";
import type {
  FabricRails,
  LlamaServerInputs,
  LlamaServerOutputs,
  ServerStarted,
  ServerStatus,
  WireEnd,
} from "./state";

/**
 * Inputs whose change restarts the server. Not the plan itself: its flags are what the server
 * runs, while its numbers (usable memory, measured) move a little on every refresh. Not the
 * evidence's health lines either. `programs` restarts it only when a program changed other
 * than by a declared upgrade (components/unit/programs.ts).
 */
export const RESTART_KEYS = [
  "providerVersion",
  "target",
  "bind",
  "port",
  "flags",
  "binary",
  "binaryDigest",
  "modelPath",
  "smokeRequest",
  "workers",
  "rssLimitPercent",
  "rssIntervalSeconds",
  "programs",
] as const;

/**
 * Inputs whose change only rewrites state: the server keeps running (its owner is recorded on
 * the running unit first, components/unit/owner.ts).
 */
export const RECORD_KEYS = ["owner"] as const;

/** The changed inputs by what they do: restart the server, or only rewrite state. */
export function serverChanges(
  olds: LlamaServerOutputs,
  news: LlamaServerInputs,
): { restart: string[]; record: string[] } {
  const restart: string[] = [];
  const record: string[] = [];
  for (const k of changedKeys(olds, news, RESTART_KEYS)) {
    if (k !== "programs") restart.push(k);
    else {
      const c = programsChange(olds.programs, news.programs);
      if (c !== "none") (c === "restart" ? restart : record).push(k);
    }
  }
  // Builds and models of the evidence: a rebuilt peer is a restart, a worker's health is not.
  if (JSON.stringify(olds.evidence?.builds) !== JSON.stringify(news.evidence.builds))
    restart.push("evidence.builds");
  if (JSON.stringify(olds.evidence?.models) !== JSON.stringify(news.evidence.models))
    restart.push("evidence.models");
  if (olds.apiKeySha256 !== keyDigest(news.apiKey)) restart.push("apiKey");
  // The program may leave standby out: absent is a serving server, as `false` is.
  if (Boolean(olds.standby) !== Boolean(news.standby)) restart.push("standby");
  if (olds.drift.length > 0) restart.push("drift");
  record.push(...changedKeys(olds, news, RECORD_KEYS));
  return { restart, record };
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

/**
 * The server's refresh is judged by its status (what a boot or an explained restart renews left
 * out: steadyUnit), health and drift: the same verdict keeps the state `up` wrote.
 */
export function serverVerdict(o: Pick<LlamaServerOutputs, "status" | "health" | "drift">) {
  // State a test or an older sparkform wrote may have no status: it is judged as it is.
  const s = o.status as LlamaServerOutputs["status"] | undefined;
  return {
    status: s && {
      ...s,
      unit: steadyUnit(s.unit),
      ...(s.guard ? { guard: steadyUnit(s.guard) } : {}),
    },
    health: o.health,
    drift: o.drift,
  };
}

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
    ...(o.status.boot ? { boot: o.status.boot } : {}),
    expectedDigest: o.expectedDigest,
    bind: o.bind,
    guardOn: o.guardOn,
    served:
      h.status !== 200 && u.ActiveState === "active"
        ? [`GET /health answers ${h.status || "nothing"} ${h.body}`]
        : [],
  });
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
      `the worker ${w.node} (${w.endpoint}) computed ${c.graphCompute} graphs and reused none after the first ` +
      `(no [graph_recompute] after the first [graph_compute] in ${log}` +
      (c.graphRecompute > 0 ? `; its ${c.graphRecompute} came before it, another client's` : "") +
      "): the decode fast path is off, " +
      "every token re-sends its graph. Check that the worker and the client run the same build."
    );
  return null;
}
