// The fabric's checks, pure: per link and rail, from both ends' port facts and what the probe
// measured. Thresholds are config; the defaults are the figures measured on the hardware
// (shared/reference: the runbook's "The fabric", the dual-rail lab notes, NVIDIA's Spark
// playbooks as quoted in issue 11). The fabric-healthy policy and the report call the same
// functions, so the gate and the report cannot disagree.
import type { PortFacts } from "./ports";

export interface FabricThresholds {
  /** Lowest acceptable negotiated link speed, Mb/s. Default 200000 (the Spark's CX-7 ports). */
  readonly minLinkSpeedMbps: number;
  /** The GID index RDMA uses. Default 3 (RoCE v2 over IPv4 on a Spark). */
  readonly gidIndex: number;
  /** The GID type required at `gidIndex`. Default "RoCE v2". */
  readonly gidType: string;
  /** Lowest acceptable PCIe link width. Default 4 (max_link_width = 4 is the design). */
  readonly minPcieWidth: number;
  /** Healthy when measured throughput ≥ this fraction of the reference. Default 0.5. */
  readonly healthyFraction: number;
  /**
   * What one TCP stream of the probe is expected to carry of the port ceiling, where no
   * `referenceGbps` is set: the reference is then ceiling × this. Default 0.2 (25 Gbit/s of a
   * Spark port's 126 Gbit/s; healthy from 12.6 Gbit/s, which a 10 GbE fallback or a port
   * trained at x1 cannot reach). A fixed share, never a reading of the node's own loopback,
   * which moves threefold with the host's load. RDMA measurements are judged on the ceiling.
   */
  readonly tcpShare: number;
  /**
   * The stale-initialization band, Gbit/s: a link that negotiated ≥ `staleMinLinkGbps` but
   * delivers within it (~13 Gbit/s; ib_write_bw at 8–25 Gbit/s on a 200G port). Default 8–25.
   */
  readonly staleBandGbps: { readonly min: number; readonly max: number };
  /** Links at least this fast (Gbit/s) can be stale-initialized. Default 200. */
  readonly staleMinLinkGbps: number;
}

export const DEFAULT_THRESHOLDS: FabricThresholds = {
  minLinkSpeedMbps: 200_000,
  gidIndex: 3,
  gidType: "RoCE v2",
  minPcieWidth: 4,
  healthyFraction: 0.5,
  tcpShare: 0.2,
  staleBandGbps: { min: 8, max: 25 },
  staleMinLinkGbps: 200,
};

export function thresholds(partial: Partial<FabricThresholds> = {}): FabricThresholds {
  return { ...DEFAULT_THRESHOLDS, ...partial };
}

export type CheckId =
  | "link-up"
  | "link-speed"
  | "mtu"
  | "rdma-mtu"
  | "gid"
  | "pcie-width"
  | "address"
  | "reachable"
  | "bandwidth";

export interface CheckResult {
  readonly check: CheckId;
  readonly ok: boolean;
  /** On failure: what is wrong, where (node, port, rail) and the fix. On success: the fact. */
  readonly message: string;
}

const where = (p: PortFacts) =>
  `${p.node} rail ${p.rail} (${p.rdmaDevice ?? "no RDMA device"}/${p.netdev}` +
  (p.iface !== p.netdev ? ` on ${p.iface}` : "") +
  ")";

const fixtureNote = (ps: readonly PortFacts[]) =>
  ps.some((p) => p.source === "fixture")
    ? ` [RDMA facts from fixture ${[...new Set(ps.filter((p) => p.source === "fixture").map((p) => p.origin))].join(", ")}]`
    : "";

function result(check: CheckId, ok: boolean, message: string, ps: readonly PortFacts[]) {
  return { check, ok, message: message + fixtureNote(ps) };
}

/** Both ports active and the carrying interfaces up. */
export function checkLinkUp(a: PortFacts, b: PortFacts): CheckResult {
  const down = [a, b].filter(
    (p) =>
      p.ifaceOperstate !== "up" ||
      (p.rdmaDevice !== null && (p.state !== "ACTIVE" || p.physState !== "LinkUp")),
  );
  if (down.length === 0) return result("link-up", true, `rail ${a.rail}: both ends up`, [a, b]);
  return result(
    "link-up",
    false,
    down
      .map(
        (p) =>
          `${where(p)} is down (interface ${p.ifaceOperstate ?? "absent"}, port ${p.state ?? "?"}/${p.physState ?? "?"})`,
      )
      .join("; ") + ": check the cable and that both ends' interfaces are up (ip link set … up)",
    [a, b],
  );
}

