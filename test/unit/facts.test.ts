// native/node/facts.sh runs for real (on this machine and against the Spark sysfs fixture), and
// parseFacts rejects crafted bad output naming the node and the JSON path.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { nativeProgram } from "../../components/native-script";
import { parseFacts, type SparkNodeFacts } from "../../components/node/facts";

const FIXTURE = path.join(__dirname, "..", "fixtures", "sysfs-spark");
const IBV_FIXTURE = path.join(__dirname, "..", "fixtures", "sysfs-spark.ibv_devinfo");

/** Run facts.sh as the transport sends it (libraries inlined, `sh -c`), in an empty environment plus the contract's few names. */
function facts(shell: string, args: string[], env: Record<string, string> = {}): string {
  return execFileSync(shell, ["-c", nativeProgram("node/facts.sh").text, "facts.sh", ...args], {
    encoding: "utf8",
    env: {
      HOME: os.homedir(),
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      LANG: "C.UTF-8",
      ...env,
    },
  });
}

function meminfoBytes(key: string): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(fs.readFileSync("/proc/meminfo", "utf8"));
  return Number(m?.[1]) * 1024;
}

describe("facts.sh on this machine", () => {
  for (const shell of ["/bin/sh", "/bin/bash"]) {
    it(`prints one schema-valid JSON object under ${shell}`, () => {
      const f = parseFacts(facts(shell, ["/tmp", "~/sparkform-does-not-exist/models"]), "control");
      expect(f.schemaVersion).toBe(1);
      expect(f.sysfsRoot).toBe("/sys");
      expect(f.hostname).toBe(os.hostname());
      expect(f.arch).toBe(execFileSync("uname", ["-m"], { encoding: "utf8" }).trim());
      expect(f.kernel).toBe(os.release());
      expect(f.distro.id).toBe("debian");
      expect(f.memory.totalBytes).toBe(meminfoBytes("MemTotal"));
      expect(f.memory.availableBytes).toBeGreaterThan(0);
      expect(f.cpu.count).toBe(os.cpus().length);
      // This VM has one kind of core: the script must say so, not guess.
      if (f.cpu.performanceCores === null) expect(f.cpu.reason).toMatch(/no faster cluster/);
      expect(f.cuda).toMatchObject({
        version: null,
        reason: expect.stringContaining("/usr/local/cuda"),
      });
      expect(f.rdma).toEqual({
        devices: [],
        reason: "/sys/class/infiniband is absent (no RDMA devices or driver)",
      });
      expect(f.netdevs.map((n) => n.name)).not.toContain("lo");
      expect(f.disk).toHaveLength(2);
      expect(f.disk[0]).toMatchObject({
        path: "/tmp",
        checkedPath: "/tmp",
        exists: true,
        reason: null,
      });
      expect(f.disk[1]).toMatchObject({
        path: "~/sparkform-does-not-exist/models",
        checkedPath: os.homedir(),
        exists: false,
      });
      expect(f.disk[1]?.freeBytes).toBeGreaterThan(0);
    });
  }

  it("encodes hostile strings as exact JSON", () => {
    const weird = `/tmp/we"ird\\path\n\ttab é 🚀 $(x) \u0001`;
    const f = parseFacts(facts("/bin/sh", [weird]), "control");
    expect(f.disk[0]?.path).toBe(weird);
    expect(f.disk[0]?.checkedPath).toBe("/tmp");
  });

  it("says why for everything missing when sysfs is empty", () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "sf-nosys-"));
    const f = parseFacts(facts("/bin/sh", [], { SPARKFORM_SYSFS_ROOT: empty }), "bare");
    expect(f.cpu).toEqual({
      count: null,
      performanceCores: null,
      source: null,
      reason: `no cpu directories under ${empty}/devices/system/cpu`,
    });
    expect(f.rdma.devices).toEqual([]);
    expect(f.netdevs).toEqual([]);
    expect(f.nvidiaDriver.version).toBeNull();
    expect(f.disk).toEqual([]);
    fs.rmSync(empty, { recursive: true });
  });
});

