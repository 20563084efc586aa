// Items 2 and 6 of issue 16 on one 4-node sim (bench/sim-world.ts):
//   2. the cold `up` of the local stack (2 nodes): each resource's span from the engine's event
//      stream, the critical path through the state's dependencies, a Gantt chart (PNG);
//   6. cold and no-op `up` of the same config listing 2, 3 and 4 nodes: how time grows.
// Counts run one after another (each stack owns the same paths and ports on the nodes, so two
// cannot be converged at once); the no-op ups of a count follow its cold up.
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { svgToPng } from "../cli/commands/report";
import type { World } from "./sim-world";
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv } from "../setup/pulumi/env";
import { floorProject } from "./noop";
import { fmt, load1, median, summarize, type Summary } from "./lib/stats";
import {
  criticalPath,
  firstStep,
  ganttSvg,
  type PathStep,
  progressLines,
  type Span,
  spans,
} from "./timeline";

const CCACHE = "CCACHE_DIR=$HOME/.cache/sparkform/ccache ccache";
const FLOOR_ARGS = ["up", "--yes", "--stack", "floor", "--expect-no-changes", "--non-interactive"];
const FLOOR_COMMAND = `(cd <state>/bench/floor && pulumi ${FLOOR_ARGS.join(" ")})`;

/** bench/noop.ts's floor: the same CLI on an empty one-output stack. */
function floorUp(dir: string): { seconds: number; exitCode: number; load1: number } {
  const load = load1();
  const t = Date.now();
  const r = spawnSync(pulumiBinary(), FLOOR_ARGS, { cwd: dir, env: pulumiEnv(), stdio: "ignore" });
  return { seconds: (Date.now() - t) / 1000, exitCode: r.status ?? -1, load1: load };
}

export interface CountResult {
  nodes: number;
  stack: string;
  cold: {
    command: string;
    seconds: number;
    exitCode: number;
    load1: number;
    /** When the first step started: CLI, program, policy packs and the preview before it. */
    firstStepAt: number;
    spans: Span[];
    critical: PathStep[];
    /** spark-1's `ccache -s` after the cold up (zeroed just before it). */
    ccache: string;
    hubFileBytes: number;
    /** The providers' progress lines (e.g. a fan-out's copy and install), when each appeared. */
    progress: { at: number; message: string }[];
  };
  noop: { command: string; samples: { seconds: number; exitCode: number; load1: number }[] };
  noopSummary: Summary;
  /** The floor (an empty stack's no-op up, same CLI) right after each no-op up: same rounds. */
  floor: { command: string; samples: { seconds: number; exitCode: number; load1: number }[] };
  floorSummary: Summary;
  /** Median over rounds of (no-op − floor): what the stack itself costs above Pulumi's floor. */
  aboveFloor: number;
  destroySeconds: number;
  failures: string[];
}

export async function runScale(
  world: World,
  o: { counts: number[]; noopRuns: number; out: string; prefix: string; log(s: string): void },
): Promise<CountResult[]> {
  const results: CountResult[] = [];
  const floor = floorProject();
  mkdirSync(o.out, { recursive: true });
  for (const k of o.counts) {
    const stack = `bsc-${k}-${process.pid}`;
    const failures: string[] = [];
    // BENCH_DISTRIBUTE=fan-out: the sim's CPU build is build-each by default (components/build/config.ts).
    const distribute = process.env.BENCH_DISTRIBUTE;
    await world.stack(stack, k, undefined, (t) =>
      distribute
        ? t.replace('preset: "sim"', `preset: "sim"\n    distribute: ${JSON.stringify(distribute)}`)
        : t,
    );
    await world.ssh("spark-1", `${CCACHE} -z`);
    o.log(`scale: cold up, ${k} nodes`);
    const cold = await world.up(stack);
    if (cold.exitCode !== 0)
      failures.push(`cold up exit ${cold.exitCode}\n${cold.output.slice(-3000)}`);
    const ccache = (await world.ssh("spark-1", `${CCACHE} -s`)).out.trim();
    const ss = spans(cold.events, stack);
    const critical = criticalPath(ss, await world.state(stack));
    const title = `cold up, ${k} nodes: ${cold.seconds.toFixed(0)} s`;
    const png = `${o.prefix}-cold-up-${k}-nodes.png`;
    writeFileSync(
      path.join(o.out, png),
      await svgToPng(ganttSvg(ss, critical, title, cold.seconds)),
    );
    const noops: { seconds: number; exitCode: number; load1: number }[] = [];
    const floors: { seconds: number; exitCode: number; load1: number }[] = [];
    let noopCommand = "";
    for (let r = 0; r < o.noopRuns; r++) {
      const n = await world.up(stack, { noop: true });
      noopCommand = n.command;
      noops.push({ seconds: n.seconds, exitCode: n.exitCode, load1: n.load1 });
      if (n.exitCode !== 0)
        failures.push(`no-op up ${r} exit ${n.exitCode}\n${n.output.slice(-2000)}`);
      const f = floorUp(floor);
      floors.push(f);
      if (f.exitCode !== 0) failures.push(`floor up ${r} exit ${f.exitCode}`);
    }
    const d = await world.destroy(stack);
    if (d.exitCode !== 0) failures.push(`destroy exit ${d.exitCode}\n${d.output.slice(-2000)}`);
    results.push({
      nodes: k,
      stack,
      cold: {
        command: cold.command,
        seconds: cold.seconds,
        exitCode: cold.exitCode,
        load1: cold.load1,
        firstStepAt: firstStep(cold.events),
        spans: ss,
        critical,
        ccache,
        hubFileBytes: cold.hubFileBytes,
        progress: progressLines(cold.events),
      },
      noop: { command: noopCommand, samples: noops },
      noopSummary: summarize(noops.map((x) => x.seconds)),
      floor: { command: FLOOR_COMMAND, samples: floors },
      floorSummary: summarize(floors.map((x) => x.seconds)),
      aboveFloor: median(noops.map((x, i) => x.seconds - floors[i]!.seconds)),
      destroySeconds: d.seconds,
      failures,
    });
  }
  return results;
}

