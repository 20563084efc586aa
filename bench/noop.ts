// Item 1 of issue 16, the cost of doing nothing: `preview`, `refresh` and `up` with
// `--expect-no-changes` on the converged stack, against
//   - the floor: the same commands on an empty one-output stack, same CLI, same settings;
//   - the hand check (bench/hand-check.sh): what a cron script checks in one ssh per node;
//   - optionally a baseline checkout (--base DIR) run on the same stack, for before/after.
// All variants are interleaved sample by sample, the order rotated every round.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { pulumiBinary, pulumiEnv, repoRoot, stateDir } from "../setup/pulumi/env";
import { breakdown, type Phase } from "./phases";
import { tailMarkdown } from "./lib/report";
import { fmt, load1, summarize, type Summary } from "./lib/stats";
import { rotation } from "./lib/rounds";
import { policyPackArgs } from "../setup/pulumi/policy";
import { stackState } from "../cli/engine";
import type { Kind } from "../components/kinds";
import { nodeOf, resourcesOf } from "../stack-state";

/**
 * `refresh-once` is `refresh --skip-preview`: the nodes measured once, where plain `refresh --yes`
 * measures twice (its preview, then the refresh). `preview-refresh` is `preview --refresh`, the
 * README's cron form of a drift check (issue 32): it reads every resource and changes nothing.
 */
export const COMMANDS = ["preview", "refresh", "refresh-once", "preview-refresh", "up"] as const;
export type NoopCommand = (typeof COMMANDS)[number];

/** Each command's goal, in multiples of floor + hand check (issues 16, 25 and 32). */
export const NOOP_GOALS: Record<NoopCommand, number> = {
  preview: 2,
  refresh: 1.5,
  "refresh-once": 1.5,
  "preview-refresh": 2,
  up: 1.5,
};

/** The pulumi verb and its flags before the common ones. */
function verb(cmd: NoopCommand): string[] {
  switch (cmd) {
    case "refresh-once":
      return ["refresh", "--skip-preview", "--yes"];
    case "preview-refresh":
      return ["preview", "--refresh"];
    case "preview":
      return ["preview"];
    case "refresh":
    case "up":
      return [cmd, "--yes"];
    default: {
      const never: never = cmd;
      throw new Error(`unknown no-op command ${String(never)}`);
    }
  }
}

/** Whether a command takes the policy pack: not the refreshes (a refresh runs no policy). */
const withPolicy = (cmd: NoopCommand) => cmd === "preview" || cmd === "up";

export interface Sample {
  variant: string;
  round: number;
  seconds: number;
  exitCode: number;
  load1: number;
}

interface Variant {
  name: string;
  /** What the markdown shows as the command. */
  display: string;
  run(extra?: string[]): { exitCode: number; output: string };
}

export interface NoopResult {
  stack: string;
  runs: number;
  commands: Record<string, string>;
  samples: Sample[];
  summary: Record<string, Summary>;
  ratios: Record<string, number>;
  breakdown: Record<string, Phase[]>;
  failures: string[];
}

export function pulumiArgs(cmd: NoopCommand, stack: string, policy: boolean): string[] {
  return [
    ...verb(cmd),
    "--stack",
    stack,
    "--expect-no-changes",
    "--non-interactive",
    ...(policy && withPolicy(cmd) ? policyPackArgs(stack) : []),
  ];
}

function pulumiVariant(
  name: string,
  cwd: string,
  cmd: NoopCommand,
  stack: string,
  policy: boolean,
): Variant {
  const args = pulumiArgs(cmd, stack, policy);
  return {
    name,
    display: `(cd ${path.relative(repoRoot, cwd) || "."} && pulumi ${args.join(" ")})`,
    run: (extra = []) => {
      const r = spawnSync(pulumiBinary(), [...args, ...extra], {
        cwd,
        env: pulumiEnv(),
        encoding: "utf8",
        maxBuffer: 1 << 30,
      });
      return { exitCode: r.status ?? 1, output: `${r.stdout}\n${r.stderr}` };
    },
  };
}

