// SparkCluster's wiring under Pulumi's mocks: which children it registers, with which types,
// names, parents, dependsOn, aliases (stacks made before the stage layout) and secret outputs.
// The model resolves against a real local hub (sim/hub), as it does at preview.
import * as pulumi from "@pulumi/pulumi";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HfEndpoint, publishTestModel, startHfEndpoint } from "../../sim/hub";

interface Registration {
  type: string;
  name: string;
  urn: string;
  parent: string;
  dependsOn: string[];
  secretOutputs: string[];
  aliases: { name: string; type: string; parent: string }[];
  inputs: Record<string, unknown>;
}

const registrations: Registration[] = [];
/** Each resource's inputs as the engine was given them, by name. */
const inputsOf = new Map<string, Record<string, unknown>>();
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9yc3Bhcmtmb3Jtc3RhZ2V0ZXN0cw";
const COMMIT = "80fb11ac0f0e0d0c0b0a09080706050403020100";

let work: string;
let hub: HfEndpoint;
let modelCommit: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "sparkform-component-"));
  mkdirSync(path.join(work, "tree", "src"), { recursive: true });
  writeFileSync(path.join(work, "tree", "src", "main.c"), "int main(void) { return 0; }\n");
  const root = path.join(work, "hub");
  modelCommit = publishTestModel(root).commit;
  hub = await startHfEndpoint({ root });
  process.env.SPARKFORM_CACHE_DIR = path.join(work, "cache");

  await pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        inputsOf.set(args.name, args.inputs);
        const a = args.inputs.a as { port?: unknown } | undefined;
        const b = args.inputs.b as { port?: unknown } | undefined;
        return {
          id: `${args.name}-id`,
          // The measured outputs a real provider would return, so later stages can read them.
          state: {
            ...args.inputs,
            digest: `digest-of-${args.name}`,
            // (cpu and netdevs: what a FabricLink's ends read at program time, for the ring.)
            facts: { arch: "x86_64", cpu: { performanceCores: null }, netdevs: [] },
            nodeFiles: [],
            // A NativeBuild's measured outputs, which the worker stage reads.
            installDir: "/home/spark/.cache/sparkform/llama-build/out/key",
            artifacts: { "bin/ggml-rpc-server": "0".repeat(64) },
            // A FabricLink's measured ports: its ends' program-time ones.
            ...(a?.port ? { ports: { a: a.port, b: b?.port } } : {}),
          },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "local",
    false,
  );
  // The mock monitor does not hand parents, dependencies or aliases to newResource: record them
  // from the registration request itself.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const settings = require("@pulumi/pulumi/runtime/settings") as {
    getMonitor(): { registerResource(req: RegisterRequest, cb: unknown): Promise<void> };
  };
  const monitor = settings.getMonitor();
  const original = monitor.registerResource.bind(monitor);
  monitor.registerResource = async (req, cb) => {
    const callback = cb as (err: unknown, resp?: { getUrn(): string }) => void;
    return original(req, (err: unknown, resp?: { getUrn(): string }) => {
      if (resp) {
        registrations.push({
          type: req.getType(),
          name: req.getName(),
          urn: resp.getUrn(),
          parent: req.getParent(),
          dependsOn: req.getDependenciesList(),
          secretOutputs: req.getAdditionalsecretoutputsList(),
          aliases: req.getAliasesList().map((a) => {
            const spec = a.getSpec();
            return {
              name: spec?.getName() ?? "",
              type: spec?.getType() ?? "",
              parent: spec?.getParenturn() ?? "",
            };
          }),
          inputs: {},
        });
      }
      callback(err, resp);
    });
  };
});

afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

interface RegisterRequest {
  getType(): string;
  getName(): string;
  getParent(): string;
  getDependenciesList(): string[];
  getAdditionalsecretoutputsList(): string[];
  getAliasesList(): {
    getSpec(): { getName(): string; getType(): string; getParenturn(): string } | undefined;
  }[];
}

function nodes(n: number) {
  return Array.from({ length: n }, (_, i) => ({
    name: `spark-${i + 1}`,
    host: `10.0.0.${i + 11}`,
    port: 22,
    user: "spark",
    hostKey: HOST_KEY,
    fabricAddress: `192.168.100.${i + 1}`,
  }));
}

