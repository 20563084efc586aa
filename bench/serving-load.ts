// Item 7 of issue 16, serving: how long the model takes to load across the pair (the
// llama-server unit's (re)start until /health answers 200), the first and the second load, with
// the worker's tensor cache as the pre-warm left it and with it emptied; and the smoke's tokens/s
// split across the pair against spark-1 alone (native/serving/smoke.py, as `up` runs it).
// Everything is read from the converged stack's state (the LlamaServer and RpcWorker resources).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import {
  referencePort,
  referenceSmokeCommand,
  referenceStartCommand,
  referenceStopCommand,
} from "../components/serving/commands";
import type { LlamaServerInputs } from "../components/serving/state";
import { nativeProgram } from "../components/native-script";
import { type ServingPlan, referenceFits } from "../components/serving/placement";
import { CACHE_DIR } from "../components/rpc-worker/commands";
import { buildRemoteCommand, type RemoteScript, shJoin } from "../components/transport";
import { stateDir } from "../setup/pulumi/env";
import type { SimCluster } from "../sim/state";
import { tailMarkdown } from "./lib/report";
import { stackState } from "../cli/engine";
import { nodeOf, resourcesOf } from "../stack-state";
import { fmt, load1, summarize, type Summary } from "./lib/stats";
import { rotation } from "./lib/rounds";

/** Where the worker's pre-warmed entries wait while a round runs with an empty cache. */
const SAVED = "~/.cache/sparkform/bench-rpc-prewarmed";

interface Server {
  node: string;
  unit: string;
  bind: string;
  port: number;
  binary: string;
  modelPath: string;
  clientDevice: string;
  plan: ServingPlan;
  smokeRequest: { prompt: string; tokens: number; seed: number };
  healthTimeoutSeconds: number;
}

export interface ServingSample {
  variant: string;
  round: number;
  seconds: number;
  exitCode: number;
  load1: number;
}

export interface ServingLoadResult {
  stack: string;
  runs: number;
  modelBytes: number;
  cacheEntries: number;
  commands: Record<string, string>;
  samples: ServingSample[];
  smoke: { round: number; split: number; single: number; identical: boolean }[];
  summary: Record<string, Summary>;
  ratios: Record<string, number>;
  failures: string[];
}

/** On the client node: restart the unit, then poll /health every 20 ms; prints the seconds. */
const TIMED_RESTART = `
import subprocess, sys, time, urllib.request
unit, url, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
# systemd refuses a unit started more than 5 times in 10 s (start-limit-hit); the rounds do.
subprocess.run(["systemctl", "--user", "reset-failed", unit + ".service"], check=False)
t0 = time.monotonic()
subprocess.run(["systemctl", "--user", "restart", unit + ".service"], check=True)
while time.monotonic() - t0 < limit:
    try:
        if urllib.request.urlopen(url, timeout=2).status == 200:
            print("seconds %.4f" % (time.monotonic() - t0))
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.02)
sys.exit(6)
`;

function ssh(c: SimCluster, node: string, command: string, input?: string) {
  const r = spawnSync("ssh", ["-F", c.sshConfigPath, node, command], {
    encoding: "utf8",
    input,
    maxBuffer: 1 << 26,
  });
  return { exitCode: r.status ?? 1, stdout: r.stdout, output: `${r.stdout}${r.stderr}` };
}

/** A node program's command as `up` sends it (the transport's own rendering: env contract, stdin). */
function sshScript(c: SimCluster, node: string, rs: RemoteScript) {
  const built = buildRemoteCommand(rs);
  return ssh(c, node, built.commandLine, built.stdin);
}

export interface ServingLoadOptions {
  stack: string;
  runs: number;
  log(s: string): void;
}

