// The worker stage: on each worker node, ggml-rpc-server from that node's verified build as a
// supervised user unit bound to its fabric address, checked by a HELLO from the client node.
// Takes the Nodes and Builds stages (and the Trees stage, for the client's protocol version).
import * as pulumi from "@pulumi/pulumi";
import type { Builds } from "../build/builds";
import type { FabricConfig } from "../fabric/config";
import type { NodeConfig } from "../node/config";
import type { StackWorker } from "./config";
import type { Fabric } from "../fabric/fabric";
import type { Model } from "../model/model";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import type { RpcTransport } from "../fabric/rpc-log";
import type { Trees } from "../tree/trees";
import type { Health } from "./plan";
import { RpcWorker } from "./rpc-worker";

export interface WorkerSummary {
  endpoint: string;
  version: string;
  digest: string;
  deviceMemory: { device: number; free: number; total: number }[];
  health: Health;
  transport: RpcTransport;
  unit: string;
}

/** A worker as its client dials it: the llama.cpp device it becomes and its fabric endpoint. */
export interface WorkerEndpoint {
  readonly node: string;
  /** `RPC<k>`, in `sparkform:worker.nodes` order: the client's device name for this worker. */
  readonly device: string;
  /** `<fabric address>:<port>`, what `--rpc` lists. */
  readonly endpoint: string;
}

export interface RpcWorkersArgs {
  readonly nodes: Nodes;
  /** The validated `sparkform:nodes` (fabric and management addresses, known at preview). */
  readonly nodeConfigs: readonly NodeConfig[];
  readonly builds: Builds;
  readonly trees: Trees;
  /** The node that runs the client (llama-server / llama-completion --rpc). */
  readonly client: string;
  /** The nodes that run a worker (never the client). */
  readonly workers: readonly string[];
  readonly port: number;
  readonly threads: number;
  readonly devices: readonly string[];
  readonly cache: boolean;
  readonly debug: boolean;
  readonly rssLimitPercent: number;
  readonly rssIntervalSeconds: number;
  /**
   * The Model stage: on a worker node that holds the model, its verified copy pre-warms the
   * tensor cache (with `cache` on). Default: no pre-warm.
   */
  readonly model?: Model;
  /** Per node, every fabric address it has (the Fabric stage's rails); default: its fabricAddress. */
  readonly fabricAddresses?: Readonly<Record<string, readonly string[]>>;
  /** More resources every worker waits for (the serving stage's drain). Default: none. */
  readonly after?: readonly pulumi.Resource[];
}

export class RpcWorkers extends pulumi.ComponentResource implements Stage<WorkerSummary> {
  readonly byNode: pulumi.Output<Record<string, WorkerSummary>>;
  readonly ready: readonly RpcWorker[];
  /** Each worker as the client dials it, in worker order; known at preview (from config). */
  readonly endpoints: readonly WorkerEndpoint[];
  /** The port every worker listens on. */
  readonly port: number;
  private readonly perNode: PerNode<RpcWorker>;

