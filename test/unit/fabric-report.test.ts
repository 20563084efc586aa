// The fabric report and the gate on crafted FabricLink outputs built from the real fixtures:
// a 4-node switched fabric with every pair on both rails, one rail degraded, one node on the
// RoCE v1 fixture; the policies called directly; the CLI commands run as a user runs them.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkAddresses,
  classify,
  DEFAULT_THRESHOLDS,
  portChecks,
} from "../../components/fabric/checks";
import { linkPairs } from "../../components/fabric/config";
import { fixtureRdma } from "../../components/fabric/fixture";
import { linkViolations, rdmaTransportViolation } from "../../components/fabric/gate";
import { portFacts } from "../../components/fabric/ports";
import { renderMarkdown, renderSvg, type ReportLink } from "../../components/fabric/report";
import { parseRpcTransport } from "../../components/fabric/rpc-log";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
import type { SparkNodeFacts } from "../../components/node/facts";
import { fabricLinksOf, svgToPng, FABRIC_LINK_TYPE } from "../../cli/commands/report";
import { readState } from "../../stack-state";
import { fabricHealthy, measuredLinks, rdmaTransport } from "../../policies/fabric";

const live = {
  sysfsRoot: "/sys",
  cpu: { performanceCores: null },
  netdevs: [0, 1].map((r) => ({ name: `fabric${r}`, mtu: 9000, operstate: "up", addresses: [] })),
} as unknown as SparkNodeFacts;

function link(a: string, b: string, rail: number, gbps: number, fxB = "sysfs-spark"): ReportLink {
  const r = SIM_RAILS[rail]!;
  const idx = (n: string) => Number(n.split("-")[1]);
  const port = (n: string, fx: string) =>
    portFacts(
      n,
      live,
      fixtureRdma(fx),
      { rail, ...r, address: `10.214.${7 + rail}.${idx(n)}/24` },
      3,
    );
  const pa = port(a, "sysfs-spark");
  const pb = port(b, fxB);
  const m = {
    error: null,
    rttP50Us: 20 + rail,
    rttP99Us: 45,
    throughputGbps: gbps,
    method: "tcp" as const,
  };
  const cls = classify(`${a}↔${b} rail ${rail}`, m, 200000, 10, DEFAULT_THRESHOLDS);
  const checks = [
    ...portChecks(pa, pb, DEFAULT_THRESHOLDS),
    ...[
      ...checkAddresses([
        { node: a, rail, address: pa.address },
        { node: b, rail, address: pb.address },
      ]).values(),
    ],
    { check: "bandwidth" as const, ok: cls.class === "healthy", message: cls.message },
  ];
  return {
    link: `${a}↔${b}`,
    rail,
    topology: "switch",
    gidIndex: 3,
    ports: { a: pa, b: pb },
    source: "fixture",
    rttP50Us: m.rttP50Us,
    rttP99Us: m.rttP99Us,
    throughputGbps: gbps,
    classReferenceGbps: cls.referenceGbps,
    class: cls.class,
    checks,
    healthy: checks.every((c) => c.ok),
    rdma: {
      measured: false,
      reason:
        "RDMA facts are fixtures (the node has no HCA): RDMA latency and bandwidth cannot be measured",
    },
    error: null,
    mgmtIface: { a: "mgmt0", b: "mgmt0" },
  };
}

const nodes = ["spark-1", "spark-2", "spark-3", "spark-4"];
const fourNode = linkPairs(nodes).flatMap(([a, b]) =>
  [0, 1].map((rail) =>
    link(
      a,
      b,
      rail,
      a === "spark-1" && b === "spark-3" && rail === 1 ? 0.9 : 8,
      b === "spark-4" ? "sysfs-spark-rocev1" : "sysfs-spark",
    ),
  ),
);

