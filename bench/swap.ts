// Issue 24, part 3's bench: a hot swap (the served model switched between two staged ones with
// `sparkform:server.model`: only llama-server restarts) against a cold load (the model changed
// the only way there was before staging: `sparkform:model` itself pointed at the other model,
// so `up` fetches it, verifies it, fans it out, pre-warms the worker and then loads it).
//
// On the converged local stack (`npm run local`; its hub publishes both test models). Each
// round, in rotated order, times whole `pulumi up` runs (what the operator waits for):
//   hot:  stage the second model (untimed), then switch to it and back (two timed ups);
//   cold: no staging (untimed), then sparkform:model to the second model and back (two timed).
// Every hot up is checked: the worker's PID is the one it had before. The servers' readiness
// (port open, /health, first token) comes from the LlamaServer's smoke in the outputs.
// The stack file is restored and `up` run at the end, so the stack is as the bench found it.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { readStack } from "../cli/stack";
import { outputsOf } from "./lib/outputs";
import { shJoin } from "../components/transport";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { policyPackArgs } from "../setup/pulumi/policy";
import { publishStagedTestModel } from "../sim/hub";
import { median, summarizeOrEmpty, type Summary } from "./lib/stats";
import { paired, rotation } from "./lib/rounds";

export type SwapVariant = "hot" | "cold";
const VARIANTS: readonly SwapVariant[] = ["hot", "cold"];

export interface Readiness {
  portOpenSeconds: number;
  healthSeconds: number;
  firstTokenSeconds: number;
}

export interface SwapSample {
  variant: SwapVariant;
  round: number;
  /** "to" the second model, or "back" to the first. */
  direction: "to" | "back";
  /** Wall seconds of the `pulumi up`. */
  seconds: number;
  /** The client server's readiness after it (smoke.readiness). */
  readiness: Readiness | null;
  /** The worker's MainPID before and after (hot: must be equal). */
  workerPid: { before: number; after: number };
}

export interface SwapResult {
  stack: string;
  runs: number;
  model: { repo: string; commit: string; file: string };
  commands: Record<string, string>;
  samples: SwapSample[];
  /** Per round: the hot up's seconds ÷ the cold up's, same direction, same round. */
  ratio: Summary;
  hot: Summary;
  cold: Summary;
  hotFirstToken: Summary;
  coldFirstToken: Summary;
}

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

