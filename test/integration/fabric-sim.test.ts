// The FabricLink provider against the simulated cluster (root): real nodes, real ssh, the real
// probe between the rails' addresses, fixture RDMA facts mapped to the sim's rails. Create
// measures and classes both rails; `sim link --rail 1 down` makes read fail rail 1 naming it and
// the fix; every rail is shaped to its line rate and read at it; a rail shaped to a tenth is
// degraded, and healthy again once restored; a RoCE v1 fixture fails the gid check.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkAddresses, DEFAULT_THRESHOLDS } from "../../components/fabric/checks";
import { fixtureRdma } from "../../components/fabric/fixture";
import { portFacts } from "../../components/fabric/ports";
import {
  create,
  diff,
  read,
  type FabricEnd,
  type FabricLinkInputs,
  type FabricLinkOutputs,
} from "../../components/fabric/provider";
import { renderMarkdown, renderSvg } from "../../components/fabric/report";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
import { svgToPng } from "../../cli/commands/report";
import { programCommand, programRef } from "../../components/native-script";
import { parseFacts } from "../../components/node/facts";
import { close, run, type SshTarget } from "../../components/transport";
import { railRateMbit } from "../../sim/network";
import { simDown, simLink, simRate, simUp, type SimCluster } from "../../sim/index";
import { readState } from "../../sim/state";
import { fabricLineMbit } from "../../sim/paths";
import { isRoot, requireOrSkip } from "../support/requires";

const stateDir = isRoot ? fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-fabric-test-")) : "";
if (isRoot) process.env.SPARKFORM_STATE_DIR = stateDir;
process.env.SPARKFORM_SIM_QUIET = "1";

let c: SimCluster;

const target = (name: string): SshTarget => {
  const n = c.nodes.find((x) => x.name === name)!;
  return {
    name,
    host: n.mgmtAddress,
    port: n.sshPort,
    user: n.user,
    hostKey: n.hostKey,
    identityFile: c.sshKeyPath,
  };
};

async function end(name: string, rail: number, fixture = "sysfs-spark"): Promise<FabricEnd> {
  const t = target(name);
  const facts = parseFacts(
    (await run(t, programCommand("node/facts.sh", {}), { step: "facts" })).stdout,
    name,
  );
  const n = c.nodes.find((x) => x.name === name)!;
  const r = { ...SIM_RAILS[rail]!, rail, address: n.rails[rail]!.address };
  const fx = fixtureRdma(fixture);
  return {
    node: name,
    target: t,
    rail: r,
    fixture: fx,
    cpus: facts.cpu.performanceCores,
    port: portFacts(name, facts, fx, r, 3),
  };
}

async function inputs(rail: number, fixtureB = "sysfs-spark"): Promise<FabricLinkInputs> {
  const a = await end("spark-1", rail);
  const b = await end("spark-2", rail, fixtureB);
  const addr = checkAddresses(
    c.nodes.flatMap((n) =>
      n.rails.map((r) => ({ node: n.name, rail: r.rail, address: r.address })),
    ),
  );
  return {
    kind: "FabricLink",
    providerVersion: "1",
    link: "spark-1↔spark-2",
    rail,
    topology: "point-to-point",
    a,
    b,
    gidIndex: 3,
    // As the local stack sets it (sim/stack.ts): each rail judged against its line rate.
    thresholds: DEFAULT_THRESHOLDS,
    referenceGbps: fabricLineMbit / 1000,
    probe: { count: 300, seconds: 1 },
    addressChecks: [addr.get(`spark-1/${rail}`)!, addr.get(`spark-2/${rail}`)!],
    programs: {
      probe: programRef("fabric/rail-rtt-throughput.py"),
      facts: programRef("node/facts.sh"),
    },
  };
}

/** create, with its outputs (a create always returns them). */
async function created(i: FabricLinkInputs): Promise<{ id: string; outs: FabricLinkOutputs }> {
  const r = await create(i);
  if (!r.outs) throw new Error("create returned no outputs");
  return { id: r.id, outs: r.outs };
}

