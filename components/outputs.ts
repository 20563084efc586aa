// The stack outputs a person reads at the end of `pulumi up`: each stage's verdicts and the
// facts the summary and doctor show, small enough to take in. The full evidence stays in the
// resources' own state (the policies read resource properties, never stack outputs), and
// `sparkform status --json` shows it beside these (cli/evidence.ts):
//   facts    a line per fact instead of the whole sheet (netdevs, disk, RDMA ports, reasons):
//            the sheet is the SparkNode's `facts`
//   build    without `instructions` (the cpu-instructions check states them): NativeBuild's
//   model    each node's files without mtimeNs/partBytes (refresh's readings): ModelReplica's
//   worker   without deviceMemory (free memory moves on its own): RpcWorker's
//   serving  no renderings (derived from the plan: renderServing below); the plan without its
//            memory accounting (layers, perNode, totals: LlamaServer's `plan`); the smoke's
//            token ids as a count and a sha256 (LlamaServer's `smoke` keeps the ids)
// Every function here is idempotent: the CLI runs outputs written by an older program (the
// full sheets, the token arrays, the renderings) through the same functions, so a stack made
// before this shape reads as one made after it.
import { createHash } from "node:crypto";
import type { BuildSummary } from "./build/builds";
import type { ModelOnNode } from "./model/model";
import type { SparkNodeFacts } from "./node/facts";
import type { WorkerSummary } from "./rpc-worker/workers";
import type { ServingPlan } from "./serving/placement";
import type { SmokeOutput } from "./serving/provider";
import type { ServingSummary } from "./serving/serving";

/** `5,6,7,9` → `5-7,9`: the form taskset takes and the runbook writes. */
export function cpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] as number) === (sorted[j] as number) + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

const mapValues = <A, B>(r: Record<string, A>, f: (a: A) => B): Record<string, B> =>
  Object.fromEntries(Object.entries(r).map(([k, v]) => [k, f(v)]));

/** The stack output `facts.<node>`: what the summary and doctor show of the fact sheet. */
export interface NodeFactsOutput {
  arch: string | null;
  /** The distro's PRETTY_NAME (else `id versionId`). */
  os: string | null;
  kernel: string | null;
  cpus: number | null;
  /** The faster cluster as a CPU list (GB10: "5-9,15-19"), what `taskset -c` takes; null when sysfs does not tell. */
  performanceCores: string | null;
  /** MemTotal from /proc/meminfo. */
  memoryBytes: number | null;
  /** CUDA version (null: none found; the sheet says where it looked). */
  cuda: string | null;
  /** NVIDIA kernel driver version (null: none loaded). */
  driver: string | null;
  /** RDMA ports as `device/port` (empty: none). */
  rdma: string[];
}

export function nodeFactsOutput(f: SparkNodeFacts | NodeFactsOutput): NodeFactsOutput {
  if (!("distro" in f)) return f;
  const { distro } = f;
  const cores = f.cpu.performanceCores;
  return {
    arch: f.arch,
    os:
      distro.prettyName ??
      ([distro.id, distro.versionId].filter((x) => x !== null).join(" ") || null),
    kernel: f.kernel,
    cpus: f.cpu.count,
    performanceCores: cores && cores.length > 0 ? cpuList(cores) : null,
    memoryBytes: f.memory.totalBytes,
    cuda: f.cuda.version,
    driver: f.nvidiaDriver.version,
    rdma: f.rdma.devices.map((d) => `${d.device}/${d.port}`),
  };
}

/** The stack output `build.<node>`. */
export type BuildOutput = Omit<BuildSummary, "instructions">;

export function buildOutput(b: BuildSummary | BuildOutput): BuildOutput {
  const { instructions: _, ...rest } = b as BuildSummary;
  return rest;
}

/** The stack output `model.nodes.<node>`: each file's presence, size and digest. */
export interface ModelNodeOutput {
  dir: string;
  fetchedBy: string;
  files: { path: string; present: boolean; size: number; sha256: string }[];
}

export function modelNodeOutput(n: ModelOnNode | ModelNodeOutput): ModelNodeOutput {
  return {
    dir: n.dir,
    fetchedBy: n.fetchedBy,
    files: (Array.isArray(n.files) ? n.files : []).map((f) => ({
      path: f.path,
      present: f.present,
      size: f.size,
      sha256: f.sha256,
    })),
  };
}

/** The stack output `worker.<node>`. */
export type WorkerOutput = Omit<WorkerSummary, "deviceMemory">;

export function workerOutput(w: WorkerSummary | WorkerOutput): WorkerOutput {
  const { deviceMemory: _, ...rest } = w as WorkerSummary;
  return rest;
}

/** sha256 of token ids written `116,88,77`: equal ids, equal digest. */
export function tokensSha256(ids: readonly number[]): string {
  return createHash("sha256").update(ids.join(",")).digest("hex");
}

