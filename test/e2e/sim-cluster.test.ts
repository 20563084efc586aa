// The simulated Spark cluster, end to end: two nodes up, then everything the control node relies
// on, asserted through the real ssh client and the real `sparkform sim` CLI; then `sim down`.
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runRaw, type RunResult } from "../../sim/exec";
import { simDown, simExec, simStatus, simUp, type SimCluster } from "../../sim/index";
import { listMounts, nspawnProcesses } from "../../sim/node";
import { listLinks, listNetns, listSimRoutes } from "../../sim/network";
import { parseTcpRtt, tcpRttScript, type TcpRtt } from "../../sim/probe";
import { repoRoot } from "../../sim/paths";
import { isRoot, requireOrSkip } from "../support/requires";

// A state dir of our own (the image cache stays the shared one).
const stateDir = isRoot ? fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-sim-test-")) : "";
if (isRoot) process.env.SPARKFORM_STATE_DIR = stateDir;
process.env.SPARKFORM_SIM_QUIET = "1";

/** The CLI exactly as a user runs it (`sparkform sim …`). */
function cli(...args: string[]): Promise<RunResult> {
  return runRaw(process.execPath, [path.join(repoRoot, "bin/sparkform.js"), "sim", ...args], {
    cwd: repoRoot,
    env: { ...process.env, SPARKFORM_STATE_DIR: stateDir },
    timeoutMs: 120_000,
  });
}

let c: SimCluster;

/** `ssh -F <generated config> <node> <command>`: a plain, non-login, non-interactive session. */
function ssh(node: string, command: string, extra: string[] = []): Promise<RunResult> {
  return runRaw("ssh", ["-F", c.sshConfigPath, "-o", "ControlPath=none", ...extra, node, command], {
    timeoutMs: 60_000,
  });
}

/** TCP round trip from one node to an address, measured inside the node, as `spark` over ssh. */
async function tcpRtt(from: string, addr: string): Promise<TcpRtt> {
  const viaStdin = await runRaw(
    "ssh",
    ["-F", c.sshConfigPath, "-o", "ControlPath=none", from, `python3 - ${addr} 22 10`],
    { input: tcpRttScript, timeoutMs: 60_000 },
  );
  return parseTcpRtt(viaStdin);
}

