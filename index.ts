// The sparkform program: one SparkCluster per stack, configured from stacks/Pulumi.<stack>.yaml.
import * as pulumi from "@pulumi/pulumi";
import { SparkCluster } from "./components/cluster";
import { ConfigError, configKeys, parseClusterConfig } from "./components/config";

const config = new pulumi.Config("sparkform");
// Structured keys are YAML objects; the rest are plain strings (getObject would try JSON).
const structured = new Set<string>(["nodes", "toolchain", "tree"]);
const raw = Object.fromEntries(
  configKeys.map((k) => [k, structured.has(k) ? config.getObject<unknown>(k) : config.get(k)]),
);
const privateKey = config.getSecret("privateKey");

function clusterConfig() {
  try {
    return parseClusterConfig(raw);
  } catch (err) {
    // A user error: RunError prints the message without a stack trace.
    if (err instanceof ConfigError) throw new pulumi.RunError(err.message);
    throw err;
  }
}

const cluster = new SparkCluster(pulumi.getStack(), {
  config: clusterConfig(),
  projectDir: __dirname,
  ...(privateKey ? { privateKey } : {}),
});

export const facts = cluster.facts;
export const toolchain = cluster.toolchain;
export const tree = cluster.tree;
