// The FabricLink provider on a 4-node simulated cluster (root): a switch per rail, every pair of
// nodes measured on both rails through it, the report's picture with the switches; cutting one
// node's switch port on one rail fails exactly that node's links on that rail.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkAddresses, DEFAULT_THRESHOLDS } from "../../components/fabric/checks";
import { linkPairs } from "../../components/fabric/config";
import { fixtureRdma } from "../../components/fabric/fixture";
import { portFacts } from "../../components/fabric/ports";
import {
  create,
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
import { simDown, simLink, simUp, type SimCluster } from "../../sim/index";
import { fabricLineMbit } from "../../sim/paths";
import { isRoot, requireOrSkip } from "../support/requires";

const stateDir = isRoot ? fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-fabric4-test-")) : "";
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

async function inputs(x: string, y: string, rail: number): Promise<FabricLinkInputs> {
  const a = await end(x, rail);
  const b = await end(y, rail);
  const addr = checkAddresses(
    c.nodes.flatMap((n) =>
      n.rails.map((r) => ({ node: n.name, rail: r.rail, address: r.address })),
    ),
  );
  return {
    kind: "FabricLink",
    providerVersion: "1",
    link: `${x}↔${y}`,
    rail,
    topology: "switch",
    a,
    b,
    gidIndex: 3,
    // As the local stack sets it (sim/stack.ts): each rail judged against its line rate.
    thresholds: DEFAULT_THRESHOLDS,
    referenceGbps: fabricLineMbit / 1000,
    probe: { count: 200, seconds: 0.5 },
    addressChecks: [addr.get(`${x}/${rail}`)!, addr.get(`${y}/${rail}`)!],
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
)("fabric on a 4-node simulated cluster (root)", () => {
  beforeAll(async () => {
    c = await simUp({ nodes: 4 });
  });
  afterAll(async () => {
    close();
    if (fs.existsSync(path.join(stateDir, "sim", "state.json"))) await simDown();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it("measures every pair on both rails through the rails' switches; the picture shows them", async () => {
    expect(c.fabricTopology).toBe("switch");
    const measured: FabricLinkOutputs[] = [];
    for (const [x, y] of linkPairs(c.nodes.map((n) => n.name))) {
      for (const rail of [0, 1]) {
        const { id, outs } = await created(await inputs(x, y, rail));
        expect(id).toBe(`${x}-${y}-rail${rail}`);
        expect(outs.error).toBeNull();
        expect(outs.rttP50Us).toBeGreaterThan(0);
        expect(outs.throughputGbps).toBeGreaterThan(0);
        expect(failed(outs.checks).filter((k) => k.check !== "bandwidth")).toEqual([]);
        measured.push(outs);
      }
    }
    expect(measured).toHaveLength(12);
    const dir =
      process.env.SPARKFORM_FABRIC_REPORT_DIR ??
      fs.mkdtempSync(path.join(os.tmpdir(), "fabric-report4-"));
    fs.mkdirSync(dir, { recursive: true });
    const svg = renderSvg(measured, "sparkform fabric: simulated 4 nodes");
    fs.writeFileSync(path.join(dir, "fabric-sim4.svg"), svg);
    fs.writeFileSync(path.join(dir, "fabric-sim4.png"), await svgToPng(svg));
    fs.writeFileSync(
      path.join(dir, "fabric-sim4.md"),
      renderMarkdown(measured, { stack: "local (4 nodes)", picture: "fabric-sim4.png" }),
    );
    expect(svg).toContain(">rail 0 switch<");
    expect(svg).toContain(">rail 1 switch<");
    for (const m of measured) expect(svg).toContain(`${m.link} rail ${m.rail}: p50 `);

    // Cut spark-3's port on rail 0's switch: its rail-0 links fail, everything else still works.
    const r13 = measured.find((m) => m.link === "spark-1↔spark-3" && m.rail === 0)!;
    const r12 = measured.find((m) => m.link === "spark-1↔spark-2" && m.rail === 0)!;
    await simLink("spark-3", "switch", "down", 0);
    try {
      const cut = await read("spark-1-spark-3-rail0", r13);
      expect(cut.props?.class).toBe("down");
      expect(failed(cut.props!.checks).map((k) => k.check)).toEqual([
        "link-up",
        "reachable",
        "bandwidth",
      ]);
      const other = await read("spark-1-spark-2-rail0", r12);
      expect(other.props?.error).toBeNull();
    } finally {
      await simLink("spark-3", "switch", "up", 0);
    }
  });
});