/** The floor: an empty stack with one output, in its own project beside the state. */
export function floorProject(): string {
  const dir = path.join(stateDir(), "bench", "floor");
  mkdirSync(dir, { recursive: true });
  const project = readFileSync(path.join(repoRoot, "Pulumi.yaml"), "utf8")
    .replace(/^name: .*$/m, "name: sparkform-floor")
    .replace(/^main: .*$/m, "main: index.ts")
    .replace(/^stackConfigDir: .*$/m, "");
  writeFileSync(path.join(dir, "Pulumi.yaml"), project);
  writeFileSync(path.join(dir, "index.ts"), 'export const out = "floor";\n');
  writeFileSync(path.join(dir, "package.json"), '{ "name": "floor", "main": "index.ts" }\n');
  cpSync(path.join(repoRoot, "tsconfig.json"), path.join(dir, "tsconfig.json"));
  if (!existsSync(path.join(dir, "node_modules"))) {
    symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
  }
  const env = pulumiEnv();
  const pulumi = (args: string[]) =>
    spawnSync(pulumiBinary(), [...args, "--non-interactive"], { cwd: dir, env, encoding: "utf8" });
  if (pulumi(["stack", "select", "floor"]).status !== 0) {
    const init = pulumi(["stack", "init", "floor", "--secrets-provider", "passphrase"]);
    if (init.status !== 0) throw new Error(`floor stack init failed: ${init.stderr}`);
  }
  const up = pulumi(["up", "--yes", "--stack", "floor"]);
  if (up.status !== 0) throw new Error(`floor stack up failed: ${up.stdout}${up.stderr}`);
  return dir;
}