describe("facts.sh against the DGX Spark sysfs fixture", () => {
  const f: SparkNodeFacts = parseFacts(
    facts("/bin/sh", [], { SPARKFORM_SYSFS_ROOT: FIXTURE, SPARKFORM_IBV_DEVINFO: IBV_FIXTURE }),
    "spark-fixture",
  );

  it("labels the facts with the fixture root", () => {
    expect(f.sysfsRoot).toBe(FIXTURE);
  });

  it("finds the X925 performance cluster 5-9,15-19 from cpu_capacity", () => {
    expect(f.cpu).toEqual({
      count: 20,
      performanceCores: [5, 6, 7, 8, 9, 15, 16, 17, 18, 19],
      source: "cpu_capacity",
      reason: null,
    });
  });

  it("reads both RoCE rails: HCA ↔ netdev, ACTIVE, active_mtu 4096, GID 3 RoCE v2, PCIe x4", () => {
    const rail = (device: string, netdev: string, ipv4Hex: string) => ({
      device,
      port: 1,
      netdev,
      state: "ACTIVE",
      physState: "LinkUp",
      linkLayer: "Ethernet",
      rate: "200 Gb/sec (4X HDR)",
      activeMtu: 4096,
      pcie: { currentLinkWidth: 4, maxLinkWidth: 4, currentLinkSpeed: "32.0 GT/s PCIe" },
      gids: expect.arrayContaining([
        { index: 3, gid: `0000:0000:0000:0000:0000:ffff:${ipv4Hex}`, type: "RoCE v2", netdev },
      ]),
      reason: null,
    });
    expect(f.rdma.reason).toBeNull();
    expect(f.rdma.devices).toEqual([
      rail("roceP2p1s0f1", "enP2p1s0f1np1", "c0a8:650a"), // 192.168.101.10
      rail("rocep1s0f1", "enp1s0f1np1", "c0a8:640a"), // 192.168.100.10
    ]);
    // All-zero GID slots are skipped; indexes ascend.
    expect(f.rdma.devices[0]?.gids.map((g) => g.index)).toEqual([0, 1, 2, 3]);
  });

  it("reads the fabric netdevs: 200000 Mb/s, MTU 9000, addresses not taken from the live kernel", () => {
    expect(f.netdevs).toEqual([
      expect.objectContaining({
        name: "enP2p1s0f1np1",
        mtu: 9000,
        speedMbps: 200000,
        operstate: "up",
        virtual: false,
        addresses: null,
      }),
      expect.objectContaining({
        name: "enp1s0f1np1",
        mtu: 9000,
        speedMbps: 200000,
        operstate: "up",
        virtual: false,
        addresses: null,
      }),
    ]);
    expect(f.netdevs[0]?.reason).toMatch(/fixture/);
    expect(f.nvidiaDriver).toEqual({ version: "580.173.02", reason: null });
  });

  it("without ibv_devinfo, active_mtu is null with the reason", () => {
    const g = parseFacts(
      facts("/bin/sh", [], {
        SPARKFORM_SYSFS_ROOT: FIXTURE,
        SPARKFORM_IBV_DEVINFO: "sf-no-such-ibv_devinfo",
      }),
      "spark-fixture",
    );
    expect(g.rdma.devices[0]).toMatchObject({
      activeMtu: null,
      reason: "sf-no-such-ibv_devinfo is not installed, and active_mtu is not in sysfs",
    });
  });
});

// Crafted bad output is built by mutating a good sheet anywhere, deliberately untyped.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = Record<string, any>;

describe("parseFacts rejects bad output", () => {
  const good = () =>
    JSON.parse(
      facts("/bin/sh", ["/tmp"], {
        SPARKFORM_SYSFS_ROOT: FIXTURE,
        SPARKFORM_IBV_DEVINFO: IBV_FIXTURE,
      }),
    ) as Loose;

  const cases: [string, (f: Loose) => unknown, string][] = [
    [
      "a wrong type deep inside",
      (f) => (f.rdma.devices[0].activeMtu = "4096"),
      "/rdma/devices/0/activeMtu: must be equal to one of the allowed values",
    ],
    ["an impossible MTU", (f) => (f.rdma.devices[1].activeMtu = 9000), "/rdma/devices/1/activeMtu"],
    [
      "an unknown property",
      (f) => (f.memory.gpuBytes = 1),
      `/memory: unexpected property "gpuBytes"`,
    ],
    ["a missing field", (f) => delete f.kernel, "/kernel: is missing"],
    ["a negative size", (f) => (f.disk[0].freeBytes = -1), "/disk/0/freeBytes: must be >= 0"],
    [
      "a null without a reason",
      (f) => (f.memory = { totalBytes: null, availableBytes: 1, reason: null }),
      "/memory/reason: must be string",
    ],
    ["a future schema", (f) => (f.schemaVersion = 2), "/schemaVersion: must be equal to constant"],
    [
      "a malformed GID",
      (f) => (f.rdma.devices[0].gids[3].gid = "$(reboot)"),
      "/rdma/devices/0/gids/3/gid: must match pattern",
    ],
    [
      "a fractional cpu number",
      (f) => (f.cpu.performanceCores = [5.5]),
      "/cpu/performanceCores/0: must be integer",
    ],
    [
      "an oversized string",
      (f) => (f.disk[0].path = "x".repeat(5000)),
      "/disk/0/path: must NOT have more than 4096 characters",
    ],
    ["an array instead of an object", (f) => (f.cuda = []), "/cuda: must be object"],
  ];
  it.each(cases)("%s", (_what, mutate, expected) => {
    const f = good();
    mutate(f);
    expect(() => parseFacts(JSON.stringify(f), "spark-2")).toThrow(
      `fact sheet from node "spark-2" is invalid at ${expected}`,
    );
  });

  it.each([
    ["", "not one JSON object"],
    ["Welcome to Ubuntu\n{}", 'output began: "Welcome to Ubuntu'],
    ["{} {}", "not one JSON object"],
    ["[]", "at /: must be object"],
    ["null", "at /: must be object"],
  ])("non-objects: %j", (out, expected) => {
    expect(() => parseFacts(out, "spark-1")).toThrow(
      `fact sheet from node "spark-1" is invalid at `,
    );
    expect(() => parseFacts(out, "spark-1")).toThrow(expected);
  });
});
