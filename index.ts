// The sparkform program: one SparkCluster per stack, configured from stacks/Pulumi.<stack>.yaml.
// Its outputs are what `pulumi up` prints last: each stage's verdicts, cut to what a person takes
// in (components/outputs.ts); the full evidence stays in the resources' state, and
// `sparkform status --json` shows both.
import {
  buildOutput,
  modelNodeOutput,
  nodeFactsOutput,
  servingOutput,
  workerOutput,
} from "./components/outputs";
import type { Model } from "./components/model/model";
import { stackCluster } from "./components/stack";

const cluster = stackCluster(__dirname);

const each =
  <A, B>(f: (a: A) => B) =>
  (r: Record<string, A>): Record<string, B> =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, f(v)]));

export const facts = cluster.facts.apply(each(nodeFactsOutput));
export const fabric = cluster.rails;
export const toolchain = cluster.toolchain;
export const tree = cluster.tree;
export const build = cluster.build?.apply(each(buildOutput));
export const worker = cluster.worker?.apply(each(workerOutput));
const modelOutput = (m: Model) => ({
  commit: m.commit,
  files: m.files,
  gguf: m.gguf,
  nodes: m.nodes.apply(each(modelNodeOutput)),
});

export const model = cluster.model ? modelOutput(cluster.model) : undefined;
/** The models staged beside it (sparkform:models), by name; {} when none is. */
export const models = Object.fromEntries(
  Object.entries(cluster.staged).map(([k, m]) => [k, modelOutput(m)]),
);
export const serving = cluster.serving?.apply(servingOutput);
/**
 * The key every llama-server and the router check (sparkform:serverApiKey, else the one the
 * stack made): a secret, shown only by `pulumi stack output --show-secrets`, which is how
 * `sparkform key` prints it.
 */
export const serverApiKey = cluster.servingStage?.apiKey;
