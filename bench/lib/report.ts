// The report a bench run writes: its header (machine, commit, load), every item's section, and
// the end of an item's section, the same for every item (the load average over its samples, the
// exact command behind each number, its failures, and every sample in round order).
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { format, resolveConfig } from "prettier";
import { type Machine } from "./machine";
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

/** tailMarkdown, or, when no sample completed, that and the failures (the router benches). */
export function tailOrNone(r: TailInput, digits = 2): string[] {
  return r.samples.length
    ? tailMarkdown(r, digits)
    : ["No sample completed.", "", ...r.failures.map((f) => `- ${f}`), ""];
}

/** What the report's header says about the run: where, when, on what code, under what load. */
export interface RunFacts {
  machine: Machine;
  pulumi: string;
  /** The checkout's short commit, and whether tracked files differ from it. */
  commit: string;
  dirty: boolean;
  started: Date;
  argv: readonly string[];
  loadStart: number;
  loadEnd: number;
}

/** The checkout's short commit and whether tracked files differ from it. */
export function checkout(repoRoot: string): { commit: string; dirty: boolean } {
  const git = (args: string[]) =>
    execFileSync("git", args, { cwd: repoRoot, encoding: "utf8" }).trim();
  return {
    commit: git(["rev-parse", "--short", "HEAD"]),
    dirty: git(["status", "--porcelain", "--untracked-files=no"]) !== "",
  };
}

function header(f: RunFacts): string[] {
  const m = f.machine;
  const date = f.started.toISOString().slice(0, 10);
  return [
    `# sparkform benchmarks — ${m.hostname}, ${date}`,
    "",
    `${f.started.toISOString()} → ${new Date().toISOString()}; commit \`${f.commit}\`${f.dirty ? " (with uncommitted changes)" : ""}; ` +
      `\`npm run bench -- ${f.argv.join(" ")}\`.`,
    "",
    `Machine: ${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB, kernel ${m.kernel}, node ${m.node}, pulumi ${f.pulumi}. ` +
      `Load average (1 min) ${f.loadStart} at the start, ${f.loadEnd} at the end: the machine is shared, so read the ratios (same rounds) rather than the absolute times.`,
    "",
  ];
}

/**
 * Writes `<out>/<name>.md` (the header, then each item's section) and `<name>.json` (the facts
 * and every item's results); returns their path without the extension.
 */
export async function writeReport(
  out: string,
  name: string,
  facts: RunFacts,
  sections: readonly string[],
  results: Record<string, unknown>,
): Promise<string> {
  mkdirSync(out, { recursive: true });
  // Formatted as the repository's formatter would, with its config (npm run lint checks
  // committed results: a short array fits on one line at the project's width).
  const style = (await resolveConfig(path.join(out, `${name}.json`))) ?? {};
  const text = await format([...header(facts), ...sections].join("\n"), {
    ...style,
    parser: "markdown",
  });
  writeFileSync(path.join(out, `${name}.md`), text);
  writeFileSync(
    path.join(out, `${name}.json`),
    await format(
      JSON.stringify({
        machine: facts.machine,
        pulumi: facts.pulumi,
        commit: facts.commit,
        started: facts.started,
        argv: facts.argv,
        loadStart: facts.loadStart,
        loadEnd: facts.loadEnd,
        results,
      }),
      { ...style, parser: "json" },
    ),
  );
  return path.join(out, name);
}
