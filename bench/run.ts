// `npm run bench [-- --only noop,treesync] [--runs N] [--stack S] [--base DIR]`: runs the
// benches of issue 16 on this machine and writes bench/results/<date>-<machine>.md and .json.
// Every ratio is against a baseline measured in the same run, interleaved.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { format, resolveConfig } from "prettier";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { CLI_ITEMS, cliMarkdown, runCli } from "./cli";
import { COMMANDS, type NoopCommand, noopMarkdown, runNoop } from "./noop";
import { byRole, peakRss } from "./memory";
import { modelBytesMarkdown, runModelBytes } from "./model-bytes";
import { quietMarkdown, runQuiet } from "./quiet";
import { routerMarkdown, runRouter } from "./router";
import { runServingLoad, servingLoadMarkdown } from "./serving-load";
import { runSwap, swapMarkdown } from "./swap";
import { load1, machine } from "./stats";
import { SIM_ITEMS, runSimItems } from "./sim-items";
import { policyPackArgs } from "../setup/pulumi/policy";

const ITEMS = [
  "noop",
  "quiet",
  "memory",
  "model-bytes",
  "serving",
  "router",
  "swap",
  ...SIM_ITEMS,
  ...CLI_ITEMS,
] as const;
const USAGE = `usage: npm run bench -- [--only ${ITEMS.join(",")}] [--runs N] [--stack S] [--node N] [--base DIR] [--commands ${COMMANDS.join(",")}] [--refreshes N]
  --only      items to run (default: all)
  --runs      interleaved rounds per item (default 5)
  --stack     the converged stack to measure (default local; npm run local makes it)
  --node      the node \`run\` and the fresh ssh go to (cli, run), where the load runs (router:
              the client node, whose loopback the router listens on; default spark-1)
  --base      a checkout of the code before a change, run on the same stack in the same rounds
  --edit-file also time preview right after appending a comment to this file (e.g. components/stage.ts)
  --commands  the noop item's pulumi commands (default: all)
  --refreshes quiet: consecutive refreshes, client traffic before each (default 30)
  --out       results directory (default bench/results)`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      only: { type: "string" },
      runs: { type: "string", default: "5" },
      refreshes: { type: "string", default: "30" },
      stack: { type: "string", default: "local" },
      node: { type: "string", default: "spark-1" },
      base: { type: "string" },
      commands: { type: "string", default: COMMANDS.join(",") },
      out: { type: "string", default: path.join(repoRoot, "bench", "results") },
      "edit-file": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const only = values.only ? values.only.split(",") : [...ITEMS];
  const unknown = only.filter((i) => !(ITEMS as readonly string[]).includes(i));
  const runs = Number(values.runs);
  const refreshes = Number(values.refreshes);
  const commands = values.commands.split(",") as NoopCommand[];
  if (
    unknown.length ||
    !Number.isInteger(runs) ||
    runs < 1 ||
    !Number.isInteger(refreshes) ||
    refreshes < 1 ||
    commands.some((c) => !COMMANDS.includes(c))
  ) {
    console.error(`bench: bad arguments\n${USAGE}`);
    return 2;
  }
  const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);
  const started = new Date();
  const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], {
    cwd: repoRoot,
    encoding: "utf8",
  }).trim();
  const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], {
    cwd: repoRoot,
    encoding: "utf8",
  }).trim();
  const pulumiVersion = execFileSync(pulumiBinary(), ["version"], { encoding: "utf8" }).trim();
  const m = machine();
  const loadStart = load1();
  const results: Record<string, unknown> = {};
  const md: string[] = [];
  if (only.includes("noop")) {
    const r = runNoop({
      stack: values.stack,
      runs,
      base: values.base,
      commands,
      editFile: values["edit-file"],
      log,
    });
    results.noop = r;
    md.push("## 1. No-op cost", "", noopMarkdown(r, values.base));
  }
  if (only.includes("quiet")) {
    const r = await runQuiet({ stack: values.stack, refreshes, log });
    results.quiet = r;
    md.push(
      "## Issue 32: drift checks stay quiet with client traffic between them",
      "",
      quietMarkdown(r),
    );
  }
  if (only.includes("memory")) {
    const args = [
      "up",
      "--yes",
      "--stack",
      values.stack,
      "--expect-no-changes",
      "--non-interactive",
    ];
    args.push(...policyPackArgs(values.stack));
    log("memory: one up with its processes sampled");
    const r = await peakRss(pulumiBinary(), args, { cwd: repoRoot, env: pulumiEnv() });
    const roles = byRole(r.peaks);
    results.memory = { command: `pulumi ${args.join(" ")}`, ...r, roles };
    md.push(
      "## 8. Memory: peak RSS of a no-op `up`",
      "",
      `\`pulumi ${args.join(" ")}\` (exit ${r.exitCode}, ${r.seconds.toFixed(1)} s), every process sampled each 200 ms from /proc (VmHWM):`,
      "",
      "| process | peak RSS | processes |",
      "|---|---:|---:|",
      ...roles.map((x) => `| ${x.role} | ${x.peakMiB.toFixed(0)} MiB | ${x.processes} |`),
      "",
    );
  }
  if (only.includes("model-bytes")) {
    const r = await runModelBytes({ runs, outDir: values.out, log });
    results["model-bytes"] = r;
    md.push("## 3. `refresh` as model bytes grow", "", modelBytesMarkdown(r));
  }
  if (only.includes("serving")) {
    const r = runServingLoad({ stack: values.stack, runs, log });
    results.serving = r;
    md.push("## 7. Serving: model load and smoke", "", servingLoadMarkdown(r));
  }
  if (only.includes("router")) {
    const r = await runRouter({ stack: values.stack, node: values.node, runs, log });
    results.router = r;
    md.push("## 9. Router: its cost, replicas, TTFT", "", routerMarkdown(r));
  }
  if (only.includes("swap")) {
    const r = runSwap({ stack: values.stack, runs, log });
    results.swap = r;
    md.push("## 10. Hot swap against a cold load", "", swapMarkdown(r));
  }
  if (only.some((i) => (SIM_ITEMS as readonly string[]).includes(i))) {
    const prefix = `${started.toISOString().slice(0, 10)}-${m.hostname}${values.only ? `-${only.join("+")}` : ""}`;
    const r = runSimItems(only, { runs, out: values.out, prefix, log });
    Object.assign(results, r.results);
    md.push(...r.md);
  }
  const cliItems = only.filter((i) => (CLI_ITEMS as readonly string[]).includes(i));
  if (cliItems.length > 0) {
    const r = runCli({
      items: cliItems,
      stack: values.stack,
      node: values.node,
      runs,
      base: values.base,
      log,
    });
    results.cli = r;
    md.push(
      "## Issue 25: the CLI's start, `run` against a fresh ssh, `sync` against rsync + sha256",
      "",
      cliMarkdown(r),
    );
  }
  const loadEnd = load1();
  const date = started.toISOString().slice(0, 10);
  // A partial run (--only) gets its own file, so it does not replace a full one.
  const name = `${date}-${m.hostname}${values.only ? `-${only.join("+")}` : ""}`;
  mkdirSync(values.out, { recursive: true });
  const header = [
    `# sparkform benchmarks — ${m.hostname}, ${date}`,
    "",
    `${started.toISOString()} → ${new Date().toISOString()}; commit \`${commit}\`${dirty ? " (with uncommitted changes)" : ""}; ` +
      `\`npm run bench -- ${process.argv.slice(2).join(" ")}\`.`,
    "",
    `Machine: ${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB, kernel ${m.kernel}, node ${m.node}, pulumi ${pulumiVersion}. ` +
      `Load average (1 min) ${loadStart} at the start, ${loadEnd} at the end: the machine is shared, so read the ratios (same rounds) rather than the absolute times.`,
    "",
  ];
  // Formatted as the repository's formatter would, with its config (npm run lint checks
  // committed results: a short array fits on one line at the project's width).
  const style = (await resolveConfig(path.join(values.out, `${name}.json`))) ?? {};
  const text = await format([...header, ...md].join("\n"), { ...style, parser: "markdown" });
  writeFileSync(path.join(values.out, `${name}.md`), text);
  writeFileSync(
    path.join(values.out, `${name}.json`),
    await format(
      JSON.stringify({
        machine: m,
        pulumi: pulumiVersion,
        commit,
        started,
        argv: process.argv.slice(2),
        loadStart,
        loadEnd,
        results,
      }),
      { ...style, parser: "json" },
    ),
  );
  log(`wrote ${path.join(values.out, name)}.{md,json}`);
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
