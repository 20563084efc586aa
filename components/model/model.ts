import * as pulumi from "@pulumi/pulumi";
import { legacyTypeAliases } from "../aliases";
import type { Validated } from "../config/descriptor";
import type { Nodes } from "../node/nodes";
import { gatherByNode, PerNode, type Stage } from "../stage";
import { ModelReplica } from "./model-replica";
import type { NodeFile } from "./state";
import {
  modelDir,
  ModelResolveError,
  defaultGgufCacheDir,
  PUBLIC_HUB,
  resolveModel,
  type GgufSummary,
  type ResolvedModel,
} from "./resolve";
import {
  MODEL_RETRIES_DEFAULT,
  MODEL_VERIFY_DEFAULT,
  MODELS_DIR_DEFAULT,
  type StackModel,
} from "./config";
import type { ModelDirClaims } from "./dir-claims";
import { tokenFor, withheldNote } from "./token-origin";

export { MODEL_PROVIDER_VERSION, ModelReplica, type ModelReplicaArgs } from "./model-replica";

export interface ModelArgs {
  /** The nodes stage: each replica's connection and fabric address come from it. */
  readonly nodes: Nodes;
  /**
   * `sparkform:model`, validated with its defaults resolved (StackModel,
   * components/model/config.ts): `repo` (`org/name`), `revision` (a 40-hex commit, or with
   * `allowBranch` a branch or tag), `files` (one shard of a split GGUF stands for all), `sha256`
   * (expected per file; must agree with the hub), `endpoint` (HF_ENDPOINT-style base URL),
   * `verify` (`fast`: size + mtime, or `full`: re-hash), `modelsDir` (default `~/models`),
   * `retries` (resumed retries within one `up`), and `nodes`: which nodes get the model, in
   * order (the first downloads from the hub, the others copy from it over the fabric).
   */
  readonly config: Validated<StackModel>;
  /**
   * Bearer token (`sparkform:hfToken`), a secret. Default: none. It goes to this model's
   * endpoint only when that has `tokenOrigin`'s origin or the config sets `sendToken`
   * (token-origin.ts); otherwise nothing of it reaches the resolve or the node.
   */
  readonly token?: pulumi.Input<string>;
  /**
   * The endpoint the token is for (sparkform:model.endpoint); only its origin counts.
   * Default: the public hub.
   */
  readonly tokenOrigin?: string;
  /** This model's config key in messages: `model` (the default) or `models.<name>`. */
  readonly key?: string;
  /**
   * The directories the stack's models claim (one per SparkCluster): a second model resolving
   * to this one's `<modelsDir>/<repo>/<commit>` on a shared node is refused (dir-claims.ts).
   */
  readonly dirs?: ModelDirClaims;
  /** Bytes each node must keep free beyond the model. Default 0. */
  readonly reserveBytes?: number;
}

/**
 * A model from a Hugging Face endpoint on every node at `<modelsDir>/<repo>/<commit>/<file>`:
 * resolved to a commit and SHA-256s on the control node (preview included), downloaded once by
 * the first node, fanned out node to node, verified on every node.
 */
export class Model extends pulumi.ComponentResource implements Stage<ModelOnNode> {
  /** The commit the revision resolved to. */
  readonly commit: pulumi.Output<string>;
  /** Path, size and SHA-256 of each file (from the hub). */
  readonly files: pulumi.Output<Array<{ path: string; size: number; sha256: string }>>;
  readonly totalBytes: pulumi.Output<number>;
  /** The GGUF header summary (undefined when the model has no .gguf file). */
  readonly gguf: pulumi.Output<GgufSummary | undefined>;
  /** Per node: the directory, how the files got there, and the files as measured. */
  readonly nodes: pulumi.Output<Record<string, ModelOnNode>>;
  readonly replicas: ModelReplica[];
  /** The nodes that hold the model, in order (the first downloads it). */
  readonly names: readonly string[];
  private readonly perNode: PerNode<ModelReplica>;

