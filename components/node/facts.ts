// The SparkNode fact sheet: its type, its JSON schema, and the parser that checks what
// native/node/facts.sh printed on a node. That output is untrusted input on the control node
// (a compromised or merely odd node can print anything), so it is validated strictly:
// known fields only, bounded sizes, and "null only together with a reason".

import { NodeOutputError, nodeJsonParser } from "../schema/node-json";

/** Bump together with SCHEMA_VERSION in native/node/facts.sh. */
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

// ---- schema ------------------------------------------------------------------------------

const STR = { type: "string", maxLength: 4096 } as const;
const NSTR = { type: ["string", "null"], maxLength: 4096 } as const;
const NAME = { type: "string", minLength: 1, maxLength: 255 } as const;
const NNAME = { type: ["string", "null"], minLength: 1, maxLength: 255 } as const;
const NUINT = { type: ["integer", "null"], minimum: 0 } as const;

function obj(properties: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    type: "object",
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
    ...extra,
  };
}

/** "null only together with a reason": when any of `fields` is null, `reason` is a string. */
function reasonWhenNull(fields: string[]) {
  return {
    allOf: fields.map((f) => ({
      if: { properties: { [f]: { type: "null" } }, required: [f] },
      then: { properties: { reason: { type: "string", minLength: 1 } } },
    })),
  };
}

export const factsSchema = obj({
  schemaVersion: { const: FACTS_SCHEMA_VERSION },
  sysfsRoot: NAME,
  hostname: NNAME,
  arch: NNAME,
  kernel: NNAME,
  distro: obj(
    { id: NNAME, versionId: NNAME, prettyName: NSTR, reason: NSTR },
    reasonWhenNull(["id", "versionId", "prettyName"]),
  ),
  memory: obj(
    { totalBytes: NUINT, availableBytes: NUINT, reason: NSTR },
    reasonWhenNull(["totalBytes", "availableBytes"]),
  ),
  cpu: obj(
    {
      count: { type: ["integer", "null"], minimum: 1, maximum: 4096 },
      performanceCores: {
        type: ["array", "null"],
        items: { type: "integer", minimum: 0, maximum: 4095 },
        maxItems: 4096,
        uniqueItems: true,
      },
      source: { enum: ["cpu_capacity", "cpufreq/cpuinfo_max_freq", null] },
      reason: NSTR,
    },
    reasonWhenNull(["count", "performanceCores"]),
  ),
  cuda: obj(
    {
      version: { type: ["string", "null"], pattern: "^[0-9]+(\\.[0-9]+)*$", maxLength: 32 },
      home: NSTR,
      source: NSTR,
      reason: NSTR,
    },
    reasonWhenNull(["version"]),
  ),
  nvidiaDriver: obj({ version: NNAME, reason: NSTR }, reasonWhenNull(["version"])),
  rdma: obj({
    devices: {
      type: "array",
      maxItems: 64,
      items: obj(
        {
          device: NAME,
          port: { type: "integer", minimum: 1, maximum: 255 },
          netdev: NNAME,
          state: NNAME,
          physState: NNAME,
          linkLayer: NNAME,
          rate: NNAME,
          activeMtu: { enum: [256, 512, 1024, 2048, 4096, null] },
          pcie: obj({ currentLinkWidth: NUINT, maxLinkWidth: NUINT, currentLinkSpeed: NNAME }),
          gids: {
            type: "array",
            maxItems: 512,
            items: obj({
              index: { type: "integer", minimum: 0, maximum: 65535 },
              gid: { type: "string", pattern: "^[0-9a-f]{4}(:[0-9a-f]{4}){7}$" },
              type: NNAME,
              netdev: NNAME,
            }),
          },
          reason: NSTR,
        },
        reasonWhenNull(["activeMtu", "netdev"]),
      ),
    },
    reason: NSTR,
  }),
  netdevs: {
    type: "array",
    maxItems: 1024,
    items: obj(
      {
        name: NAME,
        mac: NNAME,
        mtu: NUINT,
        speedMbps: NUINT,
        operstate: NNAME,
        virtual: { type: "boolean" },
        addresses: { type: ["array", "null"], maxItems: 256, items: NAME },
        reason: NSTR,
      },
      reasonWhenNull(["addresses", "speedMbps"]),
    ),
  },
  disk: {
    type: "array",
    maxItems: 64,
    items: obj(
      {
        path: STR,
        checkedPath: STR,
        exists: { type: "boolean" },
        freeBytes: NUINT,
        totalBytes: NUINT,
        reason: NSTR,
      },
      reasonWhenNull(["freeBytes"]),
    ),
  },
});

/** A fact sheet that failed to parse or validate; `path` is the JSON pointer of the failure. */
export class FactsError extends NodeOutputError {
  override name = "FactsError";
  constructor(node: string, path: string, detail: string) {
    super("fact sheet", node, path, detail);
  }
}

const parseSparkNodeFacts = nodeJsonParser<SparkNodeFacts>(
  factsSchema,
  (node, path, detail) => new FactsError(node, path, detail),
);

/** Parse and validate facts.sh output from `nodeName`; throws FactsError naming node and path. */
export function parseFacts(stdout: string, nodeName: string): SparkNodeFacts {
  return parseSparkNodeFacts(stdout, nodeName);
}