/** A TCP connect from the host (the control node); resolves with the error code or "connected". */
function hostConnect(addr: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host: addr, port, timeout: 3000 });
    s.on("connect", () => {
      s.destroy();
      resolve("connected");
    });
    s.on("timeout", () => {
      s.destroy();
      resolve("ETIMEDOUT");
    });
    s.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("sim: a two-node simulated Spark cluster (root)", () => {
  beforeAll(async () => {
    c = await simUp({ nodes: 2 });
  });

  afterAll(async () => {
    if (fs.existsSync(path.join(stateDir, "sim", "state.json"))) await simDown();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });

  it("writes cluster.json and the stack config with every node's access values", () => {
    const onDisk = JSON.parse(
      fs.readFileSync(path.join(stateDir, "sim", "cluster.json"), "utf8"),
    ) as SimCluster;
    expect(onDisk).toEqual(c);
    expect(c.nodes.map((n) => n.name)).toEqual(["spark-1", "spark-2"]);
    expect(c.fabricMtu).toBe(9000);
    // Two rails on two subnets, as on the lab's pair; rail 0's address is the fabricAddress.
    expect(c.railSubnets).toHaveLength(2);
    expect(c.railSubnets[0]).toBe(c.fabricSubnet);
    expect(c.railSubnets[1]).not.toBe(c.railSubnets[0]);
    for (const n of c.nodes) {
      expect(n.rails.map((r) => [r.rail, r.iface, r.subnet])).toEqual([
        [0, "fabric0", c.railSubnets[0]],
        [1, "fabric1", c.railSubnets[1]],
      ]);
      expect(n.rails[0]?.address).toBe(`${n.fabricAddress}/24`);
    }
    for (const n of c.nodes) {
      expect(n.hostKey).toMatch(/^ssh-ed25519 AAAA[\w+/=]+$/);
      expect(n.user).toBe("spark");
      expect(n.sshPort).toBe(22);
    }
    expect(c.nodes[0]?.hostKey).not.toBe(c.nodes[1]?.hostKey); // per node, not baked in the image
    const stack = fs.readFileSync(c.stackConfigPath, "utf8");
    expect(stack).toContain(`host: "${c.nodes[1]?.mgmtAddress}"`);
    expect(stack).toContain(`hostKey: "${c.nodes[0]?.hostKey}"`);
    expect(stack).toContain(
      `- {rail: 1, iface: "fabric1", netdev: "enP2p1s0f1np1", address: "${c.nodes[1]?.rails[1]?.address}"}`,
    );
    expect(stack).toContain('rdmaFixture: "sysfs-spark"');
    expect(stack).toContain(`sparkform:sshKeyPath: "${c.sshKeyPath}"`);
  });

  it("`sim up` a second time changes nothing and returns the same cluster", async () => {
    const again = await simUp({});
    expect(again.runId).toBe(c.runId);
    expect(again.nodes).toEqual(c.nodes);
  });

  it("ssh spark-1 hostname prints spark-1 under strict host key checking; a changed key is refused", async () => {
    const config = fs.readFileSync(c.sshConfigPath, "utf8");
    expect(config).toMatch(/StrictHostKeyChecking yes/);
    expect(config).not.toMatch(/StrictHostKeyChecking (no|accept-new)/);
    const ok = await ssh("spark-1", "hostname");
    expect(ok.stderr).toBe("");
    expect(ok.stdout.trim()).toBe("spark-1");
    expect((await ssh("spark-2", "hostname")).stdout.trim()).toBe("spark-2");

    // The node gets a new host key (as after a reinstall, or an impostor): ssh must refuse.
    const swap = (cmd: string) =>
      simExec("spark-1", ["sh", "-ec", `${cmd}; systemctl restart ssh.service`]);
    const k = "/etc/ssh/ssh_host_ed25519_key";
    expect(
      (
        await swap(
          `mv ${k} ${k}.orig && mv ${k}.pub ${k}.pub.orig && ssh-keygen -q -t ed25519 -N '' -f ${k}`,
        )
      ).exitCode,
    ).toBe(0);
    try {
      const refused = await ssh("spark-1", "hostname");
      expect(refused.exitCode).toBe(255);
      expect(refused.stdout).toBe("");
      expect(refused.stderr).toMatch(/REMOTE HOST IDENTIFICATION HAS CHANGED/);
      expect(refused.stderr).toMatch(/Host key verification failed/);
    } finally {
      expect((await swap(`mv ${k}.orig ${k} && mv ${k}.pub.orig ${k}.pub`)).exitCode).toBe(0);
    }
    expect((await ssh("spark-1", "hostname")).stdout.trim()).toBe("spark-1");
  });

  it("as spark over plain non-login ssh, systemd-run --user starts a unit systemctl --user reports active", async () => {
    const start = await ssh("spark-1", "systemd-run --user --unit=probe sleep 60");
    expect(start.exitCode, start.stderr).toBe(0);
    const active = await ssh("spark-1", "systemctl --user is-active probe");
    expect(active.stdout.trim()).toBe("active");
    const env = await ssh(
      "spark-1",
      'echo "$XDG_RUNTIME_DIR $(id -un) $(loginctl show-user spark -p Linger --value)"',
    );
    expect(env.stdout.trim()).toBe("/run/user/1000 spark yes");
    await ssh("spark-1", "systemctl --user stop probe");
  });

  it("spark-1 reaches spark-2's fabric address (TCP round trip measured, jumbo MTU); the control node cannot", async () => {
    const peer = c.nodes[1]!.fabricAddress;
    const rtt = await tcpRtt("spark-1", peer);
    expect(rtt.error).toBeNull();
    expect(rtt.samples).toBe(10);
    expect(rtt.banner).toMatch(/^SSH-2\.0-OpenSSH/);
    expect(rtt.p50Us).toBeGreaterThan(0);
    expect(rtt.p50Us).toBeLessThan(50_000);
    console.info(
      `fabric TCP RTT spark-1 → spark-2 (${peer}): p50 ${rtt.p50Us} µs, min ${rtt.minUs} µs`,
    );

    const jumbo = await simExec("spark-1", [
      "ping",
      "-c",
      "1",
      "-W",
      "2",
      "-M",
      "do",
      "-s",
      "8972",
      peer,
    ]);
    expect(jumbo.exitCode, jumbo.stdout + jumbo.stderr).toBe(0);

    // From the host: no route (an `unreachable` route, so nothing leaks to the default gateway).
    const route = await runRaw("ip", ["route", "get", peer]);
    expect(route.stdout + route.stderr).not.toContain(c.mgmtBridge);
    for (const n of c.nodes) {
      const t0 = Date.now();
      expect(["EHOSTUNREACH", "ENETUNREACH"]).toContain(await hostConnect(n.fabricAddress, 22));
      expect(Date.now() - t0).toBeLessThan(2000);
    }
    // The mgmt side is reachable from the host, as it should be.
    expect(await hostConnect(c.nodes[1]!.mgmtAddress, 22)).toBe("connected");
  });

  it("`sim link spark-1 spark-2 down` breaks the fabric and `up` restores it", async () => {
    const peer = c.nodes[1]!.fabricAddress;
    const down = await cli("link", "spark-1", "spark-2", "down");
    expect(down.exitCode, down.stderr).toBe(0);
    const broken = await tcpRtt("spark-1", peer);
    expect(broken.samples).toBe(0);
    expect(broken.error).toMatch(/unreachable|timed out/i);
    const st = await simStatus();
    expect(st.nodes.map((n) => n.fabric.state)).toEqual(["DOWN", "DOWN"]);

    const up = await cli("link", "spark-1", "spark-2", "up");
    expect(up.exitCode, up.stderr).toBe(0);
    let restored = await tcpRtt("spark-1", peer);
    for (let i = 0; i < 10 && restored.error; i++) restored = await tcpRtt("spark-1", peer);
    expect(restored.error).toBeNull();
    expect(restored.samples).toBe(10);
  });

  it("a node's /sys/class/net lists its own interfaces (mgmt0, fabric0, fabric1), not the host's", async () => {
    const r = await ssh("spark-1", "ls /sys/class/net; cat /sys/class/net/fabric1/mtu");
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.trim().split("\n")).toEqual(["fabric0", "fabric1", "lo", "mgmt0", "9000"]);
  });

  it("`sim link … down --rail 1` cuts rail 1 only; rail 0 keeps working; `up --rail 1` restores it", async () => {
    const rail1 = c.nodes[1]!.rails[1]!.address.split("/")[0] as string;
    expect((await tcpRtt("spark-1", rail1)).error).toBeNull();
    const jumbo = await simExec("spark-1", [
      "ping",
      "-c",
      "1",
      "-W",
      "2",
      "-M",
      "do",
      "-s",
      "8972",
      rail1,
    ]);
    expect(jumbo.exitCode, jumbo.stdout + jumbo.stderr).toBe(0);

    const down = await cli("link", "spark-1", "spark-2", "down", "--rail", "1");
    expect(down.exitCode, down.stderr).toBe(0);
    expect(down.stdout.trim()).toBe("fabric spark-1 <-> spark-2 rail 1 down");
    expect((await tcpRtt("spark-1", rail1)).error).toMatch(/unreachable|timed out/i);
    expect((await tcpRtt("spark-1", c.nodes[1]!.fabricAddress)).error).toBeNull();
    const st = await simStatus();
    expect(st.cutLinks).toEqual(["spark-1|spark-2@1"]);
    expect(st.nodes.map((n) => n.rails.map((r) => r.state))).toEqual([
      ["UP", "DOWN"],
      ["UP", "DOWN"],
    ]);

    const up = await cli("link", "spark-1", "spark-2", "up", "--rail", "1");
    expect(up.exitCode, up.stderr).toBe(0);
    let restored = await tcpRtt("spark-1", rail1);
    for (let i = 0; i < 10 && restored.error; i++) restored = await tcpRtt("spark-1", rail1);
    expect(restored.error).toBeNull();
    expect((await simStatus()).cutLinks).toEqual([]);
  });

  it("`sim stop spark-2` makes ssh fail fast with a clear error; `sim start` brings it back, same host key", async () => {
    const stop = await cli("stop", "spark-2");
    expect(stop.exitCode, stop.stderr).toBe(0);
    const t0 = Date.now();
    const failed = await ssh("spark-2", "hostname");
    const took = Date.now() - t0;
    expect(failed.exitCode).toBe(255);
    expect(failed.stderr).toMatch(
      /connect to host [\d.]+ port 22: (No route to host|Connection timed out)/,
    );
    expect(took).toBeLessThan(8000);
    console.info(`ssh to a stopped node failed in ${took} ms: ${failed.stderr.trim()}`);
    const status = await cli("status", "--json");
    const st = JSON.parse(status.stdout) as Awaited<ReturnType<typeof simStatus>>;
    expect(status.exitCode).toBe(1); // not healthy
    expect(st.nodes.find((n) => n.name === "spark-2")).toMatchObject({
      running: false,
      sshReachable: false,
    });
    expect(st.nodes.find((n) => n.name === "spark-1")).toMatchObject({
      running: true,
      sshReachable: true,
    });

    const start = await cli("start", "spark-2");
    expect(start.exitCode, start.stderr).toBe(0);
    expect((await ssh("spark-2", "hostname")).stdout.trim()).toBe("spark-2");
    const healthy = await cli("status");
    expect(healthy.exitCode, healthy.stdout).toBe(0);
  });

  it("`sim down` leaves no netns, veth, bridge, mount, route or container process behind", async () => {
    const id = c.runId;
    const down = await cli("down");
    expect(down.exitCode, down.stderr).toBe(0);
    expect((await listNetns()).filter((n) => n.includes(id))).toEqual([]);
    expect((await listLinks()).filter((l) => l.includes(id))).toEqual([]);
    expect(nspawnProcesses().filter((p) => p.machine.includes(id))).toEqual([]);
    expect(
      listMounts().filter((m) => m.source.includes(id) || m.target.startsWith(stateDir)),
    ).toEqual([]);
    expect((await listSimRoutes()).filter((r) => c.railSubnets.includes(r.dst ?? ""))).toEqual([]);
    const ps = await runRaw("ps", ["-eo", "pid,args"]);
    expect(ps.stdout).not.toContain(`sf-${id}-`);
    expect(fs.existsSync(path.join(stateDir, "sim", "cluster.json"))).toBe(false);
    // Idempotent.
    const again = await cli("down");
    expect(again.exitCode).toBe(0);
    expect(again.stdout.trim()).toBe("nothing to remove");
  });
});
