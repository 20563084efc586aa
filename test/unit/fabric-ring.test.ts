// The ring topology's pure parts: the config's refusals (each message), the links of every
// topology (point-to-point and switch exactly as before), their keys, and the address one node
// reaches another at.
import { describe, expect, it } from "vitest";
import { checkAddresses, checkReachable } from "../../components/fabric/checks";
import type { PortFacts } from "../../components/fabric/ports";
import {
  fabricLinks,
  linkAddress,
  linkKey,
  parseFabricConfig,
  railsLabel,
  topologyOfRails,
} from "../../components/fabric/config";

const rail = (r: number, address: string, iface = `fabric${r}`) => ({ rail: r, iface, address });

/** NVIDIA's three-Spark ring: each cable its own /24, rail numbers of its ends differ. */
const ringRails = {
  "spark-1": [rail(0, "10.10.12.1/24"), rail(1, "10.10.13.1/24")],
  "spark-2": [rail(0, "10.10.23.2/24"), rail(1, "10.10.12.2/24")],
  "spark-3": [rail(0, "10.10.13.3/24"), rail(1, "10.10.23.3/24")],
};
const three = ["spark-1", "spark-2", "spark-3"];
const ring = { topology: "ring" as const, rails: ringRails };

const refusal = (raw: unknown, names = three) => {
  try {
    parseFabricConfig(raw, names);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("accepted");
};

describe("sparkform:fabric topology ring", () => {
  it("is accepted for three nodes and never chosen by default", () => {
    expect(parseFabricConfig(ring, three).topology).toBe("ring");
    expect(parseFabricConfig({ rails: ringRails }, three).topology).toBe("switch");
  });

  it("refuses other than three nodes, naming the topology key and the fix", () => {
    const four = [...three, "spark-4"];
    const m = refusal(
      { topology: "ring", rails: { ...ringRails, "spark-4": [rail(0, "10.10.14.4/24")] } },
      four,
    );
    expect(m).toContain(
      "sparkform:fabric.topology: is ring with 4 nodes; a ring is three nodes, each node's two ports cabled to the other two: a 4-node ring needs 4 ports per node (a Spark has two): use topology: switch",
    );
    const two = refusal(
      {
        topology: "ring",
        rails: { "spark-1": ringRails["spark-1"], "spark-2": ringRails["spark-2"] },
      },
      ["spark-1", "spark-2"],
    );
    expect(two).toContain("is ring with 2 nodes");
    expect(two).toContain("use topology: point-to-point");
  });

  it("refuses a node whose two rails reach the same peer, naming the cable to move", () => {
    const m = refusal({
      topology: "ring",
      rails: {
        "spark-1": [rail(0, "10.10.12.1/24"), rail(1, "10.10.21.1/24")],
        "spark-2": [rail(0, "10.10.21.2/24"), rail(1, "10.10.12.2/24")],
        "spark-3": [rail(0, "10.10.33.3/24"), rail(1, "10.10.34.3/24")],
      },
    });
    expect(m).toContain(
      "sparkform:fabric.rails.spark-1: spark-1's rails 0 and 1 both reach spark-2 (subnets 10.10.12.0/24 and 10.10.21.0/24: the link spark-1↔spark-2 twice): a cable is in the wrong port; cable rail 1 to spark-3",
    );
    expect(m).toContain(
      "spark-2's rails 0 and 1 both reach spark-1 (subnets 10.10.21.0/24 and 10.10.12.0/24: the link spark-2↔spark-1 twice): a cable is in the wrong port; cable rail 1 to spark-3",
    );
    // spark-3's cables end nowhere configured.
    expect(m).toContain(
      "sparkform:fabric.rails.spark-3[0]: spark-3 rail 0 (10.10.33.3/24) is the only rail on subnet 10.10.33.0/24: in a ring a subnet is one cable, and this cable's other end is not configured; give the rail at its other end an address in 10.10.33.0/24",
    );
  });

  it("refuses a subnet used by more than two rails", () => {
    const m = refusal({
      topology: "ring",
      rails: {
        "spark-1": [rail(0, "10.10.12.1/24"), rail(1, "10.10.13.1/24")],
        "spark-2": [rail(0, "10.10.12.3/24"), rail(1, "10.10.12.2/24")],
        "spark-3": [rail(0, "10.10.13.3/24"), rail(1, "10.10.23.3/24")],
      },
    });
    expect(m).toContain(
      "subnet 10.10.12.0/24 is used by spark-1 rail 0, spark-2 rail 0, spark-2 rail 1: in a ring a subnet is one cable with two ends; give each cable its own subnet",
    );
  });

  it("refuses one node's two rails on one subnet, and a node without two rails", () => {
    const m = refusal({
      topology: "ring",
      rails: {
        "spark-1": [rail(0, "10.10.11.1/24"), rail(1, "10.10.11.2/24")],
        "spark-2": [rail(0, "10.10.23.2/24")],
        "spark-3": [rail(0, "10.10.23.3/24")],
      },
    });
    expect(m).toContain(
      "sparkform:fabric.rails.spark-1[1]: spark-1's rails 0 and 1 share subnet 10.10.11.0/24: a cable joins two nodes; give each of its rails the subnet of the cable to its peer",
    );
    expect(m).toContain(
      "sparkform:fabric.rails.spark-2: lists 1 rail; in a ring each node has two, one cable to each other node: list both ports",
    );
  });

  it("refuses the same rail listed twice before judging the cables", () => {
    const m = refusal({
      topology: "ring",
      rails: { ...ringRails, "spark-1": [rail(0, "10.10.12.1/24"), rail(0, "10.10.13.1/24")] },
    });
    expect(m).toContain("sparkform:fabric.rails.spark-1: rail 0 is listed twice");
    expect(m).toContain("Fix it in stacks/Pulumi.<stack>.yaml");
  });
});

describe("fabricLinks", () => {
  const sw = (n: string, i: number) => [rail(0, `10.0.0.${i}/24`), rail(1, `10.0.1.${i}/24`)];
  const pick = (ls: ReturnType<typeof fabricLinks>) =>
    ls.map((l) => [l.a, l.b, l.rail, l.ra.rail, l.rb.rail, linkKey("switch", l)]);

  it("point-to-point: both rails of the pair, as before", () => {
    const rails = { a: sw("a", 1), b: sw("b", 2) };
    expect(pick(fabricLinks("point-to-point", ["a", "b"], (n) => rails[n as "a"]))).toEqual([
      ["a", "b", 0, 0, 0, "a-b-rail0"],
      ["a", "b", 1, 1, 1, "a-b-rail1"],
    ]);
  });

  it("switch: every pair on every rail both have, as before", () => {
    const rails: Record<string, ReturnType<typeof sw>> = {
      a: sw("a", 1),
      b: sw("b", 2),
      c: [rail(0, "10.0.0.3/24")],
    };
    expect(pick(fabricLinks("switch", ["a", "b", "c"], (n) => rails[n]))).toEqual([
      ["a", "b", 0, 0, 0, "a-b-rail0"],
      ["a", "b", 1, 1, 1, "a-b-rail1"],
      ["a", "c", 0, 0, 0, "a-c-rail0"],
      ["b", "c", 0, 0, 0, "b-c-rail0"],
    ]);
  });

  it("ring: one link per subnet, each rail once, ends with their own rail numbers", () => {
    const ls = fabricLinks("ring", three, (n) => ringRails[n as "spark-1"]);
    expect(ls.map((l) => [l.a, l.b, l.ra.address, l.rb.address])).toEqual([
      ["spark-1", "spark-2", "10.10.12.1/24", "10.10.12.2/24"],
      ["spark-1", "spark-3", "10.10.13.1/24", "10.10.13.3/24"],
      ["spark-2", "spark-3", "10.10.23.2/24", "10.10.23.3/24"],
    ]);
    expect(ls.map((l) => linkKey("ring", l))).toEqual([
      "spark-1-rail0-spark-2-rail1",
      "spark-1-rail1-spark-3-rail0",
      "spark-2-rail0-spark-3-rail1",
    ]);
    expect(ls.map(railsLabel)).toEqual(["rail 0↔1", "rail 1↔0", "rail 0↔1"]);
  });

  it("recognises a recorded ring by its subnets", () => {
    expect(topologyOfRails(ringRails)).toBe("ring");
    expect(topologyOfRails({ a: [rail(0, "10.0.0.1/24")], b: [rail(0, "10.0.0.2/24")] })).toBe(
      "point-to-point",
    );
    expect(
      topologyOfRails({
        a: [rail(0, "10.0.0.1/24")],
        b: [rail(0, "10.0.0.2/24")],
        c: [rail(0, "10.0.0.3/24")],
      }),
    ).toBe("switch");
  });
});

describe("linkAddress", () => {
  it("ring: the far end of the cable joining the pair", () => {
    expect(linkAddress(ring, "spark-1", "spark-2")).toBe("10.10.12.2");
    expect(linkAddress(ring, "spark-2", "spark-1")).toBe("10.10.12.1");
    expect(linkAddress(ring, "spark-1", "spark-3", "10.10.23.3")).toBe("10.10.13.3");
    expect(linkAddress(ring, "spark-3", "spark-2")).toBe("10.10.23.2");
  });

  it("point-to-point and switch: the node's own fabric address, else its first shared rail", () => {
    const rails = {
      a: [rail(0, "10.0.0.1/24"), rail(1, "10.0.1.1/24")],
      b: [rail(0, "10.0.0.2/24"), rail(1, "10.0.1.2/24")],
      c: [rail(1, "10.0.1.3/24")],
    };
    const p2p = { topology: "point-to-point" as const, rails };
    expect(linkAddress(p2p, "a", "b", "10.0.1.2")).toBe("10.0.1.2");
    expect(linkAddress(p2p, "a", "b")).toBe("10.0.0.2");
    const sw = { topology: "switch" as const, rails };
    expect(linkAddress(sw, "c", "a", "10.0.0.1")).toBe("10.0.0.1");
    expect(linkAddress(sw, "c", "a")).toBe("10.0.1.1");
    expect(linkAddress(sw, "a", "nowhere")).toBeUndefined();
  });
});

describe("checkAddresses in a ring", () => {
  it("says rail numbers as before where there is no ring", () => {
    const same = [0, 1, 2].map((r) => ({ node: "a", rail: r, address: `10.0.${r}.1/16` }));
    expect(checkAddresses(same).get("a/0")?.message).toContain(
      "rail 0 shares subnet 10.0.0.0/16 with rail 1, 2",
    );
  });

  it("holds each rail to its cable's subnet, not its rail number's", () => {
    const all = fabricLinks("ring", three, (n) => ringRails[n as "spark-1"]).flatMap((l) => [
      { node: l.a, rail: l.ra.rail, address: l.ra.address, link: `${l.a}↔${l.b}` },
      { node: l.b, rail: l.rb.rail, address: l.rb.address, link: `${l.a}↔${l.b}` },
    ]);
    const checks = checkAddresses(all);
    expect([...checks.values()].every((c) => c.ok)).toBe(true);
    const bad = checkAddresses(
      all.map((a) =>
        a.node === "spark-2" && a.rail === 1 ? { ...a, address: "10.10.99.2/24" } : a,
      ),
    );
    expect(bad.get("spark-2/1")?.message).toBe(
      "spark-2 rail 1: 10.10.99.2/24 is outside link spark-1↔spark-2's subnet 10.10.12.0/24: give each rail its own subnet and each node a unique address on it (sparkform:nodes[].rails)",
    );
  });
});

describe("a miscabled ring found by measurement", () => {
  const port = (node: string, r: number, address: string) =>
    ({ node, rail: r, iface: `fabric${r}`, address }) as PortFacts;
  const unreached = {
    error: "TimeoutError: timed out",
    rttP50Us: null,
    rttP99Us: null,
    throughputGbps: null,
    method: "tcp" as const,
  };

  it("names the cable: which node's which port goes to which node's which port", () => {
    const a = port("spark-1", 0, "10.10.12.1/24");
    const b = port("spark-2", 1, "10.10.12.2/24");
    expect(checkReachable("spark-1", b, unreached, a)).toEqual({
      check: "reachable",
      ok: false,
      message:
        "spark-1 cannot reach spark-2 on rail 1 at 10.10.12.2 (TimeoutError: timed out): in the ring, spark-1's fabric0 (rail 0, 10.10.12.1/24) must be cabled to spark-2's fabric1 (rail 1, 10.10.12.2/24), their own subnet: check that cable is in those two ports (in another port it reaches another node, or none), then that the link is up on both ends (ip link), and that nothing filters the probe port",
    });
    // Not a ring: the message it always had.
    expect(checkReachable("spark-1", b, unreached).message).toBe(
      "spark-1 cannot reach spark-2 on rail 1 at 10.10.12.2 (TimeoutError: timed out): check the link is up on both ends (cable, ip link), the address and prefix on fabric1, and that nothing filters the probe port",
    );
  });
});
