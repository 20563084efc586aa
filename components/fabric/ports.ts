// The per-port facts of one rail on one node, read from the SparkNode fact sheet's RDMA
// section (no second collection on the node). On a real Spark the rail's address lives on the
// RDMA device's own netdev (enp1s0f1np1 ↔ rocep1s0f1); in the simulated cluster it lives on a
// veth (fabric0) and the RDMA section comes from a sysfs fixture tree, so the two are kept
// apart: `iface` is what carries the address, `netdev` what the RDMA device is bound to.
import type { Netdev, RdmaPort, SparkNodeFacts } from "../node/facts";

/** Where the RDMA facts came from: the node's own /sys, or a fixture tree (simulated nodes). */
export type FactSource = "sysfs" | "fixture";

/** One rail of one node, as the stack config names it. */
export interface RailConfig {
  /** Rail number, 0-based (0 = enp1s0f1np1 / rocep1s0f1 on a Spark). */
  readonly rail: number;
  /** The interface that carries the rail's address (a Spark: the RDMA netdev; the sim: fabricN). */
  readonly iface: string;
  /** The RDMA device's netdev (default: `iface`). */
  readonly netdev?: string;
  /** The node's address on this rail, with its prefix: `192.168.100.10/24`. */
  readonly address: string;
}

/** The RDMA facts a port is read from: the node's, or a fixture's (labelled). */
export interface RdmaSource {
  readonly source: FactSource;
  /** Where they came from: "/sys", or the fixture tree's name. */
  readonly origin: string;
  readonly devices: readonly RdmaPort[];
  /** The netdevs of the same sysfs (speed and MTU of the RDMA netdev). */
  readonly netdevs: readonly Netdev[];
  readonly reason: string | null;
}

export interface PortFacts {
  readonly node: string;
  readonly rail: number;
  readonly iface: string;
  /** CIDR, from the config. */
  readonly address: string;
  /** The interface carrying the address, from the live fact sheet. */
  readonly ifaceMtu: number | null;
  readonly ifaceOperstate: string | null;
  readonly source: FactSource;
  readonly origin: string;
  readonly rdmaDevice: string | null;
  readonly rdmaPort: number | null;
  readonly netdev: string;
  readonly state: string | null;
  readonly physState: string | null;
  readonly linkLayer: string | null;
  /** The RDMA netdev's negotiated speed (Mb/s), else parsed from the port's `rate`. */
  readonly speedMbps: number | null;
  readonly rate: string | null;
  readonly netdevMtu: number | null;
  /** RDMA active_mtu (ibv_devinfo). */
  readonly activeMtu: number | null;
  readonly gidIndex: number;
  readonly gid: string | null;
  readonly gidType: string | null;
  readonly pcie: {
    readonly width: number | null;
    readonly maxWidth: number | null;
    readonly speed: string | null;
  };
  /** min(wire speed, PCIe ceiling), Gbit/s: what one port can deliver at best. */
  readonly ceilingGbps: number | null;
  /** Why a fact is missing (no RDMA device bound to the netdev, …); null when complete. */
  readonly reason: string | null;
}

/** `32.0 GT/s PCIe` → 32. */
export function pcieGtPerLane(speed: string | null): number | null {
  const m = speed ? /^([0-9.]+)\s*GT\/s/.exec(speed) : null;
  return m ? Number(m[1]) : null;
}

/**
 * The PCIe link's data rate in Gbit/s: GT/s × lanes × line-code efficiency (8b/10b up to
 * 5 GT/s, 128b/130b from 8 GT/s). Gen5 x4: 32 × 4 × 128/130 = 126.0 Gbit/s = 15.75 GB/s, the
 * runbook's per-port ceiling.
 */
export function pcieGbps(width: number | null, speed: string | null): number | null {
  const gt = pcieGtPerLane(speed);
  if (gt === null || width === null || width <= 0) return null;
  const efficiency = gt >= 8 ? 128 / 130 : 8 / 10;
  return Math.round(gt * width * efficiency * 100) / 100;
}

/** `200 Gb/sec (4X HDR)` → 200000. */
export function rateMbps(rate: string | null): number | null {
  const m = rate ? /^([0-9.]+)\s*Gb\/sec/.exec(rate) : null;
  return m ? Math.round(Number(m[1]) * 1000) : null;
}

