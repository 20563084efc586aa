// `sparkform:fabric`: per node, its rails (interface, address; optionally the RDMA netdev when it
// differs from the interface), the topology, where RDMA facts come from when a node has no HCA
// (a sysfs fixture, labelled), the GID index and the checks' thresholds. Validated with zod;
// errors name the key and the fix, as components/stack-config.ts does for the rest.
import { z } from "zod";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { DEFAULT_THRESHOLDS, railsLabel as label, subnetOf, type FabricThresholds } from "./checks";
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
  /**
   * point-to-point (2 nodes, cables) or switch (3–4 nodes); default from the node count. ring
   * (3 nodes, each node's two ports cabled to the other two, each cable its own subnet) is never
   * the default: it is said explicitly.
   */
  topology: z.enum(["point-to-point", "switch", "ring"]).optional(),
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

type Issue = { path: (string | number)[]; message: string };
type AddressedRail = { rail: number; address: string };

/** Per subnet, the rails in it (node, rail, its index in the node's list), in node order. */
function railsBySubnet(
  rails: Readonly<Record<string, readonly AddressedRail[]>>,
  nodeNames: readonly string[],
): Map<string, { node: string; rail: AddressedRail; index: number }[]> {
  const out = new Map<string, { node: string; rail: AddressedRail; index: number }[]>();
  for (const node of nodeNames) {
    (rails[node] ?? []).forEach((rail, index) => {
      const s = subnetOf(rail.address);
      if (s !== null) out.set(s, [...(out.get(s) ?? []), { node, rail, index }]);
    });
  }
  return out;
}

/**
 * What is wrong with a ring's cabling as configured: three nodes, two rails each, every subnet
 * one cable (two rails of two nodes), each node's two cables to the two other nodes. Judged
 * before anything runs, since a ring measured with a cable in the wrong port reads as a healthy
 * link between the wrong nodes. Paths are relative to `sparkform:fabric`.
 */
export function ringIssues(
  rails: Readonly<Record<string, readonly AddressedRail[]>>,
  nodeNames: readonly string[],
): Issue[] {
  if (nodeNames.length !== 3) {
    const fix =
      nodeNames.length < 3
        ? "two nodes are one cable per rail: use topology: point-to-point"
        : `a ${nodeNames.length}-node ring needs ${nodeNames.length} ports per node (a Spark has two): use topology: switch`;
    return [
      {
        path: ["topology"],
        message: `is ring with ${nodeNames.length} nodes; a ring is three nodes, each node's two ports cabled to the other two: ${fix}`,
      },
    ];
  }
  const out: Issue[] = [];
  for (const n of nodeNames) {
    const count = rails[n]?.length ?? 0;
    if (rails[n] && count !== 2) {
      out.push({
        path: ["rails", n],
        message: `lists ${count} rail${count === 1 ? "" : "s"}; in a ring each node has two, one cable to each other node: list both ports`,
      });
    }
  }
  const peersOf = new Map<string, { peer: string; rail: number; subnet: string }[]>();
  for (const [subnet, ends] of railsBySubnet(rails, nodeNames)) {
    const [x, y] = ends;
    if (ends.length === 1 && x) {
      out.push({
        path: ["rails", x.node, x.index],
        message: `${x.node} rail ${x.rail.rail} (${x.rail.address}) is the only rail on subnet ${subnet}: in a ring a subnet is one cable, and this cable's other end is not configured; give the rail at its other end an address in ${subnet}`,
      });
    } else if (ends.length > 2) {
      out.push({
        path: ["rails", ends[2]!.node, ends[2]!.index],
        message: `subnet ${subnet} is used by ${ends.map((e) => `${e.node} rail ${e.rail.rail}`).join(", ")}: in a ring a subnet is one cable with two ends; give each cable its own subnet`,
      });
    } else if (x && y && x.node === y.node) {
      out.push({
        path: ["rails", x.node, y.index],
        message: `${x.node}'s rails ${x.rail.rail} and ${y.rail.rail} share subnet ${subnet}: a cable joins two nodes; give each of its rails the subnet of the cable to its peer`,
      });
    } else if (x && y) {
      for (const [me, other] of [
        [x, y],
        [y, x],
      ] as const) {
        const list = peersOf.get(me.node) ?? [];
        peersOf.set(me.node, [...list, { peer: other.node, rail: me.rail.rail, subnet }]);
      }
    }
  }
  for (const n of nodeNames) {
    const [first, second] = [...(peersOf.get(n) ?? [])].sort((x, y) => x.rail - y.rail);
    if (!first || !second || first.peer !== second.peer) continue;
    const missing = nodeNames.find((m) => m !== n && m !== first.peer);
    out.push({
      path: ["rails", n],
      message: `${n}'s rails ${first.rail} and ${second.rail} both reach ${first.peer} (subnets ${first.subnet} and ${second.subnet}: the link ${n}↔${first.peer} twice): a cable is in the wrong port; cable rail ${second.rail} to ${missing ?? "the third node"} and give both its ends an address in one subnet of their own`,
    });
  }
  return out;
}

/** Every node lists its rails, and only nodes do (judged once the nodes are there). */
export function crossCheck(fabric: Salvaged<FabricConfig>, ctx: CheckContext): void {
  if (fabric.rails === undefined || ctx.names.length === 0) return;
  const issues = railIssues(fabric.rails, ctx.names);
  if (fabric.topology === "ring" && issues.length === 0)
    issues.push(...ringIssues(fabric.rails, ctx.names));
  for (const i of issues) ctx.add(["fabric", ...i.path], i.message);
}

