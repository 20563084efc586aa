// RpcWorker's dynamic-provider implementation: ggml-rpc-server from the verified build as a
// an enabled systemd user unit on the worker node, bound to its fabric address, with the RSS guard
// beside it; health is a real RPC HELLO from the client node over the fabric.
//
//   start    native/unit/start.sh (the server's too): refuses a binary whose sha256 is not
//            the client build's, an address the node does not have, and one on the management
//            session's interface; starts worker and guard
//   status   native/unit/status.py: units, running binary's digest, socket table, log
//   health   native/rpc-worker/rpc-hello.py on the client: HELLO, DEVICE_COUNT, GET_DEVICE_MEMORY
//   identity version (patch included) and digest equal to the client build's, else the worker
//            is stopped again and the error names both builds: no client ever uses it
import type * as pulumi from "@pulumi/pulumi";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys, steadyReading } from "../providers/diff";
import { progress } from "../providers/progress";
import { withStateUpgrade } from "../providers/state-upgrade";
import { openNode, RemoteCommandError, type SshTarget } from "../transport";
import { ownerOf, type UnitOwner } from "../unit/commands";
import { claimUnit, leftRunning, type OwnerCheck, unitHeldBy } from "../unit/owner";
import { ownerDrift, startedOf, type UnitBoot } from "../unit/status";
import {
  guardUnitName,
  probeCommand,
  prewarmCommand,
  pruneCommand,
  startCommand,
  statusCommand,
  stopClientsCommand,
  stopCommand,
  unitName,
} from "./commands";
import {
  parseProbe,
  parseWorkerReading,
  stoppedUnits,
  type CachePrune,
  parseCachePrune,
  parsePrewarm,
  type ProbeResult,
  workerTransport,
} from "./node-output";
import { identityMismatch } from "./gate";
import type {
  RpcWorkerInputs,
  RpcWorkerOutputs,
  Health,
  Prewarm,
  TensorCache,
  WorkerStatus,
} from "./state";
import { upgrade } from "./state-upgrade";
import {
  cacheDrifted,
  DIFF_KEYS,
  RECORD_KEYS,
  tensorCacheOf,
  updateKind,
  workerChanges,
  workerVerdict,
  driftReasons,
  heldBy,
  judgeHealth,
} from "./verdicts";

export type { RpcWorkerInputs, RpcWorkerOutputs } from "./state";
export {
  cacheDrifted,
  DIFF_KEYS,
  PREWARM_KEYS,
  RECORD_KEYS,
  tensorCacheOf,
  type UpdateKind,
  updateKind,
  workerChanges,
  workerVerdict,
} from "./verdicts";

const tag = (t: SshTarget) => `[${t.name}] rpc-worker`;

async function status(i: RpcWorkerInputs): Promise<WorkerStatus> {
  return (await statusAndOwner(i)).status;
}

/** status.py: the worker's status, and the stack its unit records (refresh's drift). */
async function statusAndOwner(
  i: RpcWorkerInputs,
): Promise<{ status: WorkerStatus; owner: string; boot: UnitBoot | undefined }> {
  const r = await openNode(i.target).run(statusCommand(i), {
    step: "rpc-worker status",
    timeoutMs: 60_000,
  });
  return parseWorkerReading(r.stdout, i.target.name);
}

/** The owner check of the worker's unit (`was`: the owner state recorded, on an update). */
const ownerCheck = (
  i: Pick<RpcWorkerInputs, "target" | "port" | "programs" | "owner">,
  was?: string,
): OwnerCheck => ({
  role: "worker",
  port: i.port,
  what: "worker",
  target: i.target,
  owner: ownerOf("worker", i, was),
  programs: i.programs,
  tag: tag(i.target),
});

async function probe(i: RpcWorkerInputs, timeoutS = 5): Promise<ProbeResult> {
  const r = await openNode(i.client.target).run(probeCommand(i, i.client.target.name, timeoutS), {
    step: "rpc-worker HELLO",
    timeoutMs: (timeoutS * 4 + 30) * 1000,
  });
  return parseProbe(r.stdout, i.client.target.name);
}

