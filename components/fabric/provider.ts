// FabricLink's dynamic-provider implementation (loaded by providers/delegate.ts): one rail of
// one link. Create measures it (port facts of both ends, TCP RTT and throughput between the
// rail addresses, the bandwidth class, every check); `read` re-measures, so a link that went
// down, an MTU or GID that changed, or a rail that dropped a class shows up as drift. Failing
// checks are outputs, not errors: the fabric-healthy policy gates on them, and the report
// shows them; an `up` after the repair re-measures (diff: an unhealthy link always updates).
// `up` measures with the configured probe; a refresh starts with a short burst and measures at
// full length only when the burst is not healthy (readings.ts burstThenFull). The quick ssh
// reads of a link (ports, management interfaces, perftest) run together, before its probe.
import type * as pulumi from "@pulumi/pulumi";
import { parseFacts, type SparkNodeFacts } from "../node/facts";
import { programCommand, programFor, type ProgramRef } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { steadyReading } from "../providers/diff";
import { run } from "../transport";
import { withStateUpgrade } from "../providers/state-upgrade";
import { ifaceHolding } from "./node-output";
import type { FabricEnd, FabricLinkInputs, FabricLinkOutputs } from "./state";
import { upgrade } from "./state-upgrade";
import { INPUT_KEYS, verdict } from "./verdicts";
import {
  checkBandwidth,
  checkReachable,
  classify,
  portChecks,
  railsLabel,
  type FabricThresholds,
  type Measured,
} from "./checks";
import { linkKey } from "./config";
import { measure, perftestPresent, type ProbeSettings } from "./measure";
import { PROBE_PROGRAM } from "./probe";
import {
  bestReading,
  burstSettings,
  burstThenFull,
  type RailReading,
  type ReadingLength,
} from "./readings";
import { liveRdma, parseIpLink, portFacts, withIface, type PortFacts } from "./ports";

export type { FabricEnd, FabricLinkInputs, FabricLinkOutputs } from "./state";
export { ifaceHolding } from "./node-output";

function mgmtIfaceOf(end: FabricEnd): Promise<string | null> {
  return shared(end, "ip addr", async () => {
    const r = await run(end.target, ["ip", "-j", "-4", "addr", "show"], {
      step: "management interface",
      timeoutMs: 30_000,
      okExitCodes: [0, 1, 127, 255],
    });
    return r.exitCode === 0 ? ifaceHolding(r.stdout, end.target.host) : null;
  });
}

/** Both ends' management interfaces, read now (`up`). */
async function mgmtNow(i: FabricLinkInputs): Promise<FabricLinkOutputs["mgmtIface"]> {
  const [a, b] = await allInOrder([mgmtIfaceOf(i.a), mgmtIfaceOf(i.b)] as const);
  return { a, b };
}

function liveFacts(end: FabricEnd, facts: ProgramRef): Promise<SparkNodeFacts> {
  return shared(end, `facts ${facts.sha256}`, async () => {
    const r = await run(
      end.target,
      programCommand(facts.name, { args: [], display: `native/${facts.name}` }),
      { step: "fabric facts", timeoutMs: 60_000 },
    );
    return parseFacts(r.stdout, end.target.name);
  });
}

/**
 * Reads of one node that are in flight, by node and what they read: the rails of a node are
 * evaluated at once (one FabricLink each), and their ends on that node share one read instead
 * of each opening its own ssh session. Shared while in flight only, so nothing is stale.
 */
const inFlight = new Map<string, Promise<unknown>>();

function shared<T>(end: FabricEnd, what: string, read: () => Promise<T>): Promise<T> {
  const key = JSON.stringify([end.target.host, end.target.port, what]);
  const pending = inFlight.get(key) as Promise<T> | undefined;
  if (pending) return pending;
  const p = read();
  inFlight.set(key, p);
  const forget = () => inFlight.get(key) === p && inFlight.delete(key);
  p.then(forget, forget);
  return p;
}

/**
 * The carrying interface's MTU and state, read over netlink (`ip -j link`), not /sys: a
 * container's /sys may show another network namespace (the sim's nodes see the host's). One
 * read of every interface per node, shared by its rails.
 */
async function ifaceOf(end: FabricEnd): Promise<ReturnType<typeof parseIpLink>> {
  const stdout = await shared(end, "ip link", async () => {
    const r = await run(end.target, ["ip", "-j", "link", "show"], {
      step: "fabric interfaces",
      timeoutMs: 30_000,
      okExitCodes: [0, 1, 255],
    });
    return r.exitCode === 0 ? r.stdout : "";
  });
  return parseIpLink(stdout, end.rail.iface);
}

