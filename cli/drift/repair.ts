// `sparkform drift --repair safe`: after a check that found drift, a targeted `up` of the
// drifted resources, but only when every one of them is in the safe set: a worker's, server's
// or router's unit stopped or crashed (its guard too), an installed binary the verified build
// restores, a damaged model file, and a resource that only follows those (nothing of its own
// measured: its inputs are made of their outputs). Never a config change (the program's inputs differ from the
// recorded ones: an operator's `up` applies those), changed node facts, a degraded fabric link,
// a unit another stack owns, a resource to create or delete, or a locked stack: then it refuses
// and says which resource and why, and the drift stays reported.
import type { DriftedResource } from "./preview";

/** Kinds whose out-of-band drift `up` puts back as it was: the units, the build, the model. */
const SAFE_KINDS: Readonly<Record<string, string>> = {
  RpcWorker: "the worker's unit or its guard",
  LlamaServer: "the server's unit or its guard",
  Router: "the router's unit",
  NativeBuild: "an installed binary the verified build restores",
  ModelReplica: "a model file the verified download restores",
};

/** Why `d` is not repaired unattended, or undefined when it is in the safe set. */
export function refusalOf(d: DriftedResource): string | undefined {
  const who = `${d.kind} ${d.name}`;
  if (d.inputsChanged.length > 0)
    return (
      `${who}: its config changed (${d.inputsChanged.join(", ")}); a config change is applied ` +
      "by an operator's `up`, never repaired"
    );
  if (d.op !== "update") return `${who}: \`up\` would ${d.op} it, which is no repair`;
  // Nothing of its own drifted, and its config did not change: it only follows the resources
  // its inputs are made of (the serving drain of a build whose binary the repair restores).
  const follows = d.measured.length === 0;
  if (!follows && !Object.hasOwn(SAFE_KINDS, d.kind))
    return (
      `${who}: ${d.kind} is not in the safe set (changed node facts, a degraded link or a ` +
      "synced tree are an operator's to judge)"
    );
  const owned = d.words.find((w) => /belongs to stack|another sparkform/.test(w));
  if (owned) return `${who}: ${owned}`;
  return undefined;
}

export type RepairPlan =
  | { readonly repair: true; readonly resources: readonly DriftedResource[] }
  | { readonly repair: false; readonly refusals: readonly string[] };

/** The repair of `drifted`: all of them when each is safe, else none, with every refusal. */
export function repairPlan(drifted: readonly DriftedResource[]): RepairPlan {
  const refusals = drifted.map(refusalOf).filter((r): r is string => r !== undefined);
  return refusals.length > 0
    ? { repair: false, refusals }
    : { repair: true, resources: [...drifted] };
}

/** The repairs by kind that `resources` add to the counts carried over (`before`). */
export function countRepairs(
  before: Readonly<Record<string, number>>,
  resources: readonly DriftedResource[],
): Record<string, number> {
  const out = { ...before };
  for (const r of resources) out[r.kind] = (out[r.kind] ?? 0) + 1;
  return out;
}

/** What `--repair safe` did after a check, as the report and the JSON say it. */
export type RepairOutcome =
  | { readonly status: "repaired"; readonly resources: readonly string[] }
  | { readonly status: "refused"; readonly refusals: readonly string[] }
  | { readonly status: "failed"; readonly resources: readonly string[]; readonly detail: string };

/**
 * Repair `drifted` when the plan allows, through `up` (a targeted `pulumi up --refresh` behind
 * the policy gate: cli/engine.ts's upTargets, injected so a test needs no stack). Returns what
 * it did and the resources it repaired (for the metrics' count).
 */
export function repairSafe(
  drifted: readonly DriftedResource[],
  up: (urns: readonly string[]) => number,
): { outcome: RepairOutcome; repaired: readonly DriftedResource[] } {
  const plan = repairPlan(drifted);
  if (!plan.repair)
    return { outcome: { status: "refused", refusals: plan.refusals }, repaired: [] };
  const names = plan.resources.map((r) => `${r.kind} ${r.name}`);
  const code = up(plan.resources.map((r) => r.urn));
  return code === 0
    ? { outcome: { status: "repaired", resources: names }, repaired: plan.resources }
    : {
        outcome: {
          status: "failed",
          resources: names,
          detail:
            `the targeted \`pulumi up --refresh\` exited ${code} (its output is above); the ` +
            "drift stays reported: read the engine's error, then run the `up` by hand",
        },
        repaired: [],
      };
}
