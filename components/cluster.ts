import * as pulumi from "@pulumi/pulumi";
import { existsSync, statSync } from "node:fs";
import * as path from "node:path";
import { stackBuildFlags } from "./build/config";
import type { BuildFlags } from "./build/flags";
import { NativeBuild } from "./build/native-build";
import { type ClusterConfig, sshTarget } from "./config";
import type { ModelConfig } from "./model/config";
import { Model } from "./model/model";
import { SparkNode } from "./node/spark-node";
import { Toolchain } from "./toolchain/toolchain";
import type { SshTarget } from "./transport/ssh";
import { validateTarget } from "./transport/connection";
import { localTreeDigest } from "./tree/digest";
import { TreeSync } from "./tree/tree-sync";

export interface SparkClusterArgs {
  /** The validated `sparkform:` stack configuration. */
  readonly config: ClusterConfig;
  /** Private key text for every node (a Pulumi secret), if not given as a file. */
  readonly privateKey?: pulumi.Output<string>;
  /** The validated `sparkform:model` section, if the stack has a model. */
  readonly model?: ModelConfig;
  /** Hugging Face token (a Pulumi secret): only the downloading node sees it. */
  readonly hfToken?: pulumi.Output<string>;
  /** Directory that relative paths in the config are relative to (the project). */
  readonly projectDir: string;
}

/**
 * A cluster of Sparks: one SparkNode per node, then the toolchain copied from the source
 * node, then the working tree synced to every node and proven by digest.
 */
export class SparkCluster extends pulumi.ComponentResource {
  /** Fact sheet per node name. */
  readonly facts: pulumi.Output<Record<string, unknown>>;
  /** Toolchain digest and probe output per node name (when a toolchain is configured). */
  readonly toolchain?: pulumi.Output<
    Record<string, { digest: string; probe: string; copiedBy: string }>
  >;
  /** Tree digest, file count and bytes per node name, with the control node's digest. */
  readonly tree?: pulumi.Output<{
    expected: { digest: string; files: number; bytes: number };
    nodes: Record<string, { digest: string; files: number; bytes: number }>;
  }>;
  /** Per node: build key, commit, install dir, artifact digests, verification checks, counts. */
  readonly build?: pulumi.Output<Record<string, BuildSummary>>;
  /** The model: commit, files with SHA-256, GGUF header summary, and where each node has it. */
  readonly model?: Model;

  constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:SparkCluster", name, {}, opts);
    const { config } = args;
    const secret = args.privateKey !== undefined;
    // A private key rides in each resource's target: keep those encrypted in state.
    // `connections`: the properties that carry a node's connection (and so the key).
    const childOpts = (
      extra: pulumi.CustomResourceOptions = {},
      connections: string[] = ["target"],
    ): pulumi.CustomResourceOptions => ({
      parent: this,
      ...extra,
      additionalSecretOutputs: secret ? connections : [],
    });

    const targets = new Map<string, pulumi.Output<SshTarget>>();
    for (const node of config.nodes) {
      const plain = sshTarget(node, config);
      // Fails at preview, before anything connects, naming the node and field.
      try {
        validateTarget(plain);
      } catch (err) {
        throw new pulumi.ResourceError(`sparkform:nodes ${(err as Error).message}`, this);
      }
      targets.set(
        node.name,
        args.privateKey
          ? args.privateKey.apply((privateKey) => ({ ...plain, privateKey }))
          : pulumi.output(plain),
      );
    }
    const target = (n: string) => targets.get(n) as pulumi.Output<SshTarget>;

    // Everything after the fact sheets depends on ALL of them: one unreachable node or wrong
    // host key stops the run before any node is changed.
    const nodes = config.nodes.map(
      (node) =>
        new SparkNode(
          `${name}-${node.name}`,
          { target: target(node.name), diskPaths: ["~/models", config.tree?.dest ?? "~"] },
          childOpts(),
        ),
    );
    this.facts = pulumi
      .all(nodes.map((n) => n.facts))
      .apply((fs) => Object.fromEntries(config.nodes.map((n, i) => [n.name, fs[i]])));

