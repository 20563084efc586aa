// What the worker's refresh and diff judge: its health and drift, what a refresh is judged by,
// the cache's verdict, and which changed inputs restart the worker, re-warm its cache or only
// rewrite state. Reads the current shape: older state is upgraded first (state-upgrade.ts).
import { changedKeys } from "../providers/diff";
import { programsChange } from "../unit/programs";
import { type Started, steadyUnit, type UnitBoot, unitDrift } from "../unit/status";
import { CACHE_DIR } from "./commands";
import type { CachePrune, ProbeResult } from "./node-output";
import type { Health, RpcWorkerInputs, RpcWorkerOutputs, TensorCache, WorkerStatus } from "./state";

/** The verdict state keeps from a prune (or a check): the bound and the drift, not the bytes. */
export function tensorCacheOf(p: CachePrune): TensorCache {
  return {
    maxBytes: p.maxBytes,
    derived: p.derived,
    drift: cacheDrift(p, p.derived ? "derived" : "configured"),
  };
}

/**
 * What a worker's refresh is judged by: its units, binaries, sockets listened on, protocol,
 * devices, health state, transport and drift. Not the readings that move while nothing
 * changes: memory, log lines, the client's ephemeral ports, free device memory, health detail.
 */
export function workerVerdict(o: RpcWorkerOutputs) {
  const { memory: _m, log: _l, guardLog: _g, established: _e, tail: _t, ...status } = o.status;
  return {
    status: {
      ...status,
      worker: steadyUnit(status.worker),
      ...(status.guard ? { guard: steadyUnit(status.guard) } : {}),
    },
    version: o.version,
    clientVersion: o.clientVersion,
    digest: o.digest,
    devices: o.deviceMemory.map((d) => [d.device, d.total]),
    health: o.health.state,
    transport: o.transport,
    drift: o.drift,
    tensorCache: o.tensorCache ?? null,
  };
}

/**
 * Inputs whose change is an update; all but PREWARM_KEYS restart the worker, and `programs`
 * only when a program changed other than by a declared upgrade (components/unit/programs.ts).
 */
export const DIFF_KEYS = [
  "providerVersion",
  "target",
  "client",
  "bind",
  "port",
  "threads",
  "devices",
  "cache",
  "cacheMaxBytes",
  "debug",
  "rssLimitPercent",
  "rssIntervalSeconds",
  "binary",
  "workerBuild",
  "clientBuild",
  "programs",
  "prewarm",
] as const;

/** Inputs whose change re-warms and re-bounds the cache beside the running worker. */
export const PREWARM_KEYS: readonly string[] = ["prewarm", "cacheMaxBytes"];

/**
 * Inputs whose change only rewrites state: the worker keeps running (its owner is recorded on
 * the running unit first, components/unit/owner.ts).
 */
export const RECORD_KEYS = ["owner"] as const;

/** The changed inputs by what they do: restart the worker, re-warm its cache, or rewrite state. */
export function workerChanges(
  olds: RpcWorkerOutputs,
  news: RpcWorkerInputs,
): { restart: string[]; prewarm: string[]; record: string[] } {
  const restart: string[] = [];
  const prewarm: string[] = [];
  const record: string[] = [];
  for (const k of changedKeys(olds, news, [...DIFF_KEYS, ...RECORD_KEYS])) {
    if (k === "programs") {
      const c = programsChange(olds.programs, news.programs);
      if (c !== "none") (c === "restart" ? restart : record).push(k);
    } else if ((RECORD_KEYS as readonly string[]).includes(k)) record.push(k);
    else (PREWARM_KEYS.includes(k) ? prewarm : restart).push(k);
  }
  return { restart, prewarm, record };
}

/** The cache needs `up` without a restart: over its bound, or on with no bound recorded yet. */
export function cacheDrifted(olds: RpcWorkerOutputs, news: RpcWorkerInputs): boolean {
  if (!news.cache || !olds.cache) return false;
  return olds.tensorCache == null || olds.tensorCache.drift.length > 0;
}

/** What `up` does to a worker whose state is `olds` for the inputs `news`. */
export type UpdateKind = "restart" | "prewarm" | "record" | "none";

/**
 * Only the model or the cache's bound changed, or the cache is over its bound: re-warm and
 * prune the cache beside the running server, which reads entries from disk per
 * SET_TENSOR_HASH, so the unit, its loaded state and the entries of unchanged tensors stay
 * (issue 13). Only the owner or a declared upgrade of a program: state is rewritten. A drifted
 * worker is restarted whatever changed.
 */
export function updateKind(olds: RpcWorkerOutputs, news: RpcWorkerInputs): UpdateKind {
  const c = workerChanges(olds, news);
  if (olds.drift.length > 0 || c.restart.length > 0) return "restart";
  if (c.prewarm.length > 0 || cacheDrifted(olds, news)) return "prewarm";
  return c.record.length > 0 ? "record" : "none";
}

const gb = (b: number) => `${(b / 1e9).toFixed(b < 1e9 ? 3 : 1)} GB`;

