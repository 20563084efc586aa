// The Fabric stage: one FabricLink per link and rail over the SparkNode stage's nodes — every
// pair of nodes (a cable for two, the rail's switch for three or four) on every rail both ends
// have, or a ring's three cables (config.ts fabricLinks). Per node it exports the rails' summary; the NCCL env block follows from the ports found.
import * as pulumi from "@pulumi/pulumi";
import type { Nodes } from "../node/nodes";
import type { SparkNode } from "../node/spark-node";
import type { SparkNodeFacts } from "../node/facts";
import type { Stage } from "../stage";
import type { SshTarget } from "../transport";
import { checkAddresses, type BandwidthClass, type CheckResult } from "./checks";
import type { Validated } from "../config/descriptor";
import { fabricLinks, linkAddress, linkKey, type FabricConfig, type StackFabric } from "./config";
import { fixtureRdma } from "./fixture";
import { liveRdma, portFacts, type FactSource, type RailConfig, type RdmaSource } from "./ports";
import { FabricLink } from "./fabric-link";
import type { FabricEnd } from "./state";

export { FABRIC_LINK_PROVIDER_VERSION, FabricLink, type FabricLinkArgs } from "./fabric-link";

/**
 * What the Fabric stage reads from the nodes stage: names in cluster order, each node's
 * SparkNode (its `facts` and `target` outputs), and the options that keep connections secret.
 */
export type FabricNodes = Pick<Nodes, "names" | "of" | "childOpts">;

export interface FabricArgs {
  /** The SparkNode stage. */
  readonly nodes: FabricNodes;
  /**
   * `sparkform:fabric`, validated with its topology resolved (StackFabric,
   * components/fabric/config.ts).
   */
  readonly config: Validated<StackFabric>;
}

/** Per node: its rails as the stage measured them. */
export interface FabricNodeSummary {
  rails: {
    rail: number;
    iface: string;
    address: string;
    rdmaDevice: string | null;
    source: FactSource;
    /** One entry per link on this rail. */
    links: {
      peer: string;
      class: BandwidthClass;
      rttP50Us: number | null;
      throughputGbps: number | null;
      healthy: boolean;
    }[];
  }[];
}

const end = (
  node: string,
  target: SshTarget,
  facts: SparkNodeFacts,
  rail: RailConfig,
  fixture: RdmaSource | null,
  gidIndex: number,
): FabricEnd => ({
  node,
  target,
  rail,
  fixture,
  cpus: facts.cpu.performanceCores,
  port: portFacts(node, facts, fixture ?? liveRdma(facts), rail, gidIndex),
});

/**
 * The fabric of the cluster: `${name}-<a>-<b>-rail<N>` for every pair of nodes and every
 * rail both have; a ring's cables `${name}-<a>-rail<Na>-<b>-rail<Nb>` (config.ts linkKey). Fixture RDMA facts (sparkform:fabric.rdmaFixture[s]) are read on the control
 * node at program time and labelled; the measurement runs on the nodes.
 */
export class Fabric extends pulumi.ComponentResource implements Stage<FabricNodeSummary> {
  readonly byNode: pulumi.Output<Record<string, FabricNodeSummary>>;
  readonly ready: readonly FabricLink[];
  /** Per link and rail, keyed `<a>-<b>-rail<N>` (a ring: `<a>-rail<Na>-<b>-rail<Nb>`). */
  readonly links: Readonly<Record<string, FabricLink>>;
  private readonly ends = new Map<FabricLink, readonly [string, string]>();
  private readonly rails: FabricConfig["rails"];
  private readonly topology: StackFabric["topology"];