async function stop(
  i: Pick<RpcWorkerInputs, "target" | "port" | "programs" | "owner">,
): Promise<void> {
  await openNode(i.target).run(stopCommand(i), { step: "rpc-worker stop", timeoutMs: 60_000 });
}

/**
 * Before the worker restarts or stops, on every path (a new build, a repaired artifact, a
 * setting, drift): the servers on the client node that use it stop first. A client holds its
 * RPC connections for its lifetime and upstream aborts it on its next request to a worker that
 * went away; stopped, it answers nothing until `up` starts it again after the worker (the
 * LlamaServer takes each worker's invocation id as an input, so a new one is a server update).
 */
async function stopClients(
  i: Pick<RpcWorkerInputs, "target" | "client" | "bind" | "port" | "fabricAddresses" | "programs">,
  why: string,
): Promise<void> {
  const r = await openNode(i.client.target).run(stopClientsCommand(i), {
    step: "rpc-worker clients stop",
    timeoutMs: 60_000,
  });
  const units = stoppedUnits(r.stdout);
  if (units.length > 0)
    await progress(
      `${tag(i.target)}: ${units.join(", ")} on ${i.client.target.name} stopped first: ${why}; \`up\` starts it again after the worker`,
    );
}

/**
 * Write the cache entries of the configured model files (verified by SHA-256 on the node) and
 * remove the entries sparkform wrote that no configured file references; no files = prune all.
 * With `retain` (a cache bound in force), those entries stay, unreferenced, for prune.py's
 * least-recently-used order under the bound.
 */
async function prewarm(
  i: Pick<RpcWorkerInputs, "target" | "port" | "programs">,
  files: RpcWorkerInputs["prewarm"],
  retain = false,
): Promise<Prewarm> {
  const r = await openNode(i.target).run(prewarmCommand(i, files, retain), {
    step: "rpc-worker pre-warm",
    timeoutMs: 60 * 60_000,
    okExitCodes: [0, 3],
  });
  const out = parsePrewarm(r.stdout, i.target.name);
  if ("error" in out) throw new Error(`${tag(i.target)}: pre-warm refused: ${out.error}`);
  return out;
}

/**
 * prune.py on the worker: hold the tensor cache under `bound` (after a pre-warm, so the staged
 * model's entries are the manifest's), or with `check` only say what a prune would do.
 */
async function prune(
  i: Pick<RpcWorkerInputs, "target" | "port" | "programs">,
  bound: number | "auto" | "all",
  check = false,
): Promise<CachePrune> {
  const r = await openNode(i.target).run(pruneCommand(i, bound, check), {
    step: "rpc-worker cache prune",
    timeoutMs: 10 * 60_000,
    okExitCodes: [0, 3],
  });
  const out = parseCachePrune(r.stdout, i.target.name);
  if ("error" in out) throw new Error(`${tag(i.target)}: tensor-cache prune refused: ${out.error}`);
  return out;
}

const retainedNote = (p: Prewarm) =>
  p.retained
    ? `, ${p.retained} no longer needed left to the bound's least-recently-used order`
    : "";

/** A bound is in force (configured, or derived when absent): entries no model needs may stay. */
const bounded = (i: Pick<RpcWorkerInputs, "cacheMaxBytes">) => i.cacheMaxBytes !== 0;

