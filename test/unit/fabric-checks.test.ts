// The fabric's pure logic on real inputs: the Spark sysfs fixture (and its variants) read by
// the product's facts.sh, port facts per rail, every check with its exact message, the
// bandwidth class, the address checks.
import { describe, expect, it } from "vitest";
import {
  checkAddresses,
  checkBandwidth,
  classify,
  DEFAULT_THRESHOLDS,
  portChecks,
  subnetOf,
  type Measured,
} from "../../components/fabric/checks";
import { fixtureRdma } from "../../components/fabric/fixture";
import {
  pcieGbps,
  portFacts,
  rateMbps,
  type PortFacts,
  type RdmaSource,
} from "../../components/fabric/ports";
import { SIM_RAILS } from "../../components/fabric/sim-rails";
import type { Netdev, SparkNodeFacts } from "../../components/node/facts";

const netdev = (name: string, mtu: number, operstate = "up"): Netdev => ({
  name,
  mac: "02:00:00:00:00:01",
  mtu,
  speedMbps: 10000,
  operstate,
  virtual: true,
  addresses: [],
  reason: null,
});

/** A simulated node's live fact sheet: no RDMA, veths fabric0/fabric1. */
function simFacts(mtu0 = 9000, mtu1 = 9000, op0 = "up"): SparkNodeFacts {
  return {
    schemaVersion: 1,
    sysfsRoot: "/sys",
    hostname: "spark-1",
    arch: "x86_64",
    kernel: "6.1.0",
    distro: { id: "debian", versionId: "12", prettyName: "Debian 12", reason: null },
    memory: { totalBytes: 1, availableBytes: 1, reason: null },
    cpu: { count: 2, performanceCores: null, source: null, reason: "no faster cluster" },
    cuda: { version: null, home: null, source: null, reason: "none" },
    nvidiaDriver: { version: null, reason: "none" },
    rdma: { devices: [], reason: "/sys/class/infiniband is absent (no RDMA devices or driver)" },
    netdevs: [netdev("mgmt0", 1500), netdev("fabric0", mtu0, op0), netdev("fabric1", mtu1)],
    disk: [],
  };
}

const cache = new Map<string, RdmaSource>();
const fixture = (name: string) => {
  if (!cache.has(name)) cache.set(name, fixtureRdma(name));
  return cache.get(name) as RdmaSource;
};

function simPort(node: string, n: number, rail: number, fx = "sysfs-spark", live = simFacts()) {
  const r = SIM_RAILS[rail] as (typeof SIM_RAILS)[number];
  return portFacts(
    node,
    live,
    fixture(fx),
    { rail, iface: r.iface, netdev: r.netdev, address: `10.214.${7 + rail}.${n}/24` },
    3,
  );
}

const T = DEFAULT_THRESHOLDS;

describe("port facts from the fixture", () => {
  it("maps rail 0 to rocep1s0f1 on fabric0 with every fact of the reference", () => {
    expect(simPort("spark-1", 1, 0)).toEqual({
      node: "spark-1",
      rail: 0,
      iface: "fabric0",
      address: "10.214.7.1/24",
      ifaceMtu: 9000,
      ifaceOperstate: "up",
      source: "fixture",
      origin: "sysfs-spark",
      rdmaDevice: "rocep1s0f1",
      rdmaPort: 1,
      netdev: "enp1s0f1np1",
      state: "ACTIVE",
      physState: "LinkUp",
      linkLayer: "Ethernet",
      speedMbps: 200000,
      rate: "200 Gb/sec (4X HDR)",
      netdevMtu: 9000,
      activeMtu: 4096,
      gidIndex: 3,
      gid: "0000:0000:0000:0000:0000:ffff:c0a8:640a",
      gidType: "RoCE v2",
      pcie: { width: 4, maxWidth: 4, speed: "32.0 GT/s PCIe" },
      ceilingGbps: 126.03,
      reason: null,
    });
    expect(simPort("spark-1", 1, 1).rdmaDevice).toBe("roceP2p1s0f1");
  });

  it("says why when no RDMA device is bound to the netdev", () => {
    const p = portFacts(
      "spark-1",
      simFacts(),
      {
        source: "sysfs",
        origin: "/sys",
        devices: [],
        netdevs: [],
        reason: "/sys/class/infiniband is absent",
      },
      { rail: 0, iface: "fabric0", address: "10.0.0.1/24" },
      3,
    );
    expect(p.rdmaDevice).toBeNull();
    expect(p.reason).toBe(
      "no RDMA device is bound to fabric0 in /sys (/sys/class/infiniband is absent)",
    );
  });

  it.each([
    [4, "32.0 GT/s PCIe", 126.03],
    [1, "32.0 GT/s PCIe", 31.51],
    [4, "16.0 GT/s PCIe", 63.02],
    [4, "5.0 GT/s PCIe", 16],
    [null, "32.0 GT/s PCIe", null],
    [4, null, null],
  ])("PCIe x%s at %s is %s Gbit/s", (w, s, want) => {
    expect(pcieGbps(w, s)).toBe(want);
  });

  it.each([
    ["200 Gb/sec (4X HDR)", 200000],
    ["10 Gb/sec (1X QDR)", 10000],
    ["25 Gb/sec (1X EDR)", 25000],
    ["weird", null],
  ])("rate %s is %s Mb/s", (r, want) => expect(rateMbps(r)).toBe(want));
});

