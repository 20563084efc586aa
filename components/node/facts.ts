// The SparkNode fact sheet: its type, and the parser that checks what native/node/facts.sh
// printed on a node. That output is untrusted input on the control node (a compromised or
// merely odd node can print anything), so it is validated strictly against the schema beside
// the program (native/node/facts.schema.json): known fields only, bounded sizes, and "null only
// together with a reason".

import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { FACTS_PROGRAM } from "./commands";

/** Bump together with SCHEMA_VERSION in native/node/facts.sh and facts.schema.json's const. */
export const FACTS_SCHEMA_VERSION = 1;

type Reason = string | null;

export interface SparkNodeFacts {
  schemaVersion: 1;
  /** Where sysfs was read from: "/sys", or a fixture tree (simulated nodes). */
  sysfsRoot: string;
  hostname: string | null;
  arch: string | null;
  kernel: string | null;
  distro: {
    id: string | null;
    versionId: string | null;
    prettyName: string | null;
    reason: Reason;
  };
  /** From /proc/meminfo (nvidia-smi prints [N/A] on GB10's unified memory). */
  memory: { totalBytes: number | null; availableBytes: number | null; reason: Reason };
  cpu: {
    count: number | null;
    /** The faster cluster (GB10: 5-9,15-19), ascending; null when sysfs does not tell. */
    performanceCores: number[] | null;
    source: "cpu_capacity" | "cpufreq/cpuinfo_max_freq" | null;
    reason: Reason;
  };
  cuda: { version: string | null; home: string | null; source: string | null; reason: Reason };
  nvidiaDriver: { version: string | null; reason: Reason };
  rdma: { devices: RdmaPort[]; reason: Reason };
  netdevs: Netdev[];
  disk: DiskFacts[];
}

export interface RdmaPort {
  device: string;
  port: number;
  netdev: string | null;
  state: string | null;
  physState: string | null;
  linkLayer: string | null;
  rate: string | null;
  /** From ibv_devinfo (not in sysfs). */
  activeMtu: number | null;
  pcie: {
    currentLinkWidth: number | null;
    maxLinkWidth: number | null;
    currentLinkSpeed: string | null;
  };
  /** Populated GIDs (non-zero), ascending index. RoCE v2 over IPv4 is at index 3 on a Spark. */
  gids: { index: number; gid: string; type: string | null; netdev: string | null }[];
  reason: Reason;
}

export interface Netdev {
  name: string;
  mac: string | null;
  mtu: number | null;
  speedMbps: number | null;
  operstate: string | null;
  /** No backing device (bridge, veth, …). */
  virtual: boolean;
  /** CIDR addresses; null when not read (fixture sysfs, no iproute2). */
  addresses: string[] | null;
  reason: Reason;
}

export interface DiskFacts {
  /** As requested (may start with ~/). */
  path: string;
  /** The nearest existing directory that was measured. */
  checkedPath: string;
  exists: boolean;
  freeBytes: number | null;
  totalBytes: number | null;
  reason: Reason;
}

/** A fact sheet that failed to parse or validate; `path` is the JSON pointer of the failure. */
export class FactsError extends NodeOutputError {
  override name = "FactsError";
  constructor(node: string, path: string, detail: string) {
    super("fact sheet", node, path, detail);
  }
}

const parseSparkNodeFacts = programJsonParser<SparkNodeFacts>(
  FACTS_PROGRAM,
  (node, path, detail) => new FactsError(node, path, detail),
);

/** Parse and validate facts.sh output from `nodeName`; throws FactsError naming node and path. */
export function parseFacts(stdout: string, nodeName: string): SparkNodeFacts {
  return parseSparkNodeFacts(stdout, nodeName);
}