/** After a pre-warm, on `up`: the cache held under its bound; null with the cache off. */
async function bound(i: RpcWorkerInputs): Promise<TensorCache | null> {
  if (!i.cache) return null;
  const p = await prune(i, i.cacheMaxBytes ?? "auto");
  if (p.deleted > 0 || p.over || (p.tempsDeleted ?? 0) > 0)
    await progress(
      `${tag(i.target)}: tensor cache ${Math.round(p.bytesBefore / 2 ** 20)} MiB, bound ${Math.round(p.maxBytes / 2 ** 20)} MiB` +
        `${p.derived ? " (derived)" : ""}: ${p.deleted} least-recently-used entries sparkform created deleted (${Math.round(p.deletedBytes / 2 ** 20)} MiB, by ${p.clock})` +
        `${p.tempsDeleted ? `, and ${p.tempsDeleted} temporary files a killed pre-warm left (${Math.round((p.tempBytes ?? 0) / 2 ** 20)} MiB)` : ""}` +
        `${p.stillOver ? `; still over: ${Math.round(p.keptBytes / 2 ** 20)} MiB are entries sparkform never deletes (the server's own, other workers')` : ""}`,
    );
  // Recorded as `up` left it: the prune's own result, so a cache it brought under is no drift.
  return tensorCacheOf({ ...p, over: p.stillOver, bytesBefore: p.bytesAfter, deleted: 0 });
}

function measured(
  i: RpcWorkerInputs,
  st: WorkerStatus,
  p: ProbeResult | undefined,
  prev?: Pick<RpcWorkerOutputs, "version" | "clientVersion" | "deviceMemory">,
): Pick<
  RpcWorkerOutputs,
  "version" | "clientVersion" | "digest" | "deviceMemory" | "health" | "transport"
> {
  const health: Health = p
    ? judgeHealth(p, st, i.client.fabricAddress)
    : { state: "down", detail: "not probed: the unit is not running" };
  return {
    version: p?.version ?? prev?.version ?? "",
    clientVersion:
      typeof p?.clientVersion === "string" ? p.clientVersion : (prev?.clientVersion ?? ""),
    digest: st.runningDigest,
    deviceMemory: p?.devices ?? prev?.deviceMemory ?? [],
    health,
    transport: workerTransport(st),
  };
}

async function converge(i: RpcWorkerInputs, was?: string): Promise<RpcWorkerOutputs> {
  const who = tag(i.target);
  const owner: UnitOwner | undefined = ownerOf("worker", i, was);
  const endpoint = `${i.bind}:${i.port}`;
  // Identity before anything starts: the worker's build must be the client's, byte for byte.
  if (i.workerBuild.digest !== i.clientBuild.digest) {
    throw new Error(
      `${who}: not started: ${identityMismatch({
        worker: {
          node: i.target.name,
          digest: i.workerBuild.digest,
          installDir: i.workerBuild.installDir,
          version: "",
          ...(i.buildInputs ? { build: i.buildInputs.worker } : {}),
        },
        client: {
          node: i.client.target.name,
          digest: i.clientBuild.digest,
          installDir: i.clientBuild.installDir,
          version: "",
          ...(i.buildInputs ? { build: i.buildInputs.client } : {}),
        },
      })
        .slice(1)
        .join("; ")}.`,
    );
  }
  // Another stack's worker on this port: refused before its pre-warm manifest is written.
  await claimUnit(ownerCheck(i, was));
  // Before the server starts, so the first load already finds every entry.
  const prewarmed = i.cache ? await prewarm(i, i.prewarm, bounded(i)) : null;
  const tensorCache = await bound(i);
  if (prewarmed && prewarmed.entries > 0)
    await progress(
      `${who}: tensor cache pre-warmed: ${prewarmed.entries} entries (${Math.round(prewarmed.bytes / 2 ** 20)} MiB; ${prewarmed.written} written, ${prewarmed.reused} kept, ${prewarmed.pruned} pruned${retainedNote(prewarmed)})`,
    );
  await stopClients(
    i,
    "the worker (re)starts, and a client of the old one aborts on its next request",
  );
  try {
    await openNode(i.target).run(startCommand(i, owner), {
      step: "rpc-worker start",
      timeoutMs: 120_000,
    });
  } catch (err) {
    if (err instanceof RemoteCommandError && err.exitCode === 7) {
      throw new Error(
        `${who}: not started: ${i.binary} on ${i.target.name} is not the client ${i.client.target.name}'s build ` +
          `(${i.clientBuild.installDir}, sha256 ${i.clientBuild.digest}): ${err.outputTail.trim()}. ` +
          "Rebuild with `pulumi up --refresh` so both nodes install the same verified build.",
        { cause: err },
      );
    }
    throw err;
  }
  const st = await status(i);
  const p = await probe(i);
  const m = measured(i, st, p);
  const mismatch = p.ok
    ? identityMismatch({
        worker: {
          node: i.target.name,
          version: m.version,
          digest: st.runningDigest,
          installDir: i.workerBuild.installDir,
          ...(i.buildInputs ? { build: i.buildInputs.worker } : {}),
        },
        client: {
          node: i.client.target.name,
          version: m.clientVersion || undefined,
          digest: i.clientBuild.digest,
          installDir: i.clientBuild.installDir,
          ...(i.buildInputs ? { build: i.buildInputs.client } : {}),
        },
      })
    : [];
  if (!p.ok || mismatch.length > 0) {
    // Nothing may connect to a worker that failed its check: stop it before reporting.
    await stop(i).catch(() => undefined);
    throw new Error(
      p.ok
        ? `${who}: the worker at ${endpoint} is not the client's build, so it was stopped: ${mismatch.join("; ")}. ` +
            "Make the two builds the same (what differs is said above) and `pulumi up --refresh`."
        : `${who}: the worker at ${endpoint} did not answer a HELLO from ${i.client.target.name} (${m.health.detail}); it was stopped. ` +
            `Its log:\n${st.log.slice(-20).join("\n")}`,
    );
  }
  await progress(
    `${who}: ${endpoint} ${m.health.detail}; transport ${m.transport.transport} (${m.transport.evidence ?? "no line"})`,
  );
  return {
    ...i,
    endpoint,
    unit: unitName(i.port),
    guardUnit: guardUnitName(i.port),
    status: st,
    started: startedOf(st.worker),
    ...m,
    prewarmed,
    tensorCache,
    drift: [],
  };
}

