// The build environment contract (runbook: "Build flags", "Why LLAMA_CPU_ARM_ARCH is not
// optional", "Why LLAMA_CUDA_ARCH must accompany it") and its validation.
//
// A NativeBuild runs under exactly these variables, in a non-login shell. They are validated
// here, on the control node, before anything runs on a node: a configuration the Makefile
// would reject with $(error) — or worse, accept and build wrongly without a word — never
// reaches a compiler.
//
// Fields are named after the environment variables the build reads, so an error message
// names the variable a user sets.
import { createHash } from "node:crypto";
import * as path from "node:path";
import { z } from "zod";
import { FAT_BUILD_COST } from "./wording";

export { FAT_BUILD_COST } from "./wording";

/** DGX Spark (GB10): the CPU architecture the runbook builds with. */
export const SPARK_CPU_ARM_ARCH = "armv9.2-a+dotprod+i8mm+fp16+bf16+sve2";
/** DGX Spark (GB10): the one CUDA architecture, real code only (no PTX). */
export const SPARK_CUDA_ARCH = "121a-real";
/** The simulated (x86 container) nodes: AVX2 + FMA + F16C, what the sim host has. */
export const SIM_X86_MARCH = "x86-64-v3";
/** Where DGX OS installs the toolkit (nvcc is on the login PATH only, so it is named). */
export const SPARK_CUDA_HOME = "/usr/local/cuda";

/** Instruction-set extensions whose signature instructions the verifier counts on x86-64. */
export type X86Extension = "avx2" | "fma" | "f16c" | "avx-vnni" | "avx512";

/**
 * The x86-64 `-march` values a build may name, and what each implies for the verifier (which
 * counts the signature instructions of each extension in the CPU library; see verify.ts):
 *
 *   x86-64-v3, haswell, znver2, znver3   avx2, fma, f16c
 *   alderlake                            avx2, fma, f16c, avx-vnni
 *   x86-64-v4, skylake-avx512            avx2, fma, f16c, avx512
 *   sapphirerapids, znver4               avx2, fma, f16c, avx512, avx-vnni (AVX512-VNNI;
 *                                        ggml uses the same vpdpbusd through AVX512VL)
 *
 * Anything older than v3 is refused: ggml's quantized kernels need AVX2 to be worth running,
 * and an -march the table does not know would leave the verifier nothing to require.
 */
export const X86_MARCH_EXTENSIONS: Readonly<Record<string, readonly X86Extension[]>> = {
  "x86-64-v3": ["avx2", "fma", "f16c"],
  haswell: ["avx2", "fma", "f16c"],
  znver2: ["avx2", "fma", "f16c"],
  znver3: ["avx2", "fma", "f16c"],
  alderlake: ["avx2", "fma", "f16c", "avx-vnni"],
  "x86-64-v4": ["avx2", "fma", "f16c", "avx512"],
  "skylake-avx512": ["avx2", "fma", "f16c", "avx512"],
  sapphirerapids: ["avx2", "fma", "f16c", "avx512", "avx-vnni"],
  znver4: ["avx2", "fma", "f16c", "avx512", "avx-vnni"],
};

/** The contract, validated. Every NativeBuild on every node runs under exactly this. */
export interface BuildFlags {
  /** `cpu` or `cuda`. */
  readonly LLAMA_BACKEND: "cpu" | "cuda";
  /** aarch64 nodes: the `-march` for ggml-cpu (Spark: SPARK_CPU_ARM_ARCH). */
  readonly LLAMA_CPU_ARM_ARCH?: string;
  /** x86-64 nodes: the `-march` for ggml-cpu (sim: SIM_X86_MARCH); a key of X86_MARCH_EXTENSIONS. */
  readonly LLAMA_CPU_X86_MARCH?: string;
  /** CUDA builds: exactly one CMake CUDA architecture (Spark: SPARK_CUDA_ARCH). */
  readonly LLAMA_CUDA_ARCH?: string;
  /** Always "1": the ggml RPC backend (rpc-server and the --rpc client) is the point. */
  readonly LLAMA_RPC: "1";
  /** CUDA builds: the toolkit root (absolute). The non-login shell has no nvcc on PATH. */
  readonly CUDA_HOME?: string;
  /** The llama.cpp commit (40 hex), passed explicitly: the synced tree has no .git. */
  readonly LLAMA_COMMIT: string;
  /**
   * "1": the RPC backend's RDMA transport (GGML_RPC_RDMA=ON, links libibverbs; configure fails
   * where libibverbs is missing); "0" or absent: off. Pinned either way: left to CMake, it
   * follows whether the build host has libibverbs installed (Spark: on, the fabric needs it).
   */
  readonly LLAMA_RPC_RDMA?: "0" | "1";
  /**
   * CUDA builds: "1" links NCCL into ggml-cuda (GGML_CUDA_NCCL=ON; multi-GPU in one process
   * only), "0" or absent: off. Pinned: ggml's default is ON, so NCCL follows the build host.
   */
  readonly LLAMA_CUDA_NCCL?: "0" | "1";
}

