// Small statistics and the machine description shared by the benches.
import { readFileSync } from "node:fs";
import * as os from "node:os";

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

/** "12.34 s (11.0–15.2)" */
export function fmt(s: Summary, digits = 2): string {
  return `${s.median.toFixed(digits)} s (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}

/** The 1-minute load average now. */
export function load1(): number {
  return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
}

export interface Machine {
  hostname: string;
  cpus: number;
  cpuModel: string;
  memGiB: number;
  kernel: string;
  node: string;
}

export function machine(): Machine {
  return {
    hostname: os.hostname(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? "?",
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
  };
}

/** Round r's order of the variants: rotated each round, so load falls on all of them alike. */
export function rotation<T>(variants: readonly T[], round: number): T[] {
  const k = round % variants.length;
  return [...variants.slice(k), ...variants.slice(0, k)];
}
