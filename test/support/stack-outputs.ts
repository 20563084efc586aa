// Stack outputs for the CLI's tests, typed as the CLI reads them (StackOutputs): a real local
// stack's `pulumi stack output --json` (test/fixtures/stack-outputs-local.json, parsed as
// cli/stack.ts parses it) and whole entries built from it, so a test that needs one field
// states that field and the rest is what a real stack holds, not a cast over a partial object.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { tokensSha256 } from "../../components/outputs";
import { parseOutputsText, type StackOutputs } from "../../stack-outputs";

type Outputs = { [K in keyof StackOutputs]-?: NonNullable<StackOutputs[K]> };
/** The sections that hold one entry per node. */
type PerNode = "facts" | "fabric" | "toolchain" | "build" | "worker";
export type NodeEntry<K extends PerNode> = Outputs[K][string];
export type ServingOutput = Outputs["serving"];
export type ModelOutput = Outputs["model"];

const FIXTURE = path.join(__dirname, "..", "fixtures", "stack-outputs-local.json");
const text = readFileSync(FIXTURE, "utf8");

/** The local stack's outputs (facts, fabric, toolchain, tree, build, worker, model); a fresh copy. */
export function localOutputs(): StackOutputs {
  return parseOutputsText(text, "local");
}

/** `v`, or a test failure saying which part of the fixture is not there. */
export function must<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`the fixture has no ${what}`);
  return v;
}

function section<K extends keyof Outputs>(k: K): Outputs[K] {
  const all: Partial<Outputs> = localOutputs();
  const s = all[k];
  if (s === undefined) throw new Error(`the fixture has no ${k} section`);
  return s;
}

/** A node's entry of `k` as the local stack recorded it (its first such node), `over` on top. */
export function nodeOutput<K extends PerNode>(
  k: K,
  over: Partial<NodeEntry<K>> = {},
): NodeEntry<K> {
  const first = Object.values(section(k))[0];
  if (!first) throw new Error(`the fixture's ${k} section is empty`);
  return { ...first, ...over };
}

/** The local stack's model, with `nodes` in place of its own, each entry over a real one. */
export function modelOutput(
  nodes: Record<string, Partial<ModelOutput["nodes"][string]>>,
): ModelOutput {
  const m = section("model");
  const first = Object.values(m.nodes)[0];
  if (!first) throw new Error("the fixture's model is on no node");
  return {
    ...m,
    nodes: Object.fromEntries(Object.entries(nodes).map(([n, o]) => [n, { ...first, ...o }])),
  };
}

/** The serving contract's `serving` output (SERVING-CONTRACT.md; values as the sim's). */
export const SERVING: ServingOutput = {
  plan: {
    known: true,
    fits: true,
    devices: ["RPC0"],
    configured: { splitMode: "layer" },
    splitMode: "layer",
    tensorSplit: [1, 1],
    nGpuLayers: 4,
    rpcServers: ["10.214.194.2:50052"],
    context: 256,
    parallel: 1,
    cacheType: "f16",
  },
  server: {
    node: "spark-1",
    url: "http://127.0.0.1:8080",
    unit: "sparkform-llama-server-8080",
    health: "ok",
  },
  placement: [
    { device: "CPU", layers: 4, modelBufferMiB: 1.2 },
    { device: "RPC0", layers: 4, modelBufferMiB: 1.2 },
  ],
  smoke: {
    tokenCount: 4,
    tokensSha256: tokensSha256([1, 2, 3, 4]),
    tokensPerSecond: 412.5,
    chat: { completionTokens: 4, finishReason: "length", characters: 12 },
    reference: { tokenCount: 4, tokensSha256: tokensSha256([1, 2, 3, 4]), tokensPerSecond: 530.25 },
    identical: true,
    graphCompute: 4,
    graphRecompute: 0,
  },
};

/** SERVING with its server moved (`over`), as a stack serving elsewhere records it. */
export function servingOutput(over: Partial<ServingOutput["server"]> = {}): ServingOutput {
  return { ...SERVING, server: { ...SERVING.server, ...over } };
}