export function runServingLoad(opts: ServingLoadOptions): ServingLoadResult {
  const c = JSON.parse(
    fs.readFileSync(path.join(stateDir(), "sim", "cluster.json"), "utf8"),
  ) as SimCluster;
  const state = stackState(opts.stack);
  const server = resourcesOf(state, "LlamaServer")[0]?.inputs as Server | undefined;
  const worker = resourcesOf(state, "RpcWorker")[0];
  const model = resourcesOf(state, "ModelReplica")[0]?.outputs as
    { files: { size: number }[] } | undefined;
  if (!server || !worker || !model) throw new Error(`stack ${opts.stack} serves no model`);
  const workerNode = nodeOf(worker);
  if (!workerNode) throw new Error(`stack ${opts.stack} records no node for its RPC worker`);
  const prewarmed = (worker.outputs.prewarmed ?? { entries: 0 }) as { entries: number };
  const health = `http://${server.bind.includes(":") ? `[${server.bind}]` : server.bind}:${server.port}/health`;
  const restartCmd = shJoin([
    "python3",
    "-",
    server.unit,
    health,
    String(server.healthTimeoutSeconds),
  ]);

  // Keep what the pre-warm wrote, so both variants start each round from a known cache.
  const cache = CACHE_DIR.replace(/^~\//, "");
  const saved = SAVED.replace(/^~\//, "");
  const save = ssh(
    c,
    workerNode,
    `cd && rm -rf ${saved} && mkdir -p ${cache} && cp -a ${cache} ${saved}`,
  );
  if (save.exitCode !== 0) throw new Error(`saving the worker's cache failed: ${save.output}`);
  const setCache = (prewarm: boolean) =>
    ssh(
      c,
      workerNode,
      `cd && rm -rf ${cache} && ${prewarm ? `cp -a ${saved} ${cache}` : `mkdir -p ${cache}`}`,
    );

  const variants = ["pre-warmed", "empty cache"] as const;
  const samples: ServingSample[] = [];
  const smoke: ServingLoadResult["smoke"] = [];
  const failures: string[] = [];
  const withReference = !referenceFits(server.plan);
  const refPort = referencePort(server.port);
  const ref = server as unknown as LlamaServerInputs;
  const smokeCmd = shJoin([
    "python3",
    "-",
    `http://${server.bind}:${server.port}`,
    String(server.smokeRequest.tokens),
    String(server.smokeRequest.seed),
    server.smokeRequest.prompt,
    "-",
  ]);
  /** The single-node reference as the smoke runs it: start.sh, one /completion, stop.sh. */
  const single = (): { tokens?: number[]; tokensPerSecond?: number } => {
    if (!withReference) return {};
    try {
      const start = sshScript(c, server.node, referenceStartCommand(ref, refPort));
      if (start.exitCode !== 0) throw new Error(`reference start: ${start.output.slice(-2000)}`);
      const r = sshScript(c, server.node, referenceSmokeCommand(ref, refPort));
      return JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}") as {
        tokens?: number[];
        tokensPerSecond?: number;
      };
    } finally {
      sshScript(c, server.node, referenceStopCommand(ref, refPort));
    }
  };
  // As sent to a node: native/lib/ inlined.
  const smokeScript = nativeProgram("serving/smoke.py").text;
  try {
    for (let round = 0; round < opts.runs; round++) {
      for (const v of rotation(variants, round)) {
        const prep = setCache(v === "pre-warmed");
        if (prep.exitCode !== 0) failures.push(`${v} round ${round}: cache setup: ${prep.output}`);
        for (const load of ["first", "second"]) {
          const name = `${v}, ${load} load`;
          const l = load1();
          const r = ssh(c, server.node, restartCmd, TIMED_RESTART);
          const seconds = Number(/^seconds (\S+)$/m.exec(r.stdout)?.[1] ?? NaN);
          samples.push({ variant: name, round, seconds, exitCode: r.exitCode, load1: l });
          opts.log(
            `serving round ${round + 1}/${opts.runs} ${name}: ${seconds.toFixed(3)} s rc=${r.exitCode} load ${l}`,
          );
          if (r.exitCode !== 0)
            failures.push(`${name} round ${round}: exit ${r.exitCode}\n${r.output.slice(-2000)}`);
        }
      }
      const s = ssh(c, server.node, smokeCmd, smokeScript);
      try {
        const o = JSON.parse(s.stdout.trim().split("\n").pop() ?? "") as {
          tokens: number[];
          tokensPerSecond: number;
        };
        const reference = single();
        const alone = reference.tokensPerSecond ?? NaN;
        const identical = JSON.stringify(o.tokens) === JSON.stringify(reference.tokens);
        smoke.push({ round, split: o.tokensPerSecond, single: alone, identical });
        opts.log(
          `serving round ${round + 1} smoke: split ${o.tokensPerSecond.toFixed(1)} tokens/s, alone ${alone.toFixed(1)}, identical ${identical}`,
        );
      } catch (err) {
        failures.push(
          `smoke round ${round}: exit ${s.exitCode}\n${s.output.slice(-2000)}\n${String(err)}`,
        );
      }
    }
  } finally {
    // The worker's cache as the pre-warm left it, and the server loaded.
    setCache(true);
    ssh(c, workerNode, `cd && rm -rf ${saved}`);
    ssh(c, server.node, restartCmd, TIMED_RESTART);
  }
  const summary: Record<string, Summary> = {};
  for (const v of variants) {
    for (const load of ["first", "second"]) {
      const n = `${v}, ${load} load`;
      summary[n] = summarize(samples.filter((s) => s.variant === n).map((s) => s.seconds));
    }
  }
  const splitTps = summarize(smoke.map((s) => s.split));
  const singleTps = summarize(smoke.map((s) => s.single));
  const m = (n: string) => summary[n]!.median;
  const ratios = {
    "pre-warmed first / empty cache first":
      m("pre-warmed, first load") / m("empty cache, first load"),
    "empty cache second / empty cache first":
      m("empty cache, second load") / m("empty cache, first load"),
    "pre-warmed second / pre-warmed first":
      m("pre-warmed, second load") / m("pre-warmed, first load"),
    "smoke tokens/s split / single node": splitTps.median / singleTps.median,
  };
  return {
    stack: opts.stack,
    runs: opts.runs,
    modelBytes: model.files.reduce((a, f) => a + f.size, 0),
    cacheEntries: prewarmed.entries,
    commands: {
      load: `ssh ${server.node} ${restartCmd} < <the timed restart in bench/serving-load.ts: systemctl --user restart ${server.unit}, then GET ${health} every 20 ms>`,
      "pre-warmed": `ssh ${workerNode} 'rm -rf ~/${cache} && cp -a ${SAVED} ~/${cache}'  (the entries the stack's pre-warm wrote, saved at the start)`,
      "empty cache": `ssh ${workerNode} 'rm -rf ~/${cache} && mkdir -p ~/${cache}'`,
      smoke: `ssh ${server.node} ${smokeCmd} < native/serving/smoke.py; then the single-node reference: native/unit/start.sh, smoke.py --reference, native/unit/stop.sh (as \`up\` runs them)`,
    },
    samples,
    smoke,
    summary,
    ratios,
    failures,
  };
}