const value = <T>(o: pulumi.Output<T>): Promise<T> => new Promise((resolve) => o.apply(resolve));

/** Build a cluster in a fresh registration log and wait until every child is registered. */
async function cluster(
  name: string,
  n: number,
  opts: { privateKey?: string; extra?: Record<string, unknown> } = {},
) {
  const { SparkCluster } = await import("../../components/cluster");
  const { parseStackConfig } = await import("../../components/stack-config");
  registrations.length = 0;
  const c = new SparkCluster(name, {
    config: {
      ...parseStackConfig(
        {
          nodes: nodes(n),
          toolchain: {
            path: "~/.sparktool",
            binDirs: ["installs/sparktool/1.0.0/bin"],
            probe: ["sparktool", "--version"],
            expect: "sparktool 1.0",
          },
          tree: { source: "tree", dest: "~/src/llama.cpp", exclude: [] },
          build: { preset: "sim", commit: COMMIT },
          worker: { nodes: ["spark-2"] },
          model: {
            repo: "sparkform/tiny-llama",
            revision: modelCommit,
            files: ["tiny-llama-f16.gguf"],
            endpoint: hub.url,
          },
          ...opts.extra,
        },
        { projectDir: work },
      ),
      ...(opts.privateKey ? { privateKey: pulumi.secret(opts.privateKey) } : {}),
    },
    projectDir: work,
  });
  const all = [
    c,
    c.nodes,
    ...c.nodes.ready,
    ...(c.toolchains ? [c.toolchains, ...c.toolchains.ready] : []),
    ...(c.trees ? [c.trees, ...c.trees.ready] : []),
    ...(c.builds ? [c.builds, ...c.builds.ready] : []),
    ...(c.model ? [c.model, ...c.model.ready] : []),
    ...(c.workers ? [c.workers, ...c.workers.ready] : []),
  ];
  await Promise.all(all.map((r) => value(r.urn)));
  await value(c.facts);
  return c;
}

const byName = (name: string): Registration => {
  const r = registrations.find((x) => x.name === name);
  if (!r)
    throw new Error(`${name} was not registered (${registrations.map((x) => x.name).join(", ")})`);
  return r;
};
const urnOf = (name: string) => byName(name).urn;

const DYN = "pulumi-nodejs:dynamic/sparkform";

