// NativeBuild's recorded shape: what its resource passes (inputs) and what its provider writes
// to state (outputs). Types only, so state-upgrade.ts and the policy pack read them without
// loading the provider.
import type { ProgramRef } from "../native-script";
import type { Peer } from "../peer-copy";
import type { SshTarget } from "../transport";
import type { FanOutSource } from "./fan-out";
import type { BuildFlags } from "./flags";
import type { BuildCommand } from "./plan";
import type { CompilerDigests } from "./node-output";
import type { Check } from "./verify";

/** A node whose compiler cache seeds this one's (it has built the same tree and flags). */
export type CacheSource = Peer;

export interface NativeBuildInputs {
  kind: "NativeBuild";
  providerVersion: string;
  target: SshTarget;
  /** The synced tree on the node (absolute or ~/...). */
  tree: string;
  /** TreeSync's digest of the tree: a new digest is a rebuild. */
  treeDigest: string;
  flags: BuildFlags;
  /** cmake targets (unused with a command). */
  targets: string[];
  /** Artifact paths relative to the build directory (with a command: to the tree). */
  artifactPaths: string[];
  /** The project's build command instead of sparkform's CMake build. */
  command?: BuildCommand;
  /** More PATH entries for the build (absolute or ~/…), e.g. the toolchain's bin dirs. */
  path?: string[];
  /** ninja parallelism; 0 = ninja's default. */
  jobs: number;
  cacheFrom?: CacheSource;
  /** native/build/verify-build.sh: name and sha256; a changed verifier is a rebuild. */
  verifyProgram: ProgramRef;
  /**
   * Inputs and state written before ProgramRefs held the text itself (`refresh` diffs against
   * those inputs); only the diff reads it.
   */
  verifyScript?: string;
  /**
   * sparkform:build.distribute fan-out: build nothing here, receive this source's verified
   * artifacts (fan-out.ts). Its `installed` digests are an input: a new source build re-copies.
   */
  fanOutFrom?: FanOutSource;
}

export interface NativeBuildOutputs extends NativeBuildInputs {
  buildKey: string;
  commit: string;
  buildDir: string;
  /** The stable directory of the installed artifacts (a symlink swapped on every install). */
  installDir: string;
  /** Verification: every check passed when the resource exists. */
  checks: Check[];
  /** Signature-instruction counts in the CPU library (verify-build.sh). */
  instructions: Record<string, number>;
  cpuLibrary: { path: string; sha256: string };
  /** Artifact digests as installed by the last build (the desired state). */
  installed: Record<string, string>;
  /** Artifact digests as last measured on the node ("" = missing); refresh re-measures. */
  artifacts: Record<string, string>;
  compiler: string;
  cache: { hits: number; misses: number; seededBy: "none" | "fabric" | "relay" | "failed" };
  seconds: Record<string, number>;
  /**
   * This resource's reference to `installDir` on the node (install.sh records it): destroy
   * removes the key's build only with the last reference, so another stack on the node with
   * the same flags keeps its binaries. Absent in state written before references: destroy
   * keeps the build then.
   */
  refToken?: string;
  /** sha256 of the compiler binaries that made the artifacts (toolchain-facts.sh; the source's when fanned out). */
  compilerDigests: CompilerDigests;
  /** `self`: compiled here; `fan-out`: received from `builtOn`'s build (fan-out.ts). */
  builtBy: "self" | "fan-out";
  /** The node that compiled the artifacts. */
  builtOn: string;
}
