// The Fabric stage under Pulumi's runtime mocks: the exact children it registers for a pair and
// for four nodes (every pair, every rail both ends have), their type token and inputs, and its
// per-node summary. The mocked `call` throws on anything unexpected.
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import type { SparkNodeFacts } from "../../components/node/facts";
import { asValidated } from "../support/validated-config";

interface Registered {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
}
const registered: Registered[] = [];

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        // A FabricLink "measured": healthy, its ports as the program computed them.
        const outs =
          args.type === "pulumi-nodejs:dynamic/sparkform:FabricLink"
            ? {
                ...args.inputs,
                ports: { a: args.inputs.a.port, b: args.inputs.b.port },
                class: "healthy",
                rttP50Us: 15,
                throughputGbps: 8,
                healthy: true,
              }
            : args.inputs;
        return { id: `${args.name}-id`, state: outs };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "test",
    true,
  );
});

const facts = {
  sysfsRoot: "/sys",
  cpu: { performanceCores: [5, 6, 7, 8, 9, 15, 16, 17, 18, 19] },
  netdevs: [0, 1].map((r) => ({ name: `fabric${r}`, mtu: 9000, operstate: "up", addresses: [] })),
  rdma: { devices: [], reason: "absent" },
} as unknown as SparkNodeFacts;

class TestNode extends pulumi.CustomResource {
  constructor(name: string, props: pulumi.Inputs) {
    super("test:index:Node", name, props);
  }
}

/** A stand-in SparkNode stage: the Fabric reads only `target` and `facts` of each node. */
function nodeStage(names: string[]) {
  const nodes = Object.fromEntries(
    names.map((n) => [
      n,
      new TestNode(n, {
        target: {
          name: n,
          host: `10.0.0.${n.slice(-1)}`,
          port: 22,
          user: "spark",
          hostKey: "ssh-ed25519 AAAA",
        },
        facts,
      }) as unknown as import("../../components/node/spark-node").SparkNode,
    ]),
  );
  return {
    names,
    of: (n: string) => nodes[n]!,
    childOpts: (extra: pulumi.CustomResourceOptions) => ({ ...extra, additionalSecretOutputs: [] }),
  };
}

const rails = (names: string[]) =>
  Object.fromEntries(
    names.map((n) => [
      n,
      [0, 1].map((rail) => ({
        rail,
        iface: `fabric${rail}`,
        netdev: rail === 0 ? "enp1s0f1np1" : "enP2p1s0f1np1",
        address: `10.214.${7 + rail}.${n.slice(-1)}/24`,
      })),
    ]),
  );

const urnOf = (r: pulumi.Resource) =>
  new Promise<string>((resolve) => pulumi.output(r.urn).apply((u) => resolve(u)));
const valueOf = <T>(o: pulumi.Output<T>) => new Promise<T>((resolve) => o.apply((v) => resolve(v)));

/** The Fabric stage over `names`, each on the fixture's rails, its section parsed and branded. */
async function fabricStage(name: string, names: string[]) {
  const { Fabric } = await import("../../components/fabric/fabric");
  const { parseFabricConfig } = await import("../../components/fabric/config");
  registered.length = 0;
  return new Fabric(name, {
    nodes: nodeStage(names),
    config: asValidated(
      parseFabricConfig({ rails: rails(names), rdmaFixture: "sysfs-spark" }, names),
    ),
  });
}

describe("Fabric stage (runtime mocks)", () => {
  it("a pair: one FabricLink per rail, named and typed, with fixture-labelled ports and pinned CPUs", async () => {
    const f = await fabricStage("sf-fabric", ["spark-1", "spark-2"]);
    await Promise.all(f.ready.map(urnOf));
    const links = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/sparkform:FabricLink");
    expect(links.map((l) => l.name)).toEqual([
      "sf-fabric-spark-1-spark-2-rail0",
      "sf-fabric-spark-1-spark-2-rail1",
    ]);
    const l0 = links[0]!.inputs as {
      a: { cpus: number[]; port: Record<string, unknown> };
      addressChecks: { ok: boolean }[];
    } & Record<string, unknown>;
    expect(l0).toMatchObject({
      kind: "FabricLink",
      providerVersion: "1",
      link: "spark-1↔spark-2",
      rail: 0,
      topology: "point-to-point",
      gidIndex: 3,
      referenceGbps: null,
      probe: { count: 2000, seconds: 2 },
    });
    expect(l0.a.cpus).toEqual([5, 6, 7, 8, 9, 15, 16, 17, 18, 19]);
    expect(l0.a.port).toMatchObject({
      source: "fixture",
      origin: "sysfs-spark",
      rdmaDevice: "rocep1s0f1",
      iface: "fabric0",
    });
    expect(l0.addressChecks.map((c: { ok: boolean }) => c.ok)).toEqual([true, true]);
    expect(await urnOf(f.of("spark-2"))).toMatch(/sf-fabric-spark-1-spark-2-rail0$/);
    const byNode = await valueOf(f.byNode);
    expect(
      byNode["spark-2"]?.rails.map((r) => [
        r.rail,
        r.rdmaDevice,
        r.source,
        r.links.map((l) => l.peer),
      ]),
    ).toEqual([
      [0, "rocep1s0f1", "fixture", ["spark-1"]],
      [1, "roceP2p1s0f1", "fixture", ["spark-1"]],
    ]);
  });

  it("four nodes: a switch, every pair on both rails (12 links)", async () => {
    const f = await fabricStage("sf4-fabric", ["spark-1", "spark-2", "spark-3", "spark-4"]);
    await Promise.all(f.ready.map(urnOf));
    const links = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/sparkform:FabricLink");
    expect(links).toHaveLength(12);
    expect(new Set(links.map((l) => (l.inputs as { topology: string }).topology))).toEqual(
      new Set(["switch"]),
    );
    expect(links.map((l) => l.name)).toContain("sf4-fabric-spark-3-spark-4-rail1");
    expect(f.linksOf("spark-4")).toHaveLength(6);
  });

  it("config errors name the key and the fix", async () => {
    const { parseFabricConfig } = await import("../../components/fabric/config");
    expect(() =>
      parseFabricConfig(
        { rails: { "spark-1": [{ rail: 0, iface: "fabric0", address: "10.0.0.1" }] } },
        ["spark-1", "spark-2"],
      ),
    ).toThrow(
      /sparkform:fabric\.rails\.spark-1\[0\]\.address: must be an IPv4 address with its prefix, a\.b\.c\.d\/len/,
    );
    expect(() =>
      parseFabricConfig(
        { rails: { "spark-1": [{ rail: 0, iface: "fabric0", address: "10.0.0.1/24" }] } },
        ["spark-1", "spark-2"],
      ),
    ).toThrow(/sparkform:fabric\.rails\.spark-2: list this node's rails/);
  });
});