/** The instruction set a set of flags builds ggml-cpu for. */
export type TargetIsa = "aarch64" | "x86_64";

// Reasons, worded once; the validation messages and the docs use the same text.
const FAT_BINARY_REASON =
  "naming the CPU architecture turns GGML_NATIVE off, and with native off ggml-cuda stops " +
  "compiling for the GPU it can see and emits a seven-architecture fat binary instead (" +
  FAT_BUILD_COST +
  ", silently)";
const NATIVE_REASON =
  "without it GGML_NATIVE probes the host with -mcpu=native, which fails silently on GB10 " +
  "(the compiler rejects the Cortex-X925/A725 cores) and the build exits 0 with the CPU " +
  "backend compiled at base ARMv8-A";

const ARM_ARCH = /^armv[89](\.[0-9])?-a(\+[a-z0-9]+)*$/;
const CUDA_ARCH = /^[1-9][0-9]{1,2}[af]?(-real|-virtual)?$/;
const COMMIT = /^[0-9a-f]{40}$/;
const ARM_ARCH_TEXT = `must be an -march value such as ${SPARK_CPU_ARM_ARCH} (an armv8/armv9 base plus +extensions)`;
const X86_MARCH_TEXT = `must be one of ${Object.keys(X86_MARCH_EXTENSIONS).join(", ")} (the -march values whose instructions the verifier knows)`;
const CUDA_ARCH_TEXT =
  `must be exactly one CMake CUDA architecture such as ${SPARK_CUDA_ARCH} ` +
  "(not a list, not all, all-major or native: one architecture per build)";
const CUDA_HOME_TEXT = "must be an absolute path without spaces or shell metacharacters";
const COMMIT_TEXT = "must be the full 40-hex llama.cpp commit (the synced tree has no .git to ask)";
const SWITCH_TEXT = 'must be "1" (on) or "0" (off)';

/** A zod error map: "is required" when the field is absent, else `text`. */
function says(text: string) {
  return (iss: { input?: unknown }) => (iss.input === undefined ? "is required" : text);
}
const stringOr = (text: string) => z.string({ error: says(text) });

const rawSchema = z.strictObject({
  LLAMA_BACKEND: z.enum(["cpu", "cuda"], { error: says('must be "cpu" or "cuda"') }),
  LLAMA_CPU_ARM_ARCH: stringOr(ARM_ARCH_TEXT).regex(ARM_ARCH, { error: ARM_ARCH_TEXT }).optional(),
  LLAMA_CPU_X86_MARCH: stringOr(X86_MARCH_TEXT)
    .refine((v) => Object.hasOwn(X86_MARCH_EXTENSIONS, v), { error: X86_MARCH_TEXT })
    .optional(),
  LLAMA_CUDA_ARCH: stringOr(CUDA_ARCH_TEXT).regex(CUDA_ARCH, { error: CUDA_ARCH_TEXT }).optional(),
  LLAMA_RPC: z.literal("1", {
    error: says('must be "1": the ggml RPC backend is what the cluster runs'),
  }),
  CUDA_HOME: stringOr(CUDA_HOME_TEXT)
    .refine((v) => path.posix.isAbsolute(v) && !/[\s'"\\$`;&|<>*?]/.test(v), {
      error: CUDA_HOME_TEXT,
    })
    .optional(),
  LLAMA_COMMIT: stringOr(COMMIT_TEXT).regex(COMMIT, { error: COMMIT_TEXT }),
  LLAMA_RPC_RDMA: z.enum(["0", "1"], { error: says(SWITCH_TEXT) }).optional(),
  LLAMA_CUDA_NCCL: z.enum(["0", "1"], { error: says(SWITCH_TEXT) }).optional(),
});

