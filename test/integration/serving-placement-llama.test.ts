// The plan's layer → device assignment and KV estimate against real llama.cpp 80fb11ac (the
// host build of the bundled source): the rendered llama-cli flags are handed to
// llama-completion with local ggml-rpc-servers standing in for the workers, and its own
// `load_tensors: layer N assigned to device D` and `KV buffer size` lines must be the plan's.
import { type ChildProcess, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTinyLlamaGguf } from "../../sim/gguf/make-model";
import { TINY_LLAMA_DIMS } from "../../sim/gguf/tiny-llama";
import { buildLlamaHost, type LlamaHostBuild } from "../../sim/llama";
import {
  kvBytesPerLayer,
  placementNodes,
  planPlacement,
  type ServingPlan,
} from "../../components/serving/placement";
import { renderLlamaCli } from "../../components/serving/render";
import { startRpcServer, stop } from "../support/local-rpc";
import { SERVER, TINY } from "../support/serving-fixtures";

let build: LlamaHostBuild;
let tmp: string;
let model: string;
let workers: string[];
const started: ChildProcess[] = [];

beforeAll(async () => {
  build = await buildLlamaHost();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-plan-"));
  model = writeTinyLlamaGguf(path.join(tmp, "tiny-llama-f16.gguf")).path;
  workers = [
    await startRpcServer(build.bin.rpcServer, started),
    await startRpcServer(build.bin.rpcServer, started),
  ];
});

afterAll(async () => {
  for (const p of started) await stop(p);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const N_LAYER = TINY_LLAMA_DIMS.nLayer;
const tiny = TINY;
const server = { ...SERVER, context: TINY_LLAMA_DIMS.nCtx, computeMarginBytes: 0 };

/** What llama.cpp did: the device of layers 0..n_layer, and KV MiB per buffer name. */
function load(plan: ServingPlan): { devices: string[]; kvMiB: Map<string, number> } {
  const argv = [...renderLlamaCli(plan, model), "-n", "1", "-p", "hi", "-t", "1"];
  argv.push("-no-cnv", "--no-warmup", "--simple-io", "-v");
  // The async logger can lose its tail at exit (see test/integration/hf-endpoint/llama-generate.test.ts);
  // the lines read here come early, so a run counts once it shows every layer and the KV.
  for (let attempt = 1; attempt <= 8; attempt++) {
    const r = spawnSync(build.bin.llamaCompletion, argv, {
      timeout: 120_000,
      maxBuffer: 64 << 20,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const err = r.stderr.toString("utf8");
    if (r.status !== 0) throw new Error(`llama-completion exited ${r.status}\n${err.slice(-3000)}`);
    const devices: string[] = [];
    for (const m of err.matchAll(/layer +(\d+) assigned to device (\S+?),/g))
      devices[Number(m[1])] = m[2] ?? "";
    const kvMiB = new Map<string, number>();
    for (const m of err.matchAll(/llama_kv_cache: +(\S+) KV buffer size = +([\d.]+) MiB/g))
      kvMiB.set(m[1] ?? "", Number(m[2]));
    if (devices.filter(Boolean).length === N_LAYER + 1 && kvMiB.size > 0) return { devices, kvMiB };
  }
  throw new Error("llama-completion lost its load log 8 times in a row");
}

/** The plan's layers, one device per layer index. */
const expand = (plan: ServingPlan) =>
  plan.layers.flatMap((l) => Array.from({ length: l.count }, () => l.device));

const nodes = (n: number, usable: number[]) =>
  placementNodes({
    client: "spark-1",
    clientDevice: "CPU",
    workers: workers.slice(0, n).map((endpoint, i) => ({ node: `spark-${i + 2}`, endpoint })),
    usable: (node) => ({ usableBytes: usable[Number(node.slice(6)) - 1] ?? 0, source: "declared" }),
  });

describe("planPlacement against llama.cpp's own load_tensors", () => {
  it.each([
    ["CPU + one worker, equal memory", 1, [8e9, 8e9], undefined],
    ["CPU + one worker, a quarter on the CPU", 1, [8e9, 8e9], [1, 3]],
    ["CPU + two workers, memory 1:1:2", 2, [4e9, 4e9, 8e9], undefined],
    ["CPU + two workers, configured 2:1:1", 2, [8e9, 8e9, 8e9], [2, 1, 1]],
  ] as const)("%s", (_, n, usable, tensorSplit) => {
    const plan = planPlacement({
      model: tiny,
      nodes: nodes(n, [...usable]),
      server: { ...server, ...(tensorSplit ? { tensorSplit: [...tensorSplit] } : {}) },
    });
    expect(plan.fits).toBe(true);
    const seen = load(plan);
    expect(seen.devices).toEqual(expand(plan));
    // Layers on both the CPU and the workers, as the simulated cluster must show.
    expect(new Set(seen.devices)).toEqual(new Set(plan.devices));
    // KV per node: the plan's bytes, llama.cpp's MiB at two decimals. A worker's buffers are
    // named RPC0[host:port] (its own device index), the client's CPU.
    const perLayer = kvBytesPerLayer(tiny, server);
    for (const p of plan.perNode) {
      const name =
        p.device === "CPU" ? "CPU" : `RPC0[${plan.rpcServers[Number(p.device.slice(3))]}]`;
      // %.2f of 0.125 prints 0.12: within half a hundredth, and a little for the float.
      expect(Math.abs((seen.kvMiB.get(name) ?? -1) - p.kvBytes / 2 ** 20)).toBeLessThanOrEqual(
        0.0051,
      );
      expect(p.kvBytes % perLayer).toBe(0);
    }
  });
});