    let toolchains: Toolchain[] = [];
    if (config.toolchain) {
      const tc = config.toolchain;
      const sourceName = tc.source ?? config.nodes[0]?.name ?? "";
      const sourceNode = config.nodes.find((n) => n.name === sourceName);
      if (!sourceNode) {
        throw new pulumi.ResourceError(
          `sparkform:toolchain.source ${JSON.stringify(sourceName)} is not one of the nodes (${config.nodes.map((n) => n.name).join(", ")})`,
          this,
        );
      }
      const common = { path: tc.path, binDirs: tc.binDirs, probe: tc.probe, expect: tc.expect };
      const source = new Toolchain(
        `${name}-toolchain-${sourceNode.name}`,
        { ...common, target: target(sourceNode.name) },
        childOpts({ dependsOn: nodes }),
      );
      toolchains = config.nodes.map((node) =>
        node === sourceNode
          ? source
          : new Toolchain(
              `${name}-toolchain-${node.name}`,
              {
                ...common,
                target: target(node.name),
                source: target(sourceNode.name).apply((t) => ({
                  target: t,
                  ...(sourceNode.fabricAddress ? { fabricAddress: sourceNode.fabricAddress } : {}),
                })),
                expectedDigest: source.digest,
              },
              childOpts({ dependsOn: [...nodes, source] }, ["target", "source"]),
            ),
      );
      this.toolchain = pulumi
        .all(toolchains.map((t) => pulumi.all([t.digest, t.probeOutput, t.copiedBy])))
        .apply((rows) =>
          Object.fromEntries(
            config.nodes.map((n, i) => {
              const [digest, probe, copiedBy] = rows[i] as [string, string, string];
              return [n.name, { digest, probe, copiedBy }];
            }),
          ),
        );
    }

    if (config.tree) {
      const tree = config.tree;
      const source = path.resolve(args.projectDir, tree.source);
      if (!existsSync(source) || !statSync(source).isDirectory()) {
        throw new pulumi.ResourceError(
          `sparkform:tree.source ${JSON.stringify(tree.source)} is not a directory (resolved to ${source}): ` +
            `point it at the working tree to sync`,
          this,
        );
      }
      // Once per program run, for all nodes: the control node's side of the proof.
      const expected = localTreeDigest(source, tree.exclude);
      const syncs = config.nodes.map(
        (node, i) =>
          new TreeSync(
            `${name}-tree-${node.name}`,
            {
              target: target(node.name),
              source,
              dest: tree.dest,
              exclude: tree.exclude,
              expectedDigest: expected.digest,
            },
            childOpts({
              dependsOn: [...nodes, ...(toolchains[i] ? [toolchains[i]] : [])],
            }),
          ),
      );
      if (config.build) {
        this.build = this.nativeBuilds(name, config, source, syncs, target, childOpts);
      }
      this.tree = pulumi
        .all(syncs.map((s) => pulumi.all([s.digest, s.files, s.bytes])))
        .apply((rows) => ({
          expected: { digest: expected.digest, files: expected.files, bytes: expected.bytes },
          nodes: Object.fromEntries(
            config.nodes.map((n, i) => {
              const [digest, files, bytes] = rows[i] as [string, number, number];
              return [n.name, { digest, files, bytes }];
            }),
          ),
        }));
    }

