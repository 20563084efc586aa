// FabricLink's recorded shape: what its resource passes (inputs) and what its provider writes
// to state (outputs). Types only, so state-upgrade.ts and the policy pack read them without
// loading the provider.
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { BandwidthClass, CheckResult, FabricThresholds } from "./checks";
import type { ProbeSettings } from "./measure";
import type { FactSource, PortFacts, RailConfig, RdmaSource } from "./ports";

export interface FabricEnd {
  node: string;
  target: SshTarget;
  rail: RailConfig;
  /** RDMA facts from a fixture (labelled) for a node without HCAs; null: the node's /sys. */
  fixture: RdmaSource | null;
  /** Performance cores to pin the probe to (the fact sheet's), or null. */
  cpus: number[] | null;
  /** The port as the SparkNode fact sheet showed it at program time. */
  port: PortFacts;
}

export interface FabricLinkInputs {
  kind: "FabricLink";
  providerVersion: string;
  /** "spark-1↔spark-2". */
  link: string;
  rail: number;
  topology: "point-to-point" | "switch" | "ring";
  /** The probe client's end. */
  a: FabricEnd;
  /** The probe server's end. */
  b: FabricEnd;
  gidIndex: number;
  thresholds: FabricThresholds;
  /** The rail's line rate, Gbit/s; null: the port ceiling (TCP: × thresholds.tcpShare). */
  referenceGbps: number | null;
  probe: ProbeSettings;
  /** Checks computed over all rails in the program (address in subnet, unique). */
  addressChecks: CheckResult[];
  /**
   * native/fabric/rail-rtt-throughput.py and native/node/facts.sh by name and sha256; the provider loads this
   * checkout's text by name, and a new sha256 re-measures.
   */
  programs: { probe: ProgramRef; facts: ProgramRef };
}

export interface FabricLinkOutputs extends FabricLinkInputs {
  ports: { a: PortFacts; b: PortFacts };
  /** "fixture" when either end's RDMA facts came from a fixture tree. */
  source: FactSource;
  rttP50Us: number | null;
  rttP99Us: number | null;
  throughputGbps: number | null;
  /** What the class was judged against (classReference): a fixed fact, never a reading. */
  classReferenceGbps: number | null;
  class: BandwidthClass;
  checks: CheckResult[];
  healthy: boolean;
  /** perftest RDMA latency/bandwidth, or why not measured. */
  rdma: { measured: false; reason: string };
  /** Why the probe could not measure (null when it did). */
  error: string | null;
  /** Each end's management interface (holding the ssh address): NCCL_SOCKET_IFNAME. */
  mgmtIface: { a: string | null; b: string | null };
}
