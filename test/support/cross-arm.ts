// Cross-compiling ggml-cpu for aarch64 on an x86 Debian 12 host: the ARM half of the build
// verification proven on machines without a Spark.
//
// Debian 12's aarch64 GCC 12 rejects -march=armv9.2-a (it knows up to armv9-a); Debian's
// clang-16 with --target=aarch64-linux-gnu accepts it, with the aarch64 cross libc and
// libstdc++ packages as the sysroot (clang finds them under /usr/aarch64-linux-gnu and
// /usr/lib/gcc-cross by itself). Only ggml-cpu is built, as a static library: no aarch64
// linker is involved, and aarch64-linux-gnu-ar/-objdump come from binutils.
//
// The llama.cpp tree is the one node-llama-cpp ships (sim/llama extractLlamaSource), cached
// with the builds under sparkformCacheDir()/llama-cross-arm-<commit>/; each build directory is
// named by the build key of its flags (flags.ts buildDirName), so each -march is built once.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { extractLlamaSource, llamaSourceInfo, runLogged, sparkformCacheDir } from "../../sim/llama";
import {
  type BuildFlags,
  buildDirName,
  cmakeDefines,
  parseBuildFlags,
} from "../../components/build/flags";

/** A file or command the cross build needs, and the Debian package that provides it. */
export interface CrossRequirement {
  /** A command looked up on PATH, or an absolute path that must exist. */
  readonly need: string;
  readonly pkg: string;
}

export const CROSS_ARM_REQUIREMENTS: readonly CrossRequirement[] = [
  { need: "clang-16", pkg: "clang-16" },
  { need: "clang++-16", pkg: "clang-16" },
  { need: "aarch64-linux-gnu-ar", pkg: "binutils-aarch64-linux-gnu" },
  { need: "aarch64-linux-gnu-ranlib", pkg: "binutils-aarch64-linux-gnu" },
  { need: "aarch64-linux-gnu-objdump", pkg: "binutils-aarch64-linux-gnu" },
  { need: "/usr/aarch64-linux-gnu/include/stdio.h", pkg: "libc6-dev-arm64-cross" },
  { need: "/usr/aarch64-linux-gnu/include/c++/12/vector", pkg: "libstdc++-12-dev-arm64-cross" },
  { need: "cmake", pkg: "cmake" },
  { need: "make", pkg: "make" },
  // Ninja only for the generator test (a configure, not a build).
  { need: "ninja", pkg: "ninja-build" },
  { need: "git", pkg: "git" },
];

/** The objdump that reads the cross-built library. */
export const CROSS_ARM_OBJDUMP = "aarch64-linux-gnu-objdump";

