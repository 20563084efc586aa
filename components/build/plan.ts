// NativeBuild's planning: the build checked and rendered for one node before anything runs (the
// directories, the configure and build argv, the environment), from the flags, the targets and
// the node's $HOME. No I/O here; provider.ts runs what this renders, with the program names and
// fixed argv of commands.ts, and test/unit/native-build-plan.test.ts pins it with tables of
// exact inputs and outputs.
import { createHash } from "node:crypto";
import * as path from "node:path";
import type { EnvValue } from "../transport";
import {
  BUILD_ROOT_REL,
  CCACHE_REL,
  CMAKE_OPTIONS,
  mergeLanguageFlags,
  prefixMapFlags,
} from "./commands";
import { contractPath } from "./contract";
import {
  type BuildFlags,
  buildDirName,
  buildEnv,
  buildKey,
  cmakeDefines,
  mergeCudaHostFlags,
} from "./flags";

/**
 * The cmake targets the simulated cluster builds: the RPC worker, a `--rpc` client, and the
 * OpenAI-compatible server the Serving stage runs on the client node.
 */
export const DEFAULT_TARGETS: readonly string[] = [
  "ggml-rpc-server",
  "llama-completion",
  "llama-server",
];
/** Their binaries (static: no shared library in the build tree is needed at run time). */
export const DEFAULT_ARTIFACTS: readonly string[] = [
  "bin/ggml-rpc-server",
  "bin/llama-completion",
  "bin/llama-server",
  "ggml/src/libggml-cpu.a",
];

const TARGET = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$/;
const ARTIFACT = /^[A-Za-z0-9._+-]+(\/[A-Za-z0-9._+-]+)*$/;
const BUILD_DIR_PATTERN = /^([A-Za-z0-9._+-]+\/)*[A-Za-z0-9._+*-]+$/;

/**
 * A build run by the project's own command instead of sparkform's CMake invocation: on real
 * Sparks `mix compile`, whose Makefile reads the contract from the environment and picks its
 * own build directory (`_build/dev/lib/llama_cpp_ex/obj/llama_build-<backend>-<key>`).
 */
export interface BuildCommand {
  /** argv, run in `workdir` under the environment contract (e.g. `["mix", "compile"]`). */
  readonly run: readonly string[];
  /** Relative to the tree (default `.`). */
  readonly workdir: string;
  /**
   * The CMake build directory the command configures, relative to the tree; its last part
   * may hold `*` (the most recently modified match is the one verified).
   */
  readonly buildDir: string;
}

/** A build-directory pattern: relative, no "..", `*` only in the last part. */
export function checkBuildDirPattern(p: string): string {
  const parts = p.split("/");
  if (
    !BUILD_DIR_PATTERN.test(p) ||
    parts.some((x) => x === ".." || x === "." || x.startsWith("-")) ||
    parts.slice(0, -1).some((x) => x.includes("*"))
  ) {
    throw new Error(
      `build directory ${JSON.stringify(p)} must be a path relative to the tree ` +
        "(letters, digits and . _ + - in each part, no '..'; `*` only in the last part), " +
        "e.g. _build/dev/lib/llama_cpp_ex/obj/llama_build-*",
    );
  }
  return p;
}

/** A working directory relative to the tree: "." or an artifact-shaped path. */
export function checkWorkdir(w: string): string {
  if (w === ".") return w;
  try {
    return checkArtifact(w);
  } catch {
    throw new Error(
      `build workdir ${JSON.stringify(w)} must be "." or a path relative to the tree without '..'`,
    );
  }
}

/** A cmake target name; throws naming the offending value. */
export function checkTarget(t: string): string {
  if (!TARGET.test(t)) {
    throw new Error(
      `build target ${JSON.stringify(t)} is not a cmake target name (letters, digits, _ . + -)`,
    );
  }
  return t;
}

/** An artifact path: relative to the build directory, no "..", no leading "-" per part. */
export function checkArtifact(a: string): string {
  if (!ARTIFACT.test(a) || a.split("/").some((p) => p === ".." || p === "." || p.startsWith("-"))) {
    throw new Error(
      `artifact ${JSON.stringify(a)} must be a path relative to the build directory ` +
        "(letters, digits and . _ + - in each part, no '..'), e.g. bin/ggml-rpc-server",
    );
  }
  return a;
}

/** A node path (absolute or `~/…`) made absolute against the node's $HOME. */
export function absoluteOnNode(p: string, home: string): string {
  if (p === "~") return home;
  if (p.startsWith("~/")) return path.posix.join(home, p.slice(2));
  if (!p.startsWith("/")) throw new Error(`${JSON.stringify(p)} must be absolute or start with ~/`);
  const n = path.posix.normalize(p);
  return n.length > 1 ? n.replace(/\/+$/, "") : n;
}

export interface PlanInput {
  /** The node's $HOME (absolute). */
  readonly home: string;
  /** The synced tree (absolute or ~/…). */
  readonly tree: string;
  readonly flags: BuildFlags;
  readonly targets: readonly string[];
  readonly artifacts: readonly string[];
  /** ninja -j; default ninja's own (cores + 2). */
  readonly jobs?: number;
  /** The project's build command instead of sparkform's CMake build (targets are unused). */
  readonly command?: BuildCommand;
  /** More PATH entries, absolute or ~/… (e.g. the toolchain's install directories). */
  readonly path?: readonly string[];
}

