// What the FabricLink provider probes on `refresh` (read) and on `up` (create, update), with
// the transport replaced by a fake node: every probe's --count and --seconds, over a rail or
// over a node's loopback, are recorded, and each answers the throughput a scenario gives it.
// A rail is classed against a fixed reference (the local stack's line rate, or the port
// ceiling × the TCP share), never against a loopback reading, which is never probed. A refresh
// starts with a short burst; a burst that is not healthy is measured again, then at the
// configured length; a rail at a tenth stays degraded. The quick ssh reads run together.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { checkAddresses, DEFAULT_THRESHOLDS } from "../../components/fabric/checks";
import { fixtureRdma } from "../../components/fabric/fixture";
import { portFacts } from "../../components/fabric/ports";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
import { renderFabric } from "../../sim/stack";
import { create, read, type FabricLinkOutputs } from "../../components/fabric/provider";
import { programRef } from "../../components/native-script";
import type { SparkNodeFacts } from "../../components/node/facts";
import type { RemoteCommand, RunOptions, RunResult, SshTarget } from "../../components/transport";

interface Probe {
  kind: "rail" | "loopback";
  count: number;
  seconds: number;
}

/** Every probe client run, in order. */
const probes: Probe[] = [];
/** Every other command, with whether a probe was running when it started. */
const reads: { what: string; duringProbe: boolean }[] = [];
/** The throughput a probe measures, Gbit/s. */
let gbpsOf: (p: Probe, nth: number) => number = () => 10;
let probing = false;
/** Reads in flight now, and the most at once. */
let inFlight = 0;
let mostAtOnce = 0;

const ok = (stdout: string): RunResult => ({ stdout, stderr: "", exitCode: 0 }) as RunResult;
const arg = (args: readonly string[], flag: string) => args[args.indexOf(flag) + 1] ?? "";

async function fakeRun(
  _target: SshTarget,
  command: RemoteCommand,
  opts: RunOptions,
): Promise<RunResult> {
  if (Array.isArray(command)) {
    reads.push({ what: command.join(" "), duringProbe: probing });
    mostAtOnce = Math.max(mostAtOnce, ++inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight -= 1;
    if (command[1] === "-j" && command[2] === "link") {
      const all = ["lo", "mgmt0", "fabric0", "fabric1"];
      return ok(JSON.stringify(all.map((ifname) => ({ ifname, mtu: 9000, operstate: "UP" }))));
    }
    return ok("[]");
  }
  const c = command as { script: string; args?: readonly string[] };
  const args = c.args ?? [];
  if (args[0] === "server") {
    opts.onLine?.('{"listening": 40000, "bind": "x", "pinned": null}', "stdout");
    return ok('{"served": [], "error": null}');
  }
  if (args[0] === "client") {
    const p: Probe = {
      kind: arg(args, "--addr") === "127.0.0.1" ? "loopback" : "rail",
      count: Number(arg(args, "--count")),
      seconds: Number(arg(args, "--seconds")),
    };
    probing = true;
    await new Promise((r) => setTimeout(r, 5));
    probing = false;
    probes.push(p);
    const gbps = gbpsOf(p, probes.length - 1);
    return ok(
      JSON.stringify({
        addr: arg(args, "--addr"),
        port: 40000,
        pinned: null,
        rtt: { samples: p.count, minUs: 20, p50Us: 40, p99Us: 90, maxUs: 200 },
        throughput: { bytes: Math.round((gbps * 1e9 * p.seconds) / 8), seconds: p.seconds, gbps },
        error: null,
      }),
    );
  }
  reads.push({ what: c.script, duringProbe: probing });
  return { stdout: "", stderr: "", exitCode: 1 } as RunResult;
}

vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  run: (t: SshTarget, c: RemoteCommand, o: RunOptions) => fakeRun(t, c, o),
}));
// The pauses between readings (1, 3 and 6 s; fabric-readings.test.ts) left out, their number kept.
vi.mock("../../components/fabric/readings", async (importOriginal) => {
  const m = await importOriginal<typeof import("../../components/fabric/readings")>();
  const gapsMs = m.DEFAULT_GAPS_MS.map(() => 0);
  return {
    ...m,
    bestReading: (f: Parameters<typeof m.bestReading>[0]) => m.bestReading(f, { gapsMs }),
    burstThenFull: (f: Parameters<typeof m.burstThenFull>[0]) =>
      m.burstThenFull(f, { gapsMs, burstGapMs: 0 }),
  };
});

