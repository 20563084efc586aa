// LlamaServer's dynamic-provider implementation: llama-server from the client node's verified
// build as an enabled systemd user unit with the plan's flags, then proof that the model landed
// where the plan says, then a smoke generation compared token for token with a single-node run.
//
//   start      native/unit/start.sh (the worker's too): refuses a binary whose sha256 is not
//              the build's and an address the node does not have; starts the RSS guard
//              beside the server (native/unit/rss-guard.py); waits for GET /health = 200
//   placement  native/unit/status.py: the log's `load_tensors:` lines, against plan.layers;
//              a device without its model buffer or a layer elsewhere fails the create
//   smoke      native/serving/smoke.py on the client: a streamed chat timed to its first token
//              (readiness, with start.sh's seconds to port and /health), /completion (greedy,
//              token ids), one token each of the Anthropic Messages and OpenAI Responses APIs
//              (smoke.py --apis: a verdict, components/serving/apis.ts), then the same
//              /completion on a reference llama-server without --rpc, stopped afterwards
//   fast path  native/serving/worker-log.py on each worker: `[graph_recompute]` after the
//              first `[graph_compute]` in the worker's GGML_RPC_DEBUG log
import type * as pulumi from "@pulumi/pulumi";
import type { ProviderImpl } from "../providers/delegate";
import { steadyReading } from "../providers/diff";
import { progress } from "../providers/progress";
import { withStateUpgrade } from "../providers/state-upgrade";
import { openNode, RemoteCommandError, type SshTarget } from "../transport";
import { keyDigest } from "../unit/api-key";
import { ownerOf, parseUnitStartTimings } from "../unit/commands";
import { claimUnit, type OwnerCheck, refusedByOwner } from "../unit/owner";
import { ownerDrift, startedOf } from "../unit/status";
import { apiVerdicts, describeApis } from "./apis";
import {
  apisSmokeCommand,
  referenceSmokeCommand,
  referenceStartCommand,
  referenceStopCommand,
  smokeCommand,
  startCommand,
  workerLogCommand,
  referencePort,
  serverStatusCommand,
  serverStopCommand,
  serverUrl,
} from "./commands";
import {
  type CompletionRun,
  parseApiProbes,
  parseReferenceRun,
  parseServerStatus,
  parseSmoke,
  parseWorkerLog,
  parseWorkerLogSize,
  parsePlacement,
} from "./node-output";
import type {
  LlamaServerInputs,
  LlamaServerOutputs,
  MeasuredServer,
  Readiness,
  ServingWorker,
  SmokeOutput,
  ServerStatus,
  WireEnd,
} from "./state";
import { rolled } from "./roll";
import { upgrade } from "./state-upgrade";
import { type ServingPlan, referenceFits } from "./placement";
import {
  serverChanges,
  describePlanned,
  describeSeen,
  placementMismatch,
  serverDrift,
  serverVerdict,
  unreachedWorkers,
  wireEnds,
  wireProofFailure,
  wireRailNote,
  workerLogFailure,
} from "./verdicts";

export type {
  LlamaServerInputs,
  LlamaServerOutputs,
  MeasuredServer,
  Readiness,
  ServingEvidence,
  ServingWorker,
  SmokeOutput,
} from "./state";
export { startCommand } from "./commands";
export { RECORD_KEYS, RESTART_KEYS, serverChanges } from "./verdicts";

const measured = ({
  log: _log,
  owner: _owner,
  boot: _boot,
  ...rest
}: ServerStatus): MeasuredServer => rest;

const tag = (t: SshTarget) => `[${t.name}] llama-server`;

export { serverUrl };

async function status(i: Omit<LlamaServerInputs, "apiKey">): Promise<ServerStatus> {
  const r = await openNode(i.target).run(serverStatusCommand(i, i.programs), {
    step: "llama-server status",
    timeoutMs: 60_000,
  });
  return parseServerStatus(r.stdout, i.target.name);
}

