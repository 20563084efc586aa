// The nodes stage: one SparkNode per configured node, and each node's connection, which every
// later stage takes from here (the pulumi-eks way: the next component receives this object).
import * as pulumi from "@pulumi/pulumi";
import { type PreStageLayout, preStageAliases } from "../aliases";
import type { Validated } from "../config/descriptor";
import { type NodeConfig, type SshSettings, sshTarget } from "./config";
import { gatherByNode, type Stage } from "../stage";
import { validateTarget, type SshTarget } from "../transport";
import type { SparkNodeFacts } from "./facts";
import { SparkNode } from "./spark-node";

/** A node as another node reaches it: its connection and its fabric address. */
export interface PeerSpec {
  target: SshTarget;
  /** The peer's address on the fabric as the other nodes reach it, if it has one. */
  fabricAddress?: string;
}

export interface NodesArgs {
  /** The validated `sparkform:nodes`, in order; the first is the default source of copies. */
  readonly config: Validated<readonly NodeConfig[]>;
  /** The cluster-wide ssh settings (`sparkform:sshKeyPath`, `sparkform:sshConfigPath`). */
  readonly ssh: SshSettings;
  /** Private key text for every node (a Pulumi secret), when not given as a file. */
  readonly privateKey?: pulumi.Output<string>;
  /** Directories whose free space each fact sheet reports (models dir, tree). */
  readonly diskPaths: readonly string[];
  /** Where stacks made before the stage layout have these nodes (aliases, no replacement). */
  readonly preStage?: PreStageLayout;
  /**
   * Where `from` reaches `to` over the fabric when that is not `to`'s one fabricAddress: a
   * ring's pairs each have their own cable and subnet (components/fabric/config.ts
   * linkAddress). Default: every node reaches `to` at its fabricAddress.
   */
  readonly reach?: (from: string, to: string) => string | undefined;
}

/**
 * The cluster's nodes. Everything after the fact sheets depends on ALL of them: one
 * unreachable node or a wrong host key stops the run before any node is changed.
 */
export class Nodes extends pulumi.ComponentResource implements Stage<SparkNodeFacts> {
  /** Node names in configuration order. */
  readonly names: readonly string[];
  readonly byNode: pulumi.Output<Record<string, SparkNodeFacts>>;
  readonly ready: readonly SparkNode[];
  /** True when connections carry a private key: children keep those properties secret. */
  readonly secretConnections: boolean;
  private readonly configs: ReadonlyMap<string, NodeConfig>;
  private readonly targets: ReadonlyMap<string, pulumi.Output<SshTarget>>;
  private readonly resources: ReadonlyMap<string, SparkNode>;
  private readonly reach: NodesArgs["reach"];

  constructor(name: string, args: NodesArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Nodes", name, {}, opts);
    this.names = args.config.map((n) => n.name);
    this.secretConnections = args.privateKey !== undefined;
    this.configs = new Map(args.config.map((n) => [n.name, n]));
    this.reach = args.reach;
    const targets = new Map<string, pulumi.Output<SshTarget>>();
    for (const node of args.config) {
      const plain = sshTarget(node, args.ssh);
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
    this.targets = targets;
    const resources = new Map<string, SparkNode>();
    for (const node of args.config) {
      resources.set(
        node.name,
        new SparkNode(
          `${name}-${node.name}`,
          { target: this.target(node.name), diskPaths: [...args.diskPaths] },
          this.childOpts({ aliases: preStageAliases(args.preStage, node.name) }),
        ),
      );
    }
    this.resources = resources;
    this.ready = [...resources.values()];
    this.byNode = gatherByNode(this.names, (n) => this.of(n).facts);
    this.registerOutputs({ byNode: this.byNode });
  }

  of(node: string): SparkNode {
    return this.lookup(this.resources, node);
  }

  has(node: string): boolean {
    return this.configs.has(node);
  }

  /** How the control node reaches `node` (with the private key, when one is configured). */
  target(node: string): pulumi.Output<SshTarget> {
    return this.lookup(this.targets, node);
  }

  /** Where the other nodes reach `node` (its configured fabric address), known at preview. */
  fabricAddress(node: string): string | undefined {
    return this.lookup(this.configs, node).fabricAddress;
  }

  /** Where the control node reaches `node` (its configured management host), known at preview. */
  managementAddress(node: string): string {
    return this.lookup(this.configs, node).host;
  }

  /**
   * `node` as its peers reach it: connection plus fabric address; as `from` reaches it when
   * given (a ring: the address on the cable joining the two).
   */
  peer(node: string, from?: string): pulumi.Output<PeerSpec> {
    const fabricAddress =
      (from === undefined ? undefined : this.reach?.(from, node)) ?? this.fabricAddress(node);
    return this.target(node).apply((target) => ({
      target,
      ...(fabricAddress ? { fabricAddress } : {}),
    }));
  }

  /**
   * Options for a stage's child resource: `parent` is the stage, and the properties that carry
   * a node's connection (`connections`, default `target`) stay encrypted in state when the
   * connection holds a private key.
   */
  childOpts(
    extra: pulumi.CustomResourceOptions & { parent?: pulumi.Resource },
    connections: readonly string[] = ["target"],
  ): pulumi.CustomResourceOptions {
    return {
      parent: this,
      ...extra,
      additionalSecretOutputs: this.secretConnections ? [...connections] : [],
    };
  }

  private lookup<T>(map: ReadonlyMap<string, T>, node: string): T {
    const v = map.get(node);
    if (v === undefined) {
      throw new pulumi.ResourceError(
        `${JSON.stringify(node)} is not one of the nodes (${this.names.join(", ")})`,
        this,
      );
    }
    return v;
  }
}
