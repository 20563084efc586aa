// SparkCluster composes the stages, each taking the previous stage's object:
// nodes → fabric, nodes → toolchain → tree → build, nodes → model, and (build, model,
// fabric) → rpc-worker, and (build, model, rpc-worker) → serving. Per-node work lives in
// the stages.
import * as pulumi from "@pulumi/pulumi";
import type { PreStageLayout } from "./aliases";
import { type BuildSummary, Builds } from "./build/builds";
import type { StackConfig } from "./stack-config";
import { Fabric, type FabricNodeSummary } from "./fabric/fabric";
import { linkAddress } from "./fabric/config";
import { stagedKey } from "./model/config";
import { ModelDirClaims } from "./model/dir-claims";
import { Model } from "./model/model";
import type { SparkNodeFacts } from "./node/facts";
import { Nodes } from "./node/nodes";
import { RpcWorkers, type WorkerSummary } from "./rpc-worker/workers";
import { ServingDrain } from "./serving/drain";
import { Serving, type ServingSummary } from "./serving/serving";
import { SPARKFORM_MODEL } from "./serving/config";
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
  /** The models staged beside `model` (sparkform:models), by name. */
  readonly staged: Record<string, Model>;
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

    const ringFabric = config.fabric?.topology === "ring" ? config.fabric : undefined;
    const nodes = new Nodes(
      `${name}-node`,
      {
        config: config.nodes,
        ssh: config,
        ...(config.privateKey ? { privateKey: config.privateKey } : {}),
        diskPaths: config.diskPaths,
        preStage: preStage(),
        // A ring's peers copy from each other over the cable joining them.
        ...(ringFabric ? { reach: (from, to) => linkAddress(ringFabric, from, to) } : {}),
      },
      child,
    );
    this.nodes = nodes;
    this.facts = nodes.byNode;
    // Measured, never inferred: every pair of nodes on every rail both have.
    const fabric =
      config.fabric && new Fabric(`${name}-fabric`, { nodes, config: config.fabric }, child);
    this.fabric = fabric;
    this.rails = fabric?.byNode;

    const toolchain =
      config.toolchain &&
      new Toolchains(
        `${name}-toolchain`,
        { nodes, config: config.toolchain, preStage: preStage("toolchain") },
        child,
      );
    this.toolchains = toolchain;
    this.toolchain = toolchain?.byNode;
    const withToolchain = toolchain ? { toolchain } : {};

    const tree =
      config.tree &&
      new Trees(
        `${name}-tree`,
        {
          nodes,
          ...withToolchain,
          config: config.tree,
          projectDir: args.projectDir,
          preStage: preStage("tree"),
        },
        child,
      );
    this.trees = tree;
    this.tree = tree?.byNode.apply((byNode) => ({ expected: tree.expected, nodes: byNode }));
    const builds =
      tree &&
      config.build &&
      new Builds(
        `${name}-build`,
        { nodes, tree, ...withToolchain, config: config.build, preStage: preStage("build") },
        child,
      );
    this.builds = builds;
    this.build = builds?.byNode;

    // hfToken is given for sparkform:model's endpoint (default the public hub): a staged model
    // elsewhere gets it only with `sendToken: true` (Model decides, model/token-origin.ts). The
    // models claim their directories by resolved commit, so none is staged twice.
    const dirs = new ModelDirClaims();
    const modelArgs = (key: string | undefined) => ({
      key: stagedKey(key),
      dirs,
      ...(config.hfToken && config.model
        ? { token: config.hfToken, tokenOrigin: config.model.endpoint }
        : {}),
    });
    const model =
      config.model &&
      new Model(`${name}-model`, { nodes, config: config.model, ...modelArgs(undefined) }, child);
    this.model = model;
    // More models staged beside it (sparkform:models), each fetched and verified the same way;
    // `server.model` picks the one served. Named `<stack>-models-<name>`, apart from the model's.
    this.staged = Object.fromEntries(
      model
        ? Object.entries(config.models ?? {}).map(([key, m]) => [
            key,
            new Model(`${name}-models-${key}`, { nodes, config: m, ...modelArgs(key) }, child),
          ])
        : [],
    );
    const everyModel = model ? [model, ...Object.values(this.staged)] : [];

    // The drain first: the workers wait for it, so a changed build stops the server before
    // any worker restarts with it.
    const server = config.server;
    const drain =
      server && builds && model
        ? new ServingDrain(`${name}-serving-drain`, { nodes, builds, config: server }, child)
        : undefined;

    // ggml-rpc-server on the worker nodes, from the verified build, bound to the fabric.
    const workers =
      builds && tree && config.worker
        ? new RpcWorkers(
            `${name}-worker`,
            {
              nodes,
              builds,
              trees: tree,
              models: everyModel,
              ...(fabric ? { fabric } : {}),
              ...(drain ? { after: [drain] } : {}),
              config: config.worker,
            },
            child,
          )
        : undefined;
    this.workers = workers;
    this.worker = workers?.byNode;

    // llama-server on the client node: it needs the model, the builds and the workers.
    if (server && drain && builds && model && workers) {
      // The server section's cross-check refused a server.model that sparkform:models lacks.
      // server.models: every one served side by side, the first where server.model's goes
      // (`model` names sparkform:model itself; the cross-check refused an unstaged name).
      const servedList = server.models?.map((alias) => ({
        alias,
        model: alias === SPARKFORM_MODEL ? model : (this.staged[alias] as Model),
      }));
      const first = server.models?.[0];
      const selected =
        first !== undefined ? (first === SPARKFORM_MODEL ? undefined : first) : server.model;
      const served = selected === undefined ? model : (this.staged[selected] as Model);
      this.servingStage = new Serving(
        `${name}-serving`,
        {
          nodes,
          builds,
          model: served,
          models: {
            live: stagedKey(selected),
            staged: [stagedKey(undefined), ...Object.keys(this.staged).map(stagedKey)],
          },
          ...(servedList ? { served: servedList } : {}),
          workers,
          ...(fabric ? { fabric } : {}),
          config: server,
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
