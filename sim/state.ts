// What the sim records: cluster.json (the public description other code relies on), state.json
// (the sim's own bookkeeping: pids, namespaces, mounts) and the machine-wide run registry.
import * as fs from "node:fs";
import * as path from "node:path";
import { ensureDir, runRegistryDir, simStateDir } from "./paths";

export interface SimNode {
  /** `spark-1`, `spark-2`, … (also the node's hostname). */
  name: string;
  /** The node's address on the management network (reachable from the control node). */
  mgmtAddress: string;
  sshPort: number;
  user: string;
  /** The node's address on the fabric (reachable only from other nodes). */
  fabricAddress: string;
  fabricIface: string;
  /** Per rail (0, 1): the interface, the address with its prefix, the subnet. Rail 0 = fabricAddress. */
  rails: SimRail[];
  /** The node's SSH host key, `ssh-ed25519 AAAA…` (no comment). */
  hostKey: string;
}

export interface SimRail {
  rail: number;
  iface: string;
  /** `a.b.c.n/24` */
  address: string;
  subnet: string;
}

export interface SimToolchain {
  node: string;
  path: string;
  /** The install's bin directory, to put on PATH directly (no shims). */
  bin: string;
  probe: string;
  expect: string;
}

export interface SimCluster {
  runId: string;
  nodes: SimNode[];
  /** The host's address on the management bridge: servers for the nodes listen here. */
  controlAddress: string;
  sshKeyPath: string;
  sshPublicKey: string;
  knownHostsPath: string;
  sshConfigPath: string;
  mgmtSubnet: string;
  mgmtBridge: string;
  /** Rail 0's subnet (= railSubnets[0]). */
  fabricSubnet: string;
  /** One /24 per rail. */
  railSubnets: string[];
  fabricMtu: number;
  fabricTopology: "point-to-point" | "switch" | "ring";
  toolchain: SimToolchain;
  imageKey: string;
  /** The stack config written for this cluster (see stack.ts). */
  stackConfigPath: string;
  createdAt: string;
}

export interface NodeRuntime {
  name: string;
  index: number;
  machine: string;
  netns: string;
  hostVeth: string;
  /** The node's writable root (an overlay over the image, or a copy of it). */
  root: string;
  upper?: string;
  work?: string;
  mounted: boolean;
  consoleLog: string;
  /** The systemd-nspawn process while the node runs. */
  nspawnPid?: number;
}

export interface SimState {
  runId: string;
  stateDir: string;
  phase: "creating" | "ready";
  nodeCount: number;
  imageKey: string;
  imageRootfs: string;
  rootMode: "overlay" | "copy";
  mgmtSubnet: string;
  fabricSubnet: string;
  /** One /24 per rail (rail 0's is fabricSubnet); absent in states written before rails. */
  railSubnets?: string[];
  /**
   * The fabric is a ring (`sim up --ring`, three nodes): railSubnets are its cables' subnets,
   * one per pair of nodes (network.ts ringCables). Absent: rails on a cable pair or a switch.
   */
  ring?: boolean;
  controlAddress: string;
  bridge: string;
  fabricNetns?: string;
  /** The switch namespace of each rail (N > 2); rail 0's is fabricNetns. */
  railNetns?: string[];
  /** Fabric interfaces administratively cut with `sim link … down`, as "a|b" (rail 0) or "a|b@r". */
  cutLinks: string[];
  controlPathDir: string;
  nodes: NodeRuntime[];
}

export interface RegistryEntry {
  runId: string;
  stateDir: string;
  pid: number;
  mgmtSubnet: string;
  fabricSubnet: string;
  railSubnets?: string[];
}

export const clusterPath = () => path.join(simStateDir(), "cluster.json");
export const statePath = () => path.join(simStateDir(), "state.json");
export const lockPath = () => path.join(simStateDir(), ".lock");

function writeJsonAtomic(file: string, value: unknown): void {
  ensureDir(path.dirname(file));
  const tmp = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  fs.renameSync(tmp, file);
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/** The cluster `sim up` made for this state dir, if any. */
export function readSimCluster(): SimCluster | undefined {
  return readJson<SimCluster>(clusterPath());
}

export function writeSimCluster(c: SimCluster): void {
  writeJsonAtomic(clusterPath(), c);
}

export function readState(): SimState | undefined {
  return readJson<SimState>(statePath());
}

export function writeState(s: SimState): void {
  writeJsonAtomic(statePath(), s);
}

export function registryPath(runId: string): string {
  return path.join(runRegistryDir, `${runId}.json`);
}

export function writeRegistry(e: RegistryEntry): void {
  writeJsonAtomic(registryPath(e.runId), e);
}

export function readRegistry(): RegistryEntry[] {
  if (!fs.existsSync(runRegistryDir)) return [];
  return fs
    .readdirSync(runRegistryDir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => readJson<RegistryEntry>(path.join(runRegistryDir, f)))
    .filter((e): e is RegistryEntry => e !== undefined);
}

export function removeRegistry(runId: string): void {
  fs.rmSync(registryPath(runId), { force: true });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether resources named with `runId` belong to nobody any more: no registry entry, or one whose
 * state dir no longer records that run and whose creator is gone. A run of this state dir is
 * always ours to clean.
 */
export function isOrphanOrOurs(runId: string, ourStateDir: string): boolean {
  const e = readJson<RegistryEntry>(registryPath(runId));
  if (!e) return true;
  if (path.resolve(e.stateDir) === path.resolve(ourStateDir)) return true;
  const theirs = readJson<SimState>(path.join(e.stateDir, "state.json"));
  if (theirs?.runId === runId) return false;
  return !pidAlive(e.pid);
}
