// The build stage: llama.cpp built in each node's synced tree under the environment contract.
// The cache source (default: the first node) builds first. With sparkform:build.distribute
// build-each the others seed their compiler cache from it over the fabric, then build; with
// fan-out (the CUDA default) they compile nothing and receive its verified artifacts
// (fan-out.ts), taking its outputs as inputs, so identity across nodes holds by construction.
import * as pulumi from "@pulumi/pulumi";
import { type PreStageLayout, preStageAliases } from "../aliases";
import type { Validated } from "../config/descriptor";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import type { Toolchains } from "../toolchain/toolchains";
import type { Trees } from "../tree/trees";
import { type BuildDistribute, buildDistribute, CACHE_FROM_NONE, type StackBuild } from "./config";
import { stackBuildFlags } from "./tree-commit";
import type { FanOutSource } from "./fan-out";
import type { BuildFlags } from "./flags";
import { NativeBuild } from "./native-build";
import type { Check } from "./verify";

export interface BuildSummary {
  /** `self`: compiled on the node; `fan-out`: received from `builtOn` (distribute fan-out). */
  builtBy: "self" | "fan-out";
  builtOn: string;
  buildKey: string;
  commit: string;
  installDir: string;
  artifacts: Record<string, string>;
  checks: Check[];
  instructions: Record<string, number>;
}

export interface BuildsArgs {
  /** The nodes stage: every node gets a build. */
  readonly nodes: Nodes;
  /**
   * The tree stage: the synced tree the builds run in (its digest re-triggers them); its
   * control-node source and exclusions give the commit and check a build command's outputs.
   */
  readonly tree: Trees;
  /** The toolchain stage: with a build command, its install directories go on PATH. Default: none. */
  readonly toolchain?: Toolchains;
  /**
   * `sparkform:build`, validated with its defaults resolved (StackBuild,
   * components/build/config.ts): preset, flags, targets, artifacts, command, jobs, distribute,
   * and `cacheFrom` (the node whose compiler cache seeds the others and builds first; default
   * the first node; `none` for no seed). The build contract is rendered from it and the tree
   * (`stackBuildFlags`) before any build is planned: bad flags stop the program.
   */
  readonly config: Validated<StackBuild>;
  /** Where a stack made before the stage layout holds these resources (aliases). Default: none. */
  readonly preStage?: PreStageLayout;
}

export class Builds extends pulumi.ComponentResource implements Stage<BuildSummary> {
  readonly byNode: pulumi.Output<Record<string, BuildSummary>>;
  readonly ready: readonly NativeBuild[];
  /** The build contract every node builds with (one flag set for the cluster). */
  readonly flags: BuildFlags;
  /** How the nodes get their build (sparkform:build.distribute, resolved). */
  readonly distribute: BuildDistribute;
  private readonly perNode: PerNode<NativeBuild>;

  constructor(name: string, args: BuildsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Builds", name, {}, opts);
    const { nodes, tree, config: b } = args;
    // The flags with the tree's commit (the config checked them before the commit was read).
    try {
      this.flags = stackBuildFlags(b, { source: tree.source, exclude: tree.exclude });
    } catch (err) {
      throw new pulumi.ResourceError((err as Error).message, this);
    }
    const cacheFrom = b.cacheFrom === CACHE_FROM_NONE ? undefined : b.cacheFrom;
    const common = {
      tree: tree.dest,
      flags: this.flags,
      // With a build command the command decides what it builds: no CMake targets.
      ...(b.command ? {} : { targets: b.targets }),
      artifacts: b.artifacts,
      ...(b.jobs ? { jobs: b.jobs } : {}),
      ...(b.command ? { command: b.command, path: args.toolchain?.binPath ?? [] } : {}),
    };
    const opts_ = (node: string, dependsOn: pulumi.Resource[], connections?: string[]) =>
      nodes.childOpts(
        { parent: this, aliases: preStageAliases(args.preStage, node), dependsOn },
        connections,
      );
    this.distribute = buildDistribute(b);
    // Fan-out needs one node that builds: the cache source, else (cacheFrom none) the first.
    const seed = this.distribute === "fan-out" ? (cacheFrom ?? nodes.names[0]) : cacheFrom;
    const seedBuild =
      seed === undefined
        ? undefined
        : new NativeBuild(
            `${name}-${seed}`,
            { ...common, target: nodes.target(seed), treeDigest: tree.of(seed).digest },
            opts_(seed, [tree.of(seed)]),
          );
    const entries = nodes.names.map((node) => {
      if (node === seed && seedBuild) return [node, seedBuild] as const;
      const sync = tree.of(node);
      const fanOut = this.distribute === "fan-out" && seed !== undefined && seedBuild;
      const build = new NativeBuild(
        `${name}-${node}`,
        {
          ...common,
          target: nodes.target(node),
          treeDigest: sync.digest,
          ...(fanOut
            ? { fanOutFrom: fanOutSource(nodes.peer(seed, node), seedBuild) }
            : seed !== undefined
              ? { cacheFrom: nodes.peer(seed, node) }
              : {}),
        },
        // cacheFrom and fanOutFrom carry the seed's connection too.
        opts_(node, seedBuild ? [sync, seedBuild] : [sync], [
          "target",
          fanOut ? "fanOutFrom" : "cacheFrom",
        ]),
      );
      return [node, build] as const;
    });
    this.perNode = new PerNode(this, "build", entries);
    this.ready = this.perNode.values();
    this.byNode = gatherByNode(nodes.names, (n) => {
      const x = this.of(n);
      return {
        builtBy: x.builtBy,
        builtOn: x.builtOn,
        buildKey: x.buildKey,
        commit: x.commit,
        installDir: x.installDir,
        artifacts: x.artifacts,
        checks: x.checks,
        instructions: x.instructions,
      };
    });
    this.registerOutputs({ byNode: this.byNode });
  }

  of(node: string): NativeBuild {
    return this.perNode.of(node);
  }
}

/** What a fanned-out node takes from the source's NativeBuild: its outputs (so it follows them). */
function fanOutSource(
  peer: ReturnType<Nodes["peer"]>,
  source: NativeBuild,
): pulumi.Output<FanOutSource> {
  return pulumi.output({
    peer,
    buildKey: source.buildKey,
    installDir: source.installDir,
    installed: source.installed,
    checks: source.checks,
    instructions: source.instructions,
    cpuLibrary: source.cpuLibrary,
    compiler: source.compiler,
    compilerDigests: source.compilerDigests,
    treeDigest: source.treeDigest,
  }) as pulumi.Output<FanOutSource>;
}
