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
export const model = cluster.model
  ? {
      commit: cluster.model.commit,
      files: cluster.model.files,
      gguf: cluster.model.gguf,
      nodes: cluster.model.nodes.apply(each(modelNodeOutput)),
    }
  : undefined;
export const serving = cluster.serving?.apply(servingOutput);
