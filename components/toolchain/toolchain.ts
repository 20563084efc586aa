import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import { TREE_DIGEST_PROGRAM } from "../tree/commands";
import type { ToolchainOutputs, ToolchainSource } from "./state";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state. */
export const TOOLCHAIN_PROVIDER_VERSION = "1";

export interface ToolchainArgs {
  readonly target: pulumi.Input<SshTarget>;
  /** The node to copy from and its digest; omit both on the source node itself. */
  readonly source?: pulumi.Input<ToolchainSource>;
  readonly expectedDigest?: pulumi.Input<string>;
  /** The toolchain directory, absolute or `~/...` (Spark: `~/.asdf`). */
  readonly path: string;
  /** Install directories relative to `path`, put on PATH directly (no shims). */
  readonly binDirs: readonly string[];
  /** Version probe argv, e.g. `["elixir", "--version"]`. */
  readonly probe: readonly string[];
  /** Text the probe output must contain. */
  readonly expect: string;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/** A toolchain directory on one node, identical (by digest) to the source node's. */
export class Toolchain extends SparkformResource<"Toolchain", ToolchainOutputs> {
  declare readonly digest: pulumi.Output<string>;
  declare readonly probeOutput: pulumi.Output<string>;
  declare readonly copiedBy: pulumi.Output<string>;

  constructor(name: string, args: ToolchainArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      {
        kind: "Toolchain",
        provider,
        version: TOOLCHAIN_PROVIDER_VERSION,
        programs: { digestProgram: TREE_DIGEST_PROGRAM },
        outputs: ["digest", "files", "bytes", "probeOutput", "copiedBy"],
      },
      name,
      {
        target: args.target,
        source: args.source,
        path: args.path,
        binDirs: args.binDirs,
        probe: args.probe,
        expect: args.expect,
        expectedDigest: args.expectedDigest,
      },
      opts,
    );
  }
}
