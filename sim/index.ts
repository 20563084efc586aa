// The simulated Spark cluster: the typed API behind `sparkform sim <verb>` (see README.md).
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { runRaw, type RunResult } from "./exec";
import { ensureImage } from "./image";
import { withLock } from "./lock";
import {
  createNetwork,
  chooseSubnets,
  controlHost,
  destroyNetwork,
  fabricHost,
  fabricOperState,
  hostIn,
  listLinks,
  listNetns,
  listSimRoutes,
  cutKey,
  mgmtHost,
  nodeRails,
  railCount,
  railsSelected,
  railSubnets,
  ringEnd,
  ringOf,
  setFabricLink,
  shapeRail,
  shapeRails,
} from "./network";
import {
  execIn,
  killCgroupProcs,
  leaderPid,
  listMounts,
  nodePid,
  nspawnProcesses,
  overlaySupported,
  prepareRoot,
  releaseRoot,
  removeCgroups,
  startContainer,
  stopContainer,
  waitBooted,
  writeNodeFiles,
  type ExecOptions,
} from "./node";
import {
  ensureDir,
  fabricIface,
  fabricLineMbit,
  fabricMtu,
  mgmtIface,
  railIface,
  globalLockPath,
  names,
  simNamePattern,
  simStateDir,
  usingDefaultStateDir,
} from "./paths";
import { ensureHostPrerequisites, requireRoot } from "./prereqs";
import { parseTcpRtt, tcpRttArgv, type TcpRtt } from "./probe";
import {
  closeMasters,
  hostKeyFromPub,
  makeControlKey,
  sshFiles,
  sshRun,
  writeSshFiles,
} from "./ssh";
import { repoStackFile, writeStackFile } from "./stack";
import {
  clusterPath,
  isOrphanOrOurs,
  lockPath,
  readRegistry,
  readSimCluster,
  readState,
  removeRegistry,
  statePath,
  writeRegistry,
  writeSimCluster,
  writeState,
  type NodeRuntime,
  type SimCluster,
  type SimNode,
  type SimState,
} from "./state";
import { toolchain, toolchainBuildScript } from "./toolchain";

export type { SimCluster, SimNode, SimRail, SimToolchain } from "./state";
export type { TcpRtt } from "./probe";
export { readSimCluster } from "./state";
export { renderStackConfig } from "./stack";

export type Log = (line: string) => void;

const defaultLog: Log = (line) => {
  if (process.env.SPARKFORM_SIM_QUIET !== "1") process.stderr.write(`${line}\n`);
};

export const maxNodes = 4;

export interface SimUpOptions {
  /** How many nodes (2–4, default 2; a ring's three). */
  nodes?: number;
  /**
   * The fabric a ring (three nodes, each pair its own cable and /24; network.ts ringCables)
   * instead of a cable pair or a switch. Default: no.
   */
  ring?: boolean;
  log?: Log;
}

/**
 * Brings the cluster up (or, when it is already up, returns it unchanged): builds or reuses the
 * cached image, makes the networks, boots the nodes, writes cluster.json, the ssh files and the
 * stack config.
 */
