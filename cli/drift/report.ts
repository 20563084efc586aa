// How a drift check reads: `--json`'s one object, and the human lines (one per drifted resource,
// then the verdict). Pure.
import type { CheckResult } from "./check";
import type { DriftedResource } from "./preview";
import type { RepairOutcome } from "./repair";

export interface DriftJson {
  readonly stack: string;
  readonly verdict: CheckResult["verdict"];
  /** When the check ended (ISO 8601). */
  readonly checkedAt: string;
  readonly durationSeconds: number;
  /** The resources an `up` would change; [] when clean or not checked. */
  readonly resources: readonly {
    readonly kind: string;
    readonly node: string;
    readonly resource: string;
    readonly urn: string;
    readonly op: string;
    readonly drifted: readonly string[];
    readonly words: readonly string[];
    /** Inputs the program now gives differently: a config change, never repaired. */
    readonly inputsChanged: readonly string[];
  }[];
  /** How many resources the check read. */
  readonly checked: number;
  /** Why there is no verdict (locked, unreachable, error), with the words a person reads. */
  readonly skipped?: { readonly reason: string; readonly detail: string };
  /** What `--repair safe` did, when it was asked and there was drift. */
  readonly repair?: RepairOutcome;
}

export const durationOf = (r: Pick<CheckResult, "startedAt" | "endedAt">): number =>
  Math.round((r.endedAt.getTime() - r.startedAt.getTime()) / 10) / 100;

export function driftJson(r: CheckResult, repair?: RepairOutcome): DriftJson {
  return {
    stack: r.stack,
    verdict: r.verdict,
    checkedAt: r.endedAt.toISOString(),
    durationSeconds: durationOf(r),
    resources: r.drifted.map((d) => ({
      kind: d.kind,
      node: d.node,
      resource: d.name,
      urn: d.urn,
      op: d.op,
      drifted: d.keys,
      words: d.words,
      inputsChanged: d.inputsChanged,
    })),
    checked: r.seen.length,
    ...(r.skipped ? { skipped: r.skipped } : {}),
    ...(repair ? { repair } : {}),
  };
}

/** `RpcWorker local-worker-spark-2 on spark-2 (update): status, drift — worker binary deleted`. */
export function driftLine(d: DriftedResource): string {
  const where = d.node ? ` on ${d.node}` : "";
  const keys = d.keys.length > 0 ? d.keys.join(", ") : "(the provider named no key)";
  const words = d.words.length > 0 ? ` — ${d.words.join("; ")}` : "";
  return `${d.kind} ${d.name}${where} (${d.op}): ${keys}${words}`;
}

export function driftLines(r: CheckResult): string[] {
  const took = `${durationOf(r).toFixed(1)} s`;
  switch (r.verdict) {
    case "clean":
      return [
        `clean: stack ${r.stack} is as its state says (${r.seen.length} resources read in ${took})`,
      ];
    case "drift":
      return [
        ...r.drifted.map(driftLine),
        `drift: ${r.drifted.length} of ${r.seen.length} resources of stack ${r.stack} differ from ` +
          `their state (read in ${took}); ` +
          `\`npm run pulumi -- up -s ${r.stack} --yes --refresh --policy-pack policies\` converges ` +
          "them, behind the policy gate",
      ];
    default:
      return [r.skipped?.detail ?? `could not check stack ${r.stack}`];
  }
}

/** The lines of what `--repair safe` did. */
export function repairLines(o: RepairOutcome): string[] {
  switch (o.status) {
    case "repaired":
      return [
        `repaired (a targeted \`up --refresh\` behind the policy gate): ${o.resources.join(", ")}`,
      ];
    case "refused":
      return [
        "repair refused: not every drifted resource is in the safe set",
        ...o.refusals.map((r) => `  ${r}`),
      ];
    case "failed":
      return [`repair failed for ${o.resources.join(", ")}: ${o.detail}`];
  }
}