const schema = rawSchema.superRefine((f, ctx) => {
  const cpuArch = f.LLAMA_CPU_ARM_ARCH ? "LLAMA_CPU_ARM_ARCH" : "LLAMA_CPU_X86_MARCH";
  if (f.LLAMA_CPU_ARM_ARCH && f.LLAMA_CPU_X86_MARCH) {
    ctx.addIssue({
      code: "custom",
      path: ["LLAMA_CPU_X86_MARCH"],
      message:
        "is set together with LLAMA_CPU_ARM_ARCH; a build targets one instruction set: " +
        "set LLAMA_CPU_ARM_ARCH on aarch64 nodes (DGX Spark) or LLAMA_CPU_X86_MARCH on x86-64 nodes, not both",
    });
  }
  if (!f.LLAMA_CPU_ARM_ARCH && !f.LLAMA_CPU_X86_MARCH) {
    ctx.addIssue({
      code: "custom",
      path: ["LLAMA_CPU_ARM_ARCH"],
      message:
        `is required (or LLAMA_CPU_X86_MARCH on x86-64 nodes): ${NATIVE_REASON}; ` +
        `set LLAMA_CPU_ARM_ARCH=${SPARK_CPU_ARM_ARCH} on DGX Spark`,
    });
  }
  if (f.LLAMA_BACKEND === "cuda") {
    if (!f.LLAMA_CUDA_ARCH && (f.LLAMA_CPU_ARM_ARCH || f.LLAMA_CPU_X86_MARCH)) {
      ctx.addIssue({
        code: "custom",
        path: ["LLAMA_CUDA_ARCH"],
        message:
          `is required with ${cpuArch} on a CUDA build (LLAMA_BACKEND=cuda): ${FAT_BINARY_REASON}; ` +
          `set LLAMA_CUDA_ARCH=${SPARK_CUDA_ARCH} on DGX Spark (GB10)`,
      });
    }
    if (!f.CUDA_HOME) {
      ctx.addIssue({
        code: "custom",
        path: ["CUDA_HOME"],
        message:
          "is required on a CUDA build: builds run in a non-login shell, where DGX OS puts no " +
          `nvcc on PATH (it is added by /etc/profile.d only); set CUDA_HOME=${SPARK_CUDA_HOME}`,
      });
    }
  } else {
    for (const field of ["LLAMA_CUDA_ARCH", "CUDA_HOME", "LLAMA_CUDA_NCCL"] as const) {
      if (f[field] !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: [field],
          message:
            "is set on a CPU build (LLAMA_BACKEND=cpu), where nothing reads it; " +
            `remove it, or set LLAMA_BACKEND=cuda`,
        });
      }
    }
  }
});

/** Build flags that failed validation; `issues` holds one "FIELD message" line each. */
export class BuildFlagsError extends Error {
  override name = "BuildFlagsError";
  constructor(readonly issues: readonly string[]) {
    super(`invalid build flags:\n  ${issues.join("\n  ")}`);
  }
}

/** One problem with the flags: the field it is at (none: the set as a whole), what is wrong. */
export interface BuildFlagIssue {
  readonly field?: string;
  readonly message: string;
}

function flagIssues(error: z.ZodError): BuildFlagIssue[] {
  return error.issues.map((i) => {
    const field = i.path.map(String).join(".");
    if (i.code === "unrecognized_keys") {
      return {
        message: `unknown field${i.keys.length > 1 ? "s" : ""} ${i.keys.join(", ")}: the contract has ${Object.keys(rawSchema.shape).join(", ")}`,
      };
    }
    return field ? { field, message: i.message } : { message: i.message };
  });
}

/** An issue as one line: "FIELD message", or the message alone for the set as a whole. */
export const issueText = (i: BuildFlagIssue): string =>
  i.field ? `${i.field} ${i.message}` : i.message;

/**
 * Validate without throwing. The issues are structured (field, message), so a config check
 * places each at its key without reading the text back.
 */
