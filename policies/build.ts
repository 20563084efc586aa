// Policies on how llama.cpp is built (runbook: "Why LLAMA_CPU_ARM_ARCH is not optional", "Why
// LLAMA_CUDA_ARCH must accompany it", "Verifying a build") and on what the builds produced.
// NativeBuild refuses bad flags itself; the pack also holds any build made another way, and
// reads the node's evidence.
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { asKind, known } from "./evidence";
import { FAT_BUILD_COST } from "../components/build/wording";
import {
  type BuildInputs,
  buildInputDifferences,
  buildInputsOf,
  explainBuildDifference,
} from "../components/build/difference";

export { type BuildInputs, buildInputDifferences, buildInputsOf };

type BuildEvidence = Evidence<"NativeBuild">;

/** One CMake CUDA architecture (as components/build/flags.ts): `121a-real`, `90`, `89-virtual`. */
const ONE_CUDA_ARCH = /^[1-9][0-9]{1,2}[af]?(-real|-virtual)?$/;

/** What cuda-arch-pinned judges of one build. */
export interface CudaArchEvidence {
  node: string;
  flags: Pick<BuildEvidence["flags"], "LLAMA_BACKEND" | "LLAMA_CPU_ARM_ARCH" | "LLAMA_CUDA_ARCH">;
  /** The node's verification; left out while this run is about to rebuild (none yet). */
  checks?: readonly Pick<BuildEvidence["checks"][number], "name" | "ok" | "detail">[];
}

/**
 * A CUDA build names exactly one CUDA architecture, and a named ARM CPU architecture comes
 * with it; the node's flags.make (the build's `cuda-one-arch` check) must agree.
 */
export function checkCudaArchPinned({ node, flags, checks }: CudaArchEvidence): string[] {
  if (flags.LLAMA_BACKEND !== "cuda") return [];
  const found: string[] = [];
  // Typed as the provider writes them; a build made another way may carry anything.
  const cudaArch: unknown = flags.LLAMA_CUDA_ARCH;
  if (cudaArch === undefined || cudaArch === null || cudaArch === "") {
    if (flags.LLAMA_CPU_ARM_ARCH) {
      found.push(
        `The CUDA build on ${node} names LLAMA_CPU_ARM_ARCH without LLAMA_CUDA_ARCH: naming the CPU ` +
          "architecture turns GGML_NATIVE off, and ggml-cuda then compiles a seven-architecture fat " +
          `binary (${FAT_BUILD_COST}). Set LLAMA_CUDA_ARCH (DGX Spark: 121a-real).`,
      );
    } else {
      found.push(
        `The CUDA build on ${node} has no LLAMA_CUDA_ARCH: set exactly one (DGX Spark: 121a-real).`,
      );
    }
  } else if (typeof cudaArch !== "string" || !ONE_CUDA_ARCH.test(cudaArch)) {
    found.push(
      `The CUDA build on ${node} has LLAMA_CUDA_ARCH=${JSON.stringify(cudaArch)}: give exactly one ` +
        "CMake CUDA architecture (DGX Spark: 121a-real), not a list, all or native.",
    );
  }
  if (checks === undefined) return found;
  const one = checks.find((c) => c.name === "cuda-one-arch");
  if (one?.ok !== true) {
    found.push(
      `The CUDA build on ${node} has no passed one-architecture check from ggml-cuda's flags.make` +
        `${one?.detail ? ` (${String(one.detail)})` : ""}: rebuild with \`pulumi up\` and read the verification.`,
    );
  }
  return found;
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
    const build = asKind(args, "NativeBuild");
    const flags = build?.props.flags;
    if (build === undefined || flags === undefined) return;
    const { checks } = build.props;
    checkCudaArchPinned({ node: build.node, flags, ...(checks ? { checks } : {}) }).forEach((m) =>
      reportViolation(m),
    );
  },
};

/** One node's measured build. */
export type BuildDigests = { node: string } & Pick<BuildEvidence, "commit" | "artifacts">;

/**
 * Every node's build has the same commit and byte-identical artifacts. The RPC HELLO compares
 * only major/minor: builds that differ connect and then misread each other's op codes. When
 * several nodes compiled, the build inputs are compared too, and a difference names its cause.
 */
export function checkBuildsIdentical(
  builds: readonly (BuildDigests & Partial<Omit<BuildInputs, "node">>)[],
): string[] {
  const found: string[] = [];
  if (new Set(builds.map((b) => b.commit)).size > 1) {
    found.push(
      `Nodes build different llama.cpp commits (${builds.map((b) => `${b.node}=${String(b.commit).slice(0, 12)}`).join(", ")}): ` +
        "sync the same tree to every node and run `pulumi up`.",
    );
  }
  const causes = buildInputDifferences(builds);
  if (causes.length > 0) {
    found.push(
      `Nodes compiled from different build inputs: ${causes.join("; ")}. Make them equal (the same ` +
        "tree, sparkform:build flags and compiler on every node) and run `pulumi up`, or set " +
        "sparkform:build.distribute: fan-out so one node builds and the others receive its artifacts.",
    );
  }
  const paths = [...new Set(builds.flatMap((b) => Object.keys(b.artifacts)))].sort();
  for (const p of paths) {
    const digests = builds.map((b) => ({ node: b.node, sha: String(b.artifacts[p] ?? "") }));
    if (new Set(digests.map((d) => d.sha)).size > 1) {
      const where = `${p} differs between nodes (${digests.map((d) => `${d.node}=${d.sha.slice(0, 12) || "(missing)"}`).join(", ")}): `;
      // Different inputs have their fix on the line above; any other cause says it here.
      const present = digests.every((d) => d.sha !== "");
      found.push(
        causes.length > 0
          ? `${where}built from different inputs (${causes.join("; ")}).`
          : `${where}${explainBuildDifference(builds, { present }).explanation}`,
      );
    }
  }
  return found;
}

/** Every node's build has the same commit and byte-identical artifacts, from equal inputs. */
export const buildsIdentical: StackValidationPolicy = {
  name: "builds-identical",
  description:
    "Every node runs the same llama.cpp commit with byte-identical build artifacts; nodes that compile do so from the same tree, flags and compiler.",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const builds = args.resources.flatMap((r) => {
      const b = asKind(r, "NativeBuild");
      if (!b) return [];
      const m = known(b, "commit", "artifacts");
      if (!m) return [];
      const { node: _n, ...inputs } = buildInputsOf(b.node, r.props as Record<string, unknown>);
      return [{ node: b.node, urn: r.urn, ...m, ...inputs }];
    });
    checkBuildsIdentical(builds).forEach((m) => reportViolation(m));
  },
};