  constructor(name: string, args: FabricArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Fabric", name, {}, opts);
    const cfg = args.config;
    this.rails = cfg.rails;
    const names = args.nodes.names;
    const topology = cfg.topology;
    this.topology = topology;
    const fixtures = new Map<string, RdmaSource | null>();
    for (const n of names) {
      const f = cfg.rdmaFixtures?.[n] ?? cfg.rdmaFixture;
      fixtures.set(n, f ? fixtureRdma(f) : null);
    }
    const all = fabricLinks(topology, names, (n) => cfg.rails[n]);
    // A ring's subnets are its cables, not its rail numbers: each rail is judged against its link's.
    const cable = new Map(
      topology === "ring"
        ? all.flatMap((l) => [
            [`${l.a}/${l.ra.rail}`, `${l.a}↔${l.b}`],
            [`${l.b}/${l.rb.rail}`, `${l.a}↔${l.b}`],
          ])
        : [],
    );
    const addressChecks = checkAddresses(
      names.flatMap((n) =>
        (cfg.rails[n] ?? []).map((r) => {
          const link = cable.get(`${n}/${r.rail}`);
          return { node: n, rail: r.rail, address: r.address, ...(link ? { link } : {}) };
        }),
      ),
    );
    const links: Record<string, FabricLink> = {};
    for (const l of all) {
      const { a, b, ra, rb } = l;
      const key = linkKey(topology, l);
      const na = args.nodes.of(a);
      const nb = args.nodes.of(b);
      const endOf = (node: string, res: SparkNode, rail: RailConfig) =>
        pulumi
          .all([res.target, res.facts])
          .apply(([t, f]) => end(node, t, f, rail, fixtures.get(node) ?? null, cfg.gidIndex));
      links[key] = new FabricLink(
        `${name}-${key}`,
        {
          link: `${a}↔${b}`,
          rail: ra.rail,
          topology,
          a: endOf(a, na, ra),
          b: endOf(b, nb, rb),
          config: cfg,
          addressChecks: [
            addressChecks.get(`${a}/${ra.rail}`),
            addressChecks.get(`${b}/${rb.rail}`),
          ].filter((c): c is CheckResult => c !== undefined),
        },
        // The ends carry both nodes' connections (and the key, when one is configured).
        args.nodes.childOpts({ parent: this, dependsOn: [na, nb] }, ["a", "b"]),
      );
      this.ends.set(links[key], [a, b]);
    }
    this.links = links;
    this.ready = Object.values(links);
    const rows = Object.entries(links).map(([key, l]) =>
      pulumi
        .all([l.ports, l.class, l.rttP50Us, l.throughputGbps, l.healthy])
        .apply(([ports, cls, rtt, tp, healthy]) => ({ key, ports, cls, rtt, tp, healthy })),
    );
    this.byNode = pulumi.all(rows).apply((rs) => {
      const out: Record<string, FabricNodeSummary> = {};
      for (const n of names) {
        out[n] = {
          rails: (cfg.rails[n] ?? []).map((r) => {
            // Each end by its own rail: a ring cable's two ends carry different rail numbers.
            const mine = rs.filter(
              (x) =>
                (x.ports.a.node === n && x.ports.a.rail === r.rail) ||
                (x.ports.b.node === n && x.ports.b.rail === r.rail),
            );
            const port = mine.map((x) => (x.ports.a.node === n ? x.ports.a : x.ports.b))[0];
            return {
              rail: r.rail,
              iface: r.iface,
              address: r.address,
              rdmaDevice: port?.rdmaDevice ?? null,
              source: port?.source ?? (fixtures.get(n) ? "fixture" : "sysfs"),
              links: mine.map((x) => ({
                peer: x.ports.a.node === n ? x.ports.b.node : x.ports.a.node,
                class: x.cls,
                rttP50Us: x.rtt,
                throughputGbps: x.tp,
                healthy: x.healthy,
              })),
            };
          }),
        };
      }
      return out;
    });
    this.registerOutputs({ byNode: this.byNode });
  }

  /**
   * The addresses of `node`'s configured rails, prefix length dropped (what a worker on it may
   * bind), known at preview; undefined when no rail is configured for it.
   */
  railAddresses(node: string): readonly string[] | undefined {
    return Object.hasOwn(this.rails, node)
      ? this.rails[node]?.map((r) => r.address.replace(/\/\d+$/, ""))
      : undefined;
  }

  /**
   * Per node, its configured rails' numbers and interfaces (sparkform:fabric.rails), known at
   * preview: what the serving stage's wire proof holds each end of a split to.
   */
  railInterfaces(): Record<string, { rail: number; iface: string }[]> {
    return Object.fromEntries(
      Object.entries(this.rails).map(([n, rs]) => [
        n,
        rs.map((r) => ({ rail: r.rail, iface: r.iface })),
      ]),
    );
  }

  /**
   * The address `from` reaches `to` at over the fabric (config.ts linkAddress): a ring's pair
   * by the cable joining them; otherwise `preferred` when it is one of `to`'s rails.
   */
  linkAddress(from: string, to: string, preferred?: string): string | undefined {
    return linkAddress({ topology: this.topology, rails: this.rails }, from, to, preferred);
  }

  /** Every link and rail `node` is an end of. */
  linksOf(node: string): FabricLink[] {
    return Object.values(this.links).filter((l) => this.ends.get(l)?.includes(node));
  }

  /** A Stage gives one resource per node; a fabric node has several links: its first. */
  of(node: string): pulumi.Resource {
    const [first] = this.linksOf(node);
    if (!first) {
      throw new pulumi.ResourceError(
        `fabric: node ${node} has no link in sparkform:fabric.rails`,
        this,
      );
    }
    return first;
  }
}