/**
 * A port as it is now: RDMA facts re-read with facts.sh (the node's /sys; a fixture end keeps
 * its fixture), the interface's MTU and state over netlink.
 */
async function portNow(end: FabricEnd, facts: ProgramRef, gidIndex: number): Promise<PortFacts> {
  const [f, iface] = await allInOrder([
    end.fixture ? Promise.resolve(null) : liveFacts(end, facts),
    ifaceOf(end),
  ] as const);
  const base = f === null ? end.port : portFacts(end.node, f, liveRdma(f), end.rail, gidIndex);
  return withIface(base, iface);
}

type Ports = { a: PortFacts; b: PortFacts };

async function portsNow(i: FabricLinkInputs): Promise<Ports> {
  const [a, b] = await allInOrder([
    portNow(i.a, i.programs.facts, i.gidIndex),
    portNow(i.b, i.programs.facts, i.gidIndex),
  ] as const);
  return { a, b };
}

/** The program's port facts (the SparkNode's) with both interfaces read again, now. */
async function programPorts(i: FabricLinkInputs): Promise<Ports> {
  const [a, b] = await allInOrder([ifaceOf(i.a), ifaceOf(i.b)] as const);
  return { a: withIface(i.a.port, a), b: withIface(i.b.port, b) };
}

/**
 * Promise.all over reads that run at once, except that it settles only when all of them have
 * (no ssh read left running behind a failure) and throws the first failure in list order, so
 * which error a broken node gives does not depend on which read finished first.
 */
