// How a drift check reads: `--json`'s one object, and the human lines (one per drifted resource,
// then the verdict). Pure.
import type { CheckResult } from "./check";
import type { DriftedResource } from "./preview";

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
  }[];
  /** How many resources the check read. */
  readonly checked: number;
  /** Why there is no verdict (locked, unreachable, error), with the words a person reads. */
  readonly skipped?: { readonly reason: string; readonly detail: string };
}

export const durationOf = (r: Pick<CheckResult, "startedAt" | "endedAt">): number =>
  Math.round((r.endedAt.getTime() - r.startedAt.getTime()) / 10) / 100;

export function driftJson(r: CheckResult): DriftJson {
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
    })),
    checked: r.seen.length,
    ...(r.skipped ? { skipped: r.skipped } : {}),
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
