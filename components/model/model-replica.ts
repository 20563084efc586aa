// ModelReplica: one model revision's files on one node (its provider: provider.ts beside it).
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import { fetchScriptDigest } from "./commands";
import { modelDir } from "./resolve";
import type { ModelFile, ModelReplicaOutputs, ModelSource, NodeFile } from "./state";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state. */
export const MODEL_PROVIDER_VERSION = "1";

export interface ModelReplicaArgs {
  readonly target: pulumi.Input<SshTarget>;
  readonly repo: pulumi.Input<string>;
  readonly commit: pulumi.Input<string>;
  /** Where models live on the node (default `~/models`). */
  readonly modelsDir: string;
  readonly files: pulumi.Input<ModelFile[]>;
  readonly verify: "fast" | "full";
  readonly retries: number;
  /** The node to copy from; omit on the node that downloads from the hub. */
  readonly source?: pulumi.Input<ModelSource>;
  /** Bearer token for the endpoint (only the downloading node needs it); a secret. */
  readonly token?: pulumi.Input<string>;
  /** Bytes to leave free on the node's filesystem (default 0). */
  readonly reserveBytes?: number;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/** One model revision's files on one node, SHA-256-verified there. */
export class ModelReplica extends SparkformResource<"ModelReplica", ModelReplicaOutputs> {
  declare readonly nodeFiles: pulumi.Output<NodeFile[]>;
  declare readonly fetchedBy: pulumi.Output<"hub" | "fabric" | "relay" | "present">;
  declare readonly created: pulumi.Output<string[]>;
  declare readonly dir: pulumi.Output<string>;

  constructor(name: string, args: ModelReplicaArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      {
        kind: "ModelReplica",
        provider,
        version: MODEL_PROVIDER_VERSION,
        outputs: ["nodeFiles", "fetchedBy", "created"],
      },
      name,
      {
        target: args.target,
        repo: args.repo,
        commit: args.commit,
        modelsDir: args.modelsDir,
        dir: pulumi.all([args.repo, args.commit]).apply(([r, c]) => modelDir(args.modelsDir, r, c)),
        files: args.files,
        verify: args.verify,
        retries: args.retries,
        source: args.source,
        token: args.token ? pulumi.secret(args.token) : undefined,
        scriptDigest: fetchScriptDigest(),
        reserveBytes: args.reserveBytes ?? 0,
      },
      opts,
    );
  }
}
