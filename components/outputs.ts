// The stack outputs a person reads at the end of `pulumi up`: each stage's verdicts and the
// facts the summary and doctor show, small enough to take in. The full evidence stays in the
// resources' own state (the policies read resource properties, never stack outputs), and
// `sparkform status --json` shows it beside these (cli/evidence.ts):
//   facts    a line per fact instead of the whole sheet (netdevs, disk, RDMA ports, reasons):
//            the sheet is the SparkNode's `facts`
//   build    without `instructions` (the cpu-instructions check states them): NativeBuild's
//   model    each node's files without mtimeNs/partBytes (refresh's readings): ModelReplica's
//   worker   without deviceMemory (free memory moves on its own): RpcWorker's
//   serving  no renderings (derived from the plan: renderServing); the plan without its
//            memory accounting (layers, perNode, totals: LlamaServer's `plan`); the smoke's
//            token ids as a count and a sha256 (LlamaServer's `smoke` keeps the ids)
// Every function here is idempotent: the CLI runs outputs written by an older program (the
// full sheets, the token arrays, the renderings) through the same functions, so a stack made
// before this shape reads as one made after it.
import type { BuildSummary } from "./build/builds";
import type { WorkerSummary } from "./rpc-worker/workers";
import type { ServingPlan } from "./serving/placement";
import type { SmokeOutput } from "./serving/provider";
import type { ServingSummary } from "./serving/serving";
import { isRecord } from "./schema/output-cut";
import { cutPlan, cutSmoke } from "./serving/output";
import { OUTPUTS } from "./stages";

// Each stage's cut lives beside the stage (components/<stage>/output.ts); these are its types.
export { cpuList, type NodeFactsOutput, nodeFactsOutput } from "./node/output";
export { type ModelNodeOutput, modelNodeOutput } from "./model/output";
export { tokensSha256 } from "./serving/output";

/** The stack output `build.<node>`. */
export type BuildOutput = Omit<BuildSummary, "instructions">;

export { buildOutput } from "./build/output";

/** The stack output `worker.<node>`. */
export type WorkerOutput = Omit<WorkerSummary, "deviceMemory">;

export { workerOutput } from "./rpc-worker/output";

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
  return cutSmoke(s as unknown as Record<string, unknown>) as unknown as SmokeSummary;
}

/** The stack output `serving.plan`: the decision, without the memory accounting. */
export type PlanSummary = Omit<ServingPlan, "layers" | "perNode" | "totals">;

export function planSummary(p: ServingPlan | PlanSummary): PlanSummary {
  return cutPlan(p as unknown as Record<string, unknown>) as PlanSummary;
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
  /** The models served side by side (sparkform:server.models); absent with one. */
  served?: ServingSummary["served"];
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
    ...(s.served !== undefined ? { served: s.served } : {}),
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

/**
 * `pulumi stack output --json` in this program's shape: a stage written by an older program
 * (its larger outputs) is cut to the summary above by the stage's own cut (its descriptor's
 * `outputs`); anything else is passed through.
 */
export function currentOutputs(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...o };
  for (const { key, cut } of OUTPUTS) {
    const value = o[key];
    // Each part is cut only when it has the shape its function reads; anything else passes.
    if (cut && isRecord(value)) out[key] = cut(value);
  }
  return out;
}
