// The worker stage: on each worker node, ggml-rpc-server from that node's verified build as a
// supervised user unit bound to its fabric address, checked by a HELLO from the client node.
// Takes the Nodes and Builds stages (and the Trees stage, for the client's protocol version).
import * as pulumi from "@pulumi/pulumi";
import type { Builds } from "../build/builds";
import type { Validated } from "../config/descriptor";
import type { StackWorker } from "./config";
import type { Fabric } from "../fabric/fabric";
import type { Model } from "../model/model";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import type { RpcTransport } from "../fabric/rpc-log";
import type { Trees } from "../tree/trees";
import type { Health } from "./state";
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
  /** The nodes stage: each node's connection, fabric address and management address. */
  readonly nodes: Nodes;
  /** The build stage: every worker runs its node's verified build, and waits for all of them. */
  readonly builds: Builds;
  /** The tree stage: the client's ggml-rpc.h, for the protocol version. */
  readonly trees: Trees;
  /**
   * Every staged model (sparkform:model, then sparkform:models by name): on a worker node, each
   * verified copy it holds pre-warms the tensor cache (with `config.cache` on), whichever one is
   * served, so switching the served model changes nothing here and restarts no worker.
   * Default: none (no pre-warm).
   */
  readonly models?: readonly Model[];
  /**
   * The Fabric stage: the workers start after its links are measured, and each may bind only
   * its node's rail addresses; in a ring each binds its end of the cable to the client. Default:
   * each binds its node's fabricAddress.
   */
  readonly fabric?: Fabric;
  /** More resources every worker waits for (the serving stage's drain). Default: none. */
  readonly after?: readonly pulumi.Resource[];
  /**
   * `sparkform:worker`, validated with its defaults resolved (StackWorker,
   * components/rpc-worker/config.ts): `client` (the node that runs llama-server / --rpc;
   * default the first node), `nodes` (the worker nodes, never the client), `port` (TCP, default
   * 50052), `threads` (0: the server's default), `devices` (`-d`; default all accelerators),
   * `cache` (the tensor cache, default on), `cacheMaxBytes` (its bound in bytes; absent =
   * derived on the node at `up`, 0 = none), `debug` (GGML_RPC_DEBUG, default on), and the RSS
   * guard's `rssLimitPercent` (of the node's memory) and `rssIntervalSeconds`.
   */
  readonly config: Validated<StackWorker>;
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
    // Every worker waits for every build and, with a fabric, for its links to be measured.
    super(
      "sparkform:index:RpcWorkers",
      name,
      {},
      {
        ...opts,
        dependsOn: [...args.builds.ready, ...(args.fabric ? args.fabric.ready : [])],
      },
    );
    // The config's cross-check already holds the client and the workers to the nodes, apart,
    // each with a fabric address (components/rpc-worker/config.ts).
    const { nodes, builds, config: wc } = args;
    const clientPeer = nodes.peer(wc.client);
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
    // Where `from` reaches `to`: in a ring each pair has its own cable and subnet, so the client
    // dials each worker (and the worker sees the client) on the link joining the two; otherwise
    // the node's fabricAddress (components/fabric/config.ts linkAddress).
    const reach = (from: string, to: string) => {
      const own = nodes.fabricAddress(to);
      return args.fabric?.linkAddress(from, to, own) ?? own;
    };
    const entries = wc.nodes.map((node) => {
      // The staged models this node holds a copy of.
      const mine = (args.models ?? []).filter((m) => m.names.includes(node));
      const cfg = reach(wc.client, node) as string;
      const clientFabric = reach(node, wc.client) as string;
      const w = new RpcWorker(
        `${name}-${node}`,
        {
          target: nodes.target(node),
          client: clientPeer.apply((p) => ({
            target: p.target,
            fabricAddress: clientFabric,
          })),
          bind: cfg,
          managementAddress: nodes.managementAddress(node),
          fabricAddresses: args.fabric?.railAddresses(node) ?? [cfg],
          port: wc.port,
          threads: wc.threads,
          devices: wc.devices,
          cache: wc.cache,
          ...(wc.cacheMaxBytes === undefined ? {} : { cacheMaxBytes: wc.cacheMaxBytes }),
          debug: wc.debug,
          rssLimitPercent: wc.rssLimitPercent,
          rssIntervalSeconds: wc.rssIntervalSeconds,
          workerBuild: {
            installDir: builds.of(node).installDir,
            artifacts: builds.of(node).artifacts,
          },
          clientBuild: {
            installDir: builds.of(wc.client).installDir,
            artifacts: builds.of(wc.client).artifacts,
          },
          clientTree: args.trees.dest,
          buildInputs: pulumi.all([inputsOf(node), inputsOf(wc.client)]).apply(([w, c]) => ({
            worker: w,
            client: c,
          })),
          ...(wc.cache && mine.length > 0
            ? {
                prewarm: pulumi.all(
                  mine.map((m) =>
                    pulumi.all([m.of(node).dir, m.of(node).nodeFiles]).apply(([dir, files]) => ({
                      dir,
                      files: files.map((f) => ({ path: f.path, sha256: f.sha256 })),
                    })),
                  ),
                ),
              }
            : {}),
        },
        nodes.childOpts(
          {
            parent: this,
            dependsOn: [
              builds.of(node),
              builds.of(wc.client),
              ...mine.map((m) => m.of(node)),
              ...(args.after ?? []),
            ],
          },
          ["target", "client"],
        ),
      );
      return [node, w] as const;
    });
    this.port = wc.port;
    this.endpoints = wc.nodes.map((node, k) => ({
      node,
      device: `RPC${k}`,
      endpoint: `${reach(wc.client, node) ?? ""}:${wc.port}`,
    }));
    this.perNode = new PerNode(this, "rpc worker", entries);
    this.ready = this.perNode.values();
    this.byNode = gatherByNode(wc.nodes, (n) => {
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
