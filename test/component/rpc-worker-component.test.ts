// The RpcWorker stage under Pulumi's runtime mocks: the exact worker it registers for a pair
// (type token, name, inputs: bind = the worker's fabric address, the client as the prober, both
// builds' digests, the pre-warm files from the Model stage's copy), and its config errors. The
// Nodes stage is the real one; builds, trees and the model are stand-ins with their outputs.
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import type { Builds } from "../../components/build/builds";
import type { Fabric } from "../../components/fabric/fabric";
import { parseStackConfig } from "../../components/stack-config";
import type { Model } from "../../components/model/model";
import { Nodes } from "../../components/node/nodes";
import { RpcWorkers } from "../../components/rpc-worker/workers";
import type { Trees } from "../../components/tree/trees";
import { inputsOf, PAIR_CONFIG, type Registered } from "../support/mock-pair";
import { setPulumiMocks } from "../support/pulumi-mocks";

const registered: Registered[] = [];

beforeAll(() => setPulumiMocks({ registered, preview: true }));

const raw = PAIR_CONFIG;
const D = (c: string) => c.repeat(64);

class TestReplica extends pulumi.CustomResource {
  readonly dir = pulumi.output("~/models/org/m/c0ffee");
  readonly nodeFiles = pulumi.output([
    { path: "m.gguf", sha256: D("b") },
    { path: "README.md", sha256: D("c") },
  ]);
  constructor(name: string) {
    super("test:index:Replica", name, {});
  }
}

class TestBuild extends pulumi.CustomResource {
  readonly installDir = pulumi.output("/home/spark/.cache/sparkform/llama-build/out/k");
  readonly artifacts = pulumi.output({ "bin/ggml-rpc-server": D("a") });
  constructor(name: string) {
    super("test:index:Build", name, {});
  }
}

function stages(config: ReturnType<typeof parseStackConfig>) {
  const nodes = new Nodes("t-node", { config: config.nodes, ssh: config, diskPaths: [] });
  // A NativeBuild stand-in: a resource (dependsOn needs one) with the outputs the stage reads.
  const made = new Map<string, TestBuild>();
  const build = (n: string) => {
    let b = made.get(n);
    if (!b) made.set(n, (b = new TestBuild(`${config.nodes.length}-${n}-${made.size}`)));
    return b;
  };
  const builds = { of: build, ready: [] } as unknown as Builds;
  const trees = { dest: "~/src/llama.cpp" } as unknown as Trees;
  const model = {
    names: ["spark-1", "spark-2"],
    of: (n: string) => new TestReplica(`${config.nodes.length}-${n}-${registered.length}`),
  } as unknown as Model;
  return { nodes, builds, trees, models: [model] };
}

/** The worker stage as SparkCluster makes it: the stages it reads, plus its own section. */
function workers(name: string, config: ReturnType<typeof parseStackConfig>, fabric?: Fabric) {
  if (!config.worker) throw new Error("the test config has no sparkform:worker");
  return new RpcWorkers(name, {
    ...stages(config),
    ...(fabric ? { fabric } : {}),
    config: config.worker,
  });
}

describe("RpcWorkers", () => {
  it("registers one RpcWorker per worker node, bound to its fabric address", async () => {
    const config = parseStackConfig(raw);
    const w = workers("t-worker", config);
    expect(w.endpoints).toEqual([{ node: "spark-2", device: "RPC0", endpoint: "10.0.0.2:50052" }]);
    const inputs = await inputsOf(registered, "t-worker-spark-2");
    const r = registered.find((x) => x.name === "t-worker-spark-2");
    expect(r?.type).toBe("pulumi-nodejs:dynamic/sparkform:RpcWorker");
    expect(registered.filter((x) => x.type.endsWith(":RpcWorker")).map((x) => x.name)).toEqual([
      "t-worker-spark-2",
    ]);
    expect(inputs).toMatchObject({
      kind: "RpcWorker",
      bind: "10.0.0.2",
      port: 50052,
      managementAddress: "192.168.1.5",
      fabricAddresses: ["10.0.0.2"],
      cache: true,
      debug: true,
      rssLimitPercent: 92,
      binary: "/home/spark/.cache/sparkform/llama-build/out/k/bin/ggml-rpc-server",
      workerBuild: { installDir: "/home/spark/.cache/sparkform/llama-build/out/k", digest: D("a") },
      clientBuild: {
        digest: D("a"),
        header: "~/src/llama.cpp/ggml/include/ggml-rpc.h",
      },
      client: { fabricAddress: "10.0.0.1", target: { name: "spark-1" } },
      // Only the GGUF files of the worker's own verified copy.
      prewarm: [{ path: "~/models/org/m/c0ffee/m.gguf", sha256: D("b") }],
    });
  });

  it("with a Fabric stage, a worker may bind only its node's rail addresses", async () => {
    const config = parseStackConfig(raw);
    // The Fabric stage's answer for each node, as its rails are configured (prefix dropped).
    const fabric = {
      ready: [],
      railAddresses: (n: string) => (n === "spark-2" ? ["10.0.0.2", "10.1.0.2"] : undefined),
      // Not a ring: a peer reaches a node at its own fabric address.
      linkAddress: (_from: string, _to: string, own?: string) => own,
    } as unknown as Fabric;
    workers("t2-worker", config, fabric);
    const inputs = await inputsOf(registered, "t2-worker-spark-2");
    expect(inputs).toMatchObject({ bind: "10.0.0.2", fabricAddresses: ["10.0.0.2", "10.1.0.2"] });
  });

  // Since issue 23 the config refuses it at the node's own key, before any stage is made.
  it("a worker node without a fabric address is an error naming the key", () => {
    expect(() =>
      parseStackConfig({
        ...raw,
        nodes: [raw.nodes[0], { ...raw.nodes[1], fabricAddress: undefined }],
      }),
    ).toThrow(
      "sparkform:nodes[1].fabricAddress: is not set, and spark-2 runs a worker (sparkform:worker.nodes), which binds only its node's fabric address; give spark-2's fabric IPv4 address",
    );
  });
});