const failed = (checks: { check: string; ok: boolean; message: string }[]) =>
  checks.filter((x) => !x.ok);

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated cluster needs namespaces, mounts and containers"),
)("fabric on the simulated cluster (root)", () => {
  beforeAll(async () => {
    c = await simUp({ nodes: 2 });
  });
  afterAll(async () => {
    close();
    if (fs.existsSync(path.join(stateDir, "sim", "state.json"))) await simDown();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it("measures both rails: TCP RTT and throughput over each rail's addresses, healthy, fixture-labelled", async () => {
    const measured: FabricLinkOutputs[] = [];
    for (const rail of [0, 1]) {
      const { id, outs } = await created(await inputs(rail));
      measured.push(outs);
      expect(id).toBe(`spark-1-spark-2-rail${rail}`);
      console.info(
        `rail ${rail}: p50 ${outs.rttP50Us} µs, p99 ${outs.rttP99Us} µs, ${outs.throughputGbps} of ${outs.classReferenceGbps} Gbit/s, ${outs.class}`,
      );
      expect(outs.error).toBeNull();
      expect(outs.source).toBe("fixture");
      expect(outs.ports.a.rdmaDevice).toBe(rail === 0 ? "rocep1s0f1" : "roceP2p1s0f1");
      expect(outs.ports.a.ifaceMtu).toBe(9000);
      expect(outs.rttP50Us).toBeGreaterThan(0);
      expect(outs.rttP99Us).toBeGreaterThanOrEqual(outs.rttP50Us!);
      // The rail reads its line rate: the tc shaper's, not the host's loopback.
      expect(outs.classReferenceGbps).toBe(fabricLineMbit / 1000);
      expect(outs.throughputGbps).toBeGreaterThan(0.5 * (fabricLineMbit / 1000));
      expect(outs.throughputGbps).toBeLessThan(1.2 * (fabricLineMbit / 1000));
      expect(outs.rdma.reason).toMatch(/^RDMA facts are fixtures/);
      expect(failed(outs.checks)).toEqual([]);
      expect(outs.class).toBe("healthy");
      expect(outs.healthy).toBe(true);
      // A healthy link does not change on refresh.
      const again = await read(id, outs);
      expect(again.props).toEqual(outs);
      expect((await diff(id, outs, await inputs(rail))).changes).toBe(false);
    }
    // The report of what was measured: both rails, fixture-labelled, the picture beside it.
    const dir =
      process.env.SPARKFORM_FABRIC_REPORT_DIR ??
      fs.mkdtempSync(path.join(os.tmpdir(), "fabric-report-"));
    fs.mkdirSync(dir, { recursive: true });
    const svg = renderSvg(measured, "sparkform fabric: simulated pair");
    fs.writeFileSync(path.join(dir, "fabric.svg"), svg);
    fs.writeFileSync(path.join(dir, "fabric.png"), await svgToPng(svg));
    const md = renderMarkdown(measured, { stack: "local", picture: "fabric.png" });
    fs.writeFileSync(path.join(dir, "fabric.md"), md);
    console.info(`fabric report: ${dir}/fabric.md`);
    expect(md).toContain("**Fixture-sourced RDMA facts** (sysfs-spark)");
    expect(md).toContain(
      `| spark-1↔spark-2 | 1 | spark-1:fabric1 (roceP2p1s0f1, fixture) ↔ spark-2:fabric1 (roceP2p1s0f1, fixture) | ${measured[1]!.rttP50Us!.toFixed(1)} µs`,
    );
    expect(md).toContain(
      "export NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1\nexport NCCL_SOCKET_IFNAME=mgmt0\nexport NCCL_IB_GID_INDEX=3",
    );
    expect(svg).toContain("fabric1 · roceP2p1s0f1 (fixture)");
  });

  it("a cut rail 1 is drift on read: link-up, reachable and bandwidth fail naming rail 1 and the fix; up after repair converges", async () => {
    const i = await inputs(1);
    const { id, outs } = await created(i);
    await simLink("spark-1", "spark-2", "down", 1);
    try {
      const r = await read(id, outs);
      expect(r.props?.class).toBe("down");
      expect(r.props?.healthy).toBe(false);
      const bad = failed(r.props!.checks);
      expect(bad.map((x) => x.check)).toEqual(["link-up", "reachable", "bandwidth"]);
      expect(bad[0]!.message).toMatch(
        /^spark-1 rail 1 \(roceP2p1s0f1\/enP2p1s0f1np1 on fabric1\) is down .*: check the cable/,
      );
      expect(bad[1]!.message).toMatch(/^spark-1 cannot reach spark-2 on rail 1 at /);
      expect((await diff(id, r.props!, i)).changes).toBe(true);
    } finally {
      await simLink("spark-1", "spark-2", "up", 1);
    }
    // Carrier and addresses come back within a second or two.
    await new Promise((res) => setTimeout(res, 2000));
    const healed = await read(id, outs);
    expect(failed(healed.props!.checks)).toEqual([]);
  });

  it("every node's end of every rail is shaped to the line rate", async () => {
    const s = readState()!;
    for (const n of s.nodes) {
      for (const rail of [0, 1]) expect(await railRateMbit(n.netns, rail)).toBe(fabricLineMbit);
    }
  });

  it("a rail shaped to a tenth of its line is degraded, with the fix; restored, it is healthy and quiet", async () => {
    const i = await inputs(0);
    const { id, outs } = await created(i);
    const tenth = fabricLineMbit / 10;
    await simRate("spark-1", tenth, 0);
    try {
      const r = await read(id, outs);
      console.info(
        `shaped to ${tenth} Mbit/s: ${r.props?.throughputGbps} Gbit/s of ${r.props?.classReferenceGbps}`,
      );
      expect(r.props?.class).toBe("degraded");
      const bw = r.props!.checks.find((x) => x.check === "bandwidth")!;
      expect(bw.ok).toBe(false);
      expect(bw.message).toMatch(
        /^spark-1↔spark-2 rail 0: degraded: .* Gbit\/s is \d+% of 1 Gbit\/s \(healthy from 50%\): check the cable and re-seat it/,
      );
      expect((await diff(id, r.props!, i)).changes).toBe(true);
    } finally {
      await simRate("spark-1", undefined, 0);
    }
    // Restored: the next read is healthy, and the one after it records nothing new.
    const healed = await read(id, outs);
    expect(healed.props?.class).toBe("healthy");
    expect(healed.props).toEqual(outs);
    expect((await read(id, healed.props!)).props).toEqual(outs);
  });

  it("a RoCE v1 fixture on one end fails the gid check with its fix, the link still measured", async () => {
    const { outs } = await created(await inputs(0, "sysfs-spark-rocev1"));
    expect(outs.throughputGbps).toBeGreaterThan(0);
    expect(failed(outs.checks).map((x) => [x.check, x.message])).toEqual([
      [
        "gid",
        "spark-2 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) has IB/RoCE v1 at GID index 3, not RoCE v2: give the port its IPv4 address (RoCE v2 GIDs are derived from it), or set the GID index to the one that is RoCE v2 (show_gids) and NCCL_IB_GID_INDEX with it [RDMA facts from fixture sysfs-spark, sysfs-spark-rocev1]",
      ],
    ]);
  });
});