const failing = (a: PortFacts, b: PortFacts) =>
  portChecks(a, b, T)
    .filter((c) => !c.ok)
    .map((c) => [c.check, c.message]);

describe("per-port checks", () => {
  it("pass on the reference pair, each stating its fact and the fixture label", () => {
    const checks = portChecks(simPort("spark-1", 1, 0), simPort("spark-2", 2, 0), T);
    expect(checks.map((c) => [c.check, c.ok, c.message])).toEqual([
      ["link-up", true, "rail 0: both ends up [RDMA facts from fixture sysfs-spark]"],
      [
        "link-speed",
        true,
        "rail 0: 200000 Mb/s on both ends [RDMA facts from fixture sysfs-spark]",
      ],
      [
        "mtu",
        true,
        "rail 0: interface MTU 9000, RDMA netdev MTU 9000 on both ends [RDMA facts from fixture sysfs-spark]",
      ],
      [
        "rdma-mtu",
        true,
        "rail 0: RDMA active_mtu 4096 on both ends [RDMA facts from fixture sysfs-spark]",
      ],
      [
        "gid",
        true,
        "rail 0: RoCE v2 at GID index 3 on both ends [RDMA facts from fixture sysfs-spark]",
      ],
      ["pcie-width", true, "rail 0: PCIe x4 on both ends [RDMA facts from fixture sysfs-spark]"],
    ]);
  });

  it("RoCE v1 at GID 3 fails the gid check with the fix", () => {
    expect(
      failing(simPort("spark-1", 1, 0), simPort("spark-2", 2, 0, "sysfs-spark-rocev1")),
    ).toEqual([
      [
        "gid",
        "spark-2 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) has IB/RoCE v1 at GID index 3, not RoCE v2: give the port its IPv4 address (RoCE v2 GIDs are derived from it), or set the GID index to the one that is RoCE v2 (show_gids) and NCCL_IB_GID_INDEX with it [RDMA facts from fixture sysfs-spark, sysfs-spark-rocev1]",
      ],
    ]);
    // Rail 1 of the same variant is untouched.
    expect(
      failing(simPort("spark-1", 1, 1), simPort("spark-2", 2, 1, "sysfs-spark-rocev1")),
    ).toEqual([]);
  });

  it("an MTU mismatch fails mtu (rail 0) and rdma-mtu, each saying to set the same MTU", () => {
    expect(failing(simPort("spark-1", 1, 0), simPort("spark-2", 2, 0, "sysfs-spark-mtu"))).toEqual([
      [
        "mtu",
        "rail 0: RDMA netdev MTU differs or is unknown: spark-1 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) 9000, spark-2 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) 1500: set the same MTU on both ends (the lab pair: 9000, in the netplan of both nodes) [RDMA facts from fixture sysfs-spark, sysfs-spark-mtu]",
      ],
      [
        "rdma-mtu",
        "rail 0: RDMA active_mtu differs or is unknown: spark-1 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) 4096, spark-2 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) 1024: both ends' netdev MTU must be at least 4096 + headers (9000 on the lab pair) for active_mtu 4096; set the same MTU on both ends, then check ibv_devinfo [RDMA facts from fixture sysfs-spark, sysfs-spark-mtu]",
      ],
    ]);
  });

  it("a live interface MTU mismatch (the sim's veth) fails mtu", () => {
    const b = simPort("spark-2", 2, 1, "sysfs-spark", simFacts(9000, 1500));
    expect(failing(simPort("spark-1", 1, 1), b).map(([c]) => c)).toEqual(["mtu"]);
    expect(failing(simPort("spark-1", 1, 1), b)[0]?.[1]).toMatch(
      /^rail 1: interface MTU differs or is unknown: .* 9000, .* 1500: set the same MTU on both ends/,
    );
  });

  it("a 10 Gbit/s link fails link-speed on rail 1 with the fix", () => {
    expect(failing(simPort("spark-1", 1, 1, "sysfs-spark-10g"), simPort("spark-2", 2, 1))).toEqual([
      [
        "link-speed",
        "spark-1 rail 1 (roceP2p1s0f1/enP2p1s0f1np1 on fabric1) negotiated 10 Gbit/s, below 200 Gbit/s: re-seat the cable (a 200G QSFP DAC on both ends), check that both ports auto-negotiate the same speed (ethtool), then reset the port [RDMA facts from fixture sysfs-spark-10g, sysfs-spark]",
      ],
    ]);
    expect(simPort("spark-1", 1, 1, "sysfs-spark-10g").ceilingGbps).toBe(10);
  });

  it("a cut rail fails link-up naming the node and rail", () => {
    const down = simPort("spark-2", 2, 0, "sysfs-spark", simFacts(9000, 9000, "lowerlayerdown"));
    expect(failing(simPort("spark-1", 1, 0), down)).toEqual([
      [
        "link-up",
        "spark-2 rail 0 (rocep1s0f1/enp1s0f1np1 on fabric0) is down (interface lowerlayerdown, port ACTIVE/LinkUp): check the cable and that both ends' interfaces are up (ip link set … up) [RDMA facts from fixture sysfs-spark]",
      ],
    ]);
  });
});

