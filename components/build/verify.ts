// Build verification (runbook: "Verifying a build"), control side.
//
// native/build/verify-build.sh runs on the node and reports what is on disk: the compile flags CMake
// generated for ggml-cpu and ggml-cuda, signature-instruction counts in the CPU library, and
// artifact digests. Its output is untrusted input here: parseEvidence() validates it with the
// JSON schema beside the program (native/build/verify-build.schema.json). evaluate() then
// judges it against the build flags, with three checks, because each catches a different
// silent failure:
//
//   cuda-one-arch      the fat binary: ggml-cuda compiled for a list of architectures
//   cpu-march          the flag not reaching the compiler
//   cpu-instructions   the flag reaching the compiler and producing nothing
//
// plus `artifacts` (every configured artifact present and digested) and `isa` (the evidence
// is for the instruction set the flags build for).
//
// Everything below parseEvidence() is pure: the unit tests drive it with generated flags.make
// and build.ninja snippets. The CUDA check in particular is tested that way only: this
// machine has no nvcc, so no real ggml-cuda can be configured here (the ARM integration test
// configures one when nvcc is present).
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import * as path from "node:path";
import { programPath } from "../native-script";
import {
  type BuildFlags,
  type TargetIsa,
  expectedMarch,
  FAT_BUILD_COST,
  SPARK_CPU_ARM_ARCH,
  targetIsa,
  X86_MARCH_EXTENSIONS,
  type X86Extension,
} from "./flags";

/** native/build/verify-build.sh, the node-side half (by name under native/). */
export const VERIFY_PROGRAM = "build/verify-build.sh";
/** The checkout's file (sources native/lib/ itself; a node gets it with the libraries inlined). */
export const VERIFY_SCRIPT_PATH = programPath(VERIFY_PROGRAM);
/** Bump together with SCHEMA_VERSION in verify-build.sh and verify-build.schema.json's const. */
export const EVIDENCE_SCHEMA_VERSION = 1;

export type Generator = "make" | "ninja";
export type TargetName = "ggml-cpu" | "ggml-cuda";

/** A target's generated compile flags, as the script found them. */
export interface TargetEvidence {
  /** flags.make (Makefile generator) or build.ninja (Ninja); null when not found. */
  readonly file: string | null;
  /** flags.make whole, or the target's compile statements from build.ninja. */
  readonly text: string | null;
  readonly truncated: boolean;
  readonly reason: string | null;
}

export interface ArtifactEvidence {
  /** As configured (relative paths are relative to the build directory). */
  readonly path: string;
  readonly sha256: string | null;
  readonly size: number | null;
  readonly reason: string | null;
  /** Shared libraries it loads (readelf -d NEEDED; [] static); null: not ELF or no readelf. */
  readonly needed?: readonly string[] | null;
}

/** What native/build/verify-build.sh printed, validated. */
export interface BuildEvidence {
  readonly schemaVersion: 1;
  readonly isa: TargetIsa;
  readonly buildDir: string;
  readonly generator: Generator | null;
  readonly reason: string | null;
  readonly targets: Readonly<Record<TargetName, TargetEvidence>>;
  readonly library: {
    readonly path: string | null;
    readonly objdump: string;
    readonly sha256: string | null;
    /** Signature-instruction counts; keys per ISA (see SIGNATURES). */
    readonly counts: Readonly<Record<string, number>> | null;
    readonly reason: string | null;
  };
  readonly artifacts: readonly ArtifactEvidence[];
}

/** Build evidence that failed to parse or validate; `path` is the JSON pointer of the failure. */
export class EvidenceError extends NodeOutputError {
  override name = "EvidenceError";
  constructor(node: string, path: string, detail: string) {
    super("build evidence", node, path, detail);
  }
}

const parseBuildEvidence = programJsonParser<BuildEvidence>(
  VERIFY_PROGRAM,
  (node, path, detail) => new EvidenceError(node, path, detail),
);

/** Parse and validate verify-build.sh output from `nodeName`; throws EvidenceError. */
export function parseEvidence(stdout: string, nodeName: string): BuildEvidence {
  return parseBuildEvidence(stdout, nodeName);
}

