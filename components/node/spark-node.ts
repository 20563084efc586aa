import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import type { SparkNodeFacts } from "./facts";
import { FACTS_PROGRAM } from "./commands";
import type { SparkNodeOutputs } from "./state";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state. */
export const SPARK_NODE_PROVIDER_VERSION = "1";

export interface SparkNodeArgs {
  /** How the control node reaches the node; host key pinned, checking never disabled. */
  readonly target: pulumi.Input<SshTarget>;
  /** Directories whose free space the fact sheet reports. Default: `~/models`, `~`. */
  readonly diskPaths?: pulumi.Input<pulumi.Input<string>[]>;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/**
 * One Spark: its SSH connection and a fact sheet (arch, kernel, distro, memory from
 * /proc/meminfo, CPU clusters, CUDA, RDMA devices, free disk), re-measured on refresh.
 */
export class SparkNode extends SparkformResource<"SparkNode", SparkNodeOutputs> {
  declare readonly facts: pulumi.Output<SparkNodeFacts>;
  declare readonly target: pulumi.Output<SshTarget>;

  constructor(name: string, args: SparkNodeArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      {
        kind: "SparkNode",
        provider,
        version: SPARK_NODE_PROVIDER_VERSION,
        programs: { factsProgram: FACTS_PROGRAM },
        outputs: ["facts"],
      },
      name,
      { target: args.target, diskPaths: args.diskPaths ?? ["~/models", "~"] },
      opts,
    );
  }
}
