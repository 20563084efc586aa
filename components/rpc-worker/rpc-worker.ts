// The RpcWorker resource: one ggml-rpc-server unit (and its RSS guard) on one worker node.
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import type { RpcTransport } from "../fabric/rpc-log";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import type { BuildInputs } from "../build/difference";
import { workerPrograms } from "./commands";
import type { RpcWorkerOutputs } from "./provider";
import type { Health } from "./state";
import { unsafeBind } from "./gate";
import { stackOwner } from "../unit/stack-owner";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state (and restarts). */
export const RPC_WORKER_PROVIDER_VERSION = "1";

export interface RpcWorkerArgs {
  readonly target: pulumi.Input<SshTarget>;
  /** The client node and its fabric address: it runs the HELLO probe. */
  readonly client: pulumi.Input<{ target: SshTarget; fabricAddress: string }>;
  /** The worker's fabric address on the client's rail: the only address it listens on. */
  readonly bind: string;
  /** The worker node's management address (its `host`): refused as a bind. */
  readonly managementAddress: string;
  /** Every fabric address of the node (allowed binds; default `[bind]`). */
  readonly fabricAddresses?: readonly string[];
  /** TCP port (default 50052). */
  readonly port: number;
  /** CPU threads (0 = the server's default, half the cores). */
  readonly threads: number;
  /** Devices the server exposes (`-d`, e.g. CUDA0); [] = all accelerators, else the CPU. */
  readonly devices: readonly string[];
  /** The tensor cache (`-c`, ~/.cache/llama.cpp/rpc). */
  readonly cache: boolean;
  /** The cache's bound in bytes; absent = derived on the node at `up`; 0 = none. */
  readonly cacheMaxBytes?: number;
  /** GGML_RPC_DEBUG=1: per-command log lines and the RDMA lines the transport is read from. */
  readonly debug: boolean;
  /** The RSS guard stops the worker at this % of the node's RAM used (0 = no guard). */
  readonly rssLimitPercent: number;
  readonly rssIntervalSeconds: number;
  /** The worker node's NativeBuild installDir and its measured artifact digests. */
  readonly workerBuild: {
    installDir: pulumi.Input<string>;
    artifacts: pulumi.Input<Record<string, string>>;
  };
  /** The client node's NativeBuild: its server digest is the one the worker must run. */
  readonly clientBuild: {
    installDir: pulumi.Input<string>;
    artifacts: pulumi.Input<Record<string, string>>;
  };
  /**
   * The model on the worker node (its ModelReplica's `dir` and files): every tensor over 10 MiB
   * is written into the cache before the server starts. Default: none.
   */
  readonly prewarm?: pulumi.Input<{ dir: string; files: { path: string; sha256: string }[] }[]>;
  /** The client's synced tree (for its RPC_PROTO_* version in ggml/include/ggml-rpc.h). */
  readonly clientTree: string;
  /**
   * Both NativeBuilds' recorded inputs (tree digest, flags, compiler), so a build mismatch
   * names its cause (worker-version-match, as builds-identical). Evidence only: a change of
   * these alone restarts nothing. Default: none.
   */
  readonly buildInputs?: pulumi.Input<{ worker: BuildInputs; client: BuildInputs }>;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));
const SERVER = "bin/ggml-rpc-server";

/**
 * ggml-rpc-server on one node as an enabled systemd user unit bound to its fabric address, the
 * RSS guard beside it, health by a real RPC HELLO from the client node. Refresh re-reads the
 * units (NRestarts, InvocationID), the running binary's digest and the socket table: drift.
 */
export class RpcWorker extends SparkformResource<"RpcWorker", RpcWorkerOutputs> {
  declare readonly endpoint: pulumi.Output<string>;
  declare readonly version: pulumi.Output<string>;
  declare readonly clientVersion: pulumi.Output<string>;
  declare readonly digest: pulumi.Output<string>;
  declare readonly deviceMemory: pulumi.Output<{ device: number; free: number; total: number }[]>;
  declare readonly health: pulumi.Output<Health>;
  declare readonly transport: pulumi.Output<RpcTransport>;
  declare readonly unit: pulumi.Output<string>;
  declare readonly guardUnit: pulumi.Output<string>;
  declare readonly prewarmed: pulumi.Output<import("./state").Prewarm | null>;
  /** The cache's bound and whether it is over it (drift); null with the cache off. */
  declare readonly tensorCache: pulumi.Output<import("./state").TensorCache | null>;
  declare readonly drift: pulumi.Output<string[]>;
  /** The unit's identity when `up` started it: a new invocation restarts the servers using it. */
  declare readonly started: pulumi.Output<import("./state").Started>;

  constructor(name: string, args: RpcWorkerArgs, opts?: pulumi.CustomResourceOptions) {
    // An unsafe bind stops here, at preview, before anything starts on a node.
    const why = unsafeBind(args.bind, {
      managementAddress: args.managementAddress,
      remoteClient: true,
    });
    if (why)
      throw new pulumi.RunError(
        `RpcWorker ${name}: must not bind there: ${why}; bind the node's fabric address (sparkform:nodes[].fabricAddress)`,
      );
    const digestOf = (b: RpcWorkerArgs["workerBuild"]) =>
      pulumi.all([b.installDir, b.artifacts]).apply(([installDir, a]) => ({
        installDir,
        digest: a[SERVER] ?? "",
      }));
    super(
      {
        kind: "RpcWorker",
        provider,
        version: RPC_WORKER_PROVIDER_VERSION,
        outputs: [
          "endpoint",
          "unit",
          "guardUnit",
          "status",
          "started",
          "version",
          "clientVersion",
          "digest",
          "deviceMemory",
          "health",
          "transport",
          "prewarmed",
          "tensorCache",
          "drift",
        ],
      },
      name,
      {
        target: args.target,
        client: args.client,
        bind: args.bind,
        port: args.port,
        fabricAddresses: [...(args.fabricAddresses ?? [args.bind])],
        managementAddress: args.managementAddress,
        threads: args.threads,
        devices: [...args.devices],
        cache: args.cache,
        ...(args.cacheMaxBytes === undefined ? {} : { cacheMaxBytes: args.cacheMaxBytes }),
        debug: args.debug,
        rssLimitPercent: args.rssLimitPercent,
        rssIntervalSeconds: args.rssIntervalSeconds,
        binary: pulumi.output(args.workerBuild.installDir).apply((d) => `${d}/${SERVER}`),
        workerBuild: digestOf(args.workerBuild),
        clientBuild: digestOf(args.clientBuild).apply((c) => ({
          ...c,
          header: `${args.clientTree.replace(/\/$/, "")}/ggml/include/ggml-rpc.h`,
        })),
        prewarm: pulumi
          .output(args.prewarm ?? [])
          .apply((ms) =>
            ms.flatMap((m) =>
              m.files
                .filter((f) => f.path.endsWith(".gguf"))
                .map((f) => ({ path: `${m.dir.replace(/\/$/, "")}/${f.path}`, sha256: f.sha256 })),
            ),
          ),
        programs: workerPrograms(),
        ...(args.buildInputs ? { buildInputs: args.buildInputs } : {}),
        // The stack its unit belongs to (recorded on it; another stack's port is refused).
        owner: stackOwner(),
      },
      opts,
    );
  }
}