describe("SparkCluster on 2 nodes", () => {
  beforeAll(async () => {
    await cluster("local", 2);
  });

  it("registers exactly the stages and their per-node resources, with sparkform's types", () => {
    expect(registrations.map((r) => [r.type, r.name]).sort()).toEqual(
      [
        ["sparkform:index:SparkCluster", "local"],
        ["sparkform:index:Nodes", "local-node"],
        [`${DYN}:SparkNode`, "local-node-spark-1"],
        [`${DYN}:SparkNode`, "local-node-spark-2"],
        ["sparkform:index:Toolchains", "local-toolchain"],
        [`${DYN}:Toolchain`, "local-toolchain-spark-1"],
        [`${DYN}:Toolchain`, "local-toolchain-spark-2"],
        ["sparkform:index:Trees", "local-tree"],
        [`${DYN}:TreeSync`, "local-tree-spark-1"],
        [`${DYN}:TreeSync`, "local-tree-spark-2"],
        ["sparkform:index:Builds", "local-build"],
        [`${DYN}:NativeBuild`, "local-build-spark-1"],
        [`${DYN}:NativeBuild`, "local-build-spark-2"],
        ["sparkform:index:Model", "local-model"],
        [`${DYN}:ModelReplica`, "local-model-spark-1"],
        [`${DYN}:ModelReplica`, "local-model-spark-2"],
        ["sparkform:index:RpcWorkers", "local-worker"],
        [`${DYN}:RpcWorker`, "local-worker-spark-2"],
      ].sort(),
    );
  });

  it("parents every per-node resource to its stage, and every stage to the cluster", () => {
    const cluster = urnOf("local");
    for (const stage of ["node", "toolchain", "tree", "build", "model"]) {
      expect(byName(`local-${stage}`).parent).toBe(cluster);
      for (const node of ["spark-1", "spark-2"]) {
        expect(byName(`local-${stage}-${node}`).parent).toBe(urnOf(`local-${stage}`));
      }
    }
  });

  it("orders the stages: fact sheets first, the source node first, each build after its tree", () => {
    const facts = [urnOf("local-node-spark-1"), urnOf("local-node-spark-2")];
    const deps = (n: string) => [...byName(n).dependsOn].sort();
    expect(deps("local-node-spark-1")).toEqual([]);
    expect(deps("local-toolchain-spark-1")).toEqual([...facts].sort());
    expect(deps("local-toolchain-spark-2")).toEqual(
      [...facts, urnOf("local-toolchain-spark-1")].sort(),
    );
    expect(deps("local-tree-spark-2")).toEqual([...facts, urnOf("local-toolchain-spark-2")].sort());
    expect(deps("local-build-spark-1")).toEqual([urnOf("local-tree-spark-1")]);
    expect(deps("local-build-spark-2")).toEqual(
      [urnOf("local-tree-spark-2"), urnOf("local-build-spark-1")].sort(),
    );
    expect(deps("local-model-spark-1")).toEqual([...facts].sort());
    expect(deps("local-model-spark-2")).toEqual([...facts, urnOf("local-model-spark-1")].sort());
    // The worker starts from the verified build on its node and the client's (spark-1's).
    expect(deps("local-worker-spark-2")).toEqual(
      expect.arrayContaining([urnOf("local-build-spark-1"), urnOf("local-build-spark-2")]),
    );
  });

  it("aliases every resource a pre-stage stack has, so `up` moves it instead of replacing it", () => {
    const cluster = urnOf("local");
    const legacy = "pulumi-nodejs:dynamic:Resource";
    for (const node of ["spark-1", "spark-2"]) {
      // Nodes were `<cluster>-<node>`; the others kept their names.
      expect(byName(`local-node-${node}`).aliases).toEqual([
        { name: `local-${node}`, type: legacy, parent: cluster },
      ]);
      for (const stage of ["toolchain", "tree", "build"]) {
        expect(byName(`local-${stage}-${node}`).aliases).toEqual([
          { name: `local-${stage}-${node}`, type: legacy, parent: cluster },
        ]);
      }
      // Replicas were already children of the Model component: only the type changed.
      expect(byName(`local-model-${node}`).aliases).toEqual([
        { name: "", type: legacy, parent: urnOf("local-model") },
      ]);
    }
  });

  it("keeps no connection property secret when no private key is configured", () => {
    for (const stage of ["node", "toolchain", "tree", "build"]) {
      expect(byName(`local-${stage}-spark-2`).secretOutputs).toEqual([]);
    }
  });
});

describe("SparkCluster on three nodes in a ring", () => {
  // Each cable its own subnet; each node's fabricAddress its rail 0's, on the cable to its successor.
  const rails = {
    "spark-1": [
      { rail: 0, iface: "fabric0", address: "10.10.12.1/24" },
      { rail: 1, iface: "fabric1", address: "10.10.13.1/24" },
    ],
    "spark-2": [
      { rail: 0, iface: "fabric0", address: "10.10.23.2/24" },
      { rail: 1, iface: "fabric1", address: "10.10.12.2/24" },
    ],
    "spark-3": [
      { rail: 0, iface: "fabric0", address: "10.10.13.3/24" },
      { rail: 1, iface: "fabric1", address: "10.10.23.3/24" },
    ],
  };
  let c: Awaited<ReturnType<typeof cluster>>;
  beforeAll(async () => {
    c = await cluster("ring", 3, {
      extra: {
        nodes: nodes(3).map((n) => ({
          ...n,
          fabricAddress: rails[n.name as "spark-1"][0]!.address.split("/")[0],
        })),
        fabric: { topology: "ring", rails, rdmaFixture: "sysfs-spark" },
        worker: { nodes: ["spark-2", "spark-3"] },
      },
    });
    await Promise.all((c.fabric?.ready ?? []).map((l) => value(l.urn)));
  });

  it("measures one link per cable, named by both its ports", () => {
    expect(registrations.filter((r) => r.type === `${DYN}:FabricLink`).map((r) => r.name)).toEqual([
      "ring-fabric-spark-1-rail0-spark-2-rail1",
      "ring-fabric-spark-1-rail1-spark-3-rail0",
      "ring-fabric-spark-2-rail0-spark-3-rail1",
    ]);
  });

  it("the client dials each worker, and each worker sees the client, on the cable joining them", () => {
    expect(c.workers?.endpoints.map((e) => [e.node, e.endpoint])).toEqual([
      ["spark-2", "10.10.12.2:50052"],
      ["spark-3", "10.10.13.3:50052"],
    ]);
    expect(inputsOf.get("ring-worker-spark-2")).toMatchObject({
      bind: "10.10.12.2",
      client: { fabricAddress: "10.10.12.1" },
    });
    expect(inputsOf.get("ring-worker-spark-3")).toMatchObject({
      bind: "10.10.13.3",
      client: { fabricAddress: "10.10.13.1" },
    });
  });

  it("each node copies from the first over the cable joining the two", () => {
    const from = (resource: string, key: string) =>
      (inputsOf.get(resource)?.[key] as { fabricAddress?: string } | undefined)?.fabricAddress;
    expect(from("ring-model-spark-2", "source")).toBe("10.10.12.1");
    expect(from("ring-model-spark-3", "source")).toBe("10.10.13.1");
    expect(from("ring-toolchain-spark-3", "source")).toBe("10.10.13.1");
    expect(from("ring-build-spark-3", "cacheFrom")).toBe("10.10.13.1");
  });
});