describe("fabric report", () => {
  it("a 4-node switched fabric: every pair on both rails, a switch per rail, fixture labels, failures with their fix", async () => {
    expect(fourNode).toHaveLength(12);
    const md = renderMarkdown(fourNode, { stack: "local4", picture: "fabric.png" });
    expect(md).toContain("4 nodes, a switch per rail, 2 rails, 12 links measured: **4 failing**.");
    expect(md).toContain("**Fixture-sourced RDMA facts** (sysfs-spark, sysfs-spark-rocev1)");
    for (const [a, b] of linkPairs(nodes))
      for (const r of [0, 1]) expect(md).toContain(`| ${a}↔${b} | ${r} |`);
    expect(md).toContain(
      "- **spark-1↔spark-3 rail 1, bandwidth**: spark-1↔spark-3 rail 1: degraded: 0.9 Gbit/s is 9% of 10 Gbit/s (healthy from 50%): check the cable and re-seat it",
    );
    expect(md).toMatch(
      /- \*\*spark-1↔spark-4 rail 0, gid\*\*: spark-4 rail 0 \(rocep1s0f1\/enp1s0f1np1 on fabric0\) has IB\/RoCE v1 at GID index 3/,
    );
    expect(md).toContain("never ICMP");
    const svg = renderSvg(fourNode, "sparkform fabric: 4 nodes");
    expect(svg).toContain(">rail 0 switch<");
    expect(svg).toContain(
      "spark-3↔spark-4 rail 0: p50 20.0 µs · p99 45.0 µs · 8.00 Gbit/s · healthy · ✗ gid",
    );
    expect(svg).toContain(">rail 1 switch<");
    expect(svg).toContain(
      "spark-3↔spark-4 rail 1: p50 21.0 µs · p99 45.0 µs · 8.00 Gbit/s · healthy",
    );
    expect(svg).toContain("RDMA facts from fixture sysfs-spark, sysfs-spark-rocev1");
    const png = await svgToPng(svg);
    expect(png.subarray(1, 4).toString("ascii")).toBe("PNG");
    const dir =
      process.env.SPARKFORM_FABRIC_REPORT_DIR ??
      fs.mkdtempSync(path.join(os.tmpdir(), "fabric-report4-"));
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "fabric4.png"), png);
  });

  it("reads FabricLinks from a stack export and writes md, svg and png through the CLI", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fabric-cli-"));
    const exported = {
      version: 3,
      deployment: {
        resources: [
          {
            type: "pulumi:pulumi:Stack",
            urn: "urn:pulumi:t::sparkform::pulumi:pulumi:Stack::sparkform-t",
            outputs: {},
          },
          ...fourNode.slice(0, 2).map((l, i) => ({
            type: FABRIC_LINK_TYPE,
            urn: `urn:pulumi:t::sparkform::${FABRIC_LINK_TYPE}::t-fabric-${i}`,
            outputs: l,
          })),
        ],
      },
    };
    expect(fabricLinksOf(readState(exported))).toHaveLength(2);
    fs.writeFileSync(path.join(dir, "export.json"), JSON.stringify(exported));
    const r = spawnSync(
      process.execPath,
      [
        "bin/sparkform.js",
        "report",
        "fabric",
        "--from",
        path.join(dir, "export.json"),
        "--stack",
        "t",
        "--out",
        dir,
      ],
      { encoding: "utf8", cwd: path.join(__dirname, "..", "..") },
    );
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe(
      `2 links and rails: ${path.join(dir, "fabric.md")} (+ fabric.svg, fabric.png)`,
    );
    expect(fs.readFileSync(path.join(dir, "fabric.md"), "utf8")).toContain(
      "![fabric topology](fabric.png)",
    );
    expect(fs.readFileSync(path.join(dir, "fabric.png")).subarray(1, 4).toString("ascii")).toBe(
      "PNG",
    );
  });
});

