// The one list of sparkform's resource kinds, their type tokens, and the evidence each kind
// carries for the policy pack. The pack imports this file with `import type` only, and every
// import here is `import type`: nothing of @pulumi/* (or of the providers) loads with it.
// The evidence is a slice of each provider's Outputs interface, so a renamed or retyped output
// breaks the pack's compile instead of silently hiding evidence from a policy.
import type { NativeBuildOutputs } from "./build/state";
import type { RpcWorkerOutputs } from "./rpc-worker/state";
import type { ModelReplicaOutputs } from "./model/state";
import type { SparkNodeOutputs } from "./node/state";
import type { ToolchainOutputs } from "./toolchain/state";
import type { TreeSyncOutputs } from "./tree/state";
import type { LlamaServerGate } from "./serving/placement";
import type { BuildInputs } from "./build/difference";
import type { FabricLinkOutputs } from "./fabric/state";
import type { ServingDrainOutputs } from "./serving/state";
import type { RouterOutputs } from "./router/state";

/** Each kind's state as its provider writes it: the inputs plus what it measured. */
export interface KindOutputs {
  SparkNode: SparkNodeOutputs;
  /** One rail of one link between two nodes, measured (it has two ends, so no `target`). */
  FabricLink: FabricLinkOutputs;
  Toolchain: ToolchainOutputs;
  TreeSync: TreeSyncOutputs;
  NativeBuild: NativeBuildOutputs;
  ModelReplica: ModelReplicaOutputs;
  RpcWorker: RpcWorkerOutputs;
  /** llama-server on the client node: its gate inputs (components/serving/placement.ts). */
  LlamaServer: LlamaServerGate & { target: Target };
  /** Where `up` stops the server before a changed build reaches it. */
  ServingDrain: ServingDrainOutputs;
  /** The router (Caddy) in front of the llama-server(s) on the client node. */
  Router: RouterOutputs;
}

/** A sparkform resource kind: `SparkNode`, `FabricLink`, `TreeSync`, … (KINDS lists them). */
export type Kind = keyof KindOutputs;

/**
 * Every kind, in stage order (nodes → fabric → toolchain → tree → build → model → drain → worker
 * → server → router).
 */
export const KINDS = [
  "SparkNode",
  "FabricLink",
  "Toolchain",
  "TreeSync",
  "NativeBuild",
  "ModelReplica",
  "ServingDrain",
  "RpcWorker",
  "LlamaServer",
  "Router",
] as const satisfies readonly Kind[];
// The list names every kind: a kind added to KindOutputs and not here fails to compile.
type _AllKindsListed = Assert<
  [Exclude<Kind, (typeof KINDS)[number]>] extends [never] ? true : false
>;

/** A compile-time assertion: `Assert<false>` does not compile. */
export type Assert<T extends true> = T;

/**
 * The module of every sparkform dynamic resource: the SDK's `dynamic.Resource` constructor
 * takes it with the kind as the type, and composes `pulumi-nodejs:dynamic/<module>:<type>`.
 */
export const TYPE_MODULE = "sparkform";

/** The type token of a kind: `pulumi-nodejs:dynamic/sparkform:TreeSync`. */
export type TypeToken<K extends Kind = Kind> = `pulumi-nodejs:dynamic/${typeof TYPE_MODULE}:${K}`;

/**
 * The type every sparkform resource had before the kinds had tokens (then a `kind` input said
 * which it was). Existing state holds it until an `up` moves each resource by its alias; the
 * policy pack, which runs during that very `up`, recognises both.
 */
export type LegacyType = "pulumi-nodejs:dynamic:Resource";
export const LEGACY_TYPE: LegacyType = "pulumi-nodejs:dynamic:Resource";

/** The type token of `kind`, as the SDK composes it from TYPE_MODULE and the kind. */
export function typeToken<K extends Kind>(kind: K): TypeToken<K> {
  return `pulumi-nodejs:dynamic/${TYPE_MODULE}:${kind}`;
}

/**
 * How a resource reaches its node (every kind but FabricLink, which has two ends); the pack reads
 * `name` and `hostKey`.
 */
export type Target = SparkNodeOutputs["target"];

/**
 * What the policy pack reads from each kind. Inputs (`target`, `flags`, `expectedDigest`,
 * `repo`, `commit`, `files`) are known in every run; the measured outputs (`facts`, `digest`,
 * `artifacts`, `checks`) are unknown in a run that changes the resource, and judged after it.
 */
export interface KindEvidence extends Record<Kind, object> {
  SparkNode: Pick<SparkNodeOutputs, "target" | "facts">;
  /** What fabric-healthy judges: the link as the report reads it (components/fabric/report.ts). */
  FabricLink: Pick<
    FabricLinkOutputs,
    | "link"
    | "rail"
    | "topology"
    | "gidIndex"
    | "ports"
    | "source"
    | "rttP50Us"
    | "rttP99Us"
    | "throughputGbps"
    | "classReferenceGbps"
    | "class"
    | "checks"
    | "healthy"
    | "rdma"
    | "error"
    | "mgmtIface"
    | "thresholds"
  >;
  Toolchain: Pick<ToolchainOutputs, "target" | "digest">;
  TreeSync: Pick<TreeSyncOutputs, "target" | "digest" | "expectedDigest">;
  NativeBuild: Pick<NativeBuildOutputs, "target" | "flags" | "commit" | "artifacts" | "checks">;
  ModelReplica: Pick<ModelReplicaOutputs, "target" | "repo" | "commit" | "files">;
  RpcWorker: Pick<
    RpcWorkerOutputs,
    | "target"
    | "bind"
    | "fabricAddresses"
    | "managementAddress"
    | "rssLimitPercent"
    | "workerBuild"
    | "clientBuild"
    | "client"
    | "version"
    | "clientVersion"
    | "digest"
    | "status"
    | "transport"
  > & {
    /**
     * Both builds' recorded inputs (tree digest, flags, compiler), so worker-version-match names
     * the cause as builds-identical does. An input the RpcWorker resource passes and its
     * provider keeps without reading it (not a restart key): not in RpcWorkerOutputs's type.
     */
    buildInputs: { worker: BuildInputs; client: BuildInputs };
  };
  LlamaServer: Pick<
    KindOutputs["LlamaServer"],
    | "target"
    | "plan"
    | "evidence"
    | "node"
    | "bind"
    | "port"
    | "unit"
    | "rssLimitPercent"
    | "status"
    | "standby"
    | "topology"
  >;
  ServingDrain: Pick<ServingDrainOutputs, "target">;
  Router: Pick<RouterOutputs, "target" | "bind" | "port" | "binaryDigest">;
}

/** The evidence of one kind. */
export type Evidence<K extends Kind> = KindEvidence[K];
