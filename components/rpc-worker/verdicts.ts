// What the worker's refresh and diff judge: what a refresh is judged by, the cache's verdict,
// and which changed inputs restart the worker, re-warm its cache or only rewrite state. Reads
// the current shape: older state is upgraded first (state-upgrade.ts).
import { changedKeys } from "../providers/diff";
import { programsChange } from "../unit/programs";
import { cacheDrift, type CachePrune, type TensorCache } from "./plan";
import type { RpcWorkerInputs, RpcWorkerOutputs } from "./state";

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
    status,
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