export function checkLinkSpeed(a: PortFacts, b: PortFacts, t: FabricThresholds): CheckResult {
  const slow = [a, b].filter((p) => p.speedMbps === null || p.speedMbps < t.minLinkSpeedMbps);
  if (slow.length === 0) {
    return result("link-speed", true, `rail ${a.rail}: ${a.speedMbps} Mb/s on both ends`, [a, b]);
  }
  return result(
    "link-speed",
    false,
    slow
      .map(
        (p) =>
          `${where(p)} negotiated ${p.speedMbps === null ? "an unknown speed" : `${p.speedMbps / 1000} Gbit/s`}, below ${t.minLinkSpeedMbps / 1000} Gbit/s`,
      )
      .join("; ") +
      ": re-seat the cable (a 200G QSFP DAC on both ends), check that both ports auto-negotiate the same speed (ethtool), then reset the port",
    [a, b],
  );
}

function equalCheck(
  check: "mtu" | "rdma-mtu",
  label: string,
  get: (p: PortFacts) => number | null,
  a: PortFacts,
  b: PortFacts,
  fix: string,
): CheckResult {
  const x = get(a);
  const y = get(b);
  if (x !== null && x === y)
    return result(check, true, `rail ${a.rail}: ${label} ${x} on both ends`, [a, b]);
  return result(
    check,
    false,
    `rail ${a.rail}: ${label} differs or is unknown: ${where(a)} ${x ?? "unknown"}, ${where(b)} ${y ?? "unknown"}: ${fix}`,
    [a, b],
  );
}

/** The netdev MTU (of the interface carrying the address, and of the RDMA netdev) equal on both ends. */
export function checkMtu(a: PortFacts, b: PortFacts): CheckResult {
  const fix = "set the same MTU on both ends (the lab pair: 9000, in the netplan of both nodes)";
  const iface = equalCheck("mtu", "interface MTU", (p) => p.ifaceMtu, a, b, fix);
  if (!iface.ok || (a.netdev === a.iface && b.netdev === b.iface)) return iface;
  const nd = equalCheck("mtu", "RDMA netdev MTU", (p) => p.netdevMtu, a, b, fix);
  if (!nd.ok) return nd;
  return result(
    "mtu",
    true,
    `rail ${a.rail}: interface MTU ${a.ifaceMtu}, RDMA netdev MTU ${a.netdevMtu} on both ends`,
    [a, b],
  );
}

/** RDMA active_mtu equal on both ends. */
export function checkRdmaMtu(a: PortFacts, b: PortFacts): CheckResult {
  return equalCheck(
    "rdma-mtu",
    "RDMA active_mtu",
    (p) => p.activeMtu,
    a,
    b,
    "both ends' netdev MTU must be at least 4096 + headers (9000 on the lab pair) for active_mtu 4096; set the same MTU on both ends, then check ibv_devinfo",
  );
}

export function checkGid(a: PortFacts, b: PortFacts, t: FabricThresholds): CheckResult {
  const bad = [a, b].filter((p) => p.gidType !== t.gidType || p.gid === null);
  if (bad.length === 0) {
    return result(
      "gid",
      true,
      `rail ${a.rail}: ${t.gidType} at GID index ${t.gidIndex} on both ends`,
      [a, b],
    );
  }
  return result(
    "gid",
    false,
    bad
      .map(
        (p) =>
          `${where(p)} has ${p.gid === null ? "no GID" : (p.gidType ?? "an untyped GID")} at GID index ${t.gidIndex}, not ${t.gidType}`,
      )
      .join("; ") +
      `: give the port its IPv4 address (RoCE v2 GIDs are derived from it), or set the GID index to the one that is ${t.gidType} (show_gids) and NCCL_IB_GID_INDEX with it`,
    [a, b],
  );
}

export function checkPcieWidth(a: PortFacts, b: PortFacts, t: FabricThresholds): CheckResult {
  const narrow = [a, b].filter((p) => p.pcie.width === null || p.pcie.width < t.minPcieWidth);
  if (narrow.length === 0) {
    return result("pcie-width", true, `rail ${a.rail}: PCIe x${a.pcie.width} on both ends`, [a, b]);
  }
  return result(
    "pcie-width",
    false,
    narrow
      .map(
        (p) =>
          `${where(p)} trained PCIe x${p.pcie.width ?? "?"} (max x${p.pcie.maxWidth ?? "?"}), below x${t.minPcieWidth}`,
      )
      .join("; ") +
      ": the port trained narrow; power-cycle the node (a warm reset does not retrain the link)",
    [a, b],
  );
}