function present(need: string): boolean {
  if (need.startsWith("/")) return fs.existsSync(need);
  return (process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(":").some((d) => {
    try {
      fs.accessSync(path.join(d, need), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export function missingCrossArmPackages(
  reqs: readonly CrossRequirement[] = CROSS_ARM_REQUIREMENTS,
): string[] {
  return [...new Set(reqs.filter((r) => !present(r.need)).map((r) => r.pkg))];
}

function aptGet(args: string[]): { status: number | null; output: string } {
  const r = spawnSync("apt-get", ["-q", "-o", "DPkg::Lock::Timeout=900", ...args], {
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return {
    status: r.status,
    output: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}`,
  };
}

/**
 * Make sure the cross toolchain is installed: installs the missing Debian packages with
 * apt-get (running `apt-get update` first if the install fails, e.g. on a fresh machine with
 * no package lists). Needs root when anything is missing; otherwise throws with the apt line.
 */
export function ensureCrossArmToolchain(opts: { log?: (line: string) => void } = {}): void {
  const missing = missingCrossArmPackages();
  if (missing.length === 0) return;
  const line = `apt-get install -y --no-install-recommends ${missing.join(" ")}`;
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    throw new Error(`the aarch64 cross toolchain is missing; install it as root: ${line}`);
  }
  opts.log?.(`cross-arm: installing ${missing.join(" ")} with apt-get`);
  const install = () => aptGet(["install", "-y", "--no-install-recommends", ...missing]);
  let r = install();
  if (r.status !== 0) {
    const u = aptGet(["update"]);
    if (u.status !== 0) throw new Error(`apt-get update failed:\n${u.output.slice(-3000)}`);
    r = install();
  }
  if (r.status !== 0) throw new Error(`${line} failed:\n${r.output.slice(-3000)}`);
  const still = missingCrossArmPackages();
  if (still.length > 0) {
    throw new Error(`after ${line}, still missing: ${still.join(" ")}`);
  }
}

/** CMake toolchain file for clang-16 → aarch64-linux-gnu with Debian's cross sysroot. */
export const CROSS_ARM_TOOLCHAIN = `# sparkform: clang-16 cross-compiling for aarch64 with Debian's cross libc as sysroot
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER clang-16)
set(CMAKE_CXX_COMPILER clang++-16)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_AR aarch64-linux-gnu-ar)
set(CMAKE_RANLIB aarch64-linux-gnu-ranlib)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
`;

/** CMake definitions of the cross build besides the flags' own (cmakeDefines). */
export const CROSS_ARM_CMAKE_DEFINES = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF", // libggml-cpu.a: no aarch64 link step needed
  "-DGGML_OPENMP=OFF", // no aarch64 libgomp/libomp in the sysroot; keeps the configure quiet
  "-DGGML_CCACHE=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_TOOLS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_SERVER=OFF",
];

/** The cache root of the cross builds for the bundled llama.cpp commit. */
export function crossArmRoot(cacheDir: string = sparkformCacheDir()): string {
  return path.join(cacheDir, `llama-cross-arm-${llamaSourceInfo().commit}`);
}

/** Extract (or reuse) the bundled llama.cpp tree for cross builds. */
export function crossArmSource(cacheDir?: string): { dir: string; commit: string; tag: string } {
  return extractLlamaSource(path.join(crossArmRoot(cacheDir), "src"));
}

/** CPU-backend build flags for an aarch64 cross build of the bundled commit. */
export function crossArmFlags(
  march: string,
  commit: string = llamaSourceInfo().commit,
): BuildFlags {
  return parseBuildFlags({
    LLAMA_BACKEND: "cpu",
    LLAMA_CPU_ARM_ARCH: march,
    LLAMA_RPC: "1",
    LLAMA_COMMIT: commit,
  });
}

export interface CrossArmBuild {
  readonly flags: BuildFlags;
  readonly sourceDir: string;
  readonly buildDir: string;
  /** The static library: <buildDir>/ggml/src/libggml-cpu.a */
  readonly library: string;
  /** False when the cached build of the same key was reused. */
  readonly built: boolean;
  readonly configureSeconds: number;
  readonly buildSeconds: number;
  /** "Unix Makefiles" (default) or "Ninja". */
  readonly generator: CrossGenerator;
}

export type CrossGenerator = "Unix Makefiles" | "Ninja";

/**
 * Configure and (unless `configureOnly`) build ggml-cpu for aarch64 under `flags`, in
 * <crossArmRoot>/<buildDirName(flags)>[-ninja]. A finished build leaves a stamp; a later call
 * with the same flags reuses it. An unfinished or differently-stamped directory is rebuilt
 * from scratch. Not safe against two processes building the same key at once.
 */
export async function crossBuildGgmlCpu(opts: {
  flags: BuildFlags;
  cacheDir?: string;
  jobs?: number;
  generator?: CrossGenerator;
  configureOnly?: boolean;
  onLog?: (line: string) => void;
}): Promise<CrossArmBuild> {
  const flags = opts.flags;
  if (!flags.LLAMA_CPU_ARM_ARCH)
    throw new Error("crossBuildGgmlCpu: flags name no LLAMA_CPU_ARM_ARCH");
  const generator = opts.generator ?? "Unix Makefiles";
  const root = crossArmRoot(opts.cacheDir);
  const src = crossArmSource(opts.cacheDir);
  if (src.commit !== flags.LLAMA_COMMIT) {
    throw new Error(
      `crossBuildGgmlCpu: LLAMA_COMMIT is ${flags.LLAMA_COMMIT}, but the bundled tree is ${src.commit}`,
    );
  }
  const buildDir = path.join(
    root,
    buildDirName(flags) +
      (generator === "Ninja" ? "-ninja" : "") +
      (opts.configureOnly ? "-configured" : ""),
  );
  const library = path.join(buildDir, "ggml", "src", "libggml-cpu.a");
  const defines = [...cmakeDefines(flags), ...CROSS_ARM_CMAKE_DEFINES];
  const stampPath = path.join(buildDir, "sparkform.stamp.json");
  const stamp = JSON.stringify({
    flags,
    defines,
    generator,
    toolchain: CROSS_ARM_TOOLCHAIN,
    configureOnly: !!opts.configureOnly,
  });
  const done = () =>
    fs.existsSync(stampPath) &&
    fs.readFileSync(stampPath, "utf8") === stamp &&
    (opts.configureOnly || fs.existsSync(library));
  const result = (
    built: boolean,
    configureSeconds: number,
    buildSeconds: number,
  ): CrossArmBuild => ({
    flags,
    sourceDir: src.dir,
    buildDir,
    library,
    built,
    configureSeconds,
    buildSeconds,
    generator,
  });
  if (done()) return result(false, 0, 0);

  fs.rmSync(buildDir, { recursive: true, force: true });
  fs.mkdirSync(buildDir, { recursive: true });
  const toolchain = path.join(root, "aarch64-clang16.cmake");
  fs.writeFileSync(toolchain, CROSS_ARM_TOOLCHAIN);
  const log = fs.createWriteStream(path.join(buildDir, "sparkform-build.log"));
  const ctx = { cwd: root, log, onLog: opts.onLog };
  let configureSeconds = 0;
  let buildSeconds = 0;
  try {
    let t = Date.now();
    await runLogged(
      "cmake",
      [
        "-S",
        src.dir,
        "-B",
        buildDir,
        "-G",
        generator,
        `-DCMAKE_TOOLCHAIN_FILE=${toolchain}`,
        ...defines,
      ],
      ctx,
    );
    configureSeconds = (Date.now() - t) / 1000;
    if (!opts.configureOnly) {
      t = Date.now();
      const jobs = String(opts.jobs ?? os.cpus().length);
      await runLogged("cmake", ["--build", buildDir, "--target", "ggml-cpu", "-j", jobs], ctx);
      buildSeconds = (Date.now() - t) / 1000;
      if (!fs.existsSync(library)) throw new Error(`the build finished but ${library} is missing`);
    }
  } finally {
    await new Promise<void>((r) => log.end(r));
  }
  fs.writeFileSync(stampPath, stamp);
  return result(true, configureSeconds, buildSeconds);
}