export function servingLoadMarkdown(r: ServingLoadResult): string {
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const tps = (xs: number[]) => {
    const s = summarize(xs);
    return `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})`;
  };
  return [
    `Stack \`${r.stack}\`, model ${mib(r.modelBytes)}; the worker's pre-warm wrote ${r.cacheEntries} ` +
      `cache entries (ggml-rpc caches only tensors over 10 MiB)` +
      (r.cacheEntries === 0
        ? ": the sim's tiny model has none, so both variants load the same way here and the " +
          "pre-warm's effect is not measured by these numbers (see components/rpc-worker/README.md " +
          "for the 233 MB model's bytes over the fabric)"
        : "") +
      `. ${r.runs} rounds; in each, both variants in rotated order, each a first and a second ` +
      `restart of the llama-server unit, timed on ${"the client node"} from the restart until /health is 200.`,
    "",
    "| load | median (min–max) |",
    "|---|---|",
    ...Object.entries(r.summary).map(([k, v]) => `| ${k} | ${fmt(v, 3)} |`),
    "",
    `Smoke (${r.smoke.length} runs, one per round, after the loads): split across the pair ` +
      `${tps(r.smoke.map((s) => s.split))} tokens/s, client node alone ${tps(r.smoke.map((s) => s.single))} tokens/s; ` +
      `tokens identical in ${r.smoke.filter((s) => s.identical).length} of ${r.smoke.length}.`,
    "",
    "| ratio (same rounds) | value |",
    "|---|---:|",
    ...Object.entries(r.ratios).map(([k, v]) => `| ${k} | ${v.toFixed(2)}× |`),
    "",
    ...tailMarkdown({ ...r, variants: Object.keys(r.summary) }, 3),
  ].join("\n");
}