  constructor(name: string, args: RpcWorkersArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:RpcWorkers", name, {}, opts);
    const { nodes, builds } = args;
    const fail = (msg: string): never => {
      throw new pulumi.ResourceError(msg, this);
    };
    if (!nodes.has(args.client))
      fail(
        `sparkform:worker.client ${JSON.stringify(args.client)} is not one of the nodes (${nodes.names.join(", ")})`,
      );
    const clientPeer = nodes.peer(args.client);
    // What each build was made from, as its NativeBuild recorded it: the evidence that names
    // why two builds differ (components/build/difference.ts).
    const inputsOf = (n: string) => {
      const b = builds.of(n);
      return pulumi
        .all([b.treeDigest, b.compiler, b.compilerDigests, b.builtBy, b.builtOn])
        .apply(([treeDigest, compiler, compilerDigests, builtBy, builtOn]) => ({
          node: n,
          treeDigest,
          flags: { ...builds.flags } as Record<string, unknown>,
          compiler,
          compilerDigests,
          builtBy,
          builtOn,
        }));
    };
    const configOf = (n: string) => args.nodeConfigs.find((c) => c.name === n);
    const entries = args.workers.map((node) => {
      if (!nodes.has(node))
        fail(
          `sparkform:worker.nodes: ${JSON.stringify(node)} is not one of the nodes (${nodes.names.join(", ")})`,
        );
      if (node === args.client)
        fail(`sparkform:worker.nodes: ${node} is the client; list only the other nodes`);
      const cfg = nodes.fabricAddress(node);
      const clientFabric = nodes.fabricAddress(args.client);
      if (!cfg || !clientFabric)
        fail(
          `sparkform:nodes: ${!cfg ? node : args.client} has no fabricAddress; the worker binds only to a fabric address and the client probes it over the fabric: set sparkform:nodes[].fabricAddress`,
        );
      const w = new RpcWorker(
        `${name}-${node}`,
        {
          target: nodes.target(node),
          client: clientPeer.apply((p) => ({
            target: p.target,
            fabricAddress: clientFabric as string,
          })),
          bind: cfg as string,
          managementAddress: configOf(node)?.host ?? "",
          fabricAddresses: args.fabricAddresses?.[node] ?? [cfg as string],
          port: args.port,
          threads: args.threads,
          devices: args.devices,
          cache: args.cache,
          debug: args.debug,
          rssLimitPercent: args.rssLimitPercent,
          rssIntervalSeconds: args.rssIntervalSeconds,
          workerBuild: {
            installDir: builds.of(node).installDir,
            artifacts: builds.of(node).artifacts,
          },
          clientBuild: {
            installDir: builds.of(args.client).installDir,
            artifacts: builds.of(args.client).artifacts,
          },
          clientTree: args.trees.dest,
          buildInputs: pulumi.all([inputsOf(node), inputsOf(args.client)]).apply(([w, c]) => ({
            worker: w,
            client: c,
          })),
          ...(args.cache && args.model?.names.includes(node)
            ? {
                prewarm: (() => {
                  const r = args.model.of(node);
                  return pulumi
                    .all([r.dir, r.nodeFiles])
                    .apply(([dir, files]) => [
                      { dir, files: files.map((f) => ({ path: f.path, sha256: f.sha256 })) },
                    ]);
                })(),
              }
            : {}),
        },
        nodes.childOpts(
          {
            parent: this,
            dependsOn: [
              builds.of(node),
              builds.of(args.client),
              ...(args.model?.names.includes(node) ? [args.model.of(node)] : []),
              ...(args.after ?? []),
            ],
          },
          ["target", "client"],
        ),
      );
      return [node, w] as const;
    });
    this.port = args.port;
    this.endpoints = args.workers.map((node, k) => ({
      node,
      device: `RPC${k}`,
      endpoint: `${nodes.fabricAddress(node) ?? ""}:${args.port}`,
    }));
    this.perNode = new PerNode(this, "rpc worker", entries);
    this.ready = this.perNode.values();
    this.byNode = gatherByNode(args.workers, (n) => {
      const w = this.of(n);
      return {
        endpoint: w.endpoint,
        version: w.version,
        digest: w.digest,
        deviceMemory: w.deviceMemory,
        health: w.health,
        transport: w.transport,
        unit: w.unit,
      };
    });
    this.registerOutputs({ byNode: this.byNode });
  }

  of(node: string): RpcWorker {
    return this.perNode.of(node);
  }
}

/** The stages the worker stage reads, as SparkCluster holds them. */
export interface WorkerInputs {
  readonly nodes: Nodes;
  readonly builds: Builds;
  readonly trees: Trees;
  readonly model?: Model;
  /** The Fabric stage: workers start after its links are measured, and bind only its rails. */
  readonly fabric?: Fabric;
  /** More resources every worker waits for (the serving stage's drain). */
  readonly after?: readonly pulumi.Resource[];
}

/**
 * The worker stage from the validated config (`sparkform:worker`, with `sparkform:fabric`'s
 * rail addresses as the allowed binds when a fabric is configured): what SparkCluster calls.
 */
export function rpcWorkersFor(
  name: string,
  stages: WorkerInputs,
  config: {
    readonly nodes: readonly NodeConfig[];
    readonly worker?: StackWorker;
    readonly fabric?: FabricConfig;
  },
  opts?: pulumi.ComponentResourceOptions,
): RpcWorkers | undefined {
  const w = config.worker;
  if (!w) return undefined;
  const rails = config.fabric?.rails;
  return new RpcWorkers(
    name,
    {
      nodes: stages.nodes,
      nodeConfigs: config.nodes,
      builds: stages.builds,
      trees: stages.trees,
      client: w.client,
      workers: w.nodes,
      port: w.port,
      threads: w.threads,
      devices: w.devices,
      cache: w.cache,
      debug: w.debug,
      rssLimitPercent: w.rssLimitPercent,
      rssIntervalSeconds: w.rssIntervalSeconds,
      ...(stages.model ? { model: stages.model } : {}),
      ...(stages.after ? { after: stages.after } : {}),
      ...(rails
        ? {
            fabricAddresses: Object.fromEntries(
              Object.entries(rails).map(([n, rs]) => [
                n,
                rs.map((r) => r.address.replace(/\/\d+$/, "")),
              ]),
            ),
          }
        : {}),
    },
    {
      ...opts,
      dependsOn: [...stages.builds.ready, ...(stages.fabric ? stages.fabric.ready : [])],
    },
  );
}
