// SparkCluster composes the stages, each taking the previous stage's object:
// nodes → fabric, nodes → toolchain → tree → build, nodes → model, and (build, model,
// fabric) → rpc-worker, and (build, model, rpc-worker) → serving. Per-node work lives in
// the stages.
import * as pulumi from "@pulumi/pulumi";
import type { PreStageLayout } from "./aliases";
import * as path from "node:path";
import { type BuildSummary, Builds } from "./build/builds";
import { CACHE_FROM_NONE, stackBuildFlags } from "./build/config";
import type { BuildFlags } from "./build/flags";
import type { StackConfig } from "./stack-config";
import { Fabric, type FabricNodeSummary } from "./fabric/fabric";
import { Model } from "./model/model";
import type { SparkNodeFacts } from "./node/facts";
import { Nodes } from "./node/nodes";
import { type RpcWorkers, rpcWorkersFor, type WorkerSummary } from "./rpc-worker/workers";
import { ServingDrain } from "./serving/drain";
import { Serving, type ServingSummary } from "./serving/serving";
import { type ToolchainSummary, Toolchains } from "./toolchain/toolchains";
import { type TreeSummary, Trees } from "./tree/trees";

export type { BuildSummary } from "./build/builds";

export interface SparkClusterArgs {
  /**
   * The whole `sparkform:` configuration, validated with every default and cross-reference
   * resolved, secrets included (`readStackConfig`, components/stack-config.ts).
   */
  readonly config: StackConfig;
  /** Directory that relative paths in the config are relative to (the project). */
  readonly projectDir: string;
}

/**
 * A cluster of Sparks: the nodes and their fact sheets, then the toolchain copied from the
 * source node, the working tree synced and proven by digest, llama.cpp built and verified on
 * every node, and the model downloaded once and fanned out.
 */
export class SparkCluster extends pulumi.ComponentResource {
  readonly nodes: Nodes;
  readonly fabric?: Fabric;
  readonly toolchains?: Toolchains;
  readonly trees?: Trees;
  readonly builds?: Builds;
  readonly model?: Model;
  readonly workers?: RpcWorkers;
  /** Per worker node: endpoint, version, binary digest, device memory, health, transport, unit. */
  readonly worker?: pulumi.Output<Record<string, WorkerSummary>>;
  /** Fact sheet per node name. */
  readonly facts: pulumi.Output<Record<string, SparkNodeFacts>>;
  /** Per node: its rails, each link's class, RTT and throughput (when a fabric is configured). */
  readonly rails?: pulumi.Output<Record<string, FabricNodeSummary>>;
  /** Toolchain digest and probe output per node name (when a toolchain is configured). */
  readonly toolchain?: pulumi.Output<Record<string, ToolchainSummary>>;
  /** Tree digest, file count and bytes per node name, with the control node's digest. */
  readonly tree?: pulumi.Output<{ expected: TreeSummary; nodes: Record<string, TreeSummary> }>;
  /** Per node: build key, commit, install dir, artifact digests, verification checks, counts. */
  readonly build?: pulumi.Output<Record<string, BuildSummary>>;
  readonly servingStage?: Serving;
  /** The placement plan, its renderings, the server, where the model landed, the smoke. */
  readonly serving?: pulumi.Output<ServingSummary>;

  constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:SparkCluster", name, {}, opts);
    const { config } = args;
    // Stacks made before the stage layout hold every per-node resource as a direct child of
    // this component: the stages alias them, so `up` moves them instead of replacing them.
    const preStage = (stage?: string): PreStageLayout => ({
      parent: this,
      prefix: stage ? `${name}-${stage}` : name,
    });
    const child = { parent: this };
    // The flags with the tree's commit (the config checked them before the commit was read).
    let flags: BuildFlags | undefined;
    if (config.build && config.tree) {
      try {
        flags = stackBuildFlags(config.build, {
          source: path.resolve(args.projectDir, config.tree.source),
          exclude: config.tree.exclude,
        });
      } catch (err) {
        throw new pulumi.ResourceError((err as Error).message, this);
      }
    }