/** Arguments for verify-build.sh (run it with the transport as `sh <script> <args…>`). */
export function verifyScriptArgs(opts: {
  buildDir: string;
  isa: TargetIsa;
  /** Default `objdump`; a cross build on an x86 host needs aarch64-linux-gnu-objdump. */
  objdump?: string;
  /** Default: libggml-cpu.a / libggml-cpu.so* found under buildDir. */
  cpuLibrary?: string;
  artifacts?: readonly string[];
  /** What relative artifact paths are relative to. Default: buildDir. */
  artifactRoot?: string;
}): string[] {
  const args = ["-i", opts.isa];
  if (opts.objdump) args.push("-o", opts.objdump);
  if (opts.cpuLibrary) args.push("-l", opts.cpuLibrary);
  if (opts.artifactRoot) args.push("-a", opts.artifactRoot);
  // "--" keeps a build directory or artifact that begins with "-" from reading as an option.
  return [...args, "--", opts.buildDir, ...(opts.artifacts ?? [])];
}

// ---- parsing generated build files ------------------------------------------------------------

/**
 * The compile-flag strings CMake generated for `target`:
 *   make:  the values of C_FLAGS, CXX_FLAGS and CUDA_FLAGS in the target's flags.make;
 *   ninja: the FLAGS values of compile statements whose outputs lie in `<target>.dir/`
 *          (a whole build.ninja, or the excerpt verify-build.sh sends).
 * Distinct values, in order of appearance.
 */
export function targetCompileFlags(
  text: string,
  generator: Generator,
  target: TargetName,
): string[] {
  const out: string[] = [];
  const add = (v: string) => {
    if (!out.includes(v)) out.push(v);
  };
  const lines = text.split(/\r?\n/);
  if (generator === "make") {
    for (const l of lines) {
      const m = /^(?:C|CXX|CUDA)_FLAGS = ?(.*)$/.exec(l);
      if (m) add(m[1] ?? "");
    }
    return out;
  }
  const dir = `/${target}.dir/`;
  let inTarget = false;
  for (const l of lines) {
    if (l.startsWith("build ")) {
      const head = l.slice("build ".length);
      const colon = head.indexOf(": ");
      const outputs = colon >= 0 ? head.slice(0, colon) : head;
      inTarget = outputs.includes(dir);
      continue;
    }
    if (!l.startsWith(" ")) {
      inTarget = false;
      continue;
    }
    const m = /^ {2}FLAGS = ?(.*)$/.exec(l);
    if (inTarget && m) add(m[1] ?? "");
  }
  return out;
}

/** Split a flags string into tokens, honouring the double quotes CMake puts around some. */
export function flagTokens(flags: string): string[] {
  const tokens: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(flags); m; m = re.exec(flags)) {
    tokens.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] ?? ""));
  }
  return tokens;
}

/** Every `-march=` value in a flags string, in order (the last one is the one that counts). */
export function marchValues(flags: string): string[] {
  return flagTokens(flags)
    .filter((t) => t.startsWith("-march="))
    .map((t) => t.slice("-march=".length));
}

/**
 * The GPU architectures a CUDA flags string compiles for, as bare names ("121a", "86"):
 * nvcc's --generate-code/-gencode (arch= and every code= entry), --gpu-architecture/-arch,
 * and clang's --cuda-gpu-arch/--offload-arch. `all`, `all-major` and `native` come back as
 * themselves: each means "not one named architecture".
 */
export function cudaArchitectures(flags: string): string[] {
  const found: string[] = [];
  const add = (raw: string) => {
    for (const part of raw.split(/[,[\]]/)) {
      const v = part.trim().replace(/^(compute|sm|lto)_/, "");
      if (v && !found.includes(v)) found.push(v);
    }
  };
  const tokens = flagTokens(flags);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] ?? "";
    const next = tokens[i + 1] ?? "";
    let spec: string | undefined;
    let m: RegExpExecArray | null;
    if ((m = /^(?:--generate-code|-gencode)=(.*)$/.exec(t))) spec = m[1];
    else if (t === "--generate-code" || t === "-gencode") spec = next;
    if (spec !== undefined) {
      // arch=compute_121a,code=[sm_121a]  or  arch=compute_86,code=sm_86
      const arch = /arch=([^,]+)/.exec(spec);
      const code = /code=(\[[^\]]*\]|[^,]+)/.exec(spec);
      if (arch?.[1]) add(arch[1]);
      if (code?.[1]) add(code[1]);
      continue;
    }
    if ((m = /^(?:--gpu-architecture|-arch|--cuda-gpu-arch|--offload-arch)=(.+)$/.exec(t))) {
      add(m[1] ?? "");
    } else if (t === "--gpu-architecture" || t === "-arch") {
      add(next);
    }
  }
  return found;
}