async function allInOrder<T extends readonly unknown[]>(reads: {
  readonly [K in keyof T]: Promise<T[K]>;
}): Promise<T> {
  const settled = await Promise.allSettled(reads);
  for (const r of settled) if (r.status === "rejected") throw r.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * The fixed reference a rail is classed against, Gbit/s: `fabric.referenceGbps` (the rail's line
 * rate), else the lower port ceiling (min(wire, PCIe)), times `thresholds.tcpShare` for the TCP
 * probe. Facts and config only: a reading of the node's own loopback moved threefold with the
 * host's load (11.5 to 31.4 Gbit/s between samples on a 2-core host) and made a quarter of
 * quiet refreshes report a degraded rail.
 */
export function classReference(
  configured: number | null,
  ports: Ports,
  method: Measured["method"],
  t: FabricThresholds,
): number | null {
  if (configured !== null) return configured;
  const ceilings = [ports.a.ceilingGbps, ports.b.ceilingGbps].filter(
    (c): c is number => c !== null,
  );
  if (ceilings.length === 0) return null;
  const ceiling = Math.min(...ceilings);
  return method === "tcp" ? Math.round(ceiling * t.tcpShare * 1000) / 1000 : ceiling;
}

async function measureLink(
  inputs: FabricLinkInputs,
  ports: Ports,
  settings: ProbeSettings,
): Promise<RailReading> {
  const label = `${inputs.link} ${railsLabel(inputs.a.rail.rail, inputs.b.rail.rail)}`;
  const end = (e: FabricEnd) => ({
    node: e.node,
    target: e.target,
    address: e.rail.address,
    cpus: e.cpus,
  });
  const p = await measure(
    programFor(inputs.programs.probe, PROBE_PROGRAM).text,
    end(inputs.b),
    end(inputs.a),
    settings,
  );
  const m: Measured = {
    error: p.error,
    rttP50Us: p.rtt?.p50Us ?? null,
    rttP99Us: p.rtt?.p99Us ?? null,
    throughputGbps: p.throughput?.gbps ?? null,
    method: "tcp",
  };
  const speeds = [ports.a.speedMbps, ports.b.speedMbps].filter((s): s is number => s !== null);
  const cls = classify(
    label,
    m,
    speeds.length ? Math.min(...speeds) : null,
    classReference(inputs.referenceGbps, ports, m.method, inputs.thresholds),
    inputs.thresholds,
  );
  return { m, cls };
}

/**
 * Measure a link. `full`: the configured probe, read again while not healthy (`up`); `burst`:
 * a short burst first, at full length only when it is not healthy (refresh). The ports (however
 * `portsRead` reads them), both management interfaces (`mgmtRead`) and perftest are read at
 * once, and all of them before the probe: ssh commands on the nodes during a probe would share
 * its cores.
 */
async function evaluate(
  inputs: FabricLinkInputs,
  portsRead: Promise<Ports>,
  mgmtRead: Promise<FabricLinkOutputs["mgmtIface"]>,
  length: ReadingLength,
): Promise<FabricLinkOutputs> {
  // An end with a fixture has fixture ports (no perftest to look for); a live end's fact sheet
  // may be fixture-sourced too (a sim node without HCAs), known once its facts are read, so
  // perftest is looked for beside them and its answer used only for sysfs ports.
  const perftestRead =
    inputs.a.fixture !== null || inputs.b.fixture !== null
      ? Promise.resolve(false)
      : allInOrder([
          perftestPresent(inputs.a.target),
          perftestPresent(inputs.b.target),
        ] as const).then((present) => present.every(Boolean));
  const [ports, mgmt, perftestBoth] = await allInOrder([
    portsRead,
    mgmtRead,
    perftestRead,
  ] as const);
  const measureAt = (l: ReadingLength) =>
    measureLink(inputs, ports, l === "burst" ? burstSettings(inputs.probe) : inputs.probe);
  const reading =
    length === "burst"
      ? await burstThenFull(measureAt)
      : await bestReading(() => measureAt("full"));
  const { m, cls } = reading;
  const fixture = ports.a.source === "fixture" || ports.b.source === "fixture";
  const perftest = !fixture && perftestBoth;
  const checks = [
    ...portChecks(ports.a, ports.b, inputs.thresholds),
    ...inputs.addressChecks,
    checkReachable(inputs.a.node, ports.b, m, inputs.topology === "ring" ? ports.a : undefined),
    checkBandwidth(cls),
  ];
  return {
    ...inputs,
    ports,
    source: fixture ? "fixture" : "sysfs",
    rttP50Us: m.rttP50Us,
    rttP99Us: m.rttP99Us,
    throughputGbps: m.throughputGbps,
    classReferenceGbps: cls.referenceGbps,
    class: cls.class,
    checks,
    healthy: checks.every((c) => c.ok),
    rdma: {
      measured: false,
      reason: fixture
        ? "RDMA facts are fixtures (the node has no HCA): RDMA latency and bandwidth cannot be measured"
        : perftest
          ? "perftest is installed, but this version of the probe does not run it yet: TCP figures only"
          : "perftest (ib_send_lat, ib_write_bw) is not installed on both ends: TCP figures only",
    },
    error: m.error,
    mgmtIface: mgmt,
  };
}

async function createLink(
  inputs: FabricLinkInputs,
): Promise<pulumi.dynamic.CreateResult<FabricLinkOutputs>> {
  return {
    id: linkKey(inputs.topology, {
      a: inputs.a.node,
      b: inputs.b.node,
      rail: inputs.rail,
      ra: inputs.a.rail,
      rb: inputs.b.rail,
    }),
    // The program's port facts are the SparkNode's; the interfaces are read again, now.
    outs: await evaluate(inputs, programPorts(inputs), mgmtNow(inputs), "full"),
  };
}

/**
 * Refresh: re-read both ends' facts (the same facts.sh as SparkNode) and re-measure, with a short
 * burst first (`probe.refreshSeconds`, at most 200 round trips) and at full length before a rail
 * that is not healthy counts as such. The RTT and throughput wander from run to run; they are
 * kept from the last `up` unless a fact, the class or a check's verdict changed, so
 * `preview --refresh --expect-no-changes` holds on a healthy fabric and fails on a real change.
 */
async function readLink(
  id: string,
  props: FabricLinkOutputs,
): Promise<pulumi.dynamic.ReadResult<FabricLinkOutputs>> {
  // The management interfaces (NCCL_SOCKET_IFNAME) are not drift: kept as `up` read them.
  const fresh = await evaluate(props, portsNow(props), Promise.resolve(props.mgmtIface), "burst");
  return { id, props: steadyReading(props, fresh, verdict) };
}

async function diffLink(
  _id: string,
  olds: FabricLinkOutputs,
  news: FabricLinkInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const changed = INPUT_KEYS.filter((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
  // An unhealthy link (as measured at the last up or refresh) is re-measured by every up, so
  // the repair converges without touching the config.
  return { changes: changed.length > 0 || !olds.healthy, replaces: [] };
}

async function updateLink(
  _id: string,
  _olds: FabricLinkOutputs,
  news: FabricLinkInputs,
): Promise<pulumi.dynamic.UpdateResult<FabricLinkOutputs>> {
  // `up` re-reads the ports too: the program's facts are the SparkNode's, which may predate a repair.
  return { outs: await evaluate(news, portsNow(news), mgmtNow(news), "full") };
}

/** The contract, checked at compile time; nothing to delete: a measurement leaves nothing behind. */
const current = {
  create: createLink,
  read: readLink,
  diff: diffLink,
  update: updateLink,
} satisfies ProviderImpl<FabricLinkInputs, FabricLinkOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update } = provider;
