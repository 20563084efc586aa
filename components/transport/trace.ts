// Step timing for profiling (bench/): with SPARKFORM_TRACE=<file>, every remote step appends
// one JSON line (node, step, start, milliseconds, outcome) to the file. Off by default; it
// records no command text, output or secret, only the step's name.
import { appendFileSync } from "node:fs";

export interface TraceLine {
  readonly node: string;
  readonly step: string;
  /** Unix milliseconds at the step's start. */
  readonly start: number;
  readonly ms: number;
  readonly outcome: string;
  readonly pid: number;
}

export function traceStep(node: string, step: string, start: number, outcome: string): void {
  const file = process.env.SPARKFORM_TRACE;
  if (!file) return;
  const line: TraceLine = { node, step, start, ms: Date.now() - start, outcome, pid: process.pid };
  try {
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  } catch {
    // A profile that cannot be written must not fail the step it times.
  }
}