/** The bare architecture a CMake CUDA architecture names: "121a-real" → "121a". */
export function cudaArchName(cmakeArch: string): string {
  return cmakeArch.replace(/-(real|virtual)$/, "");
}

// ---- signature instructions ---------------------------------------------------------------------

/** A counter verify-build.sh reports, what it counts, and why it matters. */
export interface Signature {
  readonly counter: string;
  /** How a count reads in a report: "1217 sdot". */
  readonly label: string;
  readonly meaning: string;
}

export const SIGNATURES = {
  sdot: { counter: "sdot", label: "sdot", meaning: "dot product (+dotprod)" },
  smmla: { counter: "smmla", label: "smmla", meaning: "int8 matrix multiply (+i8mm)" },
  sve: { counter: "sve", label: "SVE operands", meaning: "SVE vector operands (+sve2)" },
  avx2: { counter: "avx2", label: "AVX2 ymm integer ops", meaning: "256-bit integer SIMD (AVX2)" },
  fma: { counter: "fma", label: "FMA", meaning: "fused multiply-add (FMA)" },
  f16c: { counter: "f16c", label: "F16C conversions", meaning: "half-float conversion (F16C)" },
  "avx-vnni": { counter: "vnni", label: "vpdpbusd", meaning: "int8 dot product (AVX-VNNI)" },
  avx512: { counter: "avx512", label: "zmm ops", meaning: "512-bit SIMD (AVX-512)" },
} as const satisfies Record<string, Signature>;

/**
 * The instructions the CPU library must contain, each at least once.
 *
 * aarch64: always sdot, smmla and SVE operands. sparkform's ARM target is GB10, and these are
 * the Q4/Q8 quantized matmul kernels; a library without them is the runbook's silent failure
 * (a build at base ARMv8-A that exits 0), whatever -march was asked for.
 * x86_64: what the chosen -march implies, per X86_MARCH_EXTENSIONS.
 */
export function requiredSignatures(flags: BuildFlags): Signature[] {
  if (targetIsa(flags) === "aarch64") return [SIGNATURES.sdot, SIGNATURES.smmla, SIGNATURES.sve];
  const ext: readonly X86Extension[] = X86_MARCH_EXTENSIONS[expectedMarch(flags)] ?? [];
  return ext.map((e) => SIGNATURES[e]);
}

// ---- evaluation -------------------------------------------------------------------------------------

export type CheckName =
  | "isa"
  | "cuda-one-arch"
  | "cpu-march"
  | "cpu-instructions"
  | "artifacts"
  /** A fanned-out build's own check: every received file has the source's sha256. */
  | "fan-out-digests";

export interface Check {
  readonly name: CheckName;
  readonly ok: boolean;
  /** What happened; on failure also why it matters and what to do. */
  readonly detail: string;
  /**
   * The node that ran the check, when it is not the resource's own: a fanned-out build carries
   * the source's verification (sparkform:build.distribute fan-out).
   */
  readonly node?: string;
}

export interface Verdict {
  readonly ok: boolean;
  readonly checks: readonly Check[];
}

function relFile(ev: BuildEvidence, file: string | null): string {
  if (!file) return "(none)";
  const prefix = ev.buildDir.endsWith("/") ? ev.buildDir : `${ev.buildDir}/`;
  return file.startsWith(prefix) ? file.slice(prefix.length) : file;
}

function whereFlags(ev: BuildEvidence, t: TargetEvidence): string {
  return ev.generator === "ninja"
    ? `${relFile(ev, t.file)} (Ninja)`
    : `${relFile(ev, t.file)} (Makefile generator)`;
}

const REBUILD_CLEAN =
  "rebuild in a clean build directory (a stale CMakeCache.txt keeps old flags; the build key " +
  "changes with every flag, so a new key gets a new directory)";

