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
import type { EnvValue } from "../transport/ssh";
import {
  type BuildFlags,
  buildDirName,
  buildEnv,
  buildKey,
  cmakeDefines,
  mergeCudaHostFlags,
} from "./flags";

/** The cmake targets the simulated cluster builds: the RPC worker and a `--rpc` client. */
export const DEFAULT_TARGETS: readonly string[] = ["ggml-rpc-server", "llama-completion"];
/** Their binaries (static: no shared library in the build tree is needed at run time). */
export const DEFAULT_ARTIFACTS: readonly string[] = [
  "bin/ggml-rpc-server",
  "bin/llama-completion",
  "ggml/src/libggml-cpu.a",
];

/** Where everything lives, relative to the node's $HOME. */
export const CACHE_REL = ".cache/sparkform";
export const BUILD_ROOT_REL = `${CACHE_REL}/llama-build`;
export const CCACHE_REL = `${CACHE_REL}/ccache`;

/**
 * CMake options every NativeBuild passes besides the flags' own (cmakeDefines): a Release
 * build of static binaries (an installed binary must not load libraries from a build
 * directory that the next build rewrites), no tests/examples/server, no network code, and
 * ccache as the compiler launcher (explicitly; ggml's own GGML_CCACHE would probe for it).
 */
export const CMAKE_OPTIONS: readonly string[] = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_SERVER=OFF",
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
  const cuda = flags.LLAMA_BACKEND === "cuda";
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
  const pathEntries = [
    ...extraPath,
    ...(cuda && flags.CUDA_HOME ? [path.posix.join(flags.CUDA_HOME, "bin")] : []),
  ];
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

// ---- node-side scripts (POSIX sh; arguments arrive as "$@", never re-parsed) -------------

/**
 * Print $HOME, then fail naming the first missing tool (exit 3) or a missing tree (exit 4);
 * else print `compiler=` and `ccache=` lines (each tool's first --version line; empty if absent).
 * Args: TREE MARKER TOOL...; MARKER is a file the tree must hold, or "" for the directory only.
 */
export const PROBE_SCRIPT = [
  'printf "%s\\n" "$HOME"',
  'tree=$1 marker=$2; shift 2; for t in "$@"; do command -v "$t" >/dev/null 2>&1 || { echo "missing tool: $t" >&2; exit 3; }; done',
  'if [ -n "$marker" ]; then [ -f "$tree/$marker" ] || { echo "no $marker in $tree" >&2; exit 4; }; else [ -d "$tree" ] || { echo "no directory $tree" >&2; exit 4; }; fi',
  'printf "compiler=%s\\n" "$( (gcc --version 2>/dev/null || cc --version 2>/dev/null) | head -n 1)"',
  'printf "ccache=%s\\n" "$(ccache --version 2>/dev/null | head -n 1)"',
].join("\n");

/** PROBE_SCRIPT's output: $HOME first, then `key=value` lines. */
export function parseProbe(stdout: string): { home: string; compiler: string; ccache: string } {
  const lines = stdout.split("\n");
  const value = (k: string) =>
    (lines.find((l) => l.startsWith(`${k}=`)) ?? "").slice(k.length + 1).trim();
  return { home: (lines[0] ?? "").trim(), compiler: value("compiler"), ccache: value("ccache") };
}

/** Tools the build needs on the node. */
export const REQUIRED_TOOLS = ["cmake", "ninja", "ccache", "sha256sum", "objdump", "cc", "c++"];

/** Run "$@" (a cmake build) with the ccache statistics zeroed before and printed after. */
export const BUILD_SCRIPT = [
  "ccache -z >/dev/null 2>&1 || true",
  '"$@"',
  "rc=$?",
  'echo "==> ccache statistics"',
  "ccache --print-stats 2>/dev/null || true",
  "exit $rc",
].join("\n");

/**
 * Run the project's build command: cd to WORKDIR, then BUILD_SCRIPT. When ccache is there,
 * CMake (3.17+) takes it as the compiler launcher from the environment, so a command that
 * configures CMake itself still shares the compiler cache. Args: WORKDIR ARGV...
 */
export const COMMAND_BUILD_SCRIPT = [
  'cd -- "$1" || exit 4',
  "shift",
  "if command -v ccache >/dev/null 2>&1; then export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache; fi",
  BUILD_SCRIPT,
].join("\n");

/**
 * The build directory a command made: DIR/PATTERN's most recently modified directory match.
 * Prints nothing when none matches. Args: DIR PATTERN (PATTERN is find -name syntax).
 */
export const FIND_BUILD_DIR_SCRIPT =
  'find "$1" -mindepth 1 -maxdepth 1 -type d -name "$2" -printf "%T@ %p\\n" 2>/dev/null | sort -rn | head -n 1 | cut -d" " -f2-';

/** verify-build.sh arrives on stdin: kept in a temp file so nothing it runs can read it. */
export const VERIFY_RUNNER =
  't=$(mktemp) || exit 1; cat >"$t"; sh "$t" "$@"; rc=$?; rm -f "$t"; exit $rc';

/**
 * Install: copy the artifacts from the build directory into a new store entry, then swap the
 * `out/<key>` symlink to it with one rename (mv -T), then remove older entries of the key.
 * Args: OUT_DIR KEY BUILD_DIR ARTIFACT...; prints `sha256  path` per artifact as installed.
 */
export const INSTALL_SCRIPT = [
  "set -eu",
  'out=$1 key=$2 build=$3; shift 3; store="$out/.store"',
  'mkdir -p "$store"',
  'stage=$(mktemp -d "$store/.tmp-$key.XXXXXX")',
  "trap 'rm -rf \"$stage\"' EXIT",
  'for a in "$@"; do mkdir -p "$stage/$(dirname "$a")"; cp -- "$build/$a" "$stage/$a"; done',
  'id=$(cd "$stage" && sha256sum -- "$@" | sha256sum | cut -c1-12)',
  // Always a new entry (the stage's random suffix): an existing entry of the same content
  // may be the damaged copy this install repairs.
  'final="$store/$key-$id-${stage##*.}"',
  'chmod 755 "$stage"',
  'mv -T "$stage" "$final"',
  'ln -sfn ".store/${final##*/}" "$out/.$key.link"',
  'mv -T "$out/.$key.link" "$out/$key"',
  'for d in "$store/$key-"*; do [ "$d" = "$final" ] || rm -rf -- "$d"; done',
  'cd "$out/$key/"',
  'sha256sum -- "$@"',
].join("\n");

/** Digest installed artifacts: `sha256  path`, or `-  path` when missing. Args: DIR ARTIFACT... */
export const DIGEST_SCRIPT = [
  'dir=$1; shift; cd "$dir" 2>/dev/null || { for a in "$@"; do printf -- "-  %s\\n" "$a"; done; exit 0; }',
  'for a in "$@"; do if [ -f "$a" ]; then sha256sum -- "$a"; else printf -- "-  %s\\n" "$a"; fi; done',
].join("\n");

/** Remove this key's build directory ("" = keep it) and installed artifacts. Args: BUILD_DIR OUT_DIR KEY. */
export const DELETE_SCRIPT = [
  "set -eu",
  'if [ -n "$1" ]; then rm -rf -- "$1"; fi',
  'rm -rf -- "$2/$3" "$2/.$3.link"',
  'for d in "$2/.store/$3-"*; do rm -rf -- "$d"; done',
].join("\n");

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
