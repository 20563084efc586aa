// `sparkform:fabric`: per node, its rails (interface, address; optionally the RDMA netdev when it
// differs from the interface), the topology, where RDMA facts come from when a node has no HCA
// (a sysfs fixture, labelled), the GID index and the checks' thresholds. Validated with zod;
// errors name the key and the fix, as components/stack-config.ts does for the rest.
import { z } from "zod";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { DEFAULT_THRESHOLDS, type FabricThresholds } from "./checks";
import { DEFAULT_REFRESH_SECONDS } from "./readings";

/** `sparkform:fabric.probe` when unset: 2000 round trips, 2 s of bulk send, 0.2 s on refresh. */
export const DEFAULT_PROBE = {
  count: 2000,
  seconds: 2,
  refreshSeconds: DEFAULT_REFRESH_SECONDS,
} as const;

const iface = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$/, "is not a network interface name (max 15 chars)");

export const railSchema = z.strictObject({
  rail: z.number().int().min(0).max(7),
  /** The interface carrying the address (a Spark: enp1s0f1np1; the sim: fabric0). */
  iface,
  /** The RDMA device's netdev when it is not `iface` (the sim maps fixture netdevs this way). */
  netdev: iface.optional(),
  /** `a.b.c.d/len`: the node's address on this rail. */
  address: z
    .string()
    .regex(
      /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/,
      "must be an IPv4 address with its prefix, a.b.c.d/len",
    ),
});

const fixtureName = z
  .string()
  .regex(/^sysfs-[a-z0-9-]+$/, 'names a sysfs fixture under test/fixtures, like "sysfs-spark"');

export const fabricConfigSchema = z.strictObject({
  /** point-to-point (2 nodes, cables) or switch (3–4 nodes); default from the node count. */
  topology: z.enum(["point-to-point", "switch"]).optional(),
  /** Per node name, its rails. */
  rails: z.record(z.string(), z.array(railSchema).min(1).max(8)),
  /**
   * RDMA facts for nodes without RDMA devices (simulated nodes): this sysfs fixture; every
   * fact from it is labelled fixture-sourced. Unset on real fabrics.
   */
  rdmaFixture: fixtureName.optional(),
  /** Per node, a different fixture (the variants: sysfs-spark-rocev1, -mtu, -10g). */
  rdmaFixtures: z.record(z.string(), fixtureName).optional(),
  /** The GID index RDMA uses (Spark: 3, RoCE v2 over IPv4). */
  gidIndex: z.number().int().min(0).max(255).default(DEFAULT_THRESHOLDS.gidIndex),
  /**
   * What a rail's throughput is classed against, Gbit/s: the rail's line rate, a fixed fact (the
   * simulated cluster's rails are shaped to it). Default: the port ceiling (min(wire, PCIe)), for
   * the TCP probe times `thresholds.tcpShare`. Never a reading that moves with the host's load.
   */
  referenceGbps: z.number().positive().optional(),
  /** How each rail is probed (native/fabric/rail-rtt-throughput.py); `up` always runs the full probe. */
  probe: z
    .strictObject({
      /** RTT round trips. Default 2000. */
      count: z.number().int().min(10).max(100_000).default(DEFAULT_PROBE.count),
      /** Seconds of bulk send. Default 2. */
      seconds: z.number().min(0.2).max(30).default(DEFAULT_PROBE.seconds),
      /**
       * Seconds of bulk send of a refresh's first reading, at most `seconds`; default 0.2. A
       * refresh probes each rail with this short burst and
       * min(`count`, 200) round trips; a burst that is not healthy is measured again at the
       * full `seconds` and `count` before the rail counts as degraded.
       */
      refreshSeconds: z.number().min(0.1).max(30).default(DEFAULT_PROBE.refreshSeconds),
    })
    .superRefine((p, ctx) => {
      if (p.refreshSeconds <= p.seconds) return;
      ctx.addIssue({
        code: "custom",
        path: ["refreshSeconds"],
        message: `is ${p.refreshSeconds}, longer than probe.seconds (${p.seconds}); a refresh's first burst is the short one: use ${p.seconds} or less`,
      });
    })
    .default(DEFAULT_PROBE),
  thresholds: z
    .strictObject({
      minLinkSpeedMbps: z.number().int().positive().optional(),
      gidType: z.string().min(1).optional(),
      minPcieWidth: z.number().int().min(1).max(32).optional(),
      healthyFraction: z.number().gt(0).max(1).optional(),
      tcpShare: z.number().gt(0).max(1).optional(),
      staleBandGbps: z.strictObject({ min: z.number().min(0), max: z.number().min(0) }).optional(),
      staleMinLinkGbps: z.number().positive().optional(),
    })
    .default({}),
});

