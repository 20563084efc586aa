// NativeBuild's pure half: where a build lives on a node, the exact commands it runs, and the
// parsing of what those commands print. No I/O here; provider.ts runs what this renders, and
// test/unit/native-build-plan.test.ts pins it with tables of exact inputs and outputs.
//
// Layout on every node (absolute paths, the same on all nodes, so binaries are reproducible):
//
//   ~/.cache/sparkform/ccache/                         the compiler cache (CCACHE_DIR)
//   ~/.cache/sparkform/llama-build/<buildDirName>/      the CMake build directory, one per key
//   ~/.cache/sparkform/llama-build/out/<key>         -> .store/<key>-<id>  (a symlink, swapped
//   ~/.cache/sparkform/llama-build/out/.store/<key>-<id>/  atomically; <id> digests the content)
//
// A build only ever writes its build directory; the installed artifacts change by one rename
// of a symlink after verification passed, so a failed build leaves the last good ones in place.
import { createHash } from "node:crypto";
import * as path from "node:path";
import type { EnvValue } from "../transport";
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

/** Where everything lives, relative to the node's $HOME. */
export const CACHE_REL = ".cache/sparkform";
export const BUILD_ROOT_REL = `${CACHE_REL}/llama-build`;
export const CCACHE_REL = `${CACHE_REL}/ccache`;

/**
 * CMake options every NativeBuild passes besides the flags' own (cmakeDefines): a Release
 * build of static binaries (an installed binary must not load libraries from a build
 * directory that the next build rewrites), no tests/examples, no network code, and ccache as
 * the compiler launcher (explicitly; ggml's own GGML_CCACHE would probe for it). The server
 * target is configured (llama-server), without its web UI: 80fb11ac's tools/ui would
 * otherwise download prebuilt assets from a Hugging Face bucket at build time
 * (LLAMA_USE_PREBUILT_UI defaults ON), and nodes build offline.
 */
export const CMAKE_OPTIONS: readonly string[] = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_SERVER=ON",
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
  "-DGGML_CCACHE=OFF",
  "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
  "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
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

/**
 * The compiler flags that keep node paths out of the binaries: __FILE__ strings (ggml's
 * assertions) and any debug info name `llama.cpp/…` and `llama-build/…`, not `/home/<user>/…`,
 * so two nodes (or two users) produce the same bytes and share compiler-cache hits.
 */
export function prefixMapFlags(tree: string, buildDir: string): string[] {
  return [`-ffile-prefix-map=${tree}=llama.cpp`, `-ffile-prefix-map=${buildDir}=llama-build`];
}

