// A stack's program: read and validate every `sparkform:` key, then one SparkCluster. The
// project's index.ts and the e2e test programs are this, so they cannot drift apart.
import * as pulumi from "@pulumi/pulumi";
import { SparkCluster } from "./cluster";
import { ConfigError, configKeys, parseClusterConfig } from "./config";
import { parseModelConfig } from "./model/config";

/** Keys this program reads; any other `sparkform:` key is a typo or a leftover. */
const knownKeys = new Set<string>([...configKeys, "model", "privateKey", "hfToken"]);

function clusterArgs(projectDir: string) {
  const config = new pulumi.Config("sparkform");
  // Structured keys are YAML objects; the rest are plain strings (getObject would try JSON).
  const structured = new Set<string>(["nodes", "toolchain", "tree", "build"]);
  const raw = Object.fromEntries(
    configKeys.map((k) => [k, structured.has(k) ? config.getObject<unknown>(k) : config.get(k)]),
  );
  const modelRaw = config.getObject<unknown>("model");
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
  const privateKey = config.getSecret("privateKey");
  const hfToken = config.getSecret("hfToken");
  try {
    return {
      config: parseClusterConfig(raw),
      ...(modelRaw === undefined ? {} : { model: parseModelConfig(modelRaw) }),
      ...(hfToken ? { hfToken } : {}),
      ...(privateKey ? { privateKey } : {}),
      projectDir,
    };
  } catch (err) {
    // A user error: RunError prints the message without a stack trace.
    if (err instanceof ConfigError) throw new pulumi.RunError(err.message);
    throw err;
  }
}

/** The stack's SparkCluster, named after the stack, from its validated configuration. */
export function stackCluster(projectDir: string): SparkCluster {
  return new SparkCluster(pulumi.getStack(), clusterArgs(projectDir));
}
