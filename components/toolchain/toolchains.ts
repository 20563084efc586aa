// The toolchain stage: the directory (Spark: ~/.asdf) on the source node, copied to every other
// node and proven identical by digest.
import * as pulumi from "@pulumi/pulumi";
import { type PreStageLayout, preStageAliases } from "../aliases";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import { Toolchain } from "./toolchain";

export interface ToolchainSummary {
  digest: string;
  probe: string;
  copiedBy: string;
}

export interface ToolchainsArgs {
  readonly nodes: Nodes;
  /** The toolchain directory on every node, absolute or `~/...` (Spark: `~/.asdf`). */
  readonly path: string;
  /** The node that has it and copies it to the others (a name in `nodes`). */
  readonly source: string;
  /** Install directories relative to `path`, put on PATH directly (no shims). */
  readonly binDirs: readonly string[];
  /** Version probe argv, run with `binDirs` on PATH, e.g. `["elixir", "--version"]`. */
  readonly probe: readonly string[];
  /** Text the probe's output must contain, e.g. `Elixir 1.18`. */
  readonly expect: string;
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
    const { nodes } = args;
    if (!nodes.has(args.source)) {
      throw new pulumi.ResourceError(
        `sparkform:toolchain.source ${JSON.stringify(args.source)} is not one of the nodes (${nodes.names.join(", ")})`,
        this,
      );
    }
    const common = {
      path: args.path,
      binDirs: args.binDirs,
      probe: args.probe,
      expect: args.expect,
    };
    const childOpts = (node: string, extra: pulumi.CustomResourceOptions, connections?: string[]) =>
      nodes.childOpts(
        { parent: this, aliases: preStageAliases(args.preStage, node), ...extra },
        connections,
      );
    const source = new Toolchain(
      `${name}-${args.source}`,
      { ...common, target: nodes.target(args.source) },
      childOpts(args.source, { dependsOn: [...nodes.ready] }),
    );
    const entries = nodes.names.map((node) => {
      const t =
        node === args.source
          ? source
          : new Toolchain(
              `${name}-${node}`,
              {
                ...common,
                target: nodes.target(node),
                source: nodes.peer(args.source),
                expectedDigest: source.digest,
              },
              childOpts(node, { dependsOn: [...nodes.ready, source] }, ["target", "source"]),
            );
      return [node, t] as const;
    });
    this.perNode = new PerNode(this, "toolchain", entries);
    this.ready = this.perNode.values();
    this.binPath = args.binDirs.map((d) => `${args.path.replace(/\/+$/, "")}/${d}`);
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