  constructor(name: string, args: ModelArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Model", name, {}, opts);
    const { nodes, config: m } = args;
    this.names = m.nodes;
    const endpoint = m.endpoint ?? PUBLIC_HUB;
    const key = args.key ?? "model";
    const modelsDir = m.modelsDir ?? MODELS_DIR_DEFAULT;
    // The token only to the origin it was given for, or where this model opts in: decided
    // here, once, so neither the resolve below nor the downloading node gets it otherwise.
    const tokenOrigin = args.tokenOrigin ?? PUBLIC_HUB;
    const sends = tokenFor(endpoint, m.sendToken ?? false, tokenOrigin);
    const tokenWithheld =
      args.token !== undefined && !sends ? withheldNote(key, endpoint, tokenOrigin) : undefined;
    // Tokens have no whitespace; a trailing newline (config set from a file) would break the header.
    const token =
      args.token && sends
        ? pulumi.secret(pulumi.output(args.token).apply((t) => t.trim()))
        : undefined;
    // Resolved at every preview and up (so a moved branch shows up as a replace), on the control
    // node. The result holds no credential, so it need not stay secret with the token.
    const resolved: pulumi.Output<ResolvedModel> = pulumi.unsecret(
      pulumi.output(token).apply(async (token) => {
        try {
          const r = await resolveModel({
            endpoint,
            ...(token ? { token } : {}),
            ...(tokenWithheld ? { tokenWithheld } : {}),
            repo: m.repo,
            revision: m.revision,
            files: m.files,
            sha256: m.sha256 ?? {},
            allowBranch: m.allowBranch ?? false,
            cacheDir: defaultGgufCacheDir(),
          });
          // Its directory is named by the resolved commit: claimed now, so two of the stack's
          // models that spell one commit differently (a sha, a branch) are refused here.
          args.dirs?.claim({
            key,
            repo: m.repo,
            revision: m.revision,
            commit: r.commit,
            dir: modelDir(modelsDir, r.repo, r.commit),
            nodes: this.names,
          });
          return r;
        } catch (err) {
          // A user-facing failure (hub unreachable, unpinned revision, SHA-256 disagreeing):
          // RunError prints just the message, where a ResourceError dumps the whole resource.
          if (err instanceof ModelResolveError) throw new pulumi.RunError(err.message);
          throw err;
        }
      }),
    );
    this.commit = resolved.commit;
    this.files = resolved.files.apply((fs) =>
      fs.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 })),
    );
    this.totalBytes = resolved.totalBytes;
    this.gguf = resolved.apply((r) => r.gguf);

    const common = {
      repo: resolved.repo,
      commit: resolved.commit,
      modelsDir,
      files: resolved.files.apply((fs) => fs.map((f) => ({ ...f }))),
      verify: m.verify ?? MODEL_VERIFY_DEFAULT,
      retries: m.retries ?? MODEL_RETRIES_DEFAULT,
      ...(args.reserveBytes !== undefined ? { reserveBytes: args.reserveBytes } : {}),
    };
    // Targets may carry a private key: keep them encrypted in state. Every replica waits for
    // every node's fact sheet, as every other stage does.
    const replicaOpts = (dependsOn: pulumi.Resource[]): pulumi.CustomResourceOptions => ({
      parent: this,
      additionalSecretOutputs: ["target", "source"],
      aliases: [...legacyTypeAliases],
      dependsOn,
    });
    const [first, ...rest] = this.names as [string, ...string[]];
    const source = new ModelReplica(
      `${name}-${first}`,
      { ...common, target: nodes.target(first), ...(token ? { token } : {}) },
      replicaOpts([...nodes.ready]),
    );
    this.replicas = [
      source,
      ...rest.map(
        (node) =>
          new ModelReplica(
            `${name}-${node}`,
            { ...common, target: nodes.target(node), source: nodes.peer(first, node) },
            replicaOpts([...nodes.ready, source]),
          ),
      ),
    ];
    this.perNode = new PerNode(
      this,
      "model replica",
      this.names.map((n, i) => [n, this.replicas[i] as ModelReplica] as const),
    );
    this.nodes = gatherByNode(this.names, (n) => {
      const r = this.of(n);
      return { dir: r.dir, fetchedBy: r.fetchedBy, files: r.nodeFiles };
    });
    this.registerOutputs({
      commit: this.commit,
      files: this.files,
      totalBytes: this.totalBytes,
      gguf: this.gguf,
      nodes: this.nodes,
    });
  }

  get byNode(): pulumi.Output<Record<string, ModelOnNode>> {
    return this.nodes;
  }

  get ready(): readonly ModelReplica[] {
    return this.replicas;
  }

  of(node: string): ModelReplica {
    return this.perNode.of(node);
  }
}

/** Where one node holds the model: its directory, how the files got there, as measured. */
export interface ModelOnNode {
  dir: string;
  fetchedBy: string;
  files: NodeFile[];
}