/** The owner check of the server's unit (`was`: the owner state recorded, on an update). */
const ownerCheck = (
  i: Pick<LlamaServerInputs, "target" | "port" | "programs" | "owner">,
  was?: string,
): OwnerCheck => ({
  role: "server",
  port: i.port,
  what: "server",
  target: i.target,
  owner: ownerOf("server", i, was),
  programs: i.programs,
  tag: tag(i.target),
});

async function stop(
  i: Pick<LlamaServerInputs, "target" | "port" | "programs" | "owner">,
): Promise<void> {
  await openNode(i.target).run(serverStopCommand(i.port, i.programs, undefined, i.owner), {
    step: "llama-server stop",
    timeoutMs: 60_000,
  });
}

/** worker-log.py on a worker (commands.ts workerLogCommand): its stdout. */
async function workerLogRun(
  w: ServingWorker,
  programs: LlamaServerInputs["programs"],
  from: string,
) {
  const r = await openNode(w.target).run(workerLogCommand(w, programs, from), {
    step: "rpc worker log",
    timeoutMs: 120_000,
  });
  return r.stdout;
}

const workerLogSize = async (w: ServingWorker, programs: LlamaServerInputs["programs"]) =>
  parseWorkerLogSize(await workerLogRun(w, programs, "size"), w.target.name);

const workerLogCounts = async (
  w: ServingWorker,
  programs: LlamaServerInputs["programs"],
  from: number,
) => parseWorkerLog(await workerLogRun(w, programs, String(from)), w.target.name);

/** Both placements, for every message that refuses one. */
function placements(plan: ServingPlan, st: ServerStatus): string {
  return `planned: ${describePlanned(plan)}; seen in the log: ${describeSeen(parsePlacement(st.log))}`;
}

/** start.sh's timings: seconds from the unit's start to its port listening and to /health = 200. */
type StartTimings = Pick<Readiness, "portOpenSeconds" | "healthSeconds">;

async function start(i: LlamaServerInputs, was?: string): Promise<StartTimings> {
  const who = tag(i.target);
  let stdout: string;
  try {
    ({ stdout } = await openNode(i.target).run(startCommand(i, was), {
      step: "llama-server start",
      timeoutMs: (i.healthTimeoutSeconds + 120) * 1000,
    }));
  } catch (err) {
    if (!(err instanceof RemoteCommandError)) throw err;
    const taken = refusedByOwner(err, ownerCheck(i, was));
    if (taken) throw taken;
    if (err.exitCode === 7)
      throw new Error(
        `${who}: not started: ${i.binary} is not the verified build's (sha256 ${i.binaryDigest}): ${err.outputTail.trim()}. ` +
          "Rebuild with `pulumi up --refresh`.",
        { cause: err },
      );
    if (err.exitCode === 6) {
      // The log stays until the next start: read where the model got before it stopped.
      const st = await status(i).catch(() => undefined);
      const seen = st ? parsePlacement(st.log) : undefined;
      const unreached = st ? unreachedWorkers(i.plan, st.log) : [];
      const missing = unreached.length ? unreached : seen ? placementMismatch(i.plan, seen) : [];
      throw new Error(
        `${who}: the server did not come up on ${i.node}, so nothing serves: ` +
          `${missing.length ? missing.join("; ") : "see its log"}. ` +
          `${st ? placements(i.plan, st) : ""}. ` +
          "Check that every worker is running (`sparkform server status`, the worker stage's health) and `up` again.\n" +
          err.outputTail.trim(),
        { cause: err },
      );
    }
    throw err;
  }
  try {
    const t = parseUnitStartTimings(stdout, i.target.name, true);
    return { portOpenSeconds: t.portOpenSeconds, healthSeconds: t.healthSeconds ?? 0 };
  } catch (err) {
    // A start.sh that did not say when the server came up is not the program sent: stop it.
    await stop(i).catch(() => undefined);
    throw err;
  }
}

/**
 * The smoke's single-node reference: started by start.sh as every supervised server is (the
 * build's digest checked, a port someone else holds refused), asked one /completion, stopped
 * whatever happened.
 */
