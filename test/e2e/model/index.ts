// Test program for test/e2e/model.test.ts: the Model component for the nodes of the stack's
// (simulated) cluster, configured exactly as the main program will be: `sparkform:nodes`,
// `sparkform:model` and the secret `sparkform:hfToken`.
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, configKeys, parseClusterConfig, sshTarget } from "../../../components/config";
import { parseModelConfig } from "../../../components/model/config";
import { Model } from "../../../components/model/model";

const config = new pulumi.Config("sparkform");
const structured = new Set<string>(["nodes", "toolchain", "tree"]);
const raw = Object.fromEntries(
  configKeys.map((k) => [k, structured.has(k) ? config.getObject<unknown>(k) : config.get(k)]),
);

function parsed() {
  try {
    return {
      cluster: parseClusterConfig(raw),
      model: parseModelConfig(config.requireObject<unknown>("model")),
    };
  } catch (err) {
    if (err instanceof ConfigError) throw new pulumi.RunError(err.message);
    throw err;
  }
}
const { cluster, model } = parsed();
const hfToken = config.getSecret("hfToken");

const wanted = model.nodes ?? cluster.nodes.map((n) => n.name);
const nodes = wanted.map((name) => {
  const n = cluster.nodes.find((x) => x.name === name);
  if (!n) throw new pulumi.RunError(`sparkform:model.nodes: ${name} is not one of the nodes`);
  return {
    name: n.name,
    target: sshTarget(n, cluster),
    ...(n.fabricAddress ? { fabricAddress: n.fabricAddress } : {}),
  };
});

const m = new Model(`${pulumi.getStack()}-model`, {
  repo: model.repo,
  revision: model.revision,
  files: model.files,
  sha256: model.sha256,
  allowBranch: model.allowBranch,
  endpoint: model.endpoint,
  verify: model.verify,
  modelsDir: model.modelsDir,
  retries: model.retries,
  ...(hfToken ? { token: hfToken } : {}),
  nodes,
});

export const commit = m.commit;
export const files = m.files;
export const gguf = m.gguf;
export const modelNodes = m.nodes;