function checkCuda(ev: BuildEvidence, flags: BuildFlags): Check {
  const name = "cuda-one-arch";
  const want = cudaArchName(flags.LLAMA_CUDA_ARCH ?? "");
  const t = ev.targets["ggml-cuda"];
  if (!ev.generator || t.text === null) {
    return {
      name,
      ok: false,
      detail:
        `ggml-cuda: no generated compile flags to read (${t.reason ?? ev.reason ?? "not found"}). ` +
        "A CUDA build (LLAMA_BACKEND=cuda) must configure ggml-cuda; without its flags the " +
        "one-architecture rule cannot be shown. Check that GGML_CUDA=ON reached CMake and " +
        "that CUDA_HOME points at the toolkit.",
    };
  }
  const archs = [
    ...new Set(
      targetCompileFlags(t.text, ev.generator, "ggml-cuda").flatMap((f) => cudaArchitectures(f)),
    ),
  ];
  const where = whereFlags(ev, t);
  if (archs.length === 0) {
    return {
      name,
      ok: false,
      detail:
        `ggml-cuda: no GPU architecture in ${where}. nvcc then compiles for its default ` +
        `architecture, not the GPU this build is for. Set LLAMA_CUDA_ARCH=${flags.LLAMA_CUDA_ARCH ?? "121a-real"} ` +
        `(CMAKE_CUDA_ARCHITECTURES) and ${REBUILD_CLEAN}.`,
    };
  }
  if (archs.length === 1 && archs[0] === want) {
    return { name, ok: true, detail: `ggml-cuda: one architecture, compute_${want}` };
  }
  if (archs.length === 1) {
    return {
      name,
      ok: false,
      detail:
        `ggml-cuda: compiled for ${archs[0]}, but LLAMA_CUDA_ARCH says ${want} (${where}). ` +
        `Kernels for another GPU either do not load or JIT from PTX at every start. ${cap(REBUILD_CLEAN)}.`,
    };
  }
  return {
    name,
    ok: false,
    detail:
      `ggml-cuda: ${archs.length} architectures (${archs.join(", ")}) in ${where}, expected ` +
      `only ${want}. This is the fat binary: with GGML_NATIVE off and no CUDA architecture ` +
      "named, ggml-cuda compiles for every architecture it supports, a build-time regression " +
      `(${FAT_BUILD_COST}) that still exits 0. Set LLAMA_CUDA_ARCH=${flags.LLAMA_CUDA_ARCH ?? "121a-real"} ` +
      `whenever the CPU architecture is named, and ${REBUILD_CLEAN}.`,
  };
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function checkMarch(ev: BuildEvidence, flags: BuildFlags): Check {
  const name = "cpu-march";
  const want = expectedMarch(flags);
  const field = flags.LLAMA_CPU_ARM_ARCH ? "LLAMA_CPU_ARM_ARCH" : "LLAMA_CPU_X86_MARCH";
  const t = ev.targets["ggml-cpu"];
  if (!ev.generator || t.text === null) {
    return {
      name,
      ok: false,
      detail:
        `ggml-cpu: no generated compile flags to read (${t.reason ?? ev.reason ?? "not found"}), ` +
        "so nothing shows that -march reached the compiler. Verify the configured build directory.",
    };
  }
  const where = whereFlags(ev, t);
  const lines = targetCompileFlags(t.text, ev.generator, "ggml-cpu");
  if (lines.length === 0) {
    return {
      name,
      ok: false,
      detail: `ggml-cpu: ${where} holds no compile flags; is it ggml-cpu's generated file?`,
    };
  }
  // The last -march on a command line is the one the compiler uses; every flags line
  // (C and C++) must end up at the expected value.
  const effective = lines.map((l) => marchValues(l).at(-1));
  if (effective.every((m) => m === want)) {
    return { name, ok: true, detail: `ggml-cpu: -march=${want}` };
  }
  const missing = effective.some((m) => m === undefined);
  const seen = [...new Set(effective.filter((m): m is string => m !== undefined))];
  const why =
    targetIsa(flags) === "aarch64"
      ? "the CPU backend then compiles for the compiler's default, base ARMv8-A, without the " +
        "dot-product, int8-matmul and SVE kernels, and the build still exits 0"
      : "the CPU backend then compiles without the instructions the simulated nodes are pinned to";
  return {
    name,
    ok: false,
    detail:
      (missing
        ? `ggml-cpu: -march=${want} did not reach the compiler: no -march in ${seen.length ? "some of " : ""}its compile flags (${where})`
        : `ggml-cpu: compiled with -march=${seen.join(", -march=")}, but ${field} says ${want} (${where})`) +
      `; ${why}. Pass ${field}=${want} with GGML_NATIVE=OFF and ${REBUILD_CLEAN}.`,
  };
}

function checkInstructions(ev: BuildEvidence, flags: BuildFlags): Check {
  const name = "cpu-instructions";
  const lib = ev.library;
  const libName = lib.path ? path.posix.basename(lib.path) : "libggml-cpu";
  const want = expectedMarch(flags);
  if (!lib.counts) {
    return {
      name,
      ok: false,
      detail:
        `${libName}: no instruction counts (${lib.reason ?? "not reported"}), so nothing shows ` +
        `that -march=${want} produced its instructions. Build ggml-cpu and make ${lib.objdump} available on the node.`,
    };
  }
  const required = requiredSignatures(flags);
  const counts = required.map((s) => ({ s, n: lib.counts?.[s.counter] ?? 0 }));
  const summary = counts.map(({ s, n }) => `${n} ${s.label}`).join(", ");
  const zero = counts.filter(({ n }) => n === 0);
  if (zero.length === 0) return { name, ok: true, detail: `${libName}: ${summary}` };
  const missing = zero.map(({ s }) => s.meaning).join(", ");
  const isArm = targetIsa(flags) === "aarch64";
  return {
    name,
    ok: false,
    detail:
      `${libName}: ${summary}: no ${missing} instructions in the CPU library. ` +
      (isArm
        ? "These are the Q4/Q8 quantized matmul kernels: without them the CPU backend is base " +
          "ARMv8-A and the build still exits 0 (the silent failure of -mcpu=native on GB10). "
        : `-march=${want} enables them, and ggml's quantized kernels use them. `) +
      (isArm && want !== SPARK_CPU_ARM_ARCH
        ? `-march=${want} does not enable them: set LLAMA_CPU_ARM_ARCH=${SPARK_CPU_ARM_ARCH} (DGX Spark) and ${REBUILD_CLEAN}.`
        : `Check that the compiler knows -march=${want} (it must not fall back to a default) and ${REBUILD_CLEAN}.`),
  };
}

function checkArtifacts(ev: BuildEvidence): Check {
  const name = "artifacts";
  const bad = ev.artifacts.filter((a) => a.sha256 === null);
  if (bad.length === 0) {
    return {
      name,
      ok: true,
      detail: `${ev.artifacts.length} artifact${ev.artifacts.length === 1 ? "" : "s"} digested`,
    };
  }
  return {
    name,
    ok: false,
    detail:
      bad.map((a) => `${a.path}: ${a.reason ?? "no digest"}`).join("; ") +
      ". Every configured artifact must exist after the build; its digest is the evidence " +
      "that all nodes run the same build. Check the artifact paths in the NativeBuild config, " +
      "or that the build command builds those targets.",
  };
}

/** Judge the evidence against the flags. `ok` only when every check passes. */
export function evaluate(evidence: BuildEvidence, flags: BuildFlags): Verdict {
  const isa = targetIsa(flags);
  if (evidence.isa !== isa) {
    const checks: Check[] = [
      {
        name: "isa",
        ok: false,
        detail:
          `the evidence counts ${evidence.isa} instructions, but the build flags target ${isa}; ` +
          `run verify-build.sh with -i ${isa} (and an objdump for ${isa}).`,
      },
    ];
    return { ok: false, checks };
  }
  const checks: Check[] = [];
  if (flags.LLAMA_BACKEND === "cuda") checks.push(checkCuda(evidence, flags));
  checks.push(checkMarch(evidence, flags), checkInstructions(evidence, flags));
  checks.push(checkArtifacts(evidence));
  return { ok: checks.every((c) => c.ok), checks };
}

/** The verdict as the runbook prints it ("  PASS  ggml-cpu: -march=…"). */
export function formatVerdict(v: Verdict, buildDir?: string): string {
  const lines = buildDir ? [`==> verifying ${buildDir}`] : [];
  for (const c of v.checks) lines.push(`  ${c.ok ? "PASS" : "FAIL"}  ${c.detail}`);
  const failed = v.checks.filter((c) => !c.ok).length;
  lines.push(
    failed === 0 ? "==> all checks passed" : `==> ${failed} check${failed === 1 ? "" : "s"} failed`,
  );
  return lines.join("\n");
}
