// The tree stage: the working tree on the control node, rsynced to every node and proven by a
// content digest equal to the control node's.
import * as pulumi from "@pulumi/pulumi";
import { existsSync, statSync } from "node:fs";
import * as path from "node:path";
import { type PreStageLayout, preStageAliases } from "../aliases";
import type { Validated } from "../config/descriptor";
import type { Exclusion, TreeConfig } from "./config";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import type { Toolchains } from "../toolchain/toolchains";
import { localTreeDigest } from "./digest";
import { TreeSync } from "./tree-sync";

export interface TreeSummary {
  digest: string;
  files: number;
  bytes: number;
}

export interface TreesArgs {
  /** The nodes stage: the tree goes to every node. */
  readonly nodes: Nodes;
  /** The toolchain stage: each node's sync waits for its toolchain. Default: no wait. */
  readonly toolchain?: Toolchains;
  /**
   * `sparkform:tree`, validated (TreeConfig, components/tree/config.ts): `source` (the working
   * tree on the control node, uncommitted changes included, absolute or relative to
   * `projectDir`), `dest` (the directory on every node, absolute or `~/...`) and `exclude`
   * (rsync exclusions, each with its reason; the digest skips the same entries; default none).
   */
  readonly config: Validated<TreeConfig>;
  /** The directory relative `config.source` paths are relative to (the project). */
  readonly projectDir: string;
  /** Where a stack made before the stage layout holds these resources (aliases). Default: none. */
  readonly preStage?: PreStageLayout;
}

export class Trees extends pulumi.ComponentResource implements Stage<TreeSummary> {
  readonly byNode: pulumi.Output<Record<string, TreeSummary>>;
  readonly ready: readonly TreeSync[];
  /** The control node's side of the proof, computed once per program run for all nodes. */
  readonly expected: TreeSummary;
  /** The tree's directory on the nodes, and its absolute source on the control node. */
  readonly dest: string;
  readonly source: string;
  readonly exclude: readonly Exclusion[];
  private readonly perNode: PerNode<TreeSync>;

  constructor(name: string, args: TreesArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Trees", name, {}, opts);
    const { nodes, config: tc } = args;
    const source = path.resolve(args.projectDir, tc.source);
    if (!existsSync(source) || !statSync(source).isDirectory()) {
      throw new pulumi.ResourceError(
        `sparkform:tree.source ${JSON.stringify(tc.source)} is not a directory (resolved to ${source}): ` +
          `point it at the working tree to sync`,
        this,
      );
    }
    this.dest = tc.dest;
    this.source = source;
    this.exclude = tc.exclude;
    const d = localTreeDigest(source, tc.exclude);
    this.expected = { digest: d.digest, files: d.files, bytes: d.bytes };
    const entries = nodes.names.map(
      (node) =>
        [
          node,
          new TreeSync(
            `${name}-${node}`,
            {
              target: nodes.target(node),
              source,
              dest: tc.dest,
              exclude: tc.exclude,
              expectedDigest: this.expected.digest,
            },
            nodes.childOpts({
              parent: this,
              aliases: preStageAliases(args.preStage, node),
              dependsOn: [...nodes.ready, ...(args.toolchain ? [args.toolchain.of(node)] : [])],
            }),
          ),
        ] as const,
    );
    this.perNode = new PerNode(this, "tree", entries);
    this.ready = this.perNode.values();
    this.byNode = gatherByNode(nodes.names, (n) => {
      const s = this.of(n);
      return { digest: s.digest, files: s.files, bytes: s.bytes };
    });
    this.registerOutputs({ byNode: this.byNode, expected: this.expected });
  }

  of(node: string): TreeSync {
    return this.perNode.of(node);
  }
}
