import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import { type BuildFlags, BuildFlagsError, parseBuildFlags } from "./flags";
import {
  type BuildCommand,
  checkArtifact,
  checkBuildDirPattern,
  checkTarget,
  checkWorkdir,
  DEFAULT_ARTIFACTS,
  DEFAULT_TARGETS,
} from "./plan";
import type { CacheSource, NativeBuildOutputs } from "./state";
import type { FanOutSource } from "./fan-out";
import type { CompilerDigests } from "./node-output";
import { type Check, VERIFY_PROGRAM } from "./verify";

export type { CacheSource } from "./state";
export type { FanOutSource } from "./fan-out";

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
  /** cmake targets (default `ggml-rpc-server llama-completion`). Not with `command`. */
  readonly targets?: readonly string[];
  /**
   * Artifact paths relative to the build directory (with `command`: relative to the tree, and
   * required), digested, verified and installed
   * (default `bin/ggml-rpc-server bin/llama-completion ggml/src/libggml-cpu.a`).
   */
  readonly artifacts?: readonly string[];
  /**
   * The project's own build command instead of sparkform's CMake build of llama.cpp. Real
   * Sparks: `{ run: ["mix", "compile"], buildDir: "_build/dev/lib/llama_cpp_ex/obj/llama_build-*" }`
   * (llama_cpp_ex's Makefile reads the contract from the environment). Default: none.
   */
  readonly command?: { run: readonly string[]; workdir?: string; buildDir: string };
  /**
   * More PATH entries for the build, absolute or `~/…`, before the system's (the contract is
   * a non-login shell): e.g. the toolchain's install directories, so `mix` is found.
   */
  readonly path?: readonly string[];
  /** ninja parallelism (default: ninja's own, cores + 2). */
  readonly jobs?: number;
  /**
   * A node that has already built the same tree and flags: its compiler cache is copied into
   * this node's before the build (node to node over the fabric when an ssh agent is available,
   * else through the control node). Also add that node's NativeBuild to `dependsOn`.
   */
  readonly cacheFrom?: pulumi.Input<CacheSource>;
  /**
   * sparkform:build.distribute fan-out: compile nothing here; copy this source build's
   * installed artifacts (from its NativeBuild's outputs, see Builds), check each file's sha256
   * against the source's and install them atomically. Also add the source to `dependsOn`.
   */
  readonly fanOutFrom?: pulumi.Input<FanOutSource>;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/**
 * llama.cpp built on one node in the synced tree, verified (one CUDA architecture, -march
 * reached ggml-cpu, the CPU library holds the instructions) and installed atomically into
 * `~/.cache/sparkform/llama-build/out/<buildKey>/`. Refresh re-digests the installed artifacts:
 * a deleted or modified one is drift, and `up` rebuilds.
 */
export class NativeBuild extends SparkformResource<"NativeBuild", NativeBuildOutputs> {
  declare readonly buildKey: pulumi.Output<string>;
  /** The tree digest it was built from (the input). */
  declare readonly treeDigest: pulumi.Output<string>;
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
  /** sha256 of the c++ and nvcc binaries that made the artifacts (the source's when fanned out). */
  declare readonly compilerDigests: pulumi.Output<CompilerDigests>;
  /** `self`: compiled on this node; `fan-out`: received from `builtOn` (distribute fan-out). */
  declare readonly builtBy: pulumi.Output<"self" | "fan-out">;
  /** The node that compiled the artifacts. */
  declare readonly builtOn: pulumi.Output<string>;

  constructor(name: string, args: NativeBuildArgs, opts?: pulumi.CustomResourceOptions) {
    const command: BuildCommand | undefined = args.command
      ? {
          run: [...args.command.run],
          workdir: args.command.workdir ?? ".",
          buildDir: args.command.buildDir,
        }
      : undefined;
    const targets = command ? [] : [...(args.targets ?? DEFAULT_TARGETS)];
    const artifacts = [...(args.artifacts ?? (command ? [] : DEFAULT_ARTIFACTS))];
    let flags: BuildFlags;
    // Bad input stops here, at preview, before anything connects to a node.
    try {
      flags = parseBuildFlags(args.flags);
      if (command) {
        if (args.targets)
          throw new Error("targets are for the built-in CMake build, not with command");
        if (command.run.length === 0 || command.run.some((a) => a.length === 0 || a.includes("\0")))
          throw new Error("command.run must be a non-empty argv of non-empty strings");
        checkWorkdir(command.workdir);
        checkBuildDirPattern(command.buildDir);
        if (artifacts.length === 0)
          throw new Error(
            "a build command needs its artifacts listed (paths relative to the tree)",
          );
      }
      for (const p of args.path ?? []) {
        if (!/^(\/|~\/)[^:\n\0]*$/.test(p))
          throw new Error(`path entry ${JSON.stringify(p)} must be absolute or ~/…, without ':'`);
      }
      targets.forEach(checkTarget);
      artifacts.forEach(checkArtifact);
      if (!command && targets.length === 0)
        throw new Error("at least one build target is required");
      if (args.jobs !== undefined && (!Number.isInteger(args.jobs) || args.jobs < 1)) {
        throw new Error(`jobs ${args.jobs} must be a positive integer`);
      }
    } catch (err) {
      const msg = err instanceof BuildFlagsError ? err.message : (err as Error).message;
      throw new pulumi.RunError(`NativeBuild ${name}: ${msg}`);
    }
    super(
      {
        kind: "NativeBuild",
        provider,
        version: NATIVE_BUILD_PROVIDER_VERSION,
        programs: { verifyProgram: VERIFY_PROGRAM },
        outputs: [
          "buildKey",
          "commit",
          "buildDir",
          "installDir",
          "checks",
          "instructions",
          "cpuLibrary",
          "artifacts",
          "installed",
          "compiler",
          "cache",
          "seconds",
          "compilerDigests",
          "builtBy",
          "builtOn",
        ],
      },
      name,
      {
        target: args.target,
        tree: args.tree,
        treeDigest: args.treeDigest,
        flags,
        targets,
        artifactPaths: artifacts,
        jobs: args.jobs ?? 0,
        ...(command ? { command } : {}),
        ...(args.path && args.path.length > 0 ? { path: [...args.path] } : {}),
        cacheFrom: args.cacheFrom,
        fanOutFrom: args.fanOutFrom,
      },
      opts,
    );
  }
}
