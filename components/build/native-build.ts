import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { nativeScript } from "../native-script";
import { delegatingProvider } from "../providers/delegate";
import type { SshTarget } from "../transport/ssh";
import { type BuildFlags, BuildFlagsError, parseBuildFlags } from "./flags";
import { checkArtifact, checkTarget, DEFAULT_ARTIFACTS, DEFAULT_TARGETS } from "./plan";
import type { CacheSource } from "./provider";
import type { Check } from "./verify";

export type { CacheSource } from "./provider";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state (and rebuilds). */
export const NATIVE_BUILD_PROVIDER_VERSION = "1";

export interface NativeBuildArgs {
  readonly target: pulumi.Input<SshTarget>;
  /** The synced llama.cpp tree on the node, absolute or `~/...` (the TreeSync's `dest`). */
  readonly tree: string;
  /**
   * The TreeSync's digest of the tree on this node (pass `treeSync.digest`): a new digest
   * rebuilds, and taking it as an input orders the build after the sync.
   */
  readonly treeDigest: pulumi.Input<string>;
  /** The build contract (flags.ts), validated here before anything runs on a node. */
  readonly flags: BuildFlags;
  /** cmake targets (default `ggml-rpc-server llama-completion`). */
  readonly targets?: readonly string[];
  /**
   * Artifact paths relative to the build directory, digested, verified and installed
   * (default `bin/ggml-rpc-server bin/llama-completion ggml/src/libggml-cpu.a`).
   */
  readonly artifacts?: readonly string[];
  /** ninja parallelism (default: ninja's own, cores + 2). */
  readonly jobs?: number;
  /**
   * A node that has already built the same tree and flags: its compiler cache is copied into
   * this node's before the build (node to node over the fabric when an ssh agent is available,
   * else through the control node). Also add that node's NativeBuild to `dependsOn`.
   */
  readonly cacheFrom?: pulumi.Input<CacheSource>;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

let verifyScript: string | undefined;

/**
 * llama.cpp built on one node in the synced tree, verified (one CUDA architecture, -march
 * reached ggml-cpu, the CPU library holds the instructions) and installed atomically into
 * `~/.cache/sparkform/llama-build/out/<buildKey>/`. Refresh re-digests the installed artifacts:
 * a deleted or modified one is drift, and `up` rebuilds.
 */
export class NativeBuild extends pulumi.dynamic.Resource {
  declare readonly buildKey: pulumi.Output<string>;
  declare readonly commit: pulumi.Output<string>;
  declare readonly buildDir: pulumi.Output<string>;
  /** Where the installed artifacts are: `<installDir>/<artifact path>`. */
  declare readonly installDir: pulumi.Output<string>;
  declare readonly checks: pulumi.Output<Check[]>;
  declare readonly instructions: pulumi.Output<Record<string, number>>;
  declare readonly cpuLibrary: pulumi.Output<{ path: string; sha256: string }>;
  /** sha256 per artifact path, as measured on the node ("" when missing). */
  declare readonly artifacts: pulumi.Output<Record<string, string>>;
  /** sha256 per artifact path, as installed by the last build. */
  declare readonly installed: pulumi.Output<Record<string, string>>;
  declare readonly compiler: pulumi.Output<string>;
  declare readonly cache: pulumi.Output<{
    hits: number;
    misses: number;
    seededBy: "none" | "fabric" | "relay" | "failed";
  }>;
  /** Seconds per phase of the last build: probe, cache, configure, build, verify, install, total. */
  declare readonly seconds: pulumi.Output<Record<string, number>>;

  constructor(name: string, args: NativeBuildArgs, opts?: pulumi.CustomResourceOptions) {
    const targets = [...(args.targets ?? DEFAULT_TARGETS)];
    const artifacts = [...(args.artifacts ?? DEFAULT_ARTIFACTS)];
    let flags: BuildFlags;
    // Bad input stops here, at preview, before anything connects to a node.
    try {
      flags = parseBuildFlags(args.flags);
      targets.forEach(checkTarget);
      artifacts.forEach(checkArtifact);
      if (targets.length === 0) throw new Error("at least one build target is required");
      if (args.jobs !== undefined && (!Number.isInteger(args.jobs) || args.jobs < 1)) {
        throw new Error(`jobs ${args.jobs} must be a positive integer`);
      }
    } catch (err) {
      const msg = err instanceof BuildFlagsError ? err.message : (err as Error).message;
      throw new pulumi.RunError(`NativeBuild ${name}: ${msg}`);
    }
    verifyScript ??= nativeScript("verify-build.sh");
    super(
      provider,
      name,
      {
        kind: "NativeBuild",
        providerVersion: NATIVE_BUILD_PROVIDER_VERSION,
        target: args.target,
        tree: args.tree,
        treeDigest: args.treeDigest,
        flags,
        targets,
        artifactPaths: artifacts,
        jobs: args.jobs ?? 0,
        cacheFrom: args.cacheFrom,
        verifyScript,
        buildKey: undefined,
        commit: undefined,
        buildDir: undefined,
        installDir: undefined,
        checks: undefined,
        instructions: undefined,
        cpuLibrary: undefined,
        artifacts: undefined,
        installed: undefined,
        compiler: undefined,
        cache: undefined,
        seconds: undefined,
      },
      opts,
    );
  }
}