/**
 * The drift line of a cache over its bound (prune.py --check's reading), with both numbers and
 * what `up` will do; [] within the bound. What `up` cannot delete (the server's own entries,
 * other workers', the staged model's) is named with the two ways out.
 */
export function cacheDrift(p: CachePrune, configured: "derived" | "configured"): string[] {
  if (!p.over) return [];
  const where = `the tensor cache (${CACHE_DIR})`;
  const bound = `its bound ${gb(p.maxBytes)} (${p.maxBytes} bytes, sparkform:worker.cacheMaxBytes${configured === "derived" ? ", derived at the last `up`" : ""})`;
  const deletes = [
    ...(p.tempsDeleted
      ? [`${p.tempsDeleted} temporary files a killed pre-warm left (${gb(p.tempBytes ?? 0)})`]
      : []),
    p.deleted > 0
      ? `${p.deleted} least-recently-used entries sparkform created that nothing references (${gb(p.deletedBytes)}, by ${p.clock})`
      : "no entry",
  ];
  const does =
    deletes.length > 1 || p.deleted > 0
      ? `\`up\` deletes ${deletes.join(" and ")}`
      : "`up` can delete nothing: no entry sparkform created is unreferenced";
  const rest = p.stillOver
    ? `; the cache stays over by ${gb(p.bytesAfter - p.maxBytes)}: ${gb(p.neededBytes)} are the staged model's and ` +
      `${gb(p.keptBytes)} are ggml-rpc-server's own entries or other workers', which sparkform never deletes: ` +
      "raise sparkform:worker.cacheMaxBytes (0 = no bound), or delete unused entries by hand"
    : `, which brings it to ${gb(p.bytesAfter)}`;
  return [
    `${where} holds ${gb(p.bytesBefore)} (${p.bytesBefore} bytes), over ${bound}: ${does}${rest}`,
  ];
}

/** The client's peers as `addr` of `addr:port`. */
export function peerAddress(established: string): string {
  return established.replace(/:\d+$/, "");
}

/** The cluster's client connection the worker serves (`addr:port`), if it holds the worker. */
export function heldBy(
  status: Pick<WorkerStatus, "established">,
  clientAddress: string,
): string | undefined {
  return status.established.find((e) => peerAddress(e) === clientAddress);
}

/**
 * What a probe plus the worker's socket table say. No answer while the cluster's own client
 * (at `clientAddress`) holds the one connection the server serves is healthy: "busy: serving".
 */
export function judgeHealth(
  probe: ProbeResult,
  status: Pick<WorkerStatus, "established">,
  clientAddress: string,
): Health {
  if (probe.ok) {
    const devs = (probe.devices ?? [])
      .map((d) => `device ${d.device}: ${mib(d.free)} of ${mib(d.total)} MiB free`)
      .join(", ");
    return { state: "ok", detail: `HELLO ${probe.version} from ${clientAddress}; ${devs}` };
  }
  // ggml-rpc-server serves one client and listens with a backlog of 1: while the cluster's
  // client holds it, a HELLO is queued unanswered ("no-answer") and, once two earlier probes
  // fill the accept queue, not even connected ("unreachable": the SYN is dropped). Both are
  // busy, not down, when that client is the one connected.
  const queued = probe.state === "no-answer" || probe.state === "unreachable";
  const own = heldBy(status, clientAddress);
  if (queued && own) {
    return {
      state: "busy",
      detail:
        probe.state === "no-answer"
          ? `busy: serving ${own}`
          : `busy: serving ${own} (its accept queue is full, so a HELLO is not connected until that client leaves)`,
    };
  }
  if (probe.state === "no-answer") {
    const other = status.established.filter((e) => peerAddress(e) !== clientAddress);
    return {
      state: "down",
      detail:
        other.length > 0
          ? `no answer to HELLO: serving ${other.join(", ")}, which is not the cluster's client (${clientAddress})`
          : `no answer to HELLO and no client connected: the server is wedged (${probe.error ?? ""})`,
    };
  }
  return { state: "down", detail: `${probe.state}: ${probe.error ?? "no detail"}` };
}

const mib = (b: number) => Math.round(b / 2 ** 20);

/** Why the measured worker is not the one `up` started, or [] when it is (drift reasons). */
export function driftReasons(o: {
  status: WorkerStatus;
  started: Started;
  boot?: UnitBoot;
  expectedDigest: string;
  bind: string;
  guardOn: boolean;
}): string[] {
  const r = unitDrift({
    words: { what: "worker", binary: "binary", guarded: "the worker" },
    status: { ...o.status, unit: o.status.worker },
    started: o.started,
    ...(o.boot ? { boot: o.boot } : {}),
    expectedDigest: o.expectedDigest,
    bind: o.bind,
    guardOn: o.guardOn,
  });
  const strays = o.status.others ?? [];
  if (strays.length > 0)
    r.push(`another sparkform worker runs on the node: ${strays.join(", ")} (one worker per node)`);
  return r;
}
