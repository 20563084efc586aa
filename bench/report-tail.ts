// The end of an item's markdown, the same for every item: the load average over its samples,
// the exact command behind each number, its failures, and every sample in round order.
import { summarize } from "./stats";

export interface TailInput {
  samples: readonly { variant: string; seconds: number; load1: number }[];
  /** Variant names, in the order the tables show them. */
  variants: readonly string[];
  commands: Record<string, string>;
  failures: readonly string[];
}

export function tailMarkdown(r: TailInput, digits = 2): string[] {
  const loads = r.samples.map((s) => s.load1);
  return [
    `Load average (1 min) at the samples' starts: median ${summarize(loads).median.toFixed(2)}, ` +
      `${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}.`,
    "",
    "Commands:",
    "",
    ...Object.entries(r.commands).map(([k, v]) => `- ${k}: \`${v}\``),
    "",
    ...(r.failures.length ? ["### Failures", "", "```", ...r.failures, "```", ""] : []),
    "Samples (s, in round order):",
    "",
    ...r.variants.map(
      (n) =>
        `- ${n}: ${r.samples
          .filter((s) => s.variant === n)
          .map((s) => s.seconds.toFixed(digits))
          .join(", ")}`,
    ),
    "",
  ];
}