    if (args.model) {
      const m = args.model;
      const names = m.nodes ?? config.nodes.map((n) => n.name);
      const unknown = names.filter((n) => !targets.has(n));
      if (unknown.length > 0) {
        throw new pulumi.ResourceError(
          `sparkform:model.nodes names ${unknown.join(", ")}, not among sparkform:nodes (${config.nodes.map((n) => n.name).join(", ")})`,
          this,
        );
      }
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
          ...(args.hfToken ? { token: args.hfToken } : {}),
          nodes: names.map((n) => {
            const fabric = config.nodes.find((x) => x.name === n)?.fabricAddress;
            return { name: n, target: target(n), ...(fabric ? { fabricAddress: fabric } : {}) };
          }),
        },
        // The component passes dependsOn on to every replica.
        { parent: this, dependsOn: nodes },
      );
    }

    this.registerOutputs({
      facts: this.facts,
      toolchain: this.toolchain,
      tree: this.tree,
      build: this.build,
      model: this.model?.commit,
    });
  }

  /**
   * One NativeBuild per node in its synced tree. The cache source (default: the first node)
   * builds first; the others seed their compiler cache from it over the fabric, then build.
   */
  private nativeBuilds(
    name: string,
    config: ClusterConfig,
    source: string,
    syncs: TreeSync[],
    target: (n: string) => pulumi.Output<SshTarget>,
    childOpts: (
      extra?: pulumi.CustomResourceOptions,
      connections?: string[],
    ) => pulumi.CustomResourceOptions,
  ): pulumi.Output<Record<string, BuildSummary>> {
    const b = config.build as NonNullable<ClusterConfig["build"]>;
    const tree = config.tree as NonNullable<ClusterConfig["tree"]>;
    let flags: BuildFlags;
    try {
      flags = stackBuildFlags(b, { source, exclude: tree.exclude });
    } catch (err) {
      throw new pulumi.ResourceError((err as Error).message, this);
    }
    const seedName = b.cacheFrom === "none" ? undefined : (b.cacheFrom ?? config.nodes[0]?.name);
    const seedIndex = config.nodes.findIndex((n) => n.name === seedName);
    if (seedName !== undefined && seedIndex < 0) {
      throw new pulumi.ResourceError(
        `sparkform:build.cacheFrom ${JSON.stringify(seedName)} is not one of the nodes (${config.nodes.map((n) => n.name).join(", ")}), nor "none"`,
        this,
      );
    }
    // A build command (llama_cpp_ex: mix compile) runs with the toolchain's install
    // directories on PATH, as the runbook's environment contract has it (no shims).
    const tc = config.toolchain;
    const toolchainPath = tc ? tc.binDirs.map((d) => `${tc.path.replace(/\/+$/, "")}/${d}`) : [];
    const common = {
      tree: tree.dest,
      flags,
      targets: b.targets,
      artifacts: b.artifacts,
      ...(b.jobs ? { jobs: b.jobs } : {}),
      ...(b.command ? { command: b.command, path: toolchainPath } : {}),
    };
    const seed = config.nodes[seedIndex];
    const seedSync = syncs[seedIndex];
    const seedBuild =
      seed && seedSync
        ? new NativeBuild(
            `${name}-build-${seed.name}`,
            { ...common, target: target(seed.name), treeDigest: seedSync.digest },
            childOpts({ dependsOn: [seedSync] }),
          )
        : undefined;
    const builds = config.nodes.map((node, i) => {
      const sync = syncs[i] as TreeSync;
      if (i === seedIndex && seedBuild) return seedBuild;
      return new NativeBuild(
        `${name}-build-${node.name}`,
        {
          ...common,
          target: target(node.name),
          treeDigest: sync.digest,
          ...(seed
            ? {
                cacheFrom: target(seed.name).apply((t) => ({
                  target: t,
                  ...(seed.fabricAddress ? { fabricAddress: seed.fabricAddress } : {}),
                })),
              }
            : {}),
        },
        // cacheFrom carries the seed's connection too.
        childOpts({ dependsOn: seedBuild ? [sync, seedBuild] : [sync] }, ["target", "cacheFrom"]),
      );
    });
    return pulumi
      .all(
        builds.map((x) =>
          pulumi.all([x.buildKey, x.commit, x.installDir, x.artifacts, x.checks, x.instructions]),
        ),
      )
      .apply((rows) =>
        Object.fromEntries(
          config.nodes.map((n, i) => {
            const [buildKey, commit, installDir, artifacts, checks, instructions] = rows[i] as [
              string,
              string,
              string,
              Record<string, string>,
              unknown[],
              Record<string, number>,
            ];
            return [n.name, { buildKey, commit, installDir, artifacts, checks, instructions }];
          }),
        ),
      );
  }
}

export interface BuildSummary {
  buildKey: string;
  commit: string;
  installDir: string;
  artifacts: Record<string, string>;
  checks: unknown[];
  instructions: Record<string, number>;
}