/** Seconds per kind of resource: the sum of its spans and the longest one. */
function byKind(ss: readonly Span[]): string[] {
  const kinds = new Map<string, number[]>();
  for (const s of ss) kinds.set(s.kind, [...(kinds.get(s.kind) ?? []), s.end - s.start]);
  return [...kinds.entries()]
    .sort((a, b) => Math.max(...b[1]) - Math.max(...a[1]))
    .map(
      ([k, xs]) =>
        `| ${k} | ${xs.length} | ${Math.max(...xs).toFixed(1)} s | ${xs.reduce((a, x) => a + x, 0).toFixed(1)} s |`,
    );
}

const ccacheLine = (s: string) =>
  s
    .split("\n")
    .filter((l) => /^\s*(Hits|Misses|Cacheable calls)/i.test(l))
    .map((l) => l.trim().replace(/\s+/g, " "))
    .join("; ");

export function coldUpMarkdown(r: CountResult, prefix: string): string {
  const c = r.cold;
  const dom = [...c.critical].sort((a, b) => b.seconds - a.seconds)[0];
  const pathTotal = c.critical.reduce((a, s) => a + s.seconds, 0);
  return [
    `Build: ${process.env.BENCH_DISTRIBUTE ?? "the sim preset's default, build-each (every node compiles; the others' ccache seeded from spark-1's)"}. \`${c.command}\` on fresh simulated nodes (a new sim; spark-1's compiler cache seeded from the e2e tests' cache, so **ccache warm**: ${ccacheLine(c.ccache) || "see the JSON"}), exit ${c.exitCode}, load ${c.load1} at the start: **${c.seconds.toFixed(1)} s**, ${c.spans.length} steps; the update began at ${c.firstStepAt.toFixed(1)} s and its first resource step at ${(c.critical[0]?.start ?? NaN).toFixed(1)} s: **${(c.critical[0]?.start ?? NaN).toFixed(1)} s (${((100 * (c.critical[0]?.start ?? NaN)) / c.seconds).toFixed(0)}%) before any node is contacted** (CLI start, program, policy packs, the preview, the update's program run).`,
    "",
    `Critical path (${pathTotal.toFixed(1)} s in steps, the rest is the start above and waiting between steps): ${dom ? `of the steps, **${dom.label}** dominates (${dom.seconds.toFixed(1)} s, ${((100 * dom.seconds) / c.seconds).toFixed(0)}% of the up).` : "none"}`,
    "",
    "| step on the critical path | start | seconds | waited before |",
    "|---|---:|---:|---:|",
    ...c.critical.map(
      (s) =>
        `| ${s.label} | ${s.start.toFixed(1)} | ${s.seconds.toFixed(1)} | ${s.waited.toFixed(1)} |`,
    ),
    "",
    "| kind | steps | longest | sum |",
    "|---|---:|---:|---:|",
    ...byKind(c.spans),
    "",
    `![Gantt of the cold up](${prefix}-cold-up-${r.nodes}-nodes.png)`,
    "",
    "Every step's start and end (seconds since the command started) is in the JSON.",
    "",
  ].join("\n");
}

export function scaleMarkdown(rs: readonly CountResult[], prefix: string): string {
  const base = rs[0];
  if (!base) return "";
  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  return [
    `Counts one after another on one 4-node sim (two counts' stacks own the same paths and ports on the nodes, so they cannot be converged at once and interleaved); the first count's cold up on fresh nodes, each later one after the previous count's \`pulumi destroy\` (which keeps spark-1's ccache: warm in every count). No-op: \`${base.noop.command}\`, ${base.noop.samples.length} runs per count right after its cold up, each followed by the floor \`${FLOOR_COMMAND}\` (an empty stack, same CLI), so load falls on both; "above floor" is the median over those rounds of no-op − floor. Ratios against ${base.nodes} nodes; linear growth would be nodes/${base.nodes}.`,
    "",
    "| nodes | cold up | cold / cold(2) | no-op up (median, min–max) | floor, same rounds | no-op above floor | above floor / above floor(2) | no-op / no-op(2) | linear | load at the samples |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ...rs.map(
      (r) =>
        `| ${r.nodes} | ${r.cold.seconds.toFixed(1)} s | ${ratio(r.cold.seconds, base.cold.seconds)} | ${fmt(r.noopSummary, 1)} | ${fmt(r.floorSummary, 1)} | ${r.aboveFloor.toFixed(1)} s | ${ratio(r.aboveFloor, base.aboveFloor)} | ${ratio(r.noopSummary.median, base.noopSummary.median)} | ${ratio(r.nodes, base.nodes)} | ${[r.cold.load1, ...r.noop.samples.map((s) => s.load1)].join(", ")} |`,
    ),
    "",
    ...rs.flatMap((r) => {
      const dom = [...r.cold.critical].sort((a, b) => b.seconds - a.seconds)[0];
      return [
        `- ${r.nodes} nodes: ${r.cold.spans.length} steps; critical path ${r.cold.critical.map((s) => s.label).join(" → ")}; dominant ${dom?.label} ${dom?.seconds.toFixed(1)} s ([Gantt](${prefix}-cold-up-${r.nodes}-nodes.png)).`,
      ];
    }),
    ...rs.flatMap((r) =>
      r.failures.map((f) => `\n**${r.nodes} nodes failed:** \`\`\`\n${f}\n\`\`\``),
    ),
    "",
  ].join("\n");
}
