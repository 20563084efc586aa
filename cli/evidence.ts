// What the stack outputs leave to the resources' state (components/outputs.ts), read back for
// `sparkform status --json`: each node's whole fact sheet (SparkNode), each build's instruction
// counts (NativeBuild), and the server's whole plan, its smoke with the token ids, and the plan's
// renderings (LlamaServer). Pure over the stack's state (stack-state.ts's reader); only
// values that are not secret are taken (a resource's target, which may hold a key, never is).
import type { BuildSummary } from "../components/build/builds";
import type { SparkNodeFacts } from "../components/node/facts";
import type { ServingPlan } from "../components/serving/placement";
import type { SmokeOutput } from "../components/serving/provider";
import { type Renderings, renderings } from "../components/serving/render";
import type { Kind } from "../components/kinds";
import { nodeOf, resourcesOf, type StackState } from "../stack-state";

export interface StateEvidence {
  /** Per node: the fact sheet as native/node/facts.sh measured it at the last up or refresh. */
  facts: Record<string, SparkNodeFacts>;
  /** Per node: the instruction counts in the CPU library (the cpu-instructions check's numbers). */
  build: Record<string, Pick<BuildSummary, "instructions">>;
  /** Per server node: the whole plan, its renderings, the smoke with its token ids. */
  serving: Record<string, { plan: ServingPlan; renderings: Renderings; smoke: SmokeOutput }>;
}

function byNodeOf<K extends Kind, T>(
  state: StackState,
  kind: K,
  pick: (o: Record<string, unknown>) => T | undefined,
): Record<string, T> {
  const out: Record<string, T> = {};
  for (const r of resourcesOf(state, kind)) {
    const node = nodeOf(r);
    const v = pick(r.outputs as Record<string, unknown>);
    if (node !== undefined && v !== undefined) out[node] = v;
  }
  return out;
}

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

/** The evidence the stack outputs summarise, from the stack's resources. */
export function stateEvidence(state: StackState): StateEvidence {
  return {
    facts: byNodeOf(state, "SparkNode", (o) =>
      isRecord(o.facts) ? (o.facts as unknown as SparkNodeFacts) : undefined,
    ),
    build: byNodeOf(state, "NativeBuild", (o) =>
      isRecord(o.instructions)
        ? { instructions: o.instructions as Record<string, number> }
        : undefined,
    ),
    serving: byNodeOf(state, "LlamaServer", (o) => {
      if (!isRecord(o.plan) || !isRecord(o.smoke) || typeof o.modelPath !== "string")
        return undefined;
      const plan = o.plan as unknown as ServingPlan;
      const rendered = renderings(plan, o.modelPath, {
        ...(typeof o.bind === "string" ? { bind: o.bind } : {}),
        ...(typeof o.port === "number" ? { port: o.port } : {}),
      });
      // llama-server's argv as the server was started with it (an API key file included).
      if (Array.isArray(o.flags) && o.flags.every((f) => typeof f === "string"))
        rendered.llamaServer = o.flags;
      return { plan, renderings: rendered, smoke: o.smoke as unknown as SmokeOutput };
    }),
  };
}
