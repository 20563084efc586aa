// The toolchain stage: the directory (Spark: ~/.asdf) on the source node, copied to every other
// node and proven identical by digest.
import * as pulumi from "@pulumi/pulumi";
import { type PreStageLayout, preStageAliases } from "../aliases";
import type { Nodes } from "../node/nodes";
import type { Validated } from "../config/descriptor";
import type { StackToolchain } from "./config";
import { gatherByNode, PerNode, type Stage } from "../stage";
import { Toolchain } from "./toolchain";

export interface ToolchainSummary {
  digest: string;
  probe: string;
  copiedBy: string;
}

export interface ToolchainsArgs {
  /** The nodes stage: the toolchain goes to every node. */
  readonly nodes: Nodes;
  /**
   * `sparkform:toolchain`, validated with `source` resolved (StackToolchain,
   * components/toolchain/config.ts): `path` (the directory on every node, absolute or `~/...`;
   * Spark: `~/.asdf`), `source` (the node that has it and copies it to the others; default the
   * first node), `binDirs` (install directories relative to `path`, put on PATH directly, no
   * shims), `probe` (version argv run with them on PATH) and `expect` (text the probe prints).
   */
  readonly config: Validated<StackToolchain>;
  /** Where a stack made before the stage layout holds these resources (aliases). Default: none. */
  readonly preStage?: PreStageLayout;
}

export class Toolchains extends pulumi.ComponentResource implements Stage<ToolchainSummary> {
  readonly byNode: pulumi.Output<Record<string, ToolchainSummary>>;
  readonly ready: readonly Toolchain[];
  /**
   * The install directories as PATH entries (absolute or `~/…`): a build command such as
   * `mix compile` runs with them on PATH, as the runbook's environment contract has it.
   */
  readonly binPath: readonly string[];
  private readonly perNode: PerNode<Toolchain>;

  constructor(name: string, args: ToolchainsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Toolchains", name, {}, opts);
    const { nodes, config: tc } = args;
    const common = {
      path: tc.path,
      binDirs: tc.binDirs,
      probe: tc.probe,
      expect: tc.expect,
    };
    const childOpts = (node: string, extra: pulumi.CustomResourceOptions, connections?: string[]) =>
      nodes.childOpts(
        { parent: this, aliases: preStageAliases(args.preStage, node), ...extra },
        connections,
      );
    const source = new Toolchain(
      `${name}-${tc.source}`,
      { ...common, target: nodes.target(tc.source) },
      childOpts(tc.source, { dependsOn: [...nodes.ready] }),
    );
    const entries = nodes.names.map((node) => {
      const t =
        node === tc.source
          ? source
          : new Toolchain(
              `${name}-${node}`,
              {
                ...common,
                target: nodes.target(node),
                source: nodes.peer(tc.source, node),
                expectedDigest: source.digest,
              },
              childOpts(node, { dependsOn: [...nodes.ready, source] }, ["target", "source"]),
            );
      return [node, t] as const;
    });
    this.perNode = new PerNode(this, "toolchain", entries);
    this.ready = this.perNode.values();
    this.binPath = tc.binDirs.map((d) => `${tc.path.replace(/\/+$/, "")}/${d}`);
    this.byNode = gatherByNode(nodes.names, (n) => {
      const t = this.of(n);
      return { digest: t.digest, probe: t.probeOutput, copiedBy: t.copiedBy };
    });
    this.registerOutputs({ byNode: this.byNode });
  }

  of(node: string): Toolchain {
    return this.perNode.of(node);
  }
}
