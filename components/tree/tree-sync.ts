import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import type { Exclusion } from "./config";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import { TREE_DIGEST_PROGRAM } from "./digest";
import type { TreeSyncOutputs } from "./state";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state. */
export const TREE_SYNC_PROVIDER_VERSION = "1";

export interface TreeSyncArgs {
  readonly target: pulumi.Input<SshTarget>;
  /** Absolute directory on the control node (the working tree, uncommitted changes included). */
  readonly source: string;
  /** Directory on the node, absolute or `~/...`. */
  readonly dest: string;
  /** rsync exclusions, each with its reason; the digest skips the same entries. */
  readonly exclude: readonly Exclusion[];
  /** The control node's digest of `source` (computed once per program run for all nodes). */
  readonly expectedDigest: string;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/**
 * `rsync -az --delete` of a tree to one node, proven by a content digest equal to the control
 * node's. Refresh re-digests the node's copy: any edited, added or removed file is drift.
 */
export class TreeSync extends SparkformResource<"TreeSync", TreeSyncOutputs> {
  declare readonly digest: pulumi.Output<string>;
  declare readonly files: pulumi.Output<number>;
  declare readonly bytes: pulumi.Output<number>;
  declare readonly dest: pulumi.Output<string>;

  constructor(name: string, args: TreeSyncArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      {
        kind: "TreeSync",
        provider,
        version: TREE_SYNC_PROVIDER_VERSION,
        programs: { digestProgram: TREE_DIGEST_PROGRAM },
        outputs: ["digest", "files", "bytes"],
      },
      name,
      {
        target: args.target,
        source: args.source,
        dest: args.dest,
        exclude: args.exclude,
        expectedDigest: args.expectedDigest,
      },
      opts,
    );
  }
}