export function checkBuildFlags(
  input: unknown,
): { ok: true; flags: BuildFlags } | { ok: false; issues: BuildFlagIssue[] } {
  const r = schema.safeParse(input);
  if (r.success) return { ok: true, flags: stripUndefined(r.data) };
  return { ok: false, issues: flagIssues(r.error) };
}

/** Validate the contract; throws BuildFlagsError naming each offending field and its fix. */
export function parseBuildFlags(input: unknown): BuildFlags {
  const r = checkBuildFlags(input);
  if (!r.ok) throw new BuildFlagsError(r.issues.map(issueText));
  return r.flags;
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** The DGX Spark defaults (runbook "Build flags"), for a given llama.cpp commit. */
export function sparkBuildFlags(commit: string, overrides: Partial<BuildFlags> = {}): BuildFlags {
  return parseBuildFlags({
    LLAMA_BACKEND: "cuda",
    LLAMA_CPU_ARM_ARCH: SPARK_CPU_ARM_ARCH,
    LLAMA_CUDA_ARCH: SPARK_CUDA_ARCH,
    LLAMA_RPC: "1",
    CUDA_HOME: SPARK_CUDA_HOME,
    LLAMA_COMMIT: commit,
    LLAMA_RPC_RDMA: "1",
    ...overrides,
  });
}

/** The simulated nodes' defaults: CPU backend, pinned x86-64 -march. */
export function simBuildFlags(commit: string, overrides: Partial<BuildFlags> = {}): BuildFlags {
  return parseBuildFlags({
    LLAMA_BACKEND: "cpu",
    LLAMA_CPU_X86_MARCH: SIM_X86_MARCH,
    LLAMA_RPC: "1",
    LLAMA_COMMIT: commit,
    ...overrides,
  });
}

/** The instruction set these flags compile ggml-cpu for. */
export function targetIsa(flags: BuildFlags): TargetIsa {
  return flags.LLAMA_CPU_ARM_ARCH ? "aarch64" : "x86_64";
}

/** The `-march` value ggml-cpu must be compiled with. */
export function expectedMarch(flags: BuildFlags): string {
  const m = flags.LLAMA_CPU_ARM_ARCH ?? flags.LLAMA_CPU_X86_MARCH;
  if (!m) throw new BuildFlagsError(["LLAMA_CPU_ARM_ARCH is required"]);
  return m;
}

/** The contract's fields in a fixed order; the build key hashes exactly this. */
const KEY_FIELDS = [
  "LLAMA_BACKEND",
  "LLAMA_CPU_ARM_ARCH",
  "LLAMA_CPU_X86_MARCH",
  "LLAMA_CUDA_ARCH",
  "LLAMA_RPC",
  "CUDA_HOME",
  "LLAMA_COMMIT",
  "LLAMA_RPC_RDMA",
  "LLAMA_CUDA_NCCL",
] as const satisfies readonly (keyof BuildFlags)[];

/** What an absent field builds as, for the key: absent and "0" render the same defines. */
const KEY_DEFAULTS: Partial<Record<(typeof KEY_FIELDS)[number], string>> = {
  LLAMA_RPC_RDMA: "0",
  LLAMA_CUDA_NCCL: "0",
};

/**
 * The build-directory key: 12 hex of a SHA-256 over every contract field (both architecture
 * flags and the commit included), independent of property order. Toggling any field gives a
 * new key, hence a clean CMake build directory (a stale CMakeCache.txt keeps old flags);
 * switching back gives the old key, a cache hit.
 */
export function buildKey(flags: BuildFlags): string {
  const canonical = JSON.stringify(KEY_FIELDS.map((k) => [k, flags[k] ?? KEY_DEFAULTS[k] ?? null]));
  return createHash("sha256").update(canonical).digest("hex").slice(0, 12);
}

/** The build directory's name, e.g. `llama_build-cuda-3f2a…` (the runbook's shape). */
export function buildDirName(flags: BuildFlags): string {
  return `llama_build-${flags.LLAMA_BACKEND}-${buildKey(flags)}`;
}

/** The environment the build command runs under (the contract, as env variables). */
export function buildEnv(flags: BuildFlags): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of KEY_FIELDS) {
    const v = flags[k];
    if (v !== undefined) env[k] = v;
  }
  return env;
}