describe("sparkform check nccl-log", () => {
  const cli = (file: string) =>
    spawnSync(process.execPath, ["bin/sparkform.js", "check", "nccl-log", file], {
      encoding: "utf8",
      cwd: path.join(__dirname, "..", ".."),
    });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nccl-log-"));
  it.each([
    [
      "ib",
      0,
      "x NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n",
      /^PASS: NCCL is on NET\/IB/,
    ],
    [
      "socket",
      1,
      "x NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
      /^FAIL: NCCL is on NET\/Socket.*--device=\/dev\/infiniband/,
    ],
    ["nodev", 1, "x NCCL INFO NET/IB : No device found.\n", /^FAIL: NCCL found no IB device/],
  ] as const)("%s log → exit %i", (name, code, text, msg) => {
    const f = path.join(dir, `${name}.log`);
    fs.writeFileSync(f, text);
    const r = cli(f);
    expect(r.status).toBe(code);
    expect(r.stdout).toMatch(msg);
  });
  it("an unreadable file exits 2 naming it", () => {
    const r = cli(path.join(dir, "missing.log"));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^sparkform check: cannot read .*missing\.log: ENOENT/);
  });
});

describe("fabric policies", () => {
  const resources = fourNode.map((l, i) => ({
    type: FABRIC_LINK_TYPE,
    name: `l${i}`,
    urn: `urn:${i}`,
    props: l as unknown as Record<string, unknown>,
    opts: {},
    isSecret: () => false,
    asType: () => undefined,
    dependencies: [],
    propertyDependencies: {},
  }));

  it("fabric-healthy reports every failing link with its fix, thresholds from config", () => {
    const got: string[] = [];
    fabricHealthy.validateStack!({ resources, getConfig: () => ({}) } as never, (m: string) =>
      got.push(m),
    );
    expect(got).toHaveLength(4);
    expect(got).toContain(
      "spark-1↔spark-3 rail 1 bandwidth: spark-1↔spark-3 rail 1: degraded: 0.9 Gbit/s is 9% of 10 Gbit/s (healthy from 50%): check the cable and re-seat it, check both ends' MTU and link speed, look for traffic shaping or a busy core (the probe pins to performance cores), then re-measure",
    );
    // A lower healthy fraction from the policy's config lets the slow rail pass.
    const relaxed: string[] = [];
    fabricHealthy.validateStack!(
      { resources, getConfig: () => ({ healthyFraction: 0.05 }) } as never,
      (m: string) => relaxed.push(m),
    );
    expect(relaxed.filter((m) => m.includes("bandwidth"))).toEqual([]);
    expect(relaxed.filter((m) => m.includes(" gid: "))).toHaveLength(3);
  });

  it("skips links this run will change (no outputs yet)", () => {
    expect(measuredLinks([{ ...resources[0]!, props: { kind: "FabricLink" } }] as never)).toEqual(
      [],
    );
  });

  it("linkViolations re-judges with the given thresholds", () => {
    const ten = link("spark-1", "spark-2", 0, 8);
    expect(linkViolations(ten)).toEqual([]);
    expect(linkViolations(ten, { minLinkSpeedMbps: 400000 }).map((c) => c.check)).toEqual([
      "link-speed",
    ]);
  });

  it("rdma-transport: TCP fallback is a violation with the evidence; RDMA passes", () => {
    const worker = (log: string) => ({
      ...resources[0]!,
      type: "pulumi-nodejs:dynamic/sparkform:RpcWorker",
      props: { target: { name: "spark-2" }, transport: parseRpcTransport(log) },
    });
    const got: string[] = [];
    rdmaTransport.validateStack!(
      {
        resources: [
          worker("RDMA activate failed, staying on TCP"),
          worker("RDMA activated: qpn=1->2 mtu=4096 rx_depth=24"),
        ],
        getConfig: () => ({}),
      } as never,
      (m: string) => got.push(m),
    );
    expect(got).toEqual([
      rdmaTransportViolation("spark-2", parseRpcTransport("RDMA activate failed, staying on TCP")),
    ]);
    expect(got[0]).toMatch(
      /^The rpc-server on spark-2 is on TCP, not RDMA \(RDMA activate failed, staying on TCP\): RDMA negotiation failed/,
    );
  });
});
