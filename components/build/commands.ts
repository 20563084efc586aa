// NativeBuild's program names, where a build lives on a node, and the fixed parts of the argv
// its plan renders (plan.ts puts them together; provider.ts runs them). Pure.
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
