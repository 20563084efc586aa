// Policies on how llama.cpp is built (runbook: "Why LLAMA_CPU_ARM_ARCH is not optional", "Why
// LLAMA_CUDA_ARCH must accompany it", "Verifying a build"). NativeBuild refuses these flags
// itself; the pack also holds any build made another way, and reads the node's evidence.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import { kindOf } from "./kinds";

/** One CMake CUDA architecture (as components/build/flags.ts): `121a-real`, `90`, `89-virtual`. */
const ONE_CUDA_ARCH = /^[1-9][0-9]{1,2}[af]?(-real|-virtual)?$/;

interface Flags {
  LLAMA_BACKEND?: unknown;
  LLAMA_CPU_ARM_ARCH?: unknown;
  LLAMA_CUDA_ARCH?: unknown;
}

interface Check {
  name?: unknown;
  ok?: unknown;
  detail?: unknown;
}

/**
 * CUDA builds name exactly one CUDA architecture, and a named ARM CPU architecture comes with
 * it; the node's flags.make (the build's `cuda-one-arch` check) must agree.
 */
export const cudaArchPinned: ResourceValidationPolicy = {
  name: "cuda-arch-pinned",
  description:
    "CUDA builds name exactly one CUDA architecture, always together with a named ARM CPU architecture, and the built flags.make shows one.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    if (kindOf(args.type, args.props) !== "NativeBuild") return;
    const flags = (args.props.flags ?? {}) as Flags;
    if (flags.LLAMA_BACKEND !== "cuda") return;
    const node = String((args.props.target as { name?: unknown } | undefined)?.name ?? args.name);
    const cudaArch = flags.LLAMA_CUDA_ARCH;
    if (cudaArch === undefined || cudaArch === null || cudaArch === "") {
      if (flags.LLAMA_CPU_ARM_ARCH) {
        reportViolation(
          `The CUDA build on ${node} names LLAMA_CPU_ARM_ARCH without LLAMA_CUDA_ARCH: naming the CPU ` +
            "architecture turns GGML_NATIVE off, and ggml-cuda then compiles a seven-architecture fat " +
            "binary (~6× build time). Set LLAMA_CUDA_ARCH (DGX Spark: 121a-real).",
        );
      } else {
        reportViolation(
          `The CUDA build on ${node} has no LLAMA_CUDA_ARCH: set exactly one (DGX Spark: 121a-real).`,
        );
      }
    } else if (typeof cudaArch !== "string" || !ONE_CUDA_ARCH.test(cudaArch)) {
      reportViolation(
        `The CUDA build on ${node} has LLAMA_CUDA_ARCH=${JSON.stringify(cudaArch)}: give exactly one ` +
          "CMake CUDA architecture (DGX Spark: 121a-real), not a list, all or native.",
      );
    }
    // Evidence from the node, when this run is not about to rebuild (then there is none yet).
    const checks = args.props.checks as Check[] | undefined;
    if (!Array.isArray(checks)) return;
    const one = checks.find((c) => c.name === "cuda-one-arch");
    if (one?.ok !== true) {
      reportViolation(
        `The CUDA build on ${node} has no passed one-architecture check from ggml-cuda's flags.make` +
          `${one?.detail ? ` (${String(one.detail)})` : ""}: rebuild with \`pulumi up\` and read the verification.`,
      );
    }
  },
};
