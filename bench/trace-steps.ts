// `tsx bench/trace-steps.ts TRACE [LABEL]`: a markdown table of the remote steps one pulumi
// command ran, from the SPARKFORM_TRACE file its providers wrote (components/transport/trace.ts):
// per step (node and step name), when it started after the first step, how long it took, and
// the span from the first step's start to the last one's end — what the nodes cost the command.
import { readFileSync } from "node:fs";
import type { TraceLine } from "../components/transport";

export function traceTable(lines: readonly TraceLine[]): { span: number; markdown: string } {
  if (lines.length === 0) return { span: 0, markdown: "(no remote steps)" };
  const t0 = Math.min(...lines.map((l) => l.start));
  const end = Math.max(...lines.map((l) => l.start + l.ms));
  const rows = [...lines]
    .sort((a, b) => a.start - b.start)
    .map(
      (l) =>
        `| ${((l.start - t0) / 1000).toFixed(2)} | ${(l.ms / 1000).toFixed(2)} | ${l.node} | ${l.step.replace(/\|/g, "\\|")} | ${l.outcome} |`,
    );
  const span = (end - t0) / 1000;
  return {
    span,
    markdown: [
      "| start (s) | took (s) | node | step | exit |",
      "|---:|---:|---|---|---|",
      ...rows,
      "",
      `${lines.length} remote steps; first start to last end: ${span.toFixed(2)} s.`,
    ].join("\n"),
  };
}

export function readTrace(file: string): TraceLine[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as TraceLine);
}

if (require.main === module) {
  const [file, label] = process.argv.slice(2);
  if (!file) {
    console.error("usage: tsx bench/trace-steps.ts TRACE [LABEL]");
    process.exit(2);
  }
  if (label) console.log(`#### ${label}\n`);
  console.log(traceTable(readTrace(file)).markdown);
}