// ---- addresses ---------------------------------------------------------------------------

function ipv4ToInt(ip: string): number | null {
  const parts = ip.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255))
    return null;
  return parts.reduce((acc, o) => acc * 256 + Number(o), 0);
}

/** `192.168.100.10/24` → `192.168.100.0/24`; null when not an IPv4 CIDR. */
export function subnetOf(cidr: string): string | null {
  const [ip, len] = cidr.split("/");
  const n = ip === undefined ? null : ipv4ToInt(ip);
  const bits = Number(len);
  if (n === null || !Number.isInteger(bits) || bits < 1 || bits > 32) return null;
  const size = 2 ** (32 - bits);
  const base = Math.floor(n / size) * size;
  const octets = [24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256);
  return `${octets.join(".")}/${bits}`;
}

export const addressOf = (cidr: string) => cidr.split("/")[0] ?? cidr;

export interface RailAddress {
  readonly node: string;
  readonly rail: number;
  readonly address: string;
  /**
   * A ring's cable this rail is an end of ("spark-1↔spark-2"): its subnet is the cable's, not
   * the rail number's (the two ends' rail numbers differ). Unset: the rail number's subnet.
   */
  readonly link?: string;
}

/** A link's rails in a message: "rail 0", or a ring cable whose ends differ, "rail 0↔1". */
export function railsLabel(ra: number, rb: number): string {
  return ra === rb ? `rail ${ra}` : `rail ${ra}↔${rb}`;
}

/**
 * Every rail on its own subnet, each node's address on a rail inside it and unique, and no
 * two rails sharing a subnet (the transport picks the HCA by the socket's local address). In a
 * ring every cable is its own subnet, so a rail is held to its cable's (`link`).
 */
export function checkAddresses(all: readonly RailAddress[]): Map<string, CheckResult> {
  const out = new Map<string, CheckResult>();
  const key = (a: RailAddress) => `${a.node}/${a.rail}`;
  const group = (a: RailAddress) => a.link ?? a.rail;
  const named = (g: string | number) => (typeof g === "number" ? `rail ${g}` : `link ${g}`);
  const railSubnet = new Map<string | number, string>();
  for (const a of all) {
    const s = subnetOf(a.address);
    if (s && !railSubnet.has(group(a))) railSubnet.set(group(a), s);
  }
  for (const a of all) {
    const s = subnetOf(a.address);
    const want = railSubnet.get(group(a));
    const problems: string[] = [];
    if (s === null)
      problems.push(`${a.address} is not an IPv4 address with a prefix (a.b.c.d/len)`);
    else if (s !== want)
      problems.push(`${a.address} is outside ${named(group(a))}'s subnet ${want}`);
    const dup = all.filter((o) => o !== a && addressOf(o.address) === addressOf(a.address));
    if (dup.length) {
      problems.push(
        `${addressOf(a.address)} is also used by ${dup.map((d) => `${d.node} rail ${d.rail}`).join(", ")}`,
      );
    }
    const shared = [...railSubnet].filter(([r, sub]) => r !== group(a) && sub === s);
    if (shared.length) {
      const others = shared.map(([r]) => r);
      // Rail numbers read as they always have ("rail 1, 2"); a ring's cables by name.
      const whom =
        a.link === undefined ? `rail ${others.join(", ")}` : others.map(named).join(", ");
      problems.push(`${named(group(a))} shares subnet ${s} with ${whom}`);
    }
    out.set(
      key(a),
      problems.length
        ? {
            check: "address",
            ok: false,
            message: `${a.node} rail ${a.rail}: ${problems.join("; ")}: give each rail its own subnet and each node a unique address on it (sparkform:nodes[].rails)`,
          }
        : { check: "address", ok: true, message: `${a.node} rail ${a.rail}: ${a.address} in ${s}` },
    );
  }
  return out;
}

// ---- measured --------------------------------------------------------------------------

export interface Measured {
  /** The probe's error, when the client could not reach the server (null when it did). */
  readonly error: string | null;
  readonly rttP50Us: number | null;
  readonly rttP99Us: number | null;
  readonly throughputGbps: number | null;
  /** How throughput was measured: TCP bulk send, or perftest ib_write_bw. */
  readonly method: "tcp" | "rdma";
}

/**
 * Whether the probe's client reached the far end. `cable`: the near end's port when the link is
 * a ring's cable. The probe's server runs on the configured peer itself, bound to its own
 * address, so a cable in the wrong port never reaches another node: it reaches none, and the
 * failure names the cable, which node's which port must go to which node's which port.
 */