const measured = (
  gbps: number | null,
  method: "tcp" | "rdma" = "tcp",
  error: string | null = null,
): Measured => ({
  error,
  rttP50Us: 20,
  rttP99Us: 40,
  throughputGbps: gbps,
  method,
});

describe("bandwidth class", () => {
  it.each([
    // [label, measured, method, link Mb/s, reference, class]
    ["lab RDMA per path", 109, "rdma", 200000, 126.03, "healthy"],
    ["stale init ~13", 13, "rdma", 200000, 126.03, "stale-initialization"],
    ["stale band low end", 8, "rdma", 200000, 126.03, "stale-initialization"],
    ["stale band high end", 25, "rdma", 200000, 126.03, "stale-initialization"],
    ["below the band", 5, "rdma", 200000, 126.03, "degraded"],
    ["10G link not stale", 9.4, "rdma", 10000, 10, "healthy"],
    ["sim tcp healthy", 20, "tcp", 200000, 22, "healthy"],
    ["sim tcp shaped to a tenth", 2.1, "tcp", 200000, 21, "degraded"],
    [
      "tcp in the stale band is judged against the reference only",
      13,
      "tcp",
      200000,
      14,
      "healthy",
    ],
  ] as const)("%s → %s", (_l, gbps, method, link, ref, want) => {
    expect(classify("spark-1↔spark-2 rail 0", measured(gbps, method), link, ref, T).class).toBe(
      want,
    );
  });

  it("says the fix for stale initialization and degraded", () => {
    expect(
      classify("spark-1↔spark-2 rail 0", measured(13, "rdma"), 200000, 126.03, T).message,
    ).toBe(
      "spark-1↔spark-2 rail 0: stale initialization: the link negotiated 200 Gbit/s but delivers 13 Gbit/s (the known 8–25 Gbit/s state that link-up checks miss): reset the port on both ends (or re-seat the cable), check the cable, check both ends' MTU, then re-measure",
    );
    const d = classify("spark-1↔spark-2 rail 1", measured(2.1), 200000, 21, T);
    expect(d.message).toBe(
      "spark-1↔spark-2 rail 1: degraded: 2.1 Gbit/s is 10% of 21 Gbit/s (healthy from 50%): check the cable and re-seat it, check both ends' MTU and link speed, look for traffic shaping or a busy core (the probe pins to performance cores), then re-measure",
    );
    expect(checkBandwidth(d)).toEqual({ check: "bandwidth", ok: false, message: d.message });
  });

  it("an unreachable rail is down", () => {
    const c = classify("r", measured(null, "tcp", "ConnectionRefusedError"), 200000, 126, T);
    expect(c.class).toBe("down");
    expect(c.message).toMatch(/no throughput measured \(ConnectionRefusedError\): check the cable/);
  });
});

describe("addresses", () => {
  it.each([
    ["192.168.100.10/24", "192.168.100.0/24"],
    ["10.214.7.2/24", "10.214.7.0/24"],
    ["10.1.2.3/16", "10.1.0.0/16"],
    ["10.1.2.3", null],
    ["fe80::1/64", null],
  ])("subnet of %s is %s", (a, s) => expect(subnetOf(a)).toBe(s));

  it("passes the lab pair's two rails and fails a duplicate, an outsider and a shared subnet", () => {
    const ok = checkAddresses([
      { node: "sparkone", rail: 0, address: "192.168.100.10/24" },
      { node: "sparktwo", rail: 0, address: "192.168.100.11/24" },
      { node: "sparkone", rail: 1, address: "192.168.101.10/24" },
      { node: "sparktwo", rail: 1, address: "192.168.101.11/24" },
    ]);
    expect([...ok.values()].every((c) => c.ok)).toBe(true);
    expect(ok.get("sparkone/0")?.message).toBe(
      "sparkone rail 0: 192.168.100.10/24 in 192.168.100.0/24",
    );
    const bad = checkAddresses([
      { node: "a", rail: 0, address: "192.168.100.10/24" },
      { node: "b", rail: 0, address: "192.168.100.10/24" },
      { node: "a", rail: 1, address: "192.168.102.10/24" },
      { node: "b", rail: 1, address: "192.168.100.12/24" },
    ]);
    expect(bad.get("b/0")?.message).toBe(
      "b rail 0: 192.168.100.10 is also used by a rail 0: give each rail its own subnet and each node a unique address on it (sparkform:nodes[].rails)",
    );
    expect(bad.get("b/1")?.message).toBe(
      "b rail 1: 192.168.100.12/24 is outside rail 1's subnet 192.168.102.0/24; rail 1 shares subnet 192.168.100.0/24 with rail 0: give each rail its own subnet and each node a unique address on it (sparkform:nodes[].rails)",
    );
    expect(bad.get("a/1")?.ok).toBe(true);
  });
});
