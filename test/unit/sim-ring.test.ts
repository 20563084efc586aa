// The simulated ring's pure parts (`sim up --ring`): which subnet, interface and address each
// end of each cable gets, and the `ring` fabric config the local stack is written with, which
// the fabric stage accepts and measures as three cables.
import { describe, expect, it } from "vitest";
import { fabricLinks, linkKey, parseFabricConfig } from "../../components/fabric/config";
import { nodeRails, railCount, railsSelected, ringCables, ringEnd } from "../../sim/network";
import { renderFabric } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";

const subnets = ["10.214.7.0/24", "10.214.8.0/24", "10.214.9.0/24"];
const nodes = [1, 2, 3].map((index) => ({ index, name: `spark-${index}` }));
const ringState = {
  ring: true,
  nodes,
  fabricSubnet: subnets[0]!,
  railSubnets: subnets,
};

describe("sim ring", () => {
  it("cables each node's fabric0 to the next node's fabric1, each cable its own /24", () => {
    expect(ringCables(3, subnets)).toEqual([
      {
        subnet: "10.214.7.0/24",
        ends: [
          { index: 1, rail: 0 },
          { index: 2, rail: 1 },
        ],
      },
      {
        subnet: "10.214.8.0/24",
        ends: [
          { index: 2, rail: 0 },
          { index: 3, rail: 1 },
        ],
      },
      {
        subnet: "10.214.9.0/24",
        ends: [
          { index: 3, rail: 0 },
          { index: 1, rail: 1 },
        ],
      },
    ]);
    expect(() => ringCables(3, subnets.slice(0, 2))).toThrow(
      "sim: a ring of 3 nodes needs 3 subnets (got 2)",
    );
    const cables = ringCables(3, subnets);
    expect(ringEnd(cables, 1, 0)).toEqual({
      subnet: "10.214.7.0/24",
      address: "10.214.7.1/24",
      peer: 2,
    });
    expect(ringEnd(cables, 1, 1)).toEqual({
      subnet: "10.214.9.0/24",
      address: "10.214.9.1/24",
      peer: 3,
    });
    expect(ringEnd(cables, 1, 2)).toBeUndefined();
  });

  it("gives each node two rails, each on the cable to a different neighbour", () => {
    expect(nodeRails(ringState, 2)).toEqual([
      { rail: 0, iface: "fabric0", address: "10.214.8.2/24", subnet: "10.214.8.0/24" },
      { rail: 1, iface: "fabric1", address: "10.214.7.2/24", subnet: "10.214.7.0/24" },
    ]);
    expect(railCount(ringState)).toBe(2);
    expect(railsSelected(ringState, undefined)).toEqual([0, 1]);
    expect(() => railsSelected(ringState, 2)).toThrow("sim: --rail must be 0..1 (got 2)");
    // A pair or a switch: one subnet per rail, as before.
    const pair = {
      nodes: nodes.slice(0, 2),
      fabricSubnet: subnets[0]!,
      railSubnets: subnets.slice(0, 2),
    };
    expect(nodeRails(pair, 2)).toEqual([
      { rail: 0, iface: "fabric0", address: "10.214.7.2/24", subnet: "10.214.7.0/24" },
      { rail: 1, iface: "fabric1", address: "10.214.8.2/24", subnet: "10.214.8.0/24" },
    ]);
    expect(railCount(pair)).toBe(2);
  });

  it("writes a ring fabric config the fabric stage accepts, three cables measured", () => {
    const cluster = {
      fabricTopology: "ring",
      nodes: nodes.map((n) => ({ name: n.name, rails: nodeRails(ringState, n.index) })),
    } as unknown as SimCluster;
    const text = renderFabric(cluster).join("\n");
    expect(text).toContain('    topology: "ring"');
    expect(text).toContain(
      '        - {rail: 0, iface: "fabric0", netdev: "enp1s0f1np1", address: "10.214.7.1/24"}',
    );
    // The YAML's rails, read back as the stack reads them.
    const rails: Record<
      string,
      { rail: number; iface: string; netdev?: string; address: string }[]
    > = {};
    let node = "";
    for (const line of text.split("\n")) {
      const n = /^ {6}"([^"]+)":$/.exec(line);
      if (n?.[1]) node = n[1];
      const r = /rail: (\d), iface: "([^"]+)", netdev: "([^"]+)", address: "([^"]+)"/.exec(line);
      if (r && node)
        (rails[node] ??= []).push({
          rail: Number(r[1]),
          iface: r[2]!,
          netdev: r[3]!,
          address: r[4]!,
        });
    }
    const names = nodes.map((n) => n.name);
    const fabric = parseFabricConfig({ topology: "ring", rails }, names);
    expect(
      fabricLinks(fabric.topology, names, (n) => fabric.rails[n]).map((l) => linkKey("ring", l)),
    ).toEqual([
      "spark-1-rail0-spark-2-rail1",
      "spark-1-rail1-spark-3-rail0",
      "spark-2-rail0-spark-3-rail1",
    ]);
  });
});