async function referenceRun(i: LlamaServerInputs): Promise<CompletionRun> {
  const node = openNode(i.target);
  const refPort = referencePort(i.port);
  try {
    await node
      .run(referenceStartCommand(i, refPort), {
        step: "single-node reference start",
        timeoutMs: (i.healthTimeoutSeconds + 60) * 1000,
      })
      .catch((err: unknown) => {
        // Only a reference this stack starts may answer for one node alone: never ask another's.
        if (err instanceof RemoteCommandError && err.exitCode === 5)
          throw new Error(
            `${tag(i.target)}: the single-node reference needs 127.0.0.1:${refPort} (the server's port + 1), ` +
              "and something else listens there: free that port or move the server's sparkform:server.port",
            { cause: err },
          );
        throw err;
      });
    const r = await node.run(referenceSmokeCommand(i, refPort), {
      step: "single-node reference smoke",
      timeoutMs: 600_000,
    });
    return parseReferenceRun(r.stdout, i.target.name);
  } finally {
    await node.run(referenceStopCommand(i, refPort), {
      step: "single-node reference stop",
      timeoutMs: 60_000,
    });
  }
}

async function smoke(i: LlamaServerInputs, started: StartTimings): Promise<SmokeOutput> {
  const who = tag(i.target);
  const sizes = await Promise.all(i.workers.map((w) => workerLogSize(w, i.programs)));
  const skip = referenceFits(i.plan);
  const r = await openNode(i.target).run(smokeCommand(i), {
    step: "llama-server smoke",
    timeoutMs: 600_000,
  });
  const run = parseSmoke(r.stdout, i.target.name);
  const counts = await Promise.all(
    i.workers.map((w, k) => workerLogCounts(w, i.programs, sizes[k]?.size ?? 0)),
  );
  // After the counts (the wire proof and the fast path judge the smoke's own requests).
  const probes = parseApiProbes(
    (
      await openNode(i.target).run(apisSmokeCommand(i), {
        step: "llama-server API check",
        timeoutMs: 600_000,
      })
    ).stdout,
    i.target.name,
  );
  // After the server's requests (the reference's load is not in their timing or byte counts).
  const reference = skip ? undefined : await referenceRun(i);
  const client: WireEnd = {
    node: i.node,
    iface: run.fabric.ifaces.join("+"),
    bytes: run.fabric.rxBytes + run.fabric.txBytes,
  };
  const workerEnds = wireEnds(i.workers, sizes, counts);
  const ref = reference
    ? { tokens: reference.tokens, tokensPerSecond: reference.tokensPerSecond }
    : { tokens: [], tokensPerSecond: 0, skipped: skip ?? "" };
  const identical =
    !ref.skipped &&
    ref.tokens.length === run.tokens.length &&
    ref.tokens.every((t, k) => t === run.tokens[k]);
  const out: SmokeOutput = {
    tokens: run.tokens,
    tokensPerSecond: run.tokensPerSecond,
    chat: run.chat,
    reference: ref,
    identical,
    graphCompute: counts.reduce((a, c) => a + c.graphCompute, 0),
    graphRecompute: counts.reduce((a, c) => a + c.graphRecompute, 0),
    fabricBytes: i.workers.length ? client.bytes : 0,
    fabricEnds: i.workers.length ? [client, ...workerEnds] : [],
    readiness: { ...started, firstTokenSeconds: run.stream.firstTokenSeconds },
  };
  const { apis, failures: apiFailures } = apiVerdicts(probes);
  out.apis = apis;
  // What the smoke generated: the streamed chat's token events, /completion's and the chat's.
  const generated = run.stream.tokenEvents + run.tokens.length + run.chat.completionTokens;
  const offWire = wireProofFailure(client, workerEnds, {
    ...(i.fabricRails ? { rails: i.fabricRails } : {}),
    tokens: generated,
  });
  if (offWire) throw new Error(`${who}: ${offWire}`);
  const railNote = i.workers.length ? wireRailNote(i.fabricRails) : "";
  if (railNote) await progress(`${who}: wire proof: ${railNote}`);
  if (run.tokens.length === 0)
    throw new Error(`${who}: the smoke generation returned no tokens: ${JSON.stringify(run)}`);
  if (run.chat.completionTokens === 0)
    throw new Error(
      `${who}: the chat completion (/v1/chat/completions, what OpenAI clients call) generated nothing: ${JSON.stringify(run.chat)}`,
    );
  if (!ref.skipped && !identical)
    throw new Error(
      `${who}: the split generation is not the single-node one, token for token: split [${run.tokens.join(", ")}], ` +
        `${i.node} alone [${ref.tokens.join(", ")}]. A placement that computes different tokens must not serve; ` +
        "check that every node runs the same build (the builds-identical policy) and `up` again.",
    );
  counts.forEach((c, k) => {
    const failure = workerLogFailure(i.workers[k] as ServingWorker, c);
    if (failure) throw new Error(`${who}: ${failure}`);
  });
  if (apiFailures.length > 0) throw new Error(`${who}: ${apiFailures.join("\n")}`);
  return out;
}