export async function create(
  inputs: RpcWorkerInputs,
): Promise<pulumi.dynamic.CreateResult<RpcWorkerOutputs>> {
  return { id: `${inputs.target.name}:rpc-worker:${inputs.port}`, outs: await converge(inputs) };
}

/** Refresh: the units, the running binary, the socket table, a HELLO (busy is healthy). */
export async function read(
  id: string,
  props: RpcWorkerOutputs,
): Promise<pulumi.dynamic.ReadResult<RpcWorkerOutputs>> {
  const { status: st, owner, boot } = await statusAndOwner(props);
  const running = st.worker.ActiveState === "active";
  // The worker serves one client: while the cluster's client holds it, a HELLO waits its
  // whole timeout unanswered and tells no more than the socket table already did (busy).
  const holder = running ? heldBy(st, props.client.fabricAddress) : undefined;
  const p = !running
    ? undefined
    : holder
      ? ({
          endpoint: props.endpoint,
          ok: false,
          state: "no-answer",
          error: `not asked: ${holder} holds the worker`,
        } satisfies ProbeResult)
      : await probe(props);
  const drift = driftReasons({
    status: st,
    started: props.started,
    boot,
    expectedDigest: props.clientBuild.digest,
    bind: props.bind,
    guardOn: props.rssLimitPercent > 0,
  });
  if (p && !p.ok && judgeHealth(p, st, props.client.fabricAddress).state === "down")
    drift.push(`no HELLO answer: ${p.error ?? p.state}`);
  drift.push(...ownerDrift(unitName(props.port), props.target.name, props.owner, owner));
  // The cache against the bound `up` recorded (a derived bound is not derived again here).
  const tc = props.tensorCache;
  const tensorCache =
    props.cache && tc && tc.maxBytes > 0 && props.programs?.prune
      ? tensorCacheOf(await prune(props, tc.maxBytes, true))
      : tc;
  const fresh = {
    ...props,
    status: st,
    ...measured(props, st, p, props),
    drift,
    ...(tensorCache === undefined ? {} : { tensorCache }),
  };
  return { id, props: steadyReading(props, fresh, workerVerdict) };
}

