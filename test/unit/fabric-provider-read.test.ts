// What the FabricLink provider probes on `refresh` (read) and on `up` (create, update), with
// the transport replaced by a fake node: every probe's --count and --seconds, rail or loopback,
// are recorded, and each answers the throughput a scenario gives it. A refresh starts with a
// short burst (rail and loopback at the same short settings); a burst that is not healthy is
// measured again at the configured length with a fresh reference; a rail at a tenth stays
// degraded. The quick ssh reads (interfaces, management addresses) run together.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { checkAddresses, DEFAULT_THRESHOLDS } from "../../components/fabric/checks";
import { fixtureRdma } from "../../components/fabric/fixture";
import { portFacts } from "../../components/fabric/ports";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
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
      return ok(JSON.stringify([{ ifname: command[5], mtu: 9000, operstate: "UP" }]));
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

/** Each test's own node addresses: the loopback reference is kept per node in the process. */
let nodeSeq = 0;

function inputs(probe: { count: number; seconds: number; refreshSeconds?: number }) {
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
    thresholds: { ...DEFAULT_THRESHOLDS, healthyFraction: 0.25 },
    referenceGbps: null,
    probe,
    addressChecks: [addr.get("spark-1/0")!, addr.get("spark-2/0")!],
    programs: { probe: programRef("fabric/probe.py"), facts: programRef("node/facts.sh") },
  };
}

/** The state an `up` left: created with a healthy rail (5 of 10 Gbit/s). */
async function upState(probe: Parameters<typeof inputs>[0]): Promise<FabricLinkOutputs> {
  gbpsOf = (p) => (p.kind === "loopback" ? 10 : 5);
  const r = await create(inputs(probe));
  expect(r.outs!.class).toBe("healthy");
  probes.length = 0;
  reads.length = 0;
  mostAtOnce = 0;
  return r.outs!;
}

const LOCAL = { count: 500, seconds: 1, refreshSeconds: 0.2 };

beforeEach(() => {
  probes.length = 0;
  reads.length = 0;
});

describe("FabricLink read (refresh): a short burst first", () => {
  it("a healthy rail is read once, rail and loopback at the short settings; the state is kept", async () => {
    const state = await upState(LOCAL);
    gbpsOf = (p) => (p.kind === "loopback" ? 9 : 4.1);
    const r = await read("id", state);
    expect(probes).toEqual([
      { kind: "rail", count: 200, seconds: 0.2 },
      { kind: "loopback", count: 200, seconds: 0.2 },
    ]);
    expect(r.props).toBe(state);
  });

  it("a state from before refreshSeconds existed: the default burst, 0.2 s", async () => {
    const state = await upState({ count: 2000, seconds: 2 });
    gbpsOf = (p) => (p.kind === "loopback" ? 9 : 4.1);
    await read("id", state);
    expect(probes.map((p) => [p.count, p.seconds])).toEqual([
      [200, 0.2],
      [200, 0.2],
    ]);
  });

  it("a burst under the line is read again at full length with a fresh full-length reference, and no drift is recorded", async () => {
    const state = await upState(LOCAL);
    // The burst dips (a busy moment on 2 cores: 1.5 of 10, 15%); the full reading does not.
    gbpsOf = (p) => (p.kind === "loopback" ? 10 : p.seconds < 1 ? 1.5 : 4.8);
    const r = await read("id", state);
    expect(probes).toEqual([
      { kind: "rail", count: 200, seconds: 0.2 },
      { kind: "loopback", count: 200, seconds: 0.2 },
      { kind: "rail", count: 200, seconds: 0.2 },
      { kind: "loopback", count: 200, seconds: 0.2 },
      { kind: "rail", count: 500, seconds: 1 },
      { kind: "loopback", count: 200, seconds: 1 },
    ]);
    expect(r.props).toBe(state);
  });

  it("a rail at a tenth of its reference is degraded after every full-length retry: drift, with the fix", async () => {
    const state = await upState(LOCAL);
    gbpsOf = (p) => (p.kind === "loopback" ? 10 : 1);
    const r = await read("id", state);
    expect(probes.filter((p) => p.kind === "rail")).toEqual([
      { kind: "rail", count: 200, seconds: 0.2 },
      { kind: "rail", count: 200, seconds: 0.2 },
      ...Array(4).fill({ kind: "rail", count: 500, seconds: 1 }),
    ]);
    // Each rail reading after the first has its own reference beside it, at its own length.
    expect(probes.filter((p) => p.kind === "loopback").map((p) => p.seconds)).toEqual([
      0.2, 0.2, 1, 1, 1, 1,
    ]);
    expect(r.props?.class).toBe("degraded");
    expect(r.props?.healthy).toBe(false);
    const bw = r.props!.checks.find((c) => c.check === "bandwidth")!;
    expect(bw.ok).toBe(false);
    expect(bw.message).toMatch(
      /^spark-1↔spark-2 rail 0: degraded: 1 Gbit\/s is 10% of 10 Gbit\/s \(healthy from 25%\)/,
    );
  });

  it("the interface and management reads run together, before the probe, never during it", async () => {
    const state = await upState(LOCAL);
    gbpsOf = (p) => (p.kind === "loopback" ? 9 : 4.1);
    await read("id", state);
    expect(reads.map((r) => r.what).sort()).toEqual([
      "ip -j -4 addr show",
      "ip -j -4 addr show",
      "ip -j link show dev fabric0",
      "ip -j link show dev fabric0",
    ]);
    expect(reads.every((r) => !r.duringProbe)).toBe(true);
    expect(mostAtOnce).toBe(4);
  });
});

describe("FabricLink create (up): the configured probe", () => {
  it("rail and loopback at the full settings (the loopback's round trips capped at 200, as before)", async () => {
    gbpsOf = (p) => (p.kind === "loopback" ? 10 : 5);
    const r = await create(inputs(LOCAL));
    expect(probes).toEqual([
      { kind: "rail", count: 500, seconds: 1 },
      { kind: "loopback", count: 200, seconds: 1 },
    ]);
    expect(r.outs?.class).toBe("healthy");
  });
});
