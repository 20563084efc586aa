// The sparkform program: one SparkCluster per stack, configured from stacks/Pulumi.<stack>.yaml.
import * as pulumi from "@pulumi/pulumi";
import { SparkCluster } from "./components/cluster";
import { ConfigError, configKeys, parseClusterConfig } from "./components/config";
import { parseModelConfig } from "./components/model/config";

const config = new pulumi.Config("sparkform");
// Structured keys are YAML objects; the rest are plain strings (getObject would try JSON).
const structured = new Set<string>(["nodes", "toolchain", "tree", "build"]);
const raw = Object.fromEntries(
  configKeys.map((k) => [k, structured.has(k) ? config.getObject<unknown>(k) : config.get(k)]),
);
const privateKey = config.getSecret("privateKey");
const hfToken = config.getSecret("hfToken");
const modelRaw = config.getObject<unknown>("model");

/** Keys this program reads; any other `sparkform:` key is a typo or a leftover. */
const knownKeys = new Set<string>([...configKeys, "model", "privateKey", "hfToken"]);

function clusterConfig() {
  const unknown = Object.keys(pulumi.runtime.allConfig())
    .filter((k) => k.startsWith("sparkform:") && !knownKeys.has(k.slice("sparkform:".length)))
    .sort();
  if (unknown.length > 0) {
    throw new pulumi.RunError(
      `unknown stack configuration ${unknown.join(", ")}: sparkform reads ` +
        `${[...knownKeys].map((k) => `sparkform:${k}`).join(", ")}. ` +
        "Fix the name, or remove it with `pulumi config rm`.",
    );
  }
  try {
    return {
      config: parseClusterConfig(raw),
      ...(modelRaw === undefined ? {} : { model: parseModelConfig(modelRaw) }),
    };
  } catch (err) {
    // A user error: RunError prints the message without a stack trace.
    if (err instanceof ConfigError) throw new pulumi.RunError(err.message);
    throw err;
  }
}

const cluster = new SparkCluster(pulumi.getStack(), {
  ...clusterConfig(),
  ...(hfToken ? { hfToken } : {}),
  projectDir: __dirname,
  ...(privateKey ? { privateKey } : {}),
});

export const facts = cluster.facts;
export const toolchain = cluster.toolchain;
export const tree = cluster.tree;
export const build = cluster.build;
export const model = cluster.model
  ? {
      commit: cluster.model.commit,
      files: cluster.model.files,
      gguf: cluster.model.gguf,
      nodes: cluster.model.nodes,
    }
  : undefined;