const facts = {
  sysfsRoot: "/sys",
  cpu: { performanceCores: [5, 6] },
  netdevs: [{ name: "fabric0", mtu: 9000, operstate: "up", addresses: [] }],
  rdma: { devices: [], reason: "absent" },
} as unknown as SparkNodeFacts;

/**
 * The local stack's `sparkform:fabric.referenceGbps`, as `sim up` writes it for a pair (null
 * when it writes none), and its healthy fraction (the default when it sets none).
 */
function localStackFabric(): { referenceGbps: number | null; healthyFraction: number } {
  const rails = (n: number) =>
    [0, 1].map((r) => ({ rail: r, iface: `fabric${r}`, address: `10.214.${7 + r}.${n}/24` }));
  const text = renderFabric({
    fabricTopology: "point-to-point",
    nodes: [
      { name: "spark-1", rails: rails(1) },
      { name: "spark-2", rails: rails(2) },
    ],
  } as never).join("\n");
  const num = (key: string) => {
    const m = new RegExp(`^\\s+${key}: ([0-9.]+)$`, "m").exec(text);
    return m ? Number(m[1]) : null;
  };
  return {
    referenceGbps: num("referenceGbps"),
    healthyFraction: num("healthyFraction") ?? DEFAULT_THRESHOLDS.healthyFraction,
  };
}

const LOCAL_FABRIC = localStackFabric();

/** Each test's own node addresses. */
let nodeSeq = 0;

function inputs(
  probe: { count: number; seconds: number; refreshSeconds?: number },
  fabric: { referenceGbps: number | null; healthyFraction: number } = LOCAL_FABRIC,
) {
  nodeSeq += 1;
  const end = (name: string, host: number) => {
    const rail = { ...SIM_RAILS[0]!, rail: 0, address: `10.214.7.${host}/24` };
    const fx = fixtureRdma("sysfs-spark");
    return {
      node: name,
      target: {
        name,
        host: `10.${nodeSeq}.0.${host}`,
        port: 22,
        user: "spark",
        hostKey: "ssh-ed25519 AAAA",
      },
      rail,
      fixture: fx,
      cpus: [5, 6],
      port: portFacts(name, facts, fx, rail, 3),
    };
  };
  const addr = checkAddresses([
    { node: "spark-1", rail: 0, address: "10.214.7.1/24" },
    { node: "spark-2", rail: 0, address: "10.214.7.2/24" },
  ]);
  return {
    kind: "FabricLink" as const,
    providerVersion: "1",
    link: "spark-1↔spark-2",
    rail: 0,
    topology: "point-to-point" as const,
    a: end("spark-1", 1),
    b: end("spark-2", 2),
    gidIndex: 3,
    thresholds: { ...DEFAULT_THRESHOLDS, healthyFraction: fabric.healthyFraction },
    referenceGbps: fabric.referenceGbps,
    probe,
    addressChecks: [addr.get("spark-1/0")!, addr.get("spark-2/0")!],
    programs: {
      probe: programRef("fabric/rail-rtt-throughput.py"),
      facts: programRef("node/facts.sh"),
    },
  };
}

/** What the sim's rails read at their line rate, Gbit/s (tc-shaped veths read 0.99-1.03 of it). */
const atLine = () => LOCAL_FABRIC.referenceGbps ?? 1;
/** A node's loopback as the issue saw it on 2 cores: 11.5 to 31.4 Gbit/s between samples. */
const movingLoopback = (nth: number) => (nth % 2 === 0 ? 31.4 : 11.5);

