// What the CLI takes of a stack's state (cli/recorded.ts): the RpcWorker's, LlamaServer's and
// NativeBuild's recorded inputs, per node, plain values only. Read from a hand-made export, so
// each case says which shape of state it stands for.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { recordedOf } from "../../cli/recorded";
import { readState, SECRET_SIG } from "../../stack-state";

const FIXTURES = path.join(__dirname, "..", "fixtures");
const NODES = ["spark-1", "spark-2"];
const URN = "urn:pulumi:local::sparkform::pulumi-nodejs:dynamic:Resource::";
const secret = (plaintext: unknown) => ({
  [SECRET_SIG]: "1b47061264138c4ac30d75fd1eb44270",
  ciphertext: `v1:${Buffer.from(JSON.stringify(plaintext)).toString("base64")}`,
});
const target = (name: string) => ({ name, host: "127.0.0.1", port: 2202, user: "spark" });

/** A worker's inputs as the current program records them. */
const workerInputs = (over: Record<string, unknown> = {}) => ({
  kind: "RpcWorker",
  target: target("spark-2"),
  bind: "10.214.194.2",
  port: 50052,
  threads: 0,
  devices: ["CUDA0"],
  cache: true,
  debug: false,
  rssLimitPercent: 90,
  rssIntervalSeconds: 5,
  binary: "/home/spark/.local/llama.cpp/bin/ggml-rpc-server",
  managementAddress: "127.0.0.1",
  fabricAddresses: ["10.214.194.2"],
  client: { target: target("spark-1"), fabricAddress: "10.214.194.1" },
  clientBuild: { installDir: "/home/spark/.local/llama.cpp", digest: "ab12", header: "cd34" },
  ...over,
});

function exportOf(resources: { name: string; inputs: Record<string, unknown> }[]) {
  return readState({
    version: 3,
    deployment: {
      resources: resources.map(({ name, inputs }) => ({
        urn: `${URN}${name}`,
        custom: true,
        type: "pulumi-nodejs:dynamic:Resource",
        inputs,
        outputs: inputs,
      })),
    },
  });
}

describe("recordedOf", () => {
  it("a worker as the RpcWorker recorded it, its client named by the client's target", () => {
    const r = recordedOf(
      exportOf([{ name: "local-worker-spark-2", inputs: workerInputs() }]),
      NODES,
    );
    expect(Object.keys(r.worker)).toEqual(["spark-2"]);
    expect(r.worker["spark-2"]).toMatchObject({
      bind: "10.214.194.2",
      port: 50052,
      devices: ["CUDA0"],
      client: { name: "spark-1", fabricAddress: "10.214.194.1" },
      clientBuild: { digest: "ab12" },
    });
    // The target (where the private key may be) is not part of what the CLI keeps.
    expect(r.worker["spark-2"]).not.toHaveProperty("target");
  });

  it("a secret target: the node from the resource's name (the longest node name that ends it)", () => {
    const inputs = workerInputs({
      target: secret(target("lab-spark-2")),
      client: { target: secret(target("spark-1")), fabricAddress: "10.214.194.1" },
    });
    const state = exportOf([{ name: "local-worker-lab-spark-2", inputs }]);
    const r = recordedOf(state, ["spark-2", "lab-spark-2"]);
    expect(Object.keys(r.worker)).toEqual(["lab-spark-2"]);
    // The client's name is unreadable: `worker` takes it from sparkform:worker.client.
    expect(r.worker["lab-spark-2"]?.client).toEqual({ fabricAddress: "10.214.194.1" });
  });

  it("a secret field, or a worker recorded before a field existed: no worker to start from here", () => {
    const state = exportOf([
      { name: "local-worker-spark-1", inputs: workerInputs({ bind: secret("10.214.194.1") }) },
      { name: "local-worker-spark-2", inputs: workerInputs({ clientBuild: undefined }) },
    ]);
    expect(recordedOf(state, NODES).worker).toEqual({});
    // The committed export was written by an older program: its worker lacks threads, binary, client.
    const old = readState(readFileSync(path.join(FIXTURES, "stack-export-local.json"), "utf8"));
    expect(recordedOf(old, NODES).worker).toEqual({});
  });

  it("servers by their recorded node, standby only when recorded so; build flags per node", () => {
    const server = (node: string, standby?: boolean) => ({
      kind: "LlamaServer",
      target: secret(target(node)),
      node,
      bind: "127.0.0.1",
      port: 8080,
      binary: "/home/spark/.local/llama.cpp/bin/llama-server",
      ...(standby === undefined ? {} : { standby }),
    });
    const flags = { GGML_CUDA: "ON", LLAMA_COMMIT: "b7d1c2e" };
    const state = exportOf([
      { name: "local-server", inputs: server("spark-1") },
      { name: "local-server-replica", inputs: server("spark-2", true) },
      {
        name: "local-build-spark-1",
        inputs: { kind: "NativeBuild", target: target("spark-1"), flags },
      },
      { name: "local-build-spark-2", inputs: { kind: "NativeBuild", flags: secret(flags) } },
    ]);
    const r = recordedOf(state, NODES);
    expect(r.server["spark-1"]).toEqual({
      node: "spark-1",
      bind: "127.0.0.1",
      port: 8080,
      binary: "/home/spark/.local/llama.cpp/bin/llama-server",
      standby: false,
    });
    expect(r.server["spark-2"]?.standby).toBe(true);
    expect(r.buildFlags).toEqual({ "spark-1": flags });
  });
});