describe("SparkCluster on 4 nodes with a private key", () => {
  let c: Awaited<ReturnType<typeof cluster>>;
  beforeAll(async () => {
    c = await cluster("quad", 4, { privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n" });
  });

  it("seeds every other node's build from the first, and copies the toolchain from it", () => {
    for (const node of ["spark-2", "spark-3", "spark-4"]) {
      expect(byName(`quad-build-${node}`).dependsOn).toContain(urnOf("quad-build-spark-1"));
      expect(byName(`quad-toolchain-${node}`).dependsOn).toContain(urnOf("quad-toolchain-spark-1"));
      expect(byName(`quad-model-${node}`).dependsOn).toContain(urnOf("quad-model-spark-1"));
    }
    expect(byName("quad-build-spark-1").dependsOn).not.toContain(urnOf("quad-build-spark-2"));
  });

  it("keeps every property that carries the key secret", () => {
    expect(byName("quad-node-spark-3").secretOutputs).toEqual(["target"]);
    expect(byName("quad-tree-spark-3").secretOutputs).toEqual(["target"]);
    expect(byName("quad-toolchain-spark-1").secretOutputs).toEqual(["target"]);
    expect(byName("quad-toolchain-spark-3").secretOutputs).toEqual(["target", "source"]);
    expect(byName("quad-build-spark-1").secretOutputs).toEqual(["target"]);
    expect(byName("quad-build-spark-4").secretOutputs).toEqual(["target", "cacheFrom"]);
    expect(byName("quad-model-spark-4").secretOutputs).toEqual(["target", "source"]);
  });

  it("gathers per-node outputs into records keyed by node name, in node order", async () => {
    expect(Object.keys(await value(c.facts))).toEqual(["spark-1", "spark-2", "spark-3", "spark-4"]);
    const tree = await value(c.tree as NonNullable<typeof c.tree>);
    expect(Object.keys(tree.nodes)).toEqual(["spark-1", "spark-2", "spark-3", "spark-4"]);
    expect(tree.nodes["spark-3"]?.digest).toBe("digest-of-quad-tree-spark-3");
    expect(tree.expected.files).toBe(1);
  });
});

// Issue 21, item 5: the engine deletes whatever the program stops registering, so a stage the
// config asks for is never dropped silently (the server without its workers used to be). Since
// issue 23 the config refuses it, before any component is made.
describe("SparkCluster with sparkform:server but no sparkform:worker", () => {
  it("refuses at preview, naming what is missing, instead of registering no server", async () => {
    const { parseStackConfig } = await import("../../components/stack-config");
    const raw = {
      nodes: nodes(2),
      tree: { source: "tree", dest: "~/src/llama.cpp", exclude: [] },
      build: { preset: "sim", commit: COMMIT },
      server: { context: 256 },
      model: {
        repo: "sparkform/tiny-llama",
        revision: modelCommit,
        files: ["tiny-llama-f16.gguf"],
        endpoint: hub.url,
      },
    };
    expect(() => parseStackConfig(raw, { projectDir: work })).toThrow(
      /sparkform:server: is set, but sparkform:worker is not: .*; set sparkform:worker \(e\.g\. nodes: \[spark-2\]\), or remove sparkform:server/,
    );
  });
});
