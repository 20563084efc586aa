// The fabric report of a three-node ring: three cables, each its own subnet, whose ends carry
// different rail numbers; the markdown lists the three links, the picture draws a triangle.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { checkAddresses, classify, DEFAULT_THRESHOLDS } from "../../components/fabric/checks";
import { fabricLinks, railsLabel } from "../../components/fabric/config";
import { fixtureRdma } from "../../components/fabric/fixture";
import { portFacts } from "../../components/fabric/ports";
import { renderMarkdown, renderSvg, type ReportLink } from "../../components/fabric/report";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
import type { SparkNodeFacts } from "../../components/node/facts";
import { svgToPng } from "../../cli/commands/report";

const facts = {
  sysfsRoot: "/sys",
  cpu: { performanceCores: null },
  netdevs: [0, 1].map((r) => ({ name: `fabric${r}`, mtu: 9000, operstate: "up", addresses: [] })),
} as unknown as SparkNodeFacts;

const rail = (r: number, address: string) => ({ rail: r, ...SIM_RAILS[r]!, address });
const rails = {
  "spark-1": [rail(0, "10.214.12.1/24"), rail(1, "10.214.13.1/24")],
  "spark-2": [rail(0, "10.214.23.2/24"), rail(1, "10.214.12.2/24")],
  "spark-3": [rail(0, "10.214.13.3/24"), rail(1, "10.214.23.3/24")],
};
const names = Object.keys(rails);

/** The ring's links as the stage measures them; `gbps` per link key "a↔b". */
function ringLinks(gbps: Record<string, number | null>): ReportLink[] {
  return fabricLinks("ring", names, (n) => rails[n as "spark-1"]).map((l) => {
    const pa = portFacts(l.a, facts, fixtureRdma("sysfs-spark"), l.ra, 3);
    const pb = portFacts(l.b, facts, fixtureRdma("sysfs-spark"), l.rb, 3);
    const tp = gbps[`${l.a}↔${l.b}`] ?? null;
    const m = {
      error: tp === null ? "connect timed out" : null,
      rttP50Us: tp === null ? null : 21,
      rttP99Us: tp === null ? null : 44,
      throughputGbps: tp,
      method: "tcp" as const,
    };
    const cls = classify(`${l.a}↔${l.b} ${railsLabel(l)}`, m, 200000, 10, DEFAULT_THRESHOLDS);
    const link = `${l.a}↔${l.b}`;
    const checks = [
      ...checkAddresses([
        { node: l.a, rail: l.ra.rail, address: l.ra.address, link },
        { node: l.b, rail: l.rb.rail, address: l.rb.address, link },
      ]).values(),
      { check: "bandwidth" as const, ok: cls.class === "healthy", message: cls.message },
    ];
    return {
      link,
      rail: l.rail,
      topology: "ring",
      gidIndex: 3,
      ports: { a: pa, b: pb },
      source: "fixture",
      rttP50Us: m.rttP50Us,
      rttP99Us: m.rttP99Us,
      throughputGbps: tp,
      classReferenceGbps: cls.referenceGbps,
      class: cls.class,
      checks,
      healthy: checks.every((c) => c.ok),
      rdma: { measured: false, reason: "RDMA facts are fixtures" },
      error: m.error,
      mgmtIface: { a: "mgmt0", b: "mgmt0" },
    };
  });
}

describe("fabric report of a ring", () => {
  const cut = ringLinks({ "spark-1↔spark-2": 8, "spark-1↔spark-3": 8, "spark-2↔spark-3": null });

  it("lists the three cables with both ends' rails, the cut one failing by name", () => {
    const md = renderMarkdown(cut, { stack: "ring", picture: "fabric.png" });
    expect(md).toContain(
      "3 nodes, a ring (a cable per pair of nodes, each its own subnet), 2 rails, 3 links measured: **1 failing**.",
    );
    expect(md).toContain("| spark-1↔spark-2 | 0↔1 | spark-1:fabric0");
    expect(md).toContain("| spark-1↔spark-3 | 1↔0 | spark-1:fabric1");
    expect(md).toContain("| spark-2↔spark-3 | 0↔1 | spark-2:fabric0");
    expect(md).toContain(
      "- **spark-2↔spark-3 rail 0↔1, bandwidth**: spark-2↔spark-3 rail 0↔1: no throughput measured (connect timed out): check the cable and both ends' interfaces, then `pulumi up` to re-measure",
    );
    const healthy = renderMarkdown(
      ringLinks({ "spark-1↔spark-2": 8, "spark-1↔spark-3": 8, "spark-2↔spark-3": 8 }),
    );
    expect(healthy).toContain("3 links measured: all healthy.");
  });

  it("draws the three nodes as a triangle, each edge a cable with its subnet, ports and class", async () => {
    const svg = renderSvg(cut, "sparkform fabric: ring");
    const boxes = svg.match(/<rect [^>]*width="300" height="120"/g) ?? [];
    expect(boxes).toHaveLength(3);
    const edges = [
      ...svg.matchAll(
        /<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)" stroke="([^"]+)"/g,
      ),
    ];
    expect(edges).toHaveLength(3);
    // A triangle: three distinct corners, each shared by two edges.
    const corners = edges.flatMap((e) => [`${e[1]},${e[2]}`, `${e[3]},${e[4]}`]);
    expect(new Set(corners).size).toBe(3);
    for (const c of new Set(corners)) expect(corners.filter((x) => x === c)).toHaveLength(2);
    expect(edges.map((e) => e[5])).toEqual(["#2e7d32", "#2e7d32", "#9e9e9e"]);
    expect(svg).toContain('stroke-dasharray="10 8"');
    for (const label of [
      "10.214.12.0/24 · rail 0↔1",
      "10.214.13.0/24 · rail 1↔0",
      "10.214.23.0/24 · rail 0↔1",
      "spark-1:fabric0 ↔ spark-2:fabric1",
    ])
      expect(svg).toContain(`>${label}<`);
    expect(svg).toContain("Every cable, measured:");
    const png = await svgToPng(svg);
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    const out = process.env.SPARKFORM_RING_PNG;
    if (out) fs.writeFileSync(out, png);
    else fs.writeFileSync(path.join(os.tmpdir(), "fabric-ring-test.png"), png);
  });
});