/** The stack output `serving.smoke`: counts and digests of the token ids, the verdicts. */
export interface SmokeSummary extends Omit<SmokeOutput, "tokens" | "reference"> {
  tokenCount: number;
  tokensSha256: string;
  reference: {
    tokenCount: number;
    tokensSha256: string;
    tokensPerSecond: number;
    skipped?: string;
  };
}

export function smokeSummary(s: SmokeOutput | SmokeSummary): SmokeSummary {
  if (!("tokens" in s)) return s;
  const { tokens, reference, ...rest } = s;
  const { tokens: refTokens, ...ref } = reference;
  return {
    ...rest,
    tokenCount: tokens.length,
    tokensSha256: tokensSha256(tokens),
    reference: { ...ref, tokenCount: refTokens.length, tokensSha256: tokensSha256(refTokens) },
  };
}

/** The stack output `serving.plan`: the decision, without the memory accounting. */
export type PlanSummary = Omit<ServingPlan, "layers" | "perNode" | "totals">;

export function planSummary(p: ServingPlan | PlanSummary): PlanSummary {
  const { layers: _l, perNode: _p, totals: _t, ...rest } = p as ServingPlan;
  return rest;
}

/** The stack output `serving`. */
export interface ServingOutput {
  /** Absent in outputs written before topologies (those served layer-split). */
  topology?: ServingSummary["topology"];
  topologyReason?: string;
  /** The router's URL on the client node (absent before the router). */
  endpoint?: string;
  servers?: ServingSummary["servers"];
  /** The live model and the staged ones (absent before staging: `model` was served). */
  models?: ServingSummary["models"];
  plan: PlanSummary;
  server: ServingSummary["server"];
  placement: ServingSummary["placement"];
  smoke: SmokeSummary;
}

export function servingOutput(
  s: ServingSummary | ServingOutput | (ServingOutput & { renderings?: unknown }),
): ServingOutput {
  return {
    ...(s.topology !== undefined ? { topology: s.topology } : {}),
    ...(s.topologyReason !== undefined ? { topologyReason: s.topologyReason } : {}),
    ...(s.endpoint !== undefined ? { endpoint: s.endpoint } : {}),
    ...(s.servers !== undefined ? { servers: s.servers } : {}),
    ...(s.models !== undefined ? { models: s.models } : {}),
    plan: planSummary(s.plan),
    server: s.server,
    placement: s.placement,
    smoke: smokeSummary(s.smoke),
  };
}

/** The model file the server loads: the client node's copy of the model's .gguf. */
export function servedModelPath(
  serving: { server: { node: string }; models?: { path: string } },
  model: { files: { path: string }[]; nodes: Record<string, { dir: string }> } | undefined,
): string | undefined {
  if (serving.models?.path) return serving.models.path;
  const dir = model?.nodes[serving.server.node]?.dir;
  const gguf = model?.files.find((f) => f.path.endsWith(".gguf"))?.path;
  return dir && gguf ? `${dir.replace(/\/$/, "")}/${gguf}` : undefined;
}

/** The outputs of every stage, in the shape above, whatever program wrote them. */
export interface StageOutputs {
  facts?: Record<string, SparkNodeFacts | NodeFactsOutput>;
  build?: Record<string, BuildSummary | BuildOutput>;
  model?: { nodes: Record<string, ModelOnNode | ModelNodeOutput> };
  worker?: Record<string, WorkerSummary | WorkerOutput>;
  serving?: ServingSummary | ServingOutput;
}

/**
 * `pulumi stack output --json` in this program's shape: a stage written by an older program
 * (its larger outputs) is cut to the summary above; anything else is passed through.
 */
export function currentOutputs(o: Record<string, unknown>): Record<string, unknown> {
  const s = o as StageOutputs & Record<string, unknown>;
  const out: Record<string, unknown> = { ...o };
  // Each part is cut only when it has the shape its function reads; anything else passes.
  const each = <A, B>(r: Record<string, A>, f: (a: A) => B) =>
    mapValues(r, (v) => (isRecord(v) ? f(v) : v));
  if (isRecord(s.facts)) out.facts = each(s.facts, nodeFactsOutput);
  if (isRecord(s.build)) out.build = each(s.build, buildOutput);
  if (isRecord(s.model) && isRecord(s.model.nodes))
    out.model = { ...s.model, nodes: each(s.model.nodes, modelNodeOutput) };
  if (isRecord(s.worker)) out.worker = each(s.worker, workerOutput);
  if (isRecord(s.serving)) {
    const { renderings: _, plan, smoke, ...rest } = s.serving as Record<string, unknown>;
    out.serving = {
      ...rest,
      ...(plan !== undefined
        ? { plan: isRecord(plan) ? planSummary(plan as unknown as ServingPlan) : plan }
        : {}),
      ...(smoke !== undefined
        ? { smoke: isRecord(smoke) ? smokeSummary(smoke as unknown as SmokeOutput) : smoke }
        : {}),
    };
  }
  return out;
}
