// Small statistics shared by the bench items: medians, quantiles, summaries, the load average.
import { readFileSync } from "node:fs";

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  if (s.length === 0) return NaN;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export interface Summary {
  n: number;
  median: number;
  min: number;
  max: number;
}

export function summarize(xs: readonly number[]): Summary {
  return { n: xs.length, median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

const EMPTY: Summary = { n: 0, median: NaN, min: NaN, max: NaN };

/** summarize, or NaNs with n 0 when there is no sample (a variant that never ran). */
export function summarizeOrEmpty(xs: readonly number[]): Summary {
  return xs.length ? summarize(xs) : EMPTY;
}

/** Nearest-rank quantile (q in 0–1) of `xs`; NaN when empty. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const k = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[k] as number;
}

/** "12.34 s (11.0–15.2)" */
export function fmt(s: Summary, digits = 2): string {
  return `${s.median.toFixed(digits)} s (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}

/** The 1-minute load average now. */
export function load1(): number {
  return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
}
