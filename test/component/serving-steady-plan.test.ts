// Issue 32: a converged `up --expect-no-changes` proposed `~ LlamaServer [diff: ~evidence,plan]`
// once after a rebuild. The Serving stage under Pulumi's runtime mocks, run as two programs on
// the same cluster whose readings moved in between (each node's MemAvailable, the worker's free
// device memory, the worker's health ok → busy while the client holds it, the fabric's RTT and
// throughput): the LlamaServer's plan, evidence, flags and topology inputs are the same. The
// reading still decides the fit, and a real change (a node's total memory) still changes the plan. The Nodes stage is the real one (its
// SparkNodes' fact sheets come from the mocks); builds, the model, the workers and the fabric
// are stand-ins with their outputs.
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import type { Builds } from "../../components/build/builds";
import type { Fabric } from "../../components/fabric/fabric";
import type { Model } from "../../components/model/model";
import { Nodes } from "../../components/node/nodes";
import type { RpcWorkers } from "../../components/rpc-worker/workers";
import { serverConfigSchema } from "../../components/serving/config";
import type { ServingPlan } from "../../components/serving/placement";
import { Serving } from "../../components/serving/serving";
import { parseStackConfig } from "../../components/stack-config";
import { TINY } from "../support/serving-fixtures";
import { inputsOf, PAIR_CONFIG, type Registered } from "../support/mock-pair";
import { asValidated } from "../support/validated-config";

const registered: Registered[] = [];

/** What each run's nodes measure: MemTotal and MemAvailable per node, by the run's prefix. */
interface Readings {
  total: Record<string, number>;
  available: Record<string, number>;
}
const runs = new Map<string, Readings>();
const readingsOf = (name: string): Readings => {
  const r = runs.get(name.split("-")[0] ?? "");
  if (!r) throw new Error(`no readings for ${name}`);
  return r;
};

const facts = (node: string, r: Readings) => ({
  schemaVersion: 1,
  sysfsRoot: "/sys",
  arch: "x86_64",
  memory: { totalBytes: r.total[node], availableBytes: r.available[node], reason: null },
});

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        const node = (args.inputs as { target?: { name?: string } }).target?.name ?? "";
        return {
          id: `${args.name}-id`,
          state: {
            ...args.inputs,
            ...(args.type.endsWith(":SparkNode")
              ? { facts: facts(node, readingsOf(args.name)) }
              : {}),
          },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "test",
    false,
  );
});

const config = parseStackConfig(PAIR_CONFIG);
const D = (c: string) => c.repeat(64);

class TestReplica extends pulumi.CustomResource {
  readonly dir = pulumi.output("~/models/org/m/c0ffee");
  readonly nodeFiles = pulumi.output([{ path: "m.gguf", sha256: D("b") }]);
  constructor(name: string) {
    super("test:index:Replica", name, {});
  }
}

class TestBuild extends pulumi.CustomResource {
  readonly installDir = pulumi.output("/home/spark/.cache/sparkform/llama-build/out/k");
  readonly artifacts = pulumi.output({ "bin/llama-server": D("a"), "bin/ggml-rpc-server": D("e") });
  readonly commit = pulumi.output("80fb11ac73e66d89eae2c6a91d8a77428fa733ed");
  readonly treeDigest = pulumi.output(D("f"));
  readonly compiler = pulumi.output("gcc 13.3.0");
  readonly compilerDigests = pulumi.output({ cxx: D("c"), nvcc: "", nvccVersion: "" });
  constructor(name: string) {
    super("test:index:Build", name, {});
  }
}

/** One worker's moving readings: GET_DEVICE_MEMORY free, health, the fabric link's numbers. */
interface WorkerReadings {
  free: number;
  total: number;
  health: "ok" | "busy";
  rttP50Us: number;
  throughputGbps: number;
}