function pulumi(args: string[], what: string): void {
  const r = spawnSync(pulumiBinary(), args, {
    cwd: repoRoot,
    env: pulumiEnv(),
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0)
    throw new Error(`${what}: pulumi ${args.join(" ")} exited ${r.status}\n${r.stdout}${r.stderr}`);
}

/** A model's `sparkform:` config as `--path` keys → values (one file each, its SHA-256 pinned). */
function modelKeys(
  prefix: string,
  m: { repo: string; commit: string; file: string; sha256: string; endpoint: string },
) {
  return [
    `${prefix}.repo=${m.repo}`,
    `${prefix}.revision=${m.commit}`,
    `${prefix}.files[0]=${m.file}`,
    `${prefix}.sha256["${m.file}"]=${m.sha256}`,
    `${prefix}.endpoint=${m.endpoint}`,
  ];
}

export interface SwapOptions {
  stack: string;
  runs: number;
  log: (s: string) => void;
}

export function runSwap(opts: SwapOptions): SwapResult {
  const { stack } = opts;
  const view = readStack(stack);
  const primary = view.config.model;
  if (!primary || !view.config.server)
    throw new Error(`stack ${stack} serves no model: run \`npm run local\` first`);
  if (view.config.models)
    throw new Error(
      `stack ${stack} already stages sparkform:models: the bench stages its own; remove them first`,
    );
  const outputs = outputsOf(stack);
  const worker = Object.entries(isRecord(outputs.worker) ? outputs.worker : {})[0];
  if (!worker || !isRecord(worker[1]))
    throw new Error(`stack ${stack} has no worker: the bench checks that a swap keeps its PID`);
  const [workerNode, w] = worker;
  const workerUnit = String(w.unit);
  // The second model, as the local hub publishes it (same bytes, same commit).
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-swap-"));
  const b = publishStagedTestModel(tmp);
  fs.rmSync(tmp, { recursive: true, force: true });
  const second = {
    repo: b.repo,
    commit: b.commit,
    file: b.model.path,
    sha256: b.model.sha256,
    endpoint: primary.endpoint,
  };
  const firstFile = primary.files[0] as string;
  const firstSha = primary.sha256[firstFile];
  if (primary.files.length !== 1 || !firstSha)
    throw new Error(
      `stack ${stack}'s sparkform:model is not one file with its sha256 pinned (the local stack's is)`,
    );
  const first = {
    repo: primary.repo,
    commit: primary.revision,
    file: firstFile,
    sha256: firstSha,
    endpoint: primary.endpoint,
  };
  const stackFile = path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`);
  const saved = fs.readFileSync(stackFile, "utf8");
  const sshConfig = view.config.sshConfigPath;
  const pid = () => {
    const r = spawnSync(
      "ssh",
      [
        ...(sshConfig ? ["-F", sshConfig] : []),
        workerNode,
        shJoin(["systemctl", "--user", "show", "-p", "MainPID", "--value", workerUnit]),
      ],
      { encoding: "utf8" },
    );
    return Number(r.stdout.trim());
  };
  const setAll = (keys: string[]) =>
    pulumi(
      ["config", "set-all", "-s", stack, "--path", ...keys.flatMap((k) => ["--plaintext", k])],
      "config",
    );
  const rm = (key: string) => pulumi(["config", "rm", "-s", stack, "--path", key], "config rm");
  const upArgs = ["up", "--yes", "--skip-preview", "-s", stack, ...policyPackArgs(stack)];
  const up = (what: string) => {
    const t = process.hrtime.bigint();
    pulumi(upArgs, what);
    return Number(process.hrtime.bigint() - t) / 1e9;
  };
  const readiness = (): Readiness | null => {
    const o = outputsOf(stack);
    const s = isRecord(o.serving) && isRecord(o.serving.smoke) ? o.serving.smoke : {};
    const r = isRecord(s.readiness) ? s.readiness : undefined;
    return r
      ? {
          portOpenSeconds: Number(r.portOpenSeconds),
          healthSeconds: Number(r.healthSeconds),
          firstTokenSeconds: Number(r.firstTokenSeconds),
        }
      : null;
  };
  const samples: SwapSample[] = [];
  const timed = (variant: SwapVariant, round: number, direction: "to" | "back") => {
    const before = pid();
    const seconds = up(`${variant} ${direction}`);
    const after = pid();
    if (variant === "hot" && after !== before)
      throw new Error(`hot swap restarted the worker: PID ${before} → ${after}`);
    samples.push({
      variant,
      round,
      direction,
      seconds,
      readiness: readiness(),
      workerPid: { before, after },
    });
    opts.log(`swap: round ${round} ${variant} ${direction} ${seconds.toFixed(1)} s`);
  };
  try {
    for (let round = 0; round < opts.runs; round++) {
      for (const v of rotation(VARIANTS, round)) {
        if (v === "hot") {
          setAll(modelKeys("sparkform:models.b", second));
          up("stage the second model");
          setAll(["sparkform:server.model=b"]);
          timed("hot", round, "to");
          rm("sparkform:server.model");
          timed("hot", round, "back");
          rm("sparkform:models");
          up("unstage the second model");
        } else {
          rm("sparkform:model.sha256");
          setAll(modelKeys("sparkform:model", second));
          timed("cold", round, "to");
          rm("sparkform:model.sha256");
          setAll(modelKeys("sparkform:model", first));
          timed("cold", round, "back");
        }
      }
    }
  } finally {
    fs.writeFileSync(stackFile, saved);
    up("restore the stack");
  }
  return {
    stack,
    runs: opts.runs,
    model: { repo: second.repo, commit: second.commit, file: second.file },
    commands: {
      hot: `pulumi config set-all --path --plaintext sparkform:server.model=b && pulumi ${upArgs.join(" ")}`,
      cold: `pulumi config set-all --path ${modelKeys("sparkform:model", second)
        .map((k) => `--plaintext ${k}`)
        .join(" ")} && pulumi ${upArgs.join(" ")}`,
    },
    samples,
    ...analyzeSwap(samples),
  };
}

/** Each variant's `up` seconds and first token, and hot ÷ cold paired per round and direction. */
export function analyzeSwap(
  samples: readonly SwapSample[],
): Pick<SwapResult, "ratio" | "hot" | "cold" | "hotFirstToken" | "coldFirstToken"> {
  const of = (v: SwapVariant) => samples.filter((s) => s.variant === v);
  const ratios = paired(
    samples,
    () => true,
    "hot",
    "cold",
    (h, c) => h.seconds / c.seconds,
    (s) => `${s.round} ${s.direction}`,
  );
  const firstToken = (v: SwapVariant) =>
    summarizeOrEmpty(of(v).flatMap((s) => (s.readiness ? [s.readiness.firstTokenSeconds] : [])));
  return {
    ratio: summarizeOrEmpty(ratios),
    hot: summarizeOrEmpty(of("hot").map((s) => s.seconds)),
    cold: summarizeOrEmpty(of("cold").map((s) => s.seconds)),
    hotFirstToken: firstToken("hot"),
    coldFirstToken: firstToken("cold"),
  };
}

const sec = (s: Summary, d = 1) =>
  s.n ? `${s.median.toFixed(d)} s (${s.min.toFixed(d)}–${s.max.toFixed(d)})` : "–";

export function swapMarkdown(r: SwapResult): string {
  const rows = r.samples.map(
    (s) =>
      `| ${s.round} | ${s.variant} | ${s.direction} | ${s.seconds.toFixed(1)} | ${s.readiness ? s.readiness.portOpenSeconds.toFixed(2) : "–"} | ${s.readiness ? s.readiness.healthSeconds.toFixed(2) : "–"} | ${s.readiness ? s.readiness.firstTokenSeconds.toFixed(3) : "–"} | ${s.workerPid.before} → ${s.workerPid.after} |`,
  );
  return [
    `Stack \`${r.stack}\`, ${r.runs} rounds; the second model ${r.model.repo}@${r.model.commit.slice(0, 12)} (${r.model.file}).`,
    "",
    `- **hot swap** (staged, \`sparkform:server.model\` switched): \`up\` ${sec(r.hot)}; first token ${sec(r.hotFirstToken, 3)} after the server's start.`,
    `- **cold load** (\`sparkform:model\` pointed at the other model: fetched, verified, fanned out, pre-warmed, loaded): \`up\` ${sec(r.cold)}; first token ${sec(r.coldFirstToken, 3)}.`,
    `- **hot ÷ cold**, paired per round and direction: ${r.ratio.n ? `${r.ratio.median.toFixed(2)}× (${r.ratio.min.toFixed(2)}–${r.ratio.max.toFixed(2)})` : "–"}; median of medians ${(median(r.samples.filter((s) => s.variant === "hot").map((s) => s.seconds)) / median(r.samples.filter((s) => s.variant === "cold").map((s) => s.seconds))).toFixed(2)}×.`,
    "",
    "| round | variant | direction | up (s) | port open (s) | /health (s) | first token (s) | worker PID |",
    "|---:|---|---|---:|---:|---:|---:|---|",
    ...rows,
    "",
    "Commands:",
    "",
    ...Object.entries(r.commands).map(([k, c]) => `- ${k}: \`${c}\``),
    "",
  ].join("\n");
}