/**
 * CMake cache definitions for a direct CMake build of llama.cpp under these flags (the sim
 * builds llama.cpp with CMake; real Sparks run `mix compile`, whose Makefile reads the env).
 * GGML_NATIVE is off in both cases: the architecture is named, never probed.
 */
export function cmakeDefines(flags: BuildFlags): string[] {
  const d = [
    "-DGGML_NATIVE=OFF",
    "-DGGML_RPC=ON",
    `-DGGML_RPC_RDMA=${onOff(flags.LLAMA_RPC_RDMA)}`,
  ];
  if (flags.LLAMA_BACKEND === "cuda") {
    d.push("-DGGML_CUDA=ON", `-DCMAKE_CUDA_ARCHITECTURES=${flags.LLAMA_CUDA_ARCH ?? ""}`);
    if (flags.CUDA_HOME) d.push(`-DCUDAToolkit_ROOT=${flags.CUDA_HOME}`);
    d.push(`-DGGML_CUDA_NCCL=${onOff(flags.LLAMA_CUDA_NCCL)}`, ...CUDA_DEFINES);
  }
  if (flags.LLAMA_CPU_ARM_ARCH) d.push(`-DGGML_CPU_ARM_ARCH=${flags.LLAMA_CPU_ARM_ARCH}`);
  if (flags.LLAMA_CPU_X86_MARCH) {
    // ggml has no x86 -march option: with GGML_NATIVE off it adds -mavx2/-mfma/... only, so
    // the -march goes in through the language flags, which land in ggml-cpu's flags too.
    const march = `-march=${flags.LLAMA_CPU_X86_MARCH}`;
    d.push(`-DCMAKE_C_FLAGS=${march}`, `-DCMAKE_CXX_FLAGS=${march}`);
    const ext = X86_MARCH_EXTENSIONS[flags.LLAMA_CPU_X86_MARCH] ?? [];
    if (ext.includes("avx512")) d.push("-DGGML_AVX512=ON");
    if (ext.includes("avx-vnni") && !ext.includes("avx512")) d.push("-DGGML_AVX_VNNI=ON");
  }
  return d;
}

function onOff(v: "0" | "1" | undefined): "ON" | "OFF" {
  return v === "1" ? "ON" : "OFF";
}

/**
 * What every CUDA build adds (measured on an H200 with nvcc 13, bench/cuda-proof.md):
 *
 *   --objdir-as-tempdir   nvcc names its intermediate files after the object, in the object's
 *                         directory, instead of /tmp/tmpxft_<pid>_…: the name lands in each
 *                         object's symbol table, so without it two clean builds differ in 3–4
 *                         bytes per CUDA object and every binary that links ggml-cuda differs.
 *   the ccache launcher   CUDA objects are about 80% of a CUDA build's compile time; without it
 *                         a cache seeded from a peer covers only the C/C++ rest.
 */
export const CUDA_DEFINES: readonly string[] = [
  "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
  "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir",
];

/**
 * `hostFlags` appended to CMAKE_CUDA_FLAGS, each through `-Xcompiler=` (nvcc passes it to the
 * host compiler, which compiles the host half of every .cu file). Defines without
 * CMAKE_CUDA_FLAGS (CPU builds) come back unchanged. A flag holding a comma is refused:
 * -Xcompiler splits its value at commas.
 */
export function mergeCudaHostFlags(
  defines: readonly string[],
  hostFlags: readonly string[],
): string[] {
  const prefix = "-DCMAKE_CUDA_FLAGS=";
  const i = defines.findIndex((d) => d.startsWith(prefix));
  if (i < 0 || hostFlags.length === 0) return [...defines];
  const bad = hostFlags.find((f) => f.includes(","));
  if (bad !== undefined) {
    throw new Error(
      `host compiler flag ${JSON.stringify(bad)} holds a comma, which nvcc's -Xcompiler splits at: ` +
        "use a tree and home path without commas",
    );
  }
  const out = [...defines];
  out[i] = `${out[i]} ${hostFlags.map((f) => `-Xcompiler=${f}`).join(" ")}`;
  return out;
}