/** The Serving stage as SparkCluster makes it, for one run of the program (`run` its prefix). */
function serving(
  run: string,
  r: Readings,
  w: WorkerReadings,
  server: Record<string, unknown> = {},
) {
  runs.set(run, r);
  const nodes = new Nodes(`${run}-node`, { config: config.nodes, ssh: config, diskPaths: [] });
  const builds = new Map<string, TestBuild>();
  const buildOf = (n: string) => {
    let b = builds.get(n);
    if (!b) builds.set(n, (b = new TestBuild(`${run}-build-${n}`)));
    return b;
  };
  const replicas = new Map<string, TestReplica>();
  const replicaOf = (n: string) => {
    let m = replicas.get(n);
    if (!m) replicas.set(n, (m = new TestReplica(`${run}-model-${n}`)));
    return m;
  };
  const model = {
    names: ["spark-1", "spark-2"],
    files: pulumi.output([{ path: "m.gguf", size: TINY.fileBytes, sha256: D("b") }]),
    gguf: pulumi.output({ ...TINY, fileBytes: undefined }),
    of: replicaOf,
  } as unknown as Model;
  const workers = {
    endpoints: [{ node: "spark-2", device: "RPC0", endpoint: "10.0.0.2:50052" }],
    port: 50052,
    ready: [],
    of: () => ({
      deviceMemory: pulumi.output([{ device: 0, free: w.free, total: w.total }]),
      started: pulumi.output({ invocationId: "worker-invocation", nRestarts: "0" }),
    }),
    byNode: pulumi.output({
      "spark-2": {
        health: { state: w.health, detail: `${w.health}: ${w.free} free` },
        version: "3.0.0",
        transport: { transport: "TCP", evidence: null },
      },
    }),
  } as unknown as RpcWorkers;
  const fabric = {
    // The Fabric stage's configured rails (what the server's wire proof is held to).
    railInterfaces: () => ({
      "spark-1": [{ rail: 0, iface: "eth1" }],
      "spark-2": [{ rail: 0, iface: "eth1" }],
    }),
    byNode: pulumi.output(
      Object.fromEntries(
        ["spark-1", "spark-2"].map((n) => [
          n,
          {
            rails: [
              {
                rail: 0,
                iface: "eth1",
                address: n === "spark-1" ? "10.0.0.1/24" : "10.0.0.2/24",
                rdmaDevice: null,
                source: "sysfs",
                links: [
                  {
                    peer: n === "spark-1" ? "spark-2" : "spark-1",
                    class: "healthy",
                    rttP50Us: w.rttP50Us,
                    throughputGbps: w.throughputGbps,
                    healthy: true,
                  },
                ],
              },
            ],
          },
        ]),
      ),
    ),
  } as unknown as Fabric;
  return new Serving(`${run}-serving`, {
    nodes,
    builds: { flags: { LLAMA_BACKEND: "cpu" }, of: buildOf, ready: [] } as unknown as Builds,
    model,
    workers,
    fabric,
    config: asValidated({ ...serverConfigSchema.parse(server), node: "spark-1" }),
  });
}

/** The LlamaServers' inputs that must not move on their own. */
async function recorded(run: string, replica = false) {
  const pick = (i: Record<string, unknown>) => ({
    plan: i.plan,
    evidence: i.evidence,
    flags: i.flags,
    topology: i.topology,
  });
  return {
    server: pick(await inputsOf(registered, `${run}-serving-server`)),
    ...(replica
      ? { replica: pick(await inputsOf(registered, `${run}-serving-server-spark-2`)) }
      : {}),
  };
}

const GB = 1e9;
const worker: WorkerReadings = {
  free: 61.2 * GB,
  total: 64 * GB,
  health: "ok",
  rttP50Us: 41,
  throughputGbps: 9.41,
};

describe("the LlamaServer's recorded inputs on an unchanged cluster (issue 32)", () => {
  // auto: the tiny model fits each node, a replica per node (whole plans); layer-split: the
  // client's plan splits by the nodes' memory (tensor_split, n_gpu_layers).
  it.each(["auto", "layer-split"])(
    "topology %s: two runs whose readings moved (MemAvailable, the worker's free memory and health, the fabric's RTT and throughput) give byte-identical plans and evidence",
    async (topology) => {
      const run = topology === "auto" ? ["a", "b"] : ["c", "d"];
      serving(
        run[0] as string,
        { total: { "spark-1": 64 * GB }, available: { "spark-1": 58.3 * GB } },
        worker,
        { topology },
      );
      serving(
        run[1] as string,
        { total: { "spark-1": 64 * GB }, available: { "spark-1": 55.9 * GB } },
        { ...worker, free: 49.7 * GB, health: "busy", rttP50Us: 57, throughputGbps: 9.12 },
        { topology },
      );
      const replica = topology === "auto";
      const [a, b] = [
        await recorded(run[0] as string, replica),
        await recorded(run[1] as string, replica),
      ];
      expect((a.server.plan as ServingPlan).fits).toBe(true);
      expect((a.server.topology as { topology: string }).topology).toBe(
        topology === "auto" ? "replicas" : "layer-split",
      );
      expect(b).toEqual(a);
      expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    },
  );

  it("the reading still decides the fit: MemAvailable below the client's share is a plan that does not fit, with the numbers", async () => {
    serving("g", { total: { "spark-1": 64 * GB }, available: { "spark-1": 0.5 * GB } }, worker, {
      topology: "layer-split",
    });
    const plan = (await recorded("g")).server.plan as ServingPlan;
    expect(plan.tensorSplit).toEqual([0.5, 0.5]);
    expect(plan.fits).toBe(false);
    expect(plan.wholeFitsClient).toBe(false);
    expect(plan.reason).toMatch(
      /spark-1 \(CPU\): .* of 0\.5 GB usable; spark-2 \(RPC0\): .* of 61\.2 GB usable/,
    );
  });

  it("a real change moves the plan: a node's total memory", async () => {
    const split = { topology: "layer-split" };
    serving(
      "e",
      { total: { "spark-1": 64 * GB }, available: { "spark-1": 58.3 * GB } },
      worker,
      split,
    );
    serving(
      "f",
      { total: { "spark-1": 128 * GB }, available: { "spark-1": 58.3 * GB } },
      worker,
      split,
    );
    const [e, f] = [await recorded("e"), await recorded("f")];
    expect((e.server.plan as ServingPlan).tensorSplit).toEqual([0.5, 0.5]);
    expect((f.server.plan as ServingPlan).tensorSplit).toEqual([0.667, 0.333]);
  });
});