/** A standby replica: whatever served on its port before is stopped; nothing is started. */
async function standBy(i: LlamaServerInputs): Promise<LlamaServerOutputs> {
  await stop(i);
  const { apiKey, ...rest } = i;
  await progress(`${tag(i.target)}: standby (${i.topology?.reason ?? "not in this topology"})`);
  return {
    ...rest,
    apiKeySha256: keyDigest(apiKey),
    url: "",
    health: "standby",
    placement: [],
    smoke: {
      tokens: [],
      tokensPerSecond: 0,
      chat: { completionTokens: 0, finishReason: "", characters: 0 },
      reference: { tokens: [], tokensPerSecond: 0, skipped: "standby" },
      identical: false,
      graphCompute: 0,
      graphRecompute: 0,
    },
    status: measured(await status(i)),
    started: { invocationId: "", nRestarts: "" },
    drift: [],
  };
}

async function converge(i: LlamaServerInputs, was?: string): Promise<LlamaServerOutputs> {
  if (i.standby) return standBy(i);
  const who = tag(i.target);
  // Defense when the policy pack is not used: a plan that does not fit never starts.
  if (!i.plan.fits)
    throw new Error(
      `${who}: not started: the model does not fit the placement: ${i.plan.reason ?? "(no reason given)"}`,
    );
  if (!i.plan.known)
    throw new Error(
      `${who}: not started: the placement is not known at up (some node's usable memory is missing). ` +
        "Run `pulumi up --refresh`, or declare it in sparkform:server.memory.",
    );
  const started = await start(i, was);
  let st = await status(i);
  const seen = parsePlacement(st.log);
  const wrong = placementMismatch(i.plan, seen);
  if (wrong.length > 0) {
    // No silent fallback: a server that placed the model elsewhere must not serve.
    await stop(i).catch(() => undefined);
    throw new Error(
      `${who}: the model did not land as planned, so the server was stopped: ${wrong.join("; ")}. ` +
        `${placements(i.plan, st)}. Check the workers (\`sparkform server status\`) and \`up\` again.`,
    );
  }
  await progress(`${who}: ${describeSeen(seen)}`);
  let smokeOut: SmokeOutput;
  try {
    smokeOut = await smoke(i, started);
  } catch (err) {
    // The server's own account first (its log), then stop it: it must not serve.
    const tail = await status(i)
      .then((s) => s.log.filter((l) => !/assigned to device/.test(l)).slice(-25))
      .catch(() => []);
    await stop(i).catch(() => undefined);
    throw new Error(
      `${(err as Error).message}\nThe server was stopped. The last lines of its log:\n${tail.join("\n")}`,
      { cause: err },
    );
  }
  const ready = smokeOut.readiness;
  await progress(
    `${who}: smoke ${smokeOut.tokens.length} tokens at ${smokeOut.tokensPerSecond.toFixed(1)} tokens/s` +
      `, chat ${smokeOut.chat.completionTokens} tokens (${smokeOut.chat.finishReason})` +
      (smokeOut.reference.skipped
        ? ` (no single-node reference: ${smokeOut.reference.skipped})`
        : `, identical to ${i.node} alone (${smokeOut.reference.tokensPerSecond.toFixed(1)} tokens/s)`) +
      `; worker graph_compute ${smokeOut.graphCompute}, graph_recompute ${smokeOut.graphRecompute}` +
      (smokeOut.fabricEnds?.length
        ? `; over the fabric: ${smokeOut.fabricEnds.map((e) => `${e.node} ${e.iface} ${e.bytes} B`).join(", ")}`
        : "") +
      `; APIs: ${describeApis(smokeOut.apis)}` +
      (ready
        ? `; first token (TTFT, streamed chat) in ${ready.firstTokenSeconds.toFixed(2)} s, port open ${ready.portOpenSeconds.toFixed(1)} s and /health 200 ${ready.healthSeconds.toFixed(1)} s after the unit's start`
        : ""),
  );
  st = await status(i);
  const { apiKey, ...rest } = i;
  return {
    ...rest,
    apiKeySha256: keyDigest(apiKey),
    url: serverUrl(i),
    health: st.health.body.trim(),
    placement: seen.devices,
    smoke: smokeOut,
    status: measured(st),
    started: startedOf(st.unit),
    drift: [],
  };
}

