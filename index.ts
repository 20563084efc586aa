// The sparkform program: one SparkCluster per stack, configured from stacks/Pulumi.<stack>.yaml.
import { stackCluster } from "./components/stack";

const cluster = stackCluster(__dirname);

export const facts = cluster.facts;
export const fabric = cluster.rails;
export const toolchain = cluster.toolchain;
export const tree = cluster.tree;
export const build = cluster.build;
export const worker = cluster.worker;
export const model = cluster.model
  ? {
      commit: cluster.model.commit,
      files: cluster.model.files,
      gguf: cluster.model.gguf,
      nodes: cluster.model.nodes,
    }
  : undefined;
export const serving = cluster.serving;