export interface BuildPlan {
  readonly mode: "cmake" | "command";
  readonly key: string;
  readonly tree: string;
  /** cmake: the build directory; command: its pattern, absolute (resolved after the build). */
  readonly buildDir: string;
  /** Where relative artifact paths start: cmake the build directory, command the tree. */
  readonly artifactRoot: string;
  /** Where the build runs (command mode; cmake runs with absolute paths). */
  readonly workdir: string;
  /** The stable path of the installed artifacts (a symlink into .store). */
  readonly installDir: string;
  readonly outDir: string;
  readonly ccacheDir: string;
  /** The environment every build step runs under (the contract plus ccache's settings). */
  readonly env: Record<string, string>;
  /** PATH entries before the default PATH (extra entries, the CUDA toolkit's bin on CUDA builds). */
  readonly path: string[];
  /** The configure argv; empty in command mode (the command configures). */
  readonly configure: string[];
  readonly build: string[];
}

/** What the node must have before a build starts (probed first, before the plan). */
export interface BuildRequirements {
  readonly tools: readonly string[];
  /** A file the tree must hold (cmake: CMakeLists.txt), or "" to require only the directory. */
  readonly treeMarker: string;
}

export function buildRequirements(command: BuildCommand | undefined): BuildRequirements {
  // A command brings its own build system (on Sparks: no ccache, no ninja); sparkform itself
  // needs only these for verification and install.
  return command
    ? { tools: ["sha256sum", "objdump", "find"], treeMarker: "" }
    : { tools: REQUIRED_TOOLS, treeMarker: "CMakeLists.txt" };
}

/** Render the whole build for one node. Pure; validates targets and artifacts. */
export function buildPlan(input: PlanInput): BuildPlan {
  const { flags, home } = input;
  if (!home.startsWith("/"))
    throw new Error(`the node's $HOME ${JSON.stringify(home)} is not absolute`);
  const command = input.command;
  if (command) {
    if (command.run.length === 0) throw new Error("the build command needs at least a program");
    checkWorkdir(command.workdir);
    checkBuildDirPattern(command.buildDir);
  } else {
    if (input.targets.length === 0) throw new Error("at least one build target is required");
    input.targets.forEach(checkTarget);
  }
  input.artifacts.forEach(checkArtifact);
  // A command is part of what is built: its own key, so switching back and forth is a hit.
  const key = command
    ? `${buildKey(flags)}-${createHash("sha256").update(JSON.stringify(command)).digest("hex").slice(0, 8)}`
    : buildKey(flags);
  const tree = absoluteOnNode(input.tree, home);
  const extraPath = (input.path ?? []).map((p) => absoluteOnNode(p, home));
  const root = path.posix.join(home, BUILD_ROOT_REL);
  const buildDir = path.posix.join(root, buildDirName(flags));
  const outDir = path.posix.join(root, "out");
  const ccacheDir = path.posix.join(home, CCACHE_REL);
  // The prefix maps go to the C/C++ compilers and, through nvcc's -Xcompiler, to the host
  // compiler of CUDA files (CUDA builds only).
  const prefixMaps = prefixMapFlags(tree, buildDir);
  const defines = mergeCudaHostFlags(
    mergeLanguageFlags(cmakeDefines(flags), prefixMaps),
    prefixMaps,
  );
  const configure = [
    "cmake",
    "-S",
    tree,
    "-B",
    buildDir,
    "-G",
    "Ninja",
    ...CMAKE_OPTIONS,
    ...defines,
    // The tree is synced without .git: the commit comes from the contract, never from git
    // (which would walk up to whatever repository holds the tree, or report "unknown").
    `-DLLAMA_BUILD_COMMIT=${flags.LLAMA_COMMIT}`,
    "-DLLAMA_BUILD_NUMBER=0",
  ];
  const build = [
    "cmake",
    "--build",
    buildDir,
    ...(input.jobs ? ["--parallel", String(input.jobs)] : []),
    "--target",
    ...input.targets,
  ];
  const env: Record<string, string> = {
    ...buildEnv(flags),
    ...(command ? { LLAMA_BUILD_NUMBER: "0" } : {}),
    CCACHE_DIR: ccacheDir,
    // Paths under $HOME are hashed relative to it, and the compiler is identified by content
    // (not mtime): a cache copied from a peer hits exactly when the inputs are identical.
    CCACHE_BASEDIR: home,
    CCACHE_COMPILERCHECK: "content",
    CCACHE_NOHASHDIR: "1",
    // Nothing in llama.cpp uses __DATE__/__TIME__ today; if it ever does, the value is fixed.
    SOURCE_DATE_EPOCH: "0",
  };
  const pathEntries = contractPath(flags, extraPath);
  if (command) {
    return {
      mode: "command",
      key,
      tree,
      buildDir: path.posix.join(tree, command.buildDir),
      artifactRoot: tree,
      workdir: command.workdir === "." ? tree : path.posix.join(tree, command.workdir),
      installDir: path.posix.join(outDir, key),
      outDir,
      ccacheDir,
      env,
      path: pathEntries,
      configure: [],
      build: [...command.run],
    };
  }
  return {
    mode: "cmake",
    key,
    tree,
    buildDir,
    artifactRoot: buildDir,
    workdir: tree,
    installDir: path.posix.join(outDir, key),
    outDir,
    ccacheDir,
    env,
    path: pathEntries,
    configure,
    build,
  };
}

/** The plan's env as the transport takes it. */
export function planEnv(plan: BuildPlan): Record<string, EnvValue> {
  return { ...plan.env };
}

/** Tools the build needs on the node. */
export const REQUIRED_TOOLS = ["cmake", "ninja", "ccache", "sha256sum", "objdump", "cc", "c++"];