/**
 * `sparkform:fabric` alone, against the given node names (the fabric's own tests; the program
 * reads it with every other key through components/stack-config.ts). Throws the same lines.
 */
export function parseFabricConfig(raw: unknown, nodeNames: readonly string[]): StackFabric {
  const r = fabricConfigSchema.safeParse(raw);
  const where = (p: readonly PropertyKey[]) =>
    `sparkform:fabric${p.map((x) => (typeof x === "number" ? `[${x}]` : `.${String(x)}`)).join("")}`;
  const issues = (d: FabricConfig) => {
    const rails = railIssues(d.rails, nodeNames);
    return rails.length || d.topology !== "ring" ? rails : ringIssues(d.rails, nodeNames);
  };
  const lines = r.success
    ? issues(r.data).map((i) => `  ${where(i.path)}: ${i.message}`)
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

/** The pairs of nodes a switch or a cable joins: every pair. */
export function linkPairs(nodes: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) out.push([nodes[i] as string, nodes[j] as string]);
  }
  return out;
}

/** One link the fabric measures: `a`'s rail `ra` to `b`'s rail `rb` (`rail`: `ra`'s number). */
export interface RailLink<R> {
  a: string;
  b: string;
  rail: number;
  ra: R;
  rb: R;
}

/**
 * The links the fabric measures, each once, each end's rail as `railsOf` gives it (the config's
 * rails, or a stage's output's). point-to-point and switch: every pair of `nodes` on every rail
 * number both ends have. ring: per subnet the two rails in it (a cable; the rail numbers of its
 * ends need not match), in node order, then the first end's rail order.
 */
export function fabricLinks<R extends { rail: number; address: string }>(
  topology: FabricTopology,
  nodes: readonly string[],
  railsOf: (node: string) => readonly R[] | undefined,
): RailLink<R>[] {
  if (topology !== "ring") {
    return linkPairs(nodes).flatMap(([a, b]) =>
      (railsOf(a) ?? []).flatMap((ra) => {
        const rb = (railsOf(b) ?? []).find((r) => r.rail === ra.rail);
        return rb ? [{ a, b, rail: ra.rail, ra, rb }] : [];
      }),
    );
  }
  return nodes.flatMap((a, i) =>
    (railsOf(a) ?? []).flatMap((ra) => {
      const s = subnetOf(ra.address);
      const far = nodes
        .slice(i + 1)
        .flatMap((b) =>
          (railsOf(b) ?? []).filter((r) => subnetOf(r.address) === s).map((rb) => ({ b, rb })),
        );
      return s !== null && far.length === 1 && far[0]
        ? [{ a, b: far[0].b, rail: ra.rail, ra, rb: far[0].rb }]
        : [];
    }),
  );
}

/** A link's rails in a message: "rail 0", or a ring cable whose ends differ, "rail 0↔1". */
export function railsLabel(l: RailLink<{ rail: number }>): string {
  return label(l.ra.rail, l.rb.rail);
}

/**
 * A link's key, its FabricLink's name after `<stack>-fabric-`. point-to-point and switch:
 * `<a>-<b>-rail<N>` (recorded in state: never changes). A ring cable's ends carry different rail
 * numbers, so its key names both ports, `<a>-rail<Na>-<b>-rail<Nb>`: unambiguous (one cable per
 * port) and stable while the cable stays in those ports; re-cabled, it is a new link, measured
 * anew, not an old one's reading carried over.
 */
export function linkKey(topology: FabricTopology, l: RailLink<{ rail: number }>): string {
  return topology === "ring"
    ? `${l.a}-rail${l.ra.rail}-${l.b}-rail${l.rb.rail}`
    : `${l.a}-${l.b}-rail${l.rail}`;
}

/**
 * The topology of recorded rails when the config is not at hand (a stack's exported `fabric`):
 * three nodes whose every subnet is one cable between two of them is a ring; otherwise the
 * default from the node count.
 */
export function topologyOfRails(
  rails: Readonly<Record<string, readonly AddressedRail[]>>,
): FabricTopology {
  const nodes = Object.keys(rails);
  const subnets = [...railsBySubnet(rails, nodes).values()];
  const ring =
    nodes.length === 3 &&
    subnets.length > 0 &&
    subnets.every((e) => e.length === 2 && e[0]?.node !== e[1]?.node);
  return ring ? "ring" : nodes.length > 2 ? "switch" : "point-to-point";
}

/**
 * The address (prefix dropped) `from` reaches `to` at over the fabric, known at preview. A ring
 * gives each pair its own cable and subnet, so it is `to`'s end of the link joining the two
 * (its other addresses are on cables to the third node). A cable or a switch joins the pair on
 * every rail both have, so `to`'s one address serves every peer: `preferred` (the node's
 * sparkform:nodes[].fabricAddress) when given, else `to`'s address on the first rail both have.
 * Undefined when no link joins them.
 */
export function linkAddress(
  fabric: Pick<StackFabric, "topology" | "rails">,
  from: string,
  to: string,
  preferred?: string,
): string | undefined {
  if (fabric.topology !== "ring" && preferred !== undefined) return preferred;
  const [l] = fabricLinks(fabric.topology, [from, to], (n) => fabric.rails[n]);
  return l && (l.a === to ? l.ra : l.rb).address.replace(/\/\d+$/, "");
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