export async function simUp(opts: SimUpOptions = {}): Promise<SimCluster> {
  const log = opts.log ?? defaultLog;
  const ring = opts.ring === true;
  const count = opts.nodes ?? (ring ? 3 : 2);
  if (!Number.isInteger(count) || count < 2 || count > maxNodes) {
    throw new Error(`sim: --nodes must be an integer from 2 to ${maxNodes} (got ${opts.nodes})`);
  }
  if (ring && count !== 3) {
    throw new Error(
      `sim: --ring is three nodes (each node's two rails cabled to the other two), not ${count}: use --nodes 3, or no --ring for a switch`,
    );
  }
  await ensureHostPrerequisites({ install: true, log });
  const dir = ensureDir(simStateDir());
  return withLock(lockPath(), "sim state", async () => {
    const existing = readState();
    if (existing) {
      const c = readSimCluster();
      const alive = await networkAlive(existing);
      if (existing.phase === "ready" && c?.runId === existing.runId && !alive) {
        log(
          `sim: run ${existing.runId} is recorded but its networks are gone (host rebooted?); recreating`,
        );
      } else if (existing.phase === "ready" && c?.runId === existing.runId) {
        if (opts.nodes !== undefined && existing.nodeCount !== count) {
          throw new Error(
            `sim: already up with ${existing.nodeCount} nodes (run ${existing.runId}); run \`sim down\` first to change that`,
          );
        }
        if (opts.ring !== undefined && (existing.ring === true) !== ring) {
          throw new Error(
            `sim: already up ${existing.ring ? "as a ring" : "without a ring"} (run ${existing.runId}); run \`sim down\` first to change that`,
          );
        }
        // A cluster made before its rails had a line rate gets it now (`replace`: idempotent),
        // before the stack file below says so.
        await shapeRails(existing);
        // The stack file is rewritten every time: its settings may be newer than the run.
        writeStackFile(path.join(existing.stateDir, "Pulumi.local.yaml"), c);
        if (c.stackConfigPath !== path.join(existing.stateDir, "Pulumi.local.yaml")) {
          writeStackFile(c.stackConfigPath, c);
        }
        log(`sim: already up (run ${existing.runId}, ${c.nodes.length} nodes); nothing changed`);
        for (const n of existing.nodes) {
          if (!nodePid(n)) log(`sim: ${n.name} is stopped; \`sim start ${n.name}\` boots it`);
        }
        return c;
      }
      if (existing.phase !== "ready") log(`sim: removing the unfinished run ${existing.runId}`);
      await teardown(existing, log);
    }
    const started = Date.now();
    const image = await ensureImage(log);
    let state: SimState | undefined;
    try {
      state = await withLock(globalLockPath, "network", async () => {
        const runId = await newRunId();
        // A ring's subnets are its cables', one per pair of nodes.
        const subnets = ring ? await chooseSubnets(runId, count) : await chooseSubnets(runId);
        writeRegistry({
          runId,
          stateDir: dir,
          pid: process.pid,
          mgmtSubnet: subnets.mgmt,
          fabricSubnet: subnets.fabric,
          railSubnets: subnets.rails,
        });
        const s = initialState(runId, dir, count, image.key, image.rootfs, subnets, ring);
        writeState(s);
        log(
          `sim: run ${runId}: mgmt ${s.mgmtSubnet} on ${s.bridge}, fabric rails ${subnets.rails.join(", ")}`,
        );
        await createNetwork(s);
        writeState(s);
        return s;
      });
      const c = await bootCluster(state, log);
      log(`sim: up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return c;
    } catch (e) {
      if (state && process.env.SPARKFORM_SIM_KEEP_ON_FAILURE !== "1") {
        log("sim: up failed; removing what it made (SPARKFORM_SIM_KEEP_ON_FAILURE=1 keeps it)");
        await teardown(state, log).catch((err: unknown) => log(`sim: cleanup: ${String(err)}`));
      }
      throw e;
    }
  });
}

/** Whether a recorded run's bridge and namespaces still exist (they do not survive a reboot). */
async function networkAlive(s: SimState): Promise<boolean> {
  const links = new Set(await listLinks());
  const netns = new Set(await listNetns());
  return links.has(s.bridge) && s.nodes.every((n) => netns.has(n.netns));
}

async function newRunId(): Promise<string> {
  const used = new Set(readRegistry().map((e) => e.runId));
  for (const l of [...(await listLinks()), ...(await listNetns())]) {
    const m = simNamePattern.exec(l);
    if (m?.[1]) used.add(m[1]);
  }
  for (;;) {
    const id = randomBytes(3).toString("hex");
    if (!used.has(id)) return id;
  }
}

function initialState(
  runId: string,
  dir: string,
  count: number,
  imageKey: string,
  imageRootfs: string,
  subnets: { mgmt: string; fabric: string; rails: string[] },
  ring = false,
): SimState {
  const forced = process.env.SPARKFORM_SIM_ROOT_MODE;
  const rootMode = forced === "copy" || !overlaySupported() ? "copy" : "overlay";
  const nodes: NodeRuntime[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `spark-${i}`;
    const nd = path.join(dir, "nodes", name);
    nodes.push({
      name,
      index: i,
      machine: names.machine(runId, name),
      netns: names.nodeNetns(runId, i),
      hostVeth: names.hostVeth(runId, i),
      root: path.join(nd, "root"),
      upper: rootMode === "overlay" ? path.join(nd, "upper") : undefined,
      work: rootMode === "overlay" ? path.join(nd, "work") : undefined,
      mounted: false,
      consoleLog: path.join(nd, "console.log"),
    });
  }
  return {
    runId,
    stateDir: dir,
    phase: "creating",
    nodeCount: count,
    imageKey,
    imageRootfs,
    rootMode,
    mgmtSubnet: subnets.mgmt,
    fabricSubnet: subnets.fabric,
    railSubnets: subnets.rails,
    ...(ring ? { ring: true } : {}),
    controlAddress: hostIn(subnets.mgmt, controlHost),
    bridge: names.bridge(runId),
    fabricNetns: undefined,
    cutLinks: [],
    controlPathDir: `/run/sparkform/cm-${runId}`,
    nodes,
  };
}

function hostsFile(s: SimState, self: NodeRuntime): string {
  const lines = [
    "127.0.0.1\tlocalhost",
    `127.0.1.1\t${self.name}`,
    "::1\tlocalhost ip6-localhost ip6-loopback",
    "ff02::1\tip6-allnodes",
    "ff02::2\tip6-allrouters",
    `${s.controlAddress}\tcontrol`,
  ];
  for (const n of s.nodes) {
    if (n.name !== self.name) lines.push(`${hostIn(s.mgmtSubnet, mgmtHost(n.index))}\t${n.name}`);
  }
  return `${lines.join("\n")}\n`;
}

async function bootCluster(s: SimState, log: Log): Promise<SimCluster> {
  const f = sshFiles(s.stateDir);
  const publicKey = await makeControlKey(f, `sparkform-sim-${s.runId}`);
  fs.rmSync(path.join(s.stateDir, "nodes"), { recursive: true, force: true });
  for (const n of s.nodes) {
    await prepareRoot(s, n);
    writeState(s);
    writeNodeFiles(n, { hostname: n.name, hosts: hostsFile(s, n), authorizedKey: publicKey });
  }
  const t0 = Date.now();
  for (const n of s.nodes) n.nspawnPid = startContainer(n);
  writeState(s);
  const leaders = await Promise.all(s.nodes.map((n) => waitBooted(n, n.nspawnPid as number)));
  log(`sim: ${s.nodes.length} nodes booted in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const nodes: SimNode[] = s.nodes.map((n) => ({
    name: n.name,
    mgmtAddress: hostIn(s.mgmtSubnet, mgmtHost(n.index)),
    sshPort: 22,
    user: "spark",
    // A ring node's rail 0 is on the cable to its successor, not on fabricSubnet.
    fabricAddress: s.ring
      ? (nodeRails(s, n.index)[0]?.address.split("/")[0] ?? "")
      : hostIn(s.fabricSubnet, fabricHost(n.index)),
    fabricIface,
    rails: nodeRails(s, n.index),
    hostKey: hostKeyFromPub(
      fs.readFileSync(path.join(n.root, "etc/ssh/ssh_host_ed25519_key.pub"), "utf8"),
    ),
  }));
  writeSshFiles(f, { nodes, controlPathDir: s.controlPathDir });

  const tcIndex = s.nodes.findIndex((n) => n.name === toolchain.node);
  const tcLeader = leaders[tcIndex];
  if (tcLeader) {
    const r = await execIn(tcLeader, ["bash", "-c", toolchainBuildScript], { user: "spark" });
    if (r.exitCode !== 0 || !r.stdout.includes(toolchain.expect)) {
      throw new Error(
        `sim: building the toolchain on ${toolchain.node} failed:\n${r.stdout}${r.stderr}`,
      );
    }
  }

  const writeRepoStack = usingDefaultStateDir() || !!process.env.SPARKFORM_STACK_FILE;
  const stackFile =
    process.env.SPARKFORM_STACK_FILE ||
    (writeRepoStack ? repoStackFile : path.join(s.stateDir, "Pulumi.local.yaml"));
  const cluster: SimCluster = {
    runId: s.runId,
    nodes,
    controlAddress: s.controlAddress,
    sshKeyPath: f.keyPath,
    sshPublicKey: publicKey,
    knownHostsPath: f.knownHostsPath,
    sshConfigPath: f.configPath,
    mgmtSubnet: s.mgmtSubnet,
    mgmtBridge: s.bridge,
    fabricSubnet: s.fabricSubnet,
    railSubnets: railSubnets(s),
    fabricMtu,
    fabricTopology: s.ring ? "ring" : s.nodes.length > 2 ? "switch" : "point-to-point",
    toolchain,
    imageKey: s.imageKey,
    stackConfigPath: stackFile,
    createdAt: new Date().toISOString(),
  };

  // Proof of access the way the control node will use it: the real ssh client, strict checking.
  await Promise.all(
    nodes.map(async (n) => {
      const r = await sshRun(cluster, n.name, "hostname", { extra: ["-o", "ControlPath=none"] });
      if (r.exitCode !== 0 || r.stdout.trim() !== n.name) {
        throw new Error(`sim: ssh ${n.name} hostname failed: ${(r.stderr || r.stdout).trim()}`);
      }
    }),
  );

  writeStackFile(path.join(s.stateDir, "Pulumi.local.yaml"), cluster);
  if (stackFile !== path.join(s.stateDir, "Pulumi.local.yaml")) writeStackFile(stackFile, cluster);
  writeSimCluster(cluster);
  s.phase = "ready";
  writeState(s);
  return cluster;
}

// ---------------------------------------------------------------- down

/** The local Hugging Face endpoint `npm run local` leaves running on the sim's address. */
function stopLocalHub(log: Log): void {
  const pidFile = path.join(path.dirname(simStateDir()), "hub", "endpoint.pid");
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, "utf8").trim());
  try {
    if (Number.isInteger(pid) && pid > 1) process.kill(pid, "SIGTERM");
    log(`sim: stopped the local Hugging Face endpoint (pid ${pid})`);
  } catch {
    // already gone
  }
  fs.rmSync(pidFile, { force: true });
}

export interface SimDownResult {
  removed: string[];
}

/** Stops every node and removes everything the sim made for this state dir, plus orphans. */
export async function simDown(opts: { log?: Log } = {}): Promise<SimDownResult> {
  const log = opts.log ?? defaultLog;
  requireRoot();
  stopLocalHub(log);
  const dir = ensureDir(simStateDir());
  return withLock(lockPath(), "sim state", async () => {
    const removed: string[] = [];
    const s = readState();
    if (s) removed.push(...(await teardown(s, log)));
    removed.push(...(await sweepOrphans(dir)));
    for (const f of [clusterPath(), statePath(), path.join(dir, "Pulumi.local.yaml")]) {
      fs.rmSync(f, { force: true });
    }
    return { removed };
  });
}

async function teardown(s: SimState, log: Log): Promise<string[]> {
  const removed: string[] = [];
  const f = sshFiles(s.stateDir);
  await closeMasters(
    f.configPath,
    s.nodes.map((n) => n.name),
  );
  fs.rmSync(s.controlPathDir, { recursive: true, force: true });
  const stopped = await Promise.all(s.nodes.map((n) => stopContainer(n, 15_000)));
  s.nodes.forEach((n, i) => {
    if (stopped[i]) removed.push(`container ${n.machine}`);
  });
  for (const n of s.nodes) {
    if (await releaseRoot(n.root)) removed.push(`mount ${n.root}`);
  }
  removed.push(
    ...(await destroyNetwork({
      bridge: s.bridge,
      netns: [
        ...s.nodes.map((n) => n.netns),
        ...railSubnets(s).map((_, r) => s.railNetns?.[r] ?? names.railNetns(s.runId, r)),
      ],
      hostVeths: s.nodes.map((n) => n.hostVeth),
      fabricSubnet: s.fabricSubnet,
      railSubnets: railSubnets(s),
    })),
  );
  removeRegistry(s.runId);
  const nodesDir = path.join(s.stateDir, "nodes");
  if (fs.existsSync(nodesDir)) {
    // --one-file-system: never descend into a root that somehow is still mounted.
    await runRaw("rm", ["-rf", "--one-file-system", nodesDir]);
  }
  fs.rmSync(f.dir, { recursive: true, force: true });
  const c = readSimCluster();
  if (c?.runId === s.runId && fs.existsSync(c.stackConfigPath)) {
    const text = fs.readFileSync(c.stackConfigPath, "utf8");
    if (text.includes(`# run ${s.runId},`)) writeStackFile(c.stackConfigPath, undefined);
  }
  fs.rmSync(statePath(), { force: true });
  fs.rmSync(clusterPath(), { force: true });
  if (removed.length) log(`sim: removed ${removed.length} things of run ${s.runId}`);
  return removed;
}

/** Removes sim resources (by name prefix) whose run is gone or belongs to this state dir. */
async function sweepOrphans(ourDir: string): Promise<string[]> {
  const removed: string[] = [];
  const idOf = (name: string) => simNamePattern.exec(name)?.[1];
  const mine = (name: string) => {
    const id = idOf(name);
    return id !== undefined && isOrphanOrOurs(id, ourDir);
  };
  for (const p of nspawnProcesses()) {
    if (!mine(p.machine)) continue;
    const fake: NodeRuntime = {
      name: p.machine,
      index: 0,
      machine: p.machine,
      netns: "",
      hostVeth: "",
      root: "",
      mounted: false,
      consoleLog: "",
      nspawnPid: p.pid,
    };
    await stopContainer(fake, 10_000);
    removed.push(`container ${p.machine}`);
  }
  for (const m of listMounts()) {
    if (m.fstype === "overlay" && mine(m.source)) {
      if (await releaseRoot(m.target)) removed.push(`mount ${m.target}`);
    }
  }
  const netns = (await listNetns()).filter(mine);
  const links = (await listLinks()).filter(mine);
  const liveSubnets = new Set(
    readRegistry()
      .filter((e) => !isOrphanOrOurs(e.runId, ourDir))
      .flatMap((e) => [e.fabricSubnet, ...(e.railSubnets ?? [])]),
  );
  removed.push(...(await destroyNetwork({ netns, hostVeths: links })));
  for (const r of await listSimRoutes()) {
    if (r.dst && !liveSubnets.has(r.dst)) {
      const x = await runRaw("ip", ["route", "del", "unreachable", r.dst, "proto", "245"]);
      if (x.exitCode === 0) removed.push(`route unreachable ${r.dst}`);
    }
  }
  for (const h of [
    "/sys/fs/cgroup/sparkform",
    "/sys/fs/cgroup/systemd/sparkform",
    "/sys/fs/cgroup/unified/sparkform",
  ]) {
    if (!fs.existsSync(h)) continue;
    for (const m of fs.readdirSync(h)) {
      if (mine(m)) {
        killCgroupProcs(m);
        removeCgroups(m);
      }
    }
  }
  for (const e of readRegistry()) {
    if (isOrphanOrOurs(e.runId, ourDir)) removeRegistry(e.runId);
  }
  return removed;
}

// ---------------------------------------------------------------- status

export interface SimNodeStatus {
  name: string;
  running: boolean;
  systemState?: string;
  sshReachable: boolean;
  sshError?: string;
  linger?: boolean;
  userManager?: string;
  /** Rail 0 (as before rails). */
  fabric: { iface: string; state: string; peer?: string; rtt?: TcpRtt };
  /** Every rail: its interface's state and the TCP RTT to the peer's address on it. */
  rails: { rail: number; iface: string; state: string; peer?: string; rtt?: TcpRtt }[];
}

export interface SimStatus {
  up: boolean;
  runId?: string;
  stateDir: string;
  phase?: string;
  cutLinks: string[];
  nodes: SimNodeStatus[];
}

/** Measures each node: running, ssh reachable (real ssh), linger, user manager, fabric + RTT. */
export async function simStatus(): Promise<SimStatus> {
  requireRoot();
  const s = readState();
  const c = readSimCluster();
  if (!s || !c || c.runId !== s.runId) {
    return {
      up: false,
      stateDir: simStateDir(),
      phase: s?.phase,
      runId: s?.runId,
      cutLinks: [],
      nodes: [],
    };
  }
  const nodes = await Promise.all(
    s.nodes.map(async (n, i): Promise<SimNodeStatus> => {
      const pid = nodePid(n);
      const leader = pid ? leaderPid(pid) : undefined;
      const peer = c.nodes[(i + 1) % c.nodes.length];
      // A ring's rails go to different peers: each rail's is the node at its cable's other end.
      const cables = ringOf(s);
      const railPeer = (rail: number) => {
        const e = cables && ringEnd(cables, n.index, rail);
        return e
          ? c.nodes.find((x) => x.name === s.nodes.find((m) => m.index === e.peer)?.name)
          : undefined;
      };
      const st: SimNodeStatus = {
        name: n.name,
        running: !!leader,
        sshReachable: false,
        fabric: { iface: fabricIface, state: await fabricOperState(n.netns), peer: peer?.name },
        rails: await Promise.all(
          Array.from({ length: railCount(s) }, async (_, rail) => ({
            rail,
            iface: railIface(rail),
            state: await fabricOperState(n.netns, railIface(rail)),
            peer: (railPeer(rail) ?? peer)?.name,
          })),
        ),
      };
      const ssh = await sshRun(c, n.name, "true", {
        extra: ["-o", "ControlPath=none", "-o", "ConnectTimeout=3"],
        timeoutMs: 10_000,
      });
      st.sshReachable = ssh.exitCode === 0;
      if (!st.sshReachable) st.sshError = (ssh.stderr || ssh.stdout).trim().split("\n").pop();
      if (leader) {
        const sys = await execIn(leader, ["systemctl", "is-system-running"]);
        st.systemState = sys.stdout.trim();
        const linger = await execIn(leader, [
          "loginctl",
          "show-user",
          "spark",
          "--property=Linger",
          "--value",
        ]);
        st.linger = linger.stdout.trim() === "yes";
        const um = await execIn(leader, ["systemctl", "is-active", "user@1000.service"]);
        st.userManager = um.stdout.trim();
        if (peer && peer.name !== n.name) {
          for (const r of st.rails) {
            const far = railPeer(r.rail);
            const mine = c.nodes[i]?.rails?.[r.rail]?.subnet;
            const addr = far
              ? (far.rails.find((x) => x.subnet === mine)?.address.split("/")[0] ??
                far.fabricAddress)
              : (peer.rails?.[r.rail]?.address.split("/")[0] ?? peer.fabricAddress);
            r.rtt = parseTcpRtt(
              await execIn(leader, tcpRttArgv(addr, 22, 10), { timeoutMs: 30_000 }),
            );
          }
          st.fabric.rtt = st.rails[0]?.rtt;
        }
      }
      return st;
    }),
  );
  return {
    up: true,
    runId: s.runId,
    stateDir: s.stateDir,
    phase: s.phase,
    cutLinks: s.cutLinks,
    nodes,
  };
}

// ---------------------------------------------------------------- faults and exec

function loadReady(): { s: SimState; c: SimCluster } {
  const s = readState();
  const c = readSimCluster();
  if (!s || !c || c.runId !== s.runId) {
    throw new Error(`sim: no simulated cluster is up (state dir ${simStateDir()}); run \`sim up\``);
  }
  return { s, c };
}

function findNode(s: SimState, node: string): NodeRuntime {
  const n = s.nodes.find((x) => x.name === node);
  if (!n)
    throw new Error(
      `sim: no node ${JSON.stringify(node)} (nodes: ${s.nodes.map((x) => x.name).join(", ")})`,
    );
  return n;
}

/** Runs argv as root (or `opts.user`) inside a running node; never throws for a non-zero exit. */
export async function simExec(
  node: string,
  argv: readonly string[],
  opts: ExecOptions = {},
): Promise<RunResult> {
  requireRoot();
  if (argv.length === 0) throw new Error("sim: exec needs a command");
  const { s } = loadReady();
  const n = findNode(s, node);
  const pid = nodePid(n);
  const leader = pid ? leaderPid(pid) : undefined;
  if (!leader) throw new Error(`sim: ${node} is stopped; \`sim start ${node}\` first`);
  return execIn(leader, argv, opts);
}

/** Powers a node off (cleanly; killed after a grace period). Its disk and addresses stay. */
export async function simStop(node: string): Promise<void> {
  requireRoot();
  await withLock(lockPath(), "sim state", async () => {
    const { s, c } = loadReady();
    const n = findNode(s, node);
    await closeMasters(c.sshConfigPath, [node]);
    await stopContainer(n);
    n.nspawnPid = undefined;
    writeState(s);
    await powerNics(s, n, "down");
  });
}

/**
 * A powered-off node is gone from both networks: its NICs go down (the fabric peer loses
 * carrier) and the host forgets its MAC, so ssh gets "No route to host" once ARP gives up.
 */
async function powerNics(s: SimState, n: NodeRuntime, state: "up" | "down"): Promise<void> {
  await runRaw("ip", ["-n", n.netns, "link", "set", mgmtIface, state]);
  const cables = ringOf(s);
  for (let rail = 0; rail < railCount(s); rail++) {
    // A ring's cut is keyed by the pair alone: the peer on this rail's cable.
    const peer = cables && s.nodes.find((m) => m.index === ringEnd(cables, n.index, rail)?.peer);
    const cut = peer
      ? s.cutLinks.includes(cutKey(n.name, peer.name, 0))
      : !s.fabricNetns &&
        s.cutLinks.some((k) => {
          const [pair, r] = k.split("@");
          return Number(r ?? 0) === rail && (pair ?? "").split("|").includes(n.name);
        });
    if (state === "down" || !cut)
      await runRaw("ip", ["-n", n.netns, "link", "set", railIface(rail), state]);
  }
  if (state === "down") {
    await runRaw("ip", [
      "neigh",
      "flush",
      "to",
      hostIn(s.mgmtSubnet, mgmtHost(n.index)),
      "dev",
      s.bridge,
    ]);
  }
}

/** Boots a stopped node again (same root, same host key). */
export async function simStart(node: string): Promise<void> {
  requireRoot();
  await withLock(lockPath(), "sim state", async () => {
    const { s, c } = loadReady();
    const n = findNode(s, node);
    if (nodePid(n)) return;
    await powerNics(s, n, "up");
    n.nspawnPid = startContainer(n);
    writeState(s);
    await waitBooted(n, n.nspawnPid);
    const key = hostKeyFromPub(
      fs.readFileSync(path.join(n.root, "etc/ssh/ssh_host_ed25519_key.pub"), "utf8"),
    );
    const want = c.nodes.find((x) => x.name === node)?.hostKey;
    if (key !== want)
      throw new Error(`sim: ${node} came back with a different host key than cluster.json records`);
  });
}

/**
 * Cuts (`down`) or restores (`up`) the fabric between two nodes (or a node and the switch), on
 * one rail or, without `rail`, on every rail.
 */
export async function simLink(
  a: string,
  b: string,
  state: "up" | "down",
  rail?: number,
): Promise<void> {
  requireRoot();
  if (state !== "up" && state !== "down")
    throw new Error(`sim: link state must be up or down (got ${String(state)})`);
  await withLock(lockPath(), "sim state", async () => {
    const { s } = loadReady();
    await setFabricLink(s, a, b, state, rail);
    writeState(s);
  });
}

/**
 * Shapes a node's end of a rail to `mbit` Mbit/s (a slow or badly seated port), or back to the
 * line rate (`mbit` undefined). Every rail unless `rail` is given.
 */
export async function simRate(
  node: string,
  mbit: number | undefined,
  rail?: number,
): Promise<void> {
  requireRoot();
  await withLock(lockPath(), "sim state", async () => {
    const { s } = loadReady();
    const n = findNode(s, node);
    for (const r of railsSelected(s, rail)) await shapeRail(n.netns, r, mbit ?? fabricLineMbit);
  });
}

/** Runs a shell command on a node over ssh as the control node does (for tests and tools). */
export function simSsh(node: string, command: string, extra: string[] = []): Promise<RunResult> {
  const { c } = loadReady();
  return sshRun(c, node, command, { extra });
}