/** The state an `up` left: created with a healthy rail at its line rate. */
async function upState(probe: Parameters<typeof inputs>[0]): Promise<FabricLinkOutputs> {
  gbpsOf = (p, nth) => (p.kind === "loopback" ? movingLoopback(nth) : 0.97 * atLine());
  const r = await create(inputs(probe));
  expect(r.outs!.class).toBe("healthy");
  probes.length = 0;
  reads.length = 0;
  mostAtOnce = 0;
  return r.outs!;
}

const LOCAL = { count: 500, seconds: 1, refreshSeconds: 0.2 };
const BURST = { kind: "rail", count: 200, seconds: 0.2 };
const FULL = { kind: "rail", count: 500, seconds: 1 };

beforeEach(() => {
  probes.length = 0;
  reads.length = 0;
});

describe("the local stack's rails: judged against their line rate", () => {
  it("sim up writes the rails' line rate as fabric.referenceGbps, with the default healthy fraction", () => {
    expect(LOCAL_FABRIC.referenceGbps).toBeGreaterThan(0);
    expect(LOCAL_FABRIC.healthyFraction).toBe(DEFAULT_THRESHOLDS.healthyFraction);
  });

  it("a rail that reads what it always reads stays healthy however the node's loopback moves: 12 refreshes, no drift", async () => {
    const state = await upState(LOCAL);
    // The readings: the rail 4.5-5.9 of an unshaped veth, here its line's 0.9-1.03; the
    // loopback 11.5 to 31.4 between samples (it made the rail read 19% of 31.4: "degraded").
    const rail = [0.92, 1.03, 0.95, 0.99];
    let k = 0;
    gbpsOf = (p, nth) =>
      p.kind === "loopback" ? movingLoopback(nth) : rail[k++ % rail.length]! * atLine();
    for (let i = 0; i < 12; i += 1) {
      const r = await read("id", state);
      expect(r.props, `refresh ${i + 1}`).toBe(state);
    }
    expect(probes.every((p) => p.kind === "rail")).toBe(true);
  });
});