    const nodes = new Nodes(
      `${name}-node`,
      {
        nodes: config.nodes,
        ssh: config,
        ...(config.privateKey ? { privateKey: config.privateKey } : {}),
        diskPaths: config.diskPaths,
        preStage: preStage(),
      },
      child,
    );
    this.nodes = nodes;
    this.facts = nodes.byNode;

    if (config.fabric) {
      // Measured, never inferred: every pair of nodes on every rail both have.
      this.fabric = new Fabric(`${name}-fabric`, { nodes, fabric: config.fabric }, child);
      this.rails = this.fabric.byNode;
    }

    const tc = config.toolchain;
    const toolchains = tc
      ? new Toolchains(
          `${name}-toolchain`,
          {
            nodes,
            path: tc.path,
            source: tc.source,
            binDirs: tc.binDirs,
            probe: tc.probe,
            expect: tc.expect,
            preStage: preStage("toolchain"),
          },
          child,
        )
      : undefined;
    this.toolchains = toolchains;
    this.toolchain = toolchains?.byNode;

    if (config.tree) {
      const trees = new Trees(
        `${name}-tree`,
        {
          nodes,
          ...(toolchains ? { toolchain: toolchains } : {}),
          source: config.tree.source,
          projectDir: args.projectDir,
          dest: config.tree.dest,
          exclude: config.tree.exclude,
          preStage: preStage("tree"),
        },
        child,
      );
      this.trees = trees;
      this.tree = trees.byNode.apply((byNode) => ({ expected: trees.expected, nodes: byNode }));
      const b = config.build;
      if (b && flags) {
        this.builds = new Builds(
          `${name}-build`,
          {
            nodes,
            tree: trees,
            ...(toolchains ? { toolchain: toolchains } : {}),
            build: b,
            flags,
            cacheFrom: b.cacheFrom === CACHE_FROM_NONE ? undefined : b.cacheFrom,
            preStage: preStage("build"),
          },
          child,
        );
        this.build = this.builds.byNode;
      }
    }

    if (config.model) {
      const m = config.model;
      this.model = new Model(
        `${name}-model`,
        {
          repo: m.repo,
          revision: m.revision,
          files: m.files,
          sha256: m.sha256,
          allowBranch: m.allowBranch,
          endpoint: m.endpoint,
          verify: m.verify,
          modelsDir: m.modelsDir,
          retries: m.retries,
          ...(config.hfToken ? { token: config.hfToken } : {}),
          nodes,
          on: m.nodes,
        },
        child,
      );
    }

    // llama-server on the client node: it needs the model, the builds and the workers.
    const server = config.server;
    // The drain first: the workers wait for it, so a changed build stops the server before
    // any worker restarts with it.
    const drain =
      server && this.builds && this.model
        ? new ServingDrain(
            `${name}-serving-drain`,
            { nodes, builds: this.builds, client: server.node, port: server.port },
            child,
          )
        : undefined;

    // ggml-rpc-server on the worker nodes, from the verified build, bound to the fabric.
    if (this.builds && this.trees) {
      this.workers = rpcWorkersFor(
        `${name}-worker`,
        {
          nodes,
          builds: this.builds,
          trees: this.trees,
          ...(this.model ? { model: this.model } : {}),
          ...(this.fabric ? { fabric: this.fabric } : {}),
          ...(drain ? { after: [drain] } : {}),
        },
        config,
        child,
      );
      this.worker = this.workers?.byNode;
    }

    if (server && drain && this.builds && this.model && this.workers && config.worker) {
      this.servingStage = new Serving(
        `${name}-serving`,
        {
          nodes,
          builds: this.builds,
          model: this.model,
          workers: this.workers,
          ...(this.fabric ? { fabric: this.fabric } : {}),
          server,
          ...(config.serverApiKey ? { apiKey: config.serverApiKey } : {}),
        },
        child,
      );
      this.serving = this.servingStage.summary;
    }

    this.registerOutputs({
      facts: this.facts,
      rails: this.rails,
      toolchain: this.toolchain,
      tree: this.tree,
      build: this.build,
      model: this.model,
      worker: this.worker,
      serving: this.serving,
    });
  }
}
