// Renders the inputs of bench/archive/serving-cuda.sh, the Serving stage's split proven on a real CUDA
// device (issue 13; results in bench/archive/serving-cuda.md): NativeBuild's CUDA build plan
// (bench/archive/cuda-proof-plan.ts), a generated llama model wide enough to time, and the llama-server
// argv that planPlacement + renderLlamaServer (components/serving/) produce for a client CUDA0
// and one ggml-rpc-server worker (RPC0), with declared usable memory, so the CUDA machine
// needs no node.
//   npx tsx bench/archive/serving-cuda-inputs.ts --out DIR --work /tmp/serving-cuda
//   npx tsx bench/archive/serving-cuda-inputs.ts judge DIR RESULTS   (the plan against the server's log)
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import {
  planPlacement,
  placementNodes,
  type ServingPlan,
} from "../../components/serving/placement";
import { renderLlamaServer, renderings } from "../../components/serving/render";
import { makeTinyLlamaGguf, type TinyLlamaDims } from "../../sim/gguf/tiny-llama";

/** 12 layers, GQA 6:2, ~38 MB of f16 weights: every layer's matrices on one device each. */
export const PROOF_DIMS: TinyLlamaDims = {
  nEmbd: 384,
  nHead: 6,
  nHeadKv: 2,
  nFf: 1024,
  nLayer: 12,
  nCtx: 512,
};
const GIB = 2 ** 30;
/** Declared usable memory: 1 : 3, so a backwards split (devices/0 order) shows in the log. */
const CLIENT_USABLE = 4 * GIB;
const WORKER_USABLE = 12 * GIB;
const RPC_PORT = 50152;

function plan(fileBytes: number): ServingPlan {
  return planPlacement({
    model: {
      blockCount: PROOF_DIMS.nLayer,
      headCount: PROOF_DIMS.nHead,
      headCountKv: PROOF_DIMS.nHeadKv,
      embeddingLength: PROOF_DIMS.nEmbd,
      keyLength: PROOF_DIMS.nEmbd / PROOF_DIMS.nHead,
      valueLength: PROOF_DIMS.nEmbd / PROOF_DIMS.nHead,
      fileBytes,
    },
    nodes: placementNodes({
      client: "client",
      clientDevice: "CUDA0",
      workers: [{ node: "worker", endpoint: `127.0.0.1:${RPC_PORT}` }],
      usable: (n) => ({
        usableBytes: n === "client" ? CLIENT_USABLE : WORKER_USABLE,
        source: "declared",
      }),
    }),
    server: {
      context: PROOF_DIMS.nCtx,
      parallel: 1,
      cacheType: "f16",
      computeMarginBytes: 512 * 2 ** 20,
      splitMode: "layer",
      gpuLayers: 99,
    },
  });
}

const bashArray = (name: string, xs: string[]) =>
  `${name}=(${xs.map((s) => `'${s.replace(/'/g, "'\\''")}'`).join(" ")})\n`;

function render(out: string, work: string): void {
  fs.mkdirSync(out, { recursive: true });
  const bytes = makeTinyLlamaGguf({ dims: PROOF_DIMS });
  fs.writeFileSync(path.join(out, "model.gguf"), bytes);
  const p = plan(bytes.length);
  if (!p.fits) throw new Error(p.reason);
  const modelPath = `${work}/model.gguf`;
  const split = renderLlamaServer(p, modelPath, { port: 8080 });
  // The single-node reference: the same build and model, every layer on the client's CUDA0.
  const reference = renderLlamaServer(
    { ...p, devices: ["CUDA0"], tensorSplit: [1], rpcServers: [] },
    modelPath,
    { port: 8081 },
  );
  fs.writeFileSync(
    path.join(out, "serve.sh"),
    `# rendered by bench/archive/serving-cuda-inputs.ts\nRPC_PORT=${RPC_PORT}\n` +
      bashArray("SPLIT_ARGS", split) +
      bashArray("REFERENCE_ARGS", reference),
  );
  fs.writeFileSync(
    path.join(out, "plan.json"),
    JSON.stringify(
      {
        plan: p,
        renderings: renderings(p, modelPath),
        model: {
          bytes: bytes.length,
          sha256: createHash("sha256").update(bytes).digest("hex"),
          dims: PROOF_DIMS,
        },
      },
      null,
      2,
    ),
  );
  execFileSync(
    "npx",
    [
      "tsx",
      path.join(__dirname, "cuda-proof-plan.ts"),
      "--home",
      work,
      "--tree",
      `${work}/llama.cpp`,
      "--variant",
      "pinned",
      "--out",
      path.join(out, "build-plan.sh"),
    ],
    { stdio: "inherit" },
  );
  console.log(`rendered into ${out}: plan ${p.devices.join(",")} split ${p.tensorSplit.join(",")}`);
}

if (require.main === module) {
  const { values } = parseArgs({
    options: { out: { type: "string" }, work: { type: "string", default: "/tmp/serving-cuda" } },
  });
  if (!values.out) {
    console.error("usage: serving-cuda-inputs.ts --out DIR [--work DIR]");
    process.exit(2);
  }
  render(values.out, values.work!);
}