/** The RDMA source of a live fact sheet. */
export function liveRdma(facts: SparkNodeFacts): RdmaSource {
  return {
    source: facts.sysfsRoot === "/sys" ? "sysfs" : "fixture",
    origin: facts.sysfsRoot,
    devices: facts.rdma.devices,
    netdevs: facts.netdevs,
    reason: facts.rdma.reason,
  };
}

/**
 * The facts of `rail` on `node`: the RDMA port bound to the rail's netdev in `rdma`, the
 * interface's live MTU and state from `facts`, the GID at `gidIndex`.
 */
export function portFacts(
  node: string,
  facts: SparkNodeFacts,
  rdma: RdmaSource,
  rail: RailConfig,
  gidIndex: number,
): PortFacts {
  const netdevName = rail.netdev ?? rail.iface;
  const live = facts.netdevs.find((n) => n.name === rail.iface);
  const port = rdma.devices.find((d) => d.netdev === netdevName);
  const nd = rdma.netdevs.find((n) => n.name === netdevName);
  const gid = port?.gids.find((g) => g.index === gidIndex);
  const speedMbps = nd?.speedMbps ?? rateMbps(port?.rate ?? null);
  const pcie = {
    width: port?.pcie.currentLinkWidth ?? null,
    maxWidth: port?.pcie.maxLinkWidth ?? null,
    speed: port?.pcie.currentLinkSpeed ?? null,
  };
  const bus = pcieGbps(pcie.width, pcie.speed);
  const wire = speedMbps === null ? null : speedMbps / 1000;
  const ceilingGbps = bus === null ? wire : wire === null ? bus : Math.min(bus, wire);
  const reasons: string[] = [];
  if (!live) reasons.push(`interface ${rail.iface} is not on the node`);
  if (!port) {
    reasons.push(
      `no RDMA device is bound to ${netdevName} in ${rdma.origin}` +
        (rdma.reason ? ` (${rdma.reason})` : ""),
    );
  } else if (port.reason) reasons.push(port.reason);
  return {
    node,
    rail: rail.rail,
    iface: rail.iface,
    address: rail.address,
    ifaceMtu: live?.mtu ?? null,
    ifaceOperstate: live?.operstate ?? null,
    source: rdma.source,
    origin: rdma.origin,
    rdmaDevice: port?.device ?? null,
    rdmaPort: port?.port ?? null,
    netdev: netdevName,
    state: port?.state ?? null,
    physState: port?.physState ?? null,
    linkLayer: port?.linkLayer ?? null,
    speedMbps,
    rate: port?.rate ?? null,
    netdevMtu: nd?.mtu ?? null,
    activeMtu: port?.activeMtu ?? null,
    gidIndex,
    gid: gid?.gid ?? null,
    gidType: gid?.type ?? null,
    pcie,
    ceilingGbps,
    reason: reasons.length ? reasons.join("; ") : null,
  };
}

/** The carrying interface as `ip -j link show dev IFACE` reports it (netlink: right in any netns). */
export interface IfaceState {
  readonly mtu: number | null;
  /** Lower case, as sysfs spells it: up, down, lowerlayerdown; null when the interface is absent. */
  readonly operstate: string | null;
}

/** Parse `ip -j link show dev IFACE` output; absent (empty, error text) → nulls. */
export function parseIpLink(stdout: string, iface?: string): IfaceState {
  try {
    const links = JSON.parse(stdout) as { ifname?: unknown; mtu?: unknown; operstate?: unknown }[];
    const l = iface === undefined ? links[0] : links.find((x) => x.ifname === iface);
    return {
      mtu: typeof l?.mtu === "number" ? l.mtu : null,
      operstate: typeof l?.operstate === "string" ? l.operstate.toLowerCase() : null,
    };
  } catch {
    return { mtu: null, operstate: null };
  }
}

/** The port with its interface's MTU and state as measured now. */
export function withIface(p: PortFacts, live: IfaceState): PortFacts {
  const reason =
    live.operstate === null
      ? `interface ${p.iface} is not on the node`
      : (p.reason
          ?.split("; ")
          .filter((r) => r !== `interface ${p.iface} is not on the node`)
          .join("; ") ?? null);
  return { ...p, ifaceMtu: live.mtu, ifaceOperstate: live.operstate, reason: reason || null };
}
