// FabricLink: one rail of one link, measured (its provider: provider.ts beside it).
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import { fabricThresholds, type FabricConfig } from "./config";
import type { BandwidthClass, CheckResult } from "./checks";
import type { FactSource, PortFacts } from "./ports";
import { PROBE_PROGRAM } from "./probe";
import type { FabricEnd, FabricLinkOutputs } from "./state";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state. */
export const FABRIC_LINK_PROVIDER_VERSION = "1";

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

export interface FabricLinkArgs {
  readonly link: string;
  readonly rail: number;
  readonly topology: "point-to-point" | "switch" | "ring";
  /** The probe client's end and the server's: target, rail, fixture, CPUs, program-time port. */
  readonly a: pulumi.Input<FabricEnd>;
  readonly b: pulumi.Input<FabricEnd>;
  readonly config: FabricConfig;
  readonly addressChecks: pulumi.Input<CheckResult[]>;
}

/** One rail of one link, measured; `refresh` re-measures (link down, MTU, GID, class: drift). */
export class FabricLink extends SparkformResource<"FabricLink", FabricLinkOutputs> {
  declare readonly ports: pulumi.Output<{ a: PortFacts; b: PortFacts }>;
  declare readonly source: pulumi.Output<FactSource>;
  declare readonly rttP50Us: pulumi.Output<number | null>;
  declare readonly rttP99Us: pulumi.Output<number | null>;
  declare readonly throughputGbps: pulumi.Output<number | null>;
  declare readonly classReferenceGbps: pulumi.Output<number | null>;
  declare readonly class: pulumi.Output<BandwidthClass>;
  declare readonly checks: pulumi.Output<CheckResult[]>;
  declare readonly healthy: pulumi.Output<boolean>;
  declare readonly rdma: pulumi.Output<{ measured: false; reason: string }>;
  declare readonly error: pulumi.Output<string | null>;
  declare readonly mgmtIface: pulumi.Output<{ a: string | null; b: string | null }>;

  constructor(name: string, args: FabricLinkArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      {
        kind: "FabricLink",
        provider,
        version: FABRIC_LINK_PROVIDER_VERSION,
        programs: { programs: { probe: PROBE_PROGRAM, facts: "node/facts.sh" } },
        outputs: [
          "ports",
          "source",
          "rttP50Us",
          "rttP99Us",
          "throughputGbps",
          "classReferenceGbps",
          "class",
          "checks",
          "healthy",
          "rdma",
          "error",
          "mgmtIface",
        ],
      },
      name,
      {
        link: args.link,
        rail: args.rail,
        topology: args.topology,
        a: args.a,
        b: args.b,
        gidIndex: args.config.gidIndex,
        thresholds: fabricThresholds(args.config),
        referenceGbps: args.config.referenceGbps ?? null,
        probe: args.config.probe,
        addressChecks: args.addressChecks,
      },
      opts,
    );
  }
}