export async function diff(
  _id: string,
  olds: RpcWorkerOutputs,
  news: RpcWorkerInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const c = workerChanges(olds, news);
  const changed = changedKeys(olds, news, [...DIFF_KEYS, ...RECORD_KEYS]).filter((k) =>
    [...c.restart, ...c.prewarm, ...c.record].includes(k),
  );
  const drifted = olds.drift.length > 0;
  const all = [
    ...changed,
    ...(drifted ? ["drift"] : []),
    ...(cacheDrifted(olds, news) ? ["tensorCache"] : []),
  ];
  return { changes: all.length > 0, replaces: [], ...(all.length > 0 ? { diffs: all } : {}) };
}

export async function update(
  _id: string,
  olds: RpcWorkerOutputs,
  news: RpcWorkerInputs,
): Promise<pulumi.dynamic.UpdateResult<RpcWorkerOutputs>> {
  const kind = updateKind(olds, news);
  if (kind !== "restart") {
    // Before the pre-warm writes the port's manifest: another stack's worker there is refused,
    // and one an older sparkform started gets this stack's record, live.
    await claimUnit(ownerCheck(news, olds.owner));
    // A bound removed from config is gone from state too (not kept from `olds`).
    const { cacheMaxBytes: _bound, ...kept } = olds;
    if (kind === "record" || kind === "none") {
      await progress(
        `${tag(news.target)}: ${workerChanges(olds, news).record.join(", ") || "nothing"} recorded in state; unit not restarted`,
      );
      return { outs: { ...kept, ...news } };
    }
    const prewarmed = news.cache ? await prewarm(news, news.prewarm, bounded(news)) : null;
    const tensorCache = await bound(news);
    await progress(
      `${tag(news.target)}: tensor cache re-warmed and bounded beside the running worker ` +
        `(${prewarmed ? `${prewarmed.entries} entries; ${prewarmed.written} written, ${prewarmed.reused} kept, ${prewarmed.pruned} pruned${retainedNote(prewarmed)}` : "cache off"}); unit not restarted`,
    );
    return { outs: { ...kept, ...news, prewarmed, tensorCache } };
  }
  // A new port or node leaves the old unit behind: stop it first (unless another stack's
  // worker holds that port now: it is left, with its clients and its cache references).
  if (olds.port !== news.port || olds.target.name !== news.target.name) {
    const held = await unitHeldBy(ownerCheck(olds));
    if (held) await leftRunning(ownerCheck(olds), held);
    else {
      await stopClients(olds, "the worker moves to another port or node");
      // The old port's references go with it, so its cache entries no one else uses go too.
      if (olds.cache && olds.programs?.prewarm) await prewarm(olds, []);
      await stop(olds);
    }
  }
  return { outs: await converge(news, olds.owner) };
}

/** Destroy stops worker and guard and waits until nothing listens on the port. */
async function deleteWorker(_id: string, props: RpcWorkerOutputs): Promise<void> {
  // Another stack's worker on the port (it took the port since): left, with its clients, its
  // pre-warm manifest and its cache entries.
  const held = await unitHeldBy(ownerCheck(props));
  if (held) return leftRunning(ownerCheck(props), held);
  // The cache entries sparkform wrote go too (the server's own stay: they are the user's), and
  // those a bound kept with no reference (prewarm.py --retain).
  if (props.programs?.prewarm) await prewarm(props, []);
  if (props.programs?.prune) await prune(props, "all");
  await stopClients(props, "the worker is deleted");
  await stop(props);
}
export { deleteWorker as delete };

export const provider = withStateUpgrade(
  {
    create,
    read,
    diff,
    update,
    delete: deleteWorker,
  } satisfies ProviderImpl<RpcWorkerInputs, RpcWorkerOutputs>,
  upgrade,
);