/** bench/hand-check.sh's expectations, from the stack's state (what refresh compares with). */
function handCheckEnv(stack: string): string {
  const state = stackState(stack);
  const of = (k: Kind) => resourcesOf(state, k);
  const tree = of("TreeSync")[0]?.outputs as
    { source: string; dest: string; exclude: { path?: string; name?: string }[] } | undefined;
  const build = of("NativeBuild")[0]?.outputs as
    { installDir: string; artifacts: Record<string, string> } | undefined;
  const model = of("ModelReplica")[0]?.outputs as
    { dir: string; files: { path: string; size: number }[] } | undefined;
  const nodes = of("SparkNode").flatMap((n) => nodeOf(n) ?? []);
  if (!tree || !build || !model) throw new Error(`stack ${stack} lacks a tree, build or model`);
  const sim = JSON.parse(readFileSync(path.join(stateDir(), "sim", "cluster.json"), "utf8")) as {
    sshConfigPath: string;
  };
  const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const lines = [
    `HC_SSH_CONFIG=${q(sim.sshConfigPath)}`,
    `HC_NODES=${q(nodes.join(" "))}`,
    `HC_TREE_SOURCE=${q(tree.source)}`,
    `HC_TREE_DEST=${q(tree.dest)}`,
    `HC_TREE_ARGS=${q(tree.exclude.map((e) => (e.path !== undefined ? `--exclude-path ${e.path}` : `--exclude-name ${e.name}`)).join(" "))}`,
    `HC_MODEL=${q(model.files.map((f) => `${f.size} ${model.dir}/${f.path}`).join("\n"))}`,
    `HC_ARTIFACTS=${q(
      Object.entries(build.artifacts)
        .map(([p, sha]) => `${sha} ${build.installDir}/${p}`)
        .join("\n"),
    )}`,
  ];
  const file = path.join(stateDir(), "bench", "hand-check.env");
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

export interface NoopOptions {
  stack: string;
  runs: number;
  /** A baseline checkout to measure on the same stack ("before"); its own Pulumi.yaml. */
  base?: string;
  commands: readonly NoopCommand[];
  /** Also time `preview` right after appending a comment to this file (repository-relative). */
  editFile?: string;
  log(s: string): void;
}

export function runNoop(opts: NoopOptions): NoopResult {
  const floor = floorProject();
  const env = handCheckEnv(opts.stack);
  const variants: Variant[] = [];
  for (const cmd of opts.commands) {
    variants.push(pulumiVariant(`${cmd}`, repoRoot, cmd, opts.stack, true));
    if (opts.base) variants.push(pulumiVariant(`${cmd} (base)`, opts.base, cmd, opts.stack, true));
    variants.push(pulumiVariant(`${cmd} floor`, floor, cmd, "floor", false));
  }
  if (opts.editFile) {
    // A converged stack right after a source edit (a comment line appended, so nothing in state
    // changes): what a developer's next preview costs. The edit is undone after each sample.
    const rel = opts.editFile;
    const edited = (v: Variant, dir: string): Variant => ({
      name: `${v.name}, ${rel} edited`,
      display: `echo "// bench <n>" >> ${rel}; ${v.display}`,
      run: (extra) => {
        const file = path.join(dir, rel);
        const original = readFileSync(file);
        writeFileSync(file, Buffer.concat([original, Buffer.from(`// bench ${Date.now()}\n`)]));
        try {
          return v.run(extra);
        } finally {
          writeFileSync(file, original);
        }
      },
    });
    variants.push(
      edited(pulumiVariant("preview", repoRoot, "preview", opts.stack, true), repoRoot),
    );
    if (opts.base) {
      const b = pulumiVariant("preview (base)", opts.base, "preview", opts.stack, true);
      variants.push(edited(b, opts.base));
    }
  }
  const handCheck = path.join(repoRoot, "bench", "hand-check.sh");
  variants.push({
    name: "hand check",
    display: `bench/hand-check.sh ${path.relative(repoRoot, env)}`,
    run: () => {
      const r = spawnSync(handCheck, [env], { encoding: "utf8" });
      return { exitCode: r.status ?? 1, output: `${r.stdout}${r.stderr}` };
    },
  });

  // Where the seconds go: one verbose run of each (not among the timed samples).
  const phases: Record<string, Phase[]> = {};
  for (const v of variants.filter(
    (x) => !x.name.includes("floor") && x.name !== "hand check" && !x.name.includes("edited"),
  )) {
    opts.log(`breakdown: ${v.name}`);
    const t = Date.now();
    const r = v.run(["--logtostderr", "-v=9", "--logflow"]);
    phases[v.name] = breakdown(r.output, (Date.now() - t) / 1000);
  }

  const samples: Sample[] = [];
  const failures: string[] = [];
  for (let round = 0; round < opts.runs; round++) {
    for (const v of rotation(variants, round)) {
      const load = load1();
      const t = process.hrtime.bigint();
      const r = v.run();
      const seconds = Number(process.hrtime.bigint() - t) / 1e9;
      samples.push({ variant: v.name, round, seconds, exitCode: r.exitCode, load1: load });
      opts.log(
        `round ${round + 1}/${opts.runs} ${v.name}: ${seconds.toFixed(2)} s rc=${r.exitCode} load ${load}`,
      );
      if (r.exitCode !== 0)
        failures.push(`${v.name} round ${round}: exit ${r.exitCode}\n${r.output.slice(-2000)}`);
    }
  }
  const summary: Record<string, Summary> = {};
  for (const v of variants) {
    summary[v.name] = summarize(samples.filter((s) => s.variant === v.name).map((s) => s.seconds));
  }
  const ratios: Record<string, number> = {};
  const hand = summary["hand check"]!.median;
  for (const cmd of opts.commands) {
    const floorMedian = summary[`${cmd} floor`]!.median;
    ratios[`${cmd} / (floor + hand check)`] = summary[cmd]!.median / (floorMedian + hand);
    if (opts.base) {
      ratios[`${cmd} (base) / (floor + hand check)`] =
        summary[`${cmd} (base)`]!.median / (floorMedian + hand);
      ratios[`${cmd} / ${cmd} (base)`] = summary[cmd]!.median / summary[`${cmd} (base)`]!.median;
    }
  }
  if (opts.editFile && opts.base) {
    const e = `, ${opts.editFile} edited`;
    ratios[`preview${e} / preview (base)${e}`] =
      summary[`preview${e}`]!.median / summary[`preview (base)${e}`]!.median;
  }
  return {
    stack: opts.stack,
    runs: opts.runs,
    commands: Object.fromEntries(variants.map((v) => [v.name, v.display])),
    samples,
    summary,
    ratios,
    breakdown: phases,
    failures,
  };
}

export function noopMarkdown(r: NoopResult, base?: string): string {
  const out: string[] = [];
  const hand = r.summary["hand check"]!;
  out.push(
    `Stack \`${r.stack}\`, ${r.runs} interleaved rounds (variant order rotated each round). ` +
      "Goal: ≤ 1.5 × (floor + hand check) (issue 16); issue 25 keeps that for `refresh --skip-preview` " +
      "(`refresh-once`) and asks `preview` for ≤ 2 ×; issue 32 asks `preview --refresh` " +
      "(`preview-refresh`, the README's cron form) for ≤ 2 ×." +
      (base
        ? ` "base" = the checkout in \`${base}\`, run on the same stack in the same rounds.`
        : ""),
    "",
    "| command | median (min–max) | floor | floor + hand check | ratio | goal met |",
    "|---|---|---|---|---:|---|",
  );
  for (const name of Object.keys(r.summary).filter(
    (n) => !n.includes("floor") && n !== "hand check",
  )) {
    const cmd = name.split(/[ ,]/)[0] as NoopCommand;
    const floor = r.summary[`${cmd} floor`]!;
    const ratio = r.summary[name]!.median / (floor.median + hand.median);
    const goal = NOOP_GOALS[cmd] ?? 1.5;
    out.push(
      `| \`${name}\` | ${fmt(r.summary[name]!)} | ${fmt(floor)} | ${(floor.median + hand.median).toFixed(2)} s | ${ratio.toFixed(2)}× | ${ratio <= goal ? "yes" : "no"} (≤ ${goal}×) |`,
    );
  }
  out.push(`| hand check | ${fmt(hand)} | | | | |`, "");
  const rel = Object.entries(r.ratios).filter(
    ([k]) => k.includes("(base)") && !k.includes("floor"),
  );
  if (rel.length) {
    out.push("Before → after, same rounds:", "");
    for (const [k, v] of rel) out.push(`- \`${k}\` = ${v.toFixed(2)}×`);
    out.push("");
  }
  if (Object.keys(r.breakdown).length) {
    out.push(
      "### Where the seconds go",
      "",
      "One extra run of each with `--logtostderr -v=9 --logflow` (not among the samples; the " +
        "verbose log slows it somewhat), phases from the engine's log timestamps:",
      "",
    );
    const names = Object.keys(r.breakdown);
    const phaseNames = [...new Set(names.flatMap((n) => r.breakdown[n]!.map((p) => p.phase)))];
    out.push(`| phase | ${names.join(" | ")} |`, `|---|${names.map(() => "---:").join("|")}|`);
    for (const ph of phaseNames) {
      out.push(
        `| ${ph} | ${names
          .map((n) => {
            const p = r.breakdown[n]!.find((x) => x.phase === ph);
            return p ? `${p.seconds.toFixed(2)} s` : "–";
          })
          .join(" | ")} |`,
      );
    }
    out.push("");
  }
  out.push(
    ...tailMarkdown({
      samples: r.samples,
      variants: Object.keys(r.summary),
      commands: r.commands,
      failures: r.failures,
    }),
  );
  return out.join("\n");
}