/** cmakeDefines(flags) with `extra` appended to CMAKE_C_FLAGS and CMAKE_CXX_FLAGS. */
export function mergeLanguageFlags(defines: readonly string[], extra: readonly string[]): string[] {
  const out = [...defines];
  for (const lang of ["C", "CXX"]) {
    const prefix = `-DCMAKE_${lang}_FLAGS=`;
    const i = out.findIndex((d) => d.startsWith(prefix));
    if (i >= 0) out[i] = `${out[i]} ${extra.join(" ")}`;
    else out.push(`${prefix}${extra.join(" ")}`);
  }
  return out;
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

// ---- node-side programs (native/build/*.sh; arguments arrive as "$@", never re-parsed) -----

/**
 * The programs a NativeBuild runs on the node, by name under native/ (components/native-script.ts
 * loads and sends them; each file's header says what it takes and prints):
 *
 *   probe           TREE MARKER TOOL...          $HOME, compiler and ccache; exit 3/4 when unfit
 *   configure       BUILD_DIR ARGV...            mkdir BUILD_DIR, then the configure argv
 *   build           ARGV...                      the build, ccache statistics around it
 *   commandBuild    WORKDIR ARGV...              the project's build command, the same way
 *   findBuildDir    DIR PATTERN                  the newest DIR/PATTERN directory (command mode)
 *   (verify.ts's VERIFY_PROGRAM, between build and install: the evidence, verify-build.sh)
 *   install         OUT_DIR KEY BUILD_DIR ARTIFACT...  atomic install, `sha256  path` lines
 *   digest          DIR ARTIFACT...              `sha256  path` or `-  path` per artifact
 *   remove          BUILD_DIR OUT_DIR KEY        destroy (the compiler cache stays)
 */
export const BUILD_PROGRAMS = {
  probe: "build/toolchain-facts.sh",
  configure: "build/configure.sh",
  build: "build/build.sh",
  commandBuild: "build/command-build.sh",
  findBuildDir: "build/find-build-dir.sh",
  install: "build/install.sh",
  digest: "build/digest.sh",
  remove: "build/delete.sh",
} as const;

/** native/build/toolchain-facts.sh's output: $HOME first, then `key=value` lines. */
export function parseProbe(stdout: string): {
  home: string;
  compiler: string;
  ccache: string;
  /** sha256 of the c++ and nvcc binaries ("" when absent): the compiler among the build inputs. */
  compilerDigests: CompilerDigests;
} {
  const lines = stdout.split("\n");
  const value = (k: string) =>
    (lines.find((l) => l.startsWith(`${k}=`)) ?? "").slice(k.length + 1).trim();
  return {
    home: (lines[0] ?? "").trim(),
    compiler: value("compiler"),
    ccache: value("ccache"),
    compilerDigests: {
      cxx: value("compilerSha256"),
      // Absent from a toolchain-facts.sh older than the cc digest: left out, not "" (= no cc on the node).
      ...(lines.some((l) => l.startsWith("ccSha256=")) ? { cc: value("ccSha256") } : {}),
      nvcc: value("nvccSha256"),
      nvccVersion: value("nvcc"),
    },
  };
}

/** The compiler binaries' digests, as toolchain-facts.sh measures them ("" = absent). */
export interface CompilerDigests {
  /** sha256 of `c++` (symlinks resolved). */
  cxx: string;
  /** sha256 of `cc`, which compiles ggml's C sources (absent in state from before it was recorded). */
  cc?: string;
  /** sha256 of nvcc (`$CUDA_HOME/bin/nvcc` or PATH's). */
  nvcc: string;
  /** nvcc's last --version line (`Build cuda_13.0…`). */
  nvccVersion: string;
}

/** Tools the build needs on the node. */
export const REQUIRED_TOOLS = ["cmake", "ninja", "ccache", "sha256sum", "objdump", "cc", "c++"];

// ---- parsing ---------------------------------------------------------------------------------

/** `sha256  path` lines → path → sha256 ("" for a missing file); exactly the asked paths. */
export function parseDigests(stdout: string, artifacts: readonly string[]): Record<string, string> {
  const got = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const m = /^([0-9a-f]{64}|-) [ *](.+)$/.exec(line.trimEnd());
    if (m?.[2]) got.set(m[2], m[1] === "-" ? "" : (m[1] ?? ""));
  }
  return Object.fromEntries(
    artifacts.map((a) => {
      const v = got.get(a);
      if (v === undefined) throw new Error(`no digest reported for artifact ${a}`);
      return [a, v];
    }),
  );
}

export interface CacheStats {
  readonly hits: number;
  readonly misses: number;
}

/** `ccache --print-stats` (tab-separated counters) → hits and misses of the last build. */
export function parseCcacheStats(text: string): CacheStats | undefined {
  const counters = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)\t(\d+)$/.exec(line.trim());
    if (m?.[1]) counters.set(m[1], Number(m[2]));
  }
  if (!counters.has("cache_miss") && !counters.has("direct_cache_hit")) return undefined;
  const n = (k: string) => counters.get(k) ?? 0;
  return { hits: n("direct_cache_hit") + n("preprocessed_cache_hit"), misses: n("cache_miss") };
}

/** A ninja progress line (`[12/345] Building CXX object …`) → done/total. */
export function ninjaProgress(line: string): { done: number; total: number } | undefined {
  const m = /^\[(\d+)\/(\d+)\]/.exec(line);
  return m ? { done: Number(m[1]), total: Number(m[2]) } : undefined;
}

/**
 * The compiler output worth showing for a failed build: from the first `FAILED:` line (ninja
 * prints it before the compiler's own messages) up to `max` lines, else the last `max` lines.
 */
export function compilerTail(lines: readonly string[], max = 40): string {
  const useful = lines.filter((l) => !/^==> ccache statistics$|^[a-z_]+\t\d+$/.test(l));
  const first = useful.findIndex((l) => l.startsWith("FAILED: "));
  const picked =
    first >= 0 ? useful.slice(first, first + max) : useful.slice(Math.max(0, useful.length - max));
  return picked.join("\n");
}

/** A short, stable digest of a set of artifact digests (for messages and comparisons). */
export function artifactSetDigest(digests: Readonly<Record<string, string>>): string {
  const canonical = JSON.stringify(
    Object.keys(digests)
      .sort()
      .map((k) => [k, digests[k]]),
  );
  return createHash("sha256").update(canonical).digest("hex").slice(0, 12);
}