export type FabricConfig = z.infer<typeof fabricConfigSchema>;
export type FabricTopology = NonNullable<FabricConfig["topology"]>;
/** `sparkform:fabric`, with `topology` resolved from the node count when not given. */
export type StackFabric = FabricConfig & { topology: FabricTopology };

/** Two nodes are cabled to each other; three or four need the rail's switch. */
export function resolve(fabric: FabricConfig, all: readonly string[]): StackFabric {
  return { ...fabric, topology: fabric.topology ?? (all.length > 2 ? "switch" : "point-to-point") };
}
export type RailConfigInput = z.infer<typeof railSchema>;

/**
 * What is wrong with `rails` against the stack's nodes: every node lists its rails, every listed
 * name is a node, no rail twice. Paths are relative to `sparkform:fabric`.
 */
export function railIssues(
  rails: Readonly<Record<string, readonly { rail: number }[]>>,
  nodeNames: readonly string[],
): { path: (string | number)[]; message: string }[] {
  const out: { path: (string | number)[]; message: string }[] = [];
  for (const n of nodeNames) {
    if (!rails[n]) out.push({ path: ["rails", n], message: "list this node's rails" });
  }
  for (const n of Object.keys(rails)) {
    if (!nodeNames.includes(n)) {
      out.push({ path: ["rails", n], message: "no such node in sparkform:nodes" });
    }
    const seen = new Set<number>();
    for (const rail of rails[n] ?? []) {
      if (seen.has(rail.rail)) {
        out.push({ path: ["rails", n], message: `rail ${rail.rail} is listed twice` });
      }
      seen.add(rail.rail);
    }
  }
  return out;
}

/** Every node lists its rails, and only nodes do (judged once the nodes are there). */
export function crossCheck(fabric: Salvaged<FabricConfig>, ctx: CheckContext): void {
  if (fabric.rails === undefined || ctx.names.length === 0) return;
  for (const i of railIssues(fabric.rails, ctx.names)) ctx.add(["fabric", ...i.path], i.message);
}

/**
 * `sparkform:fabric` alone, against the given node names (the fabric's own tests; the program
 * reads it with every other key through components/stack-config.ts). Throws the same lines.
 */
export function parseFabricConfig(raw: unknown, nodeNames: readonly string[]): StackFabric {
  const r = fabricConfigSchema.safeParse(raw);
  const where = (p: readonly PropertyKey[]) =>
    `sparkform:fabric${p.map((x) => (typeof x === "number" ? `[${x}]` : `.${String(x)}`)).join("")}`;
  const lines = r.success
    ? railIssues(r.data.rails, nodeNames).map((i) => `  ${where(i.path)}: ${i.message}`)
    : r.error.issues.map((i) => `  ${where(i.path)}: ${i.message}`);
  if (lines.length) {
    throw new Error(
      `invalid fabric configuration:\n${lines.join("\n")}\nFix it in stacks/Pulumi.<stack>.yaml (sparkform:fabric) or with \`pulumi config set --path\`.`,
    );
  }
  return resolve((r as { data: FabricConfig }).data, nodeNames);
}

export function fabricThresholds(c: FabricConfig): FabricThresholds {
  const t = Object.fromEntries(Object.entries(c.thresholds).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_THRESHOLDS, ...t, gidIndex: c.gidIndex };
}

/** The links of a topology: every pair of nodes (one cable for two; the switch for more). */
export function linkPairs(nodes: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) out.push([nodes[i] as string, nodes[j] as string]);
  }
  return out;
}

/**
 * The links the fabric measures: every pair of `nodes` (linkPairs) on every rail both ends
 * have, each end's rail as `railsOf` gives it (the config's rails, or a stage's output's).
 */
export function railLinks<R extends { rail: number }>(
  nodes: readonly string[],
  railsOf: (node: string) => readonly R[] | undefined,
): { a: string; b: string; rail: number; ra: R; rb: R }[] {
  return linkPairs(nodes).flatMap(([a, b]) =>
    (railsOf(a) ?? []).flatMap((ra) => {
      const rb = (railsOf(b) ?? []).find((r) => r.rail === ra.rail);
      return rb ? [{ a, b, rail: ra.rail, ra, rb }] : [];
    }),
  );
}

/** The fabric stage: every rail measured between every pair of nodes. */
export const stage = {
  name: "fabric",
  sections: [
    section({
      key: "fabric",
      schema: fabricConfigSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (f, ctx) => resolve(f, ctx.all),
    }),
  ],
  outputs: [{ key: "fabric", type: "object" }],
} as const satisfies StageDescriptor;