export function checkReachable(
  from: string,
  to: PortFacts,
  m: Measured,
  cable?: PortFacts,
): CheckResult {
  if (m.error === null) {
    return {
      check: "reachable",
      ok: true,
      message: `${from} reaches ${to.node} on rail ${to.rail} (${addressOf(to.address)}), TCP p50 ${m.rttP50Us} µs`,
    };
  }
  const fix = cable
    ? `in the ring, ${cable.node}'s ${cable.iface} (rail ${cable.rail}, ${cable.address}) must be cabled to ${to.node}'s ${to.iface} (rail ${to.rail}, ${to.address}), their own subnet: check that cable is in those two ports (in another port it reaches another node, or none), then that the link is up on both ends (ip link), and that nothing filters the probe port`
    : `check the link is up on both ends (cable, ip link), the address and prefix on ${to.iface}, and that nothing filters the probe port`;
  return {
    check: "reachable",
    ok: false,
    message: `${from} cannot reach ${to.node} on rail ${to.rail} at ${addressOf(to.address)} (${m.error}): ${fix}`,
  };
}

export type BandwidthClass = "healthy" | "degraded" | "stale-initialization" | "down";

export interface Classified {
  readonly class: BandwidthClass;
  /** What the class was measured against, Gbit/s. */
  readonly referenceGbps: number | null;
  readonly message: string;
}

/**
 * The bandwidth class of one rail from measured throughput. `referenceGbps` is what the rail
 * should deliver: the port ceiling on real hardware (PCIe Gen5 x4: 126 Gbit/s), or, where the
 * RDMA facts are fixtures and the wire is something else (the sim's veth), the best rail
 * measured in the same run. Stale initialization — a ≥200G link that delivers ~13 Gbit/s,
 * ib_write_bw at 8–25 Gbit/s — is judged on RDMA measurements against the negotiated speed.
 */
export function classify(
  label: string,
  m: Measured,
  linkSpeedMbps: number | null,
  referenceGbps: number | null,
  t: FabricThresholds,
): Classified {
  if (m.error !== null || m.throughputGbps === null) {
    return {
      class: "down",
      referenceGbps,
      message: `${label}: no throughput measured (${m.error ?? "no result"}): check the cable and both ends' interfaces, then \`pulumi up\` to re-measure`,
    };
  }
  const got = m.throughputGbps;
  const linkGbps = linkSpeedMbps === null ? null : linkSpeedMbps / 1000;
  if (
    m.method === "rdma" &&
    linkGbps !== null &&
    linkGbps >= t.staleMinLinkGbps &&
    got >= t.staleBandGbps.min &&
    got <= t.staleBandGbps.max
  ) {
    return {
      class: "stale-initialization",
      referenceGbps,
      message: `${label}: stale initialization: the link negotiated ${linkGbps} Gbit/s but delivers ${got} Gbit/s (the known ${t.staleBandGbps.min}–${t.staleBandGbps.max} Gbit/s state that link-up checks miss): reset the port on both ends (or re-seat the cable), check the cable, check both ends' MTU, then re-measure`,
    };
  }
  if (referenceGbps === null || referenceGbps <= 0) {
    return {
      class: "degraded",
      referenceGbps,
      message: `${label}: ${got} Gbit/s measured, but the port's ceiling is unknown (no link speed or PCIe facts): fix the fact sheet's RDMA section, or set fabric.referenceGbps`,
    };
  }
  const pct = Math.round((got / referenceGbps) * 100);
  if (got >= t.healthyFraction * referenceGbps) {
    return {
      class: "healthy",
      referenceGbps,
      message: `${label}: ${got} Gbit/s, ${pct}% of ${referenceGbps} Gbit/s`,
    };
  }
  return {
    class: "degraded",
    referenceGbps,
    message: `${label}: degraded: ${got} Gbit/s is ${pct}% of ${referenceGbps} Gbit/s (healthy from ${Math.round(t.healthyFraction * 100)}%): check the cable and re-seat it, check both ends' MTU and link speed, look for traffic shaping or a busy core (the probe pins to performance cores), then re-measure`,
  };
}

export function checkBandwidth(c: Classified): CheckResult {
  return { check: "bandwidth", ok: c.class === "healthy", message: c.message };
}

/** All per-port checks of one link and rail. */
export function portChecks(a: PortFacts, b: PortFacts, t: FabricThresholds): CheckResult[] {
  return [
    checkLinkUp(a, b),
    checkLinkSpeed(a, b, t),
    checkMtu(a, b),
    checkRdmaMtu(a, b),
    checkGid(a, b, t),
    checkPcieWidth(a, b, t),
  ];
}