export async function create(
  inputs: LlamaServerInputs,
): Promise<pulumi.dynamic.CreateResult<LlamaServerOutputs>> {
  return { id: `${inputs.target.name}:llama-server:${inputs.port}`, outs: await converge(inputs) };
}

/** Refresh: the unit, the running binary, the socket table, GET /health. */
export async function read(
  id: string,
  props: LlamaServerOutputs,
): Promise<pulumi.dynamic.ReadResult<LlamaServerOutputs>> {
  if (props.standby) return { id, props };
  const st = await status(props);
  const drift = [
    ...serverDrift({
      status: st,
      started: props.started,
      expectedDigest: props.binaryDigest,
      bind: props.bind,
      guardOn: props.rssLimitPercent > 0,
    }),
    ...ownerDrift(props.unit, props.target.name, props.owner, st.owner),
  ];
  const fresh = {
    ...props,
    status: measured(st),
    health: st.health.status === 200 ? st.health.body.trim() : `down: ${st.health.body}`,
    drift,
  };
  return { id, props: steadyReading(props, fresh, serverVerdict) };
}

export async function diff(
  _id: string,
  olds: LlamaServerOutputs,
  news: LlamaServerInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const { restart, record } = serverChanges(olds, news);
  const all = [...restart, ...record];
  return { changes: all.length > 0, replaces: [], ...(all.length > 0 ? { diffs: all } : {}) };
}

export async function update(
  _id: string,
  olds: LlamaServerOutputs,
  news: LlamaServerInputs,
): Promise<pulumi.dynamic.UpdateResult<LlamaServerOutputs>> {
  const { restart, record } = serverChanges(olds, news);
  if (restart.length === 0) {
    // Another stack's server on the port is refused; one an older sparkform started gets this
    // stack's record, live. Then state is rewritten: the server keeps running.
    await claimUnit(ownerCheck(news, olds.owner));
    await progress(
      `${tag(news.target)}: ${record.join(", ")} recorded in state; server not restarted`,
    );
    const { apiKey: _k, ...rest } = news;
    return { outs: { ...olds, ...rest } };
  }
  if (olds.port !== news.port || olds.target.name !== news.target.name) await stop(olds);
  // A server that was serving leaves the router's rotation while it restarts (roll.ts); one on
  // standby, or moving, was not in it.
  const inRotation =
    !olds.standby && olds.url !== "" && olds.url === serverUrl(news) && !news.standby;
  return {
    outs: await rolled(
      {
        ...(inRotation && news.router ? { router: news.router } : {}),
        url: serverUrl(news),
        ...(news.apiKey ? { apiKey: news.apiKey } : {}),
        who: tag(news.target),
      },
      () => converge(news, olds.owner),
    ),
  };
}

/** Destroy stops the server (and a reference left behind) and waits until both ports are free. */
async function deleteServer(_id: string, props: LlamaServerOutputs): Promise<void> {
  await stop(props);
}
export { deleteServer as delete };

export const provider = withStateUpgrade(
  {
    create,
    read,
    diff,
    update,
    delete: deleteServer,
  } satisfies ProviderImpl<LlamaServerInputs, LlamaServerOutputs>,
  upgrade,
);