describe("FabricLink read (refresh): a short burst first", () => {
  it("a healthy rail costs one short burst, nothing else probed; the state is kept", async () => {
    const state = await upState(LOCAL);
    const r = await read("id", state);
    expect(probes).toEqual([BURST]);
    expect(r.props).toBe(state);
  });

  it("a state that names the probe by its old name (fabric/probe.py) is probed by the renamed one", async () => {
    const state = await upState(LOCAL);
    const old = {
      ...state,
      programs: { ...state.programs, probe: { ...state.programs.probe, name: "fabric/probe.py" } },
    };
    const r = await read("id", old);
    expect(probes).toEqual([BURST]);
    expect(r.props).toBe(old);
  });

  it("a state from before refreshSeconds existed: the default burst, 0.2 s", async () => {
    const state = await upState({ count: 2000, seconds: 2 });
    await read("id", state);
    expect(probes.map((p) => [p.count, p.seconds])).toEqual([[200, 0.2]]);
  });

  it("a burst under the line is read again, then at full length, and no drift is recorded", async () => {
    const state = await upState(LOCAL);
    // The burst dips (a busy moment on 2 cores: 15% of the line); the full reading does not.
    gbpsOf = (p) => (p.seconds < 1 ? 0.15 : 0.96) * atLine();
    const r = await read("id", state);
    expect(probes).toEqual([BURST, BURST, FULL]);
    expect(r.props).toBe(state);
  });

  it("a rail at a tenth of its line rate is degraded after every full-length retry: drift, with the fix", async () => {
    const state = await upState(LOCAL);
    gbpsOf = (p) => (p.kind === "loopback" ? 10 : 0.1 * atLine());
    const r = await read("id", state);
    expect(probes).toEqual([BURST, BURST, ...Array(4).fill(FULL)]);
    expect(r.props?.class).toBe("degraded");
    expect(r.props?.healthy).toBe(false);
    expect(r.props?.classReferenceGbps).toBe(atLine());
    const bw = r.props!.checks.find((c) => c.check === "bandwidth")!;
    expect(bw.ok).toBe(false);
    expect(bw.message).toBe(
      `spark-1↔spark-2 rail 0: degraded: ${0.1 * atLine()} Gbit/s is 10% of ${atLine()} Gbit/s (healthy from 50%): ` +
        "check the cable and re-seat it, check both ends' MTU and link speed, look for traffic shaping or a busy core (the probe pins to performance cores), then re-measure",
    );
  });

  it("one interface read per node, both at once, before the probe, never during it; the management interfaces kept from up", async () => {
    const state = await upState(LOCAL);
    const r = await read("id", state);
    expect(reads.map((x) => x.what)).toEqual(["ip -j link show", "ip -j link show"]);
    expect(reads.every((x) => !x.duringProbe)).toBe(true);
    expect(mostAtOnce).toBe(2);
    expect(r.props?.ports.a.ifaceMtu).toBe(9000);
    expect(r.props?.mgmtIface).toEqual(state.mgmtIface);
  });

  it("two rails of a link read at once share each node's interface read", async () => {
    const rail0 = await upState(LOCAL);
    const onRail1 = (e: FabricLinkOutputs["a"]) => ({
      ...e,
      rail: { ...e.rail, rail: 1, iface: "fabric1" },
      port: { ...e.port, rail: 1, iface: "fabric1" },
    });
    const rail1 = { ...rail0, rail: 1, a: onRail1(rail0.a), b: onRail1(rail0.b) };
    const [r0, r1] = await Promise.all([read("rail0", rail0), read("rail1", rail1)]);
    expect(reads.map((x) => x.what)).toEqual(["ip -j link show", "ip -j link show"]);
    expect(r0.props?.class).toBe("healthy");
    expect(r1.props?.ports.b.iface).toBe("fabric1");
    expect(r1.props?.ports.b.ifaceOperstate).toBe("up");
  });
});

describe("FabricLink create (up): the configured probe", () => {
  it("the rail alone, at the full settings", async () => {
    gbpsOf = () => atLine();
    const r = await create(inputs(LOCAL));
    expect(probes).toEqual([FULL]);
    expect(r.outs?.class).toBe("healthy");
    expect(r.outs?.classReferenceGbps).toBe(atLine());
  });

  it("without referenceGbps (a Spark), the TCP probe is judged against the port ceiling × the TCP share", async () => {
    const spark = { referenceGbps: null, healthyFraction: DEFAULT_THRESHOLDS.healthyFraction };
    // The fixture's ports: 200 Gb/s on PCIe Gen5 x4, a 126.03 Gbit/s ceiling.
    const reference = Math.round(126.03 * DEFAULT_THRESHOLDS.tcpShare * 1000) / 1000;
    gbpsOf = (p) => (p.kind === "loopback" ? 31.4 : 21);
    const good = await create(inputs(LOCAL, spark));
    expect(good.outs?.classReferenceGbps).toBe(reference);
    expect(good.outs?.class).toBe("healthy");
    gbpsOf = (p) => (p.kind === "loopback" ? 11.5 : 9.4); // a 10 GbE fallback's most
    const slow = await create(inputs(LOCAL, spark));
    expect(slow.outs?.class).toBe("degraded");
    expect(slow.outs?.checks.find((c) => c.check === "bandwidth")?.message).toMatch(
      new RegExp(`^spark-1↔spark-2 rail 0: degraded: 9.4 Gbit/s is 37% of ${reference} Gbit/s`),
    );
    expect(probes.every((p) => p.kind === "rail")).toBe(true);
  });
});
