// Policies on how llama.cpp is built (runbook: "Why LLAMA_CPU_ARM_ARCH is not optional", "Why
// LLAMA_CUDA_ARCH must accompany it", "Verifying a build") and on what the builds produced.
// NativeBuild refuses bad flags itself; the pack also holds any build made another way, and
// reads the node's evidence.
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { asKind, known } from "./evidence";
import { FAT_BUILD_COST } from "../components/build/wording";

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
 * What one node's build was made from (NativeBuild's inputs and probe; absent fields are not
 * compared: state written before they were recorded, or unknown in this run).
 */
export interface BuildInputs {
  node: string;
  /** `fan-out`: received, not compiled (sparkform:build.distribute fan-out). */
  builtBy?: string;
  /** The node that compiled it (default: `node`). */
  builtOn?: string;
  treeDigest?: string;
  flags?: Record<string, unknown>;
  /** The compiler's version line (`gcc (Debian 12.2.0-14) 12.2.0`). */
  compiler?: string;
  /** sha256 of the c++, cc and nvcc binaries (probe.sh); nvcc's version line. */
  compilerDigests?: { cxx?: string; cc?: string; nvcc?: string; nvccVersion?: string };
  /** The resource, for a fix that names it (`pulumi up --replace <urn>`). */
  urn?: string;
}

const short = (v: unknown) => String(v ?? "").slice(0, 12) || "(none)";

/**
 * Which build input differs between the nodes that compiled (fanned-out nodes compiled
 * nothing and are left out), one phrase each: "tree digest a1b2… on spark-1 vs c3d4… on
 * spark-2". Empty when one node compiled, or the inputs are equal. Pure.
 */
export function buildInputDifferences(builds: readonly BuildInputs[]): string[] {
  const compiled = builds.filter((b) => b.builtBy !== "fan-out");
  if (new Set(compiled.map((b) => b.builtOn ?? b.node)).size < 2) return [];
  const found: string[] = [];
  const vs = (xs: { node: string; v: string }[]) =>
    xs.map((x) => `${x.v} on ${x.node}`).join(" vs ");
  const differs = (get: (b: BuildInputs) => string | undefined) => {
    const xs = compiled.flatMap((b) => {
      const v = get(b);
      return v === undefined || v === "" ? [] : [{ node: b.builtOn ?? b.node, v }];
    });
    return new Set(xs.map((x) => x.v)).size > 1 ? xs : undefined;
  };
  const tree = differs((b) => b.treeDigest);
  if (tree) found.push(`tree digest ${vs(tree.map((x) => ({ ...x, v: `${short(x.v)}…` })))}`);
  const withFlags = compiled.filter((b) => b.flags !== undefined);
  const vars = [...new Set(withFlags.flatMap((b) => Object.keys(b.flags ?? {})))].sort();
  for (const k of vars) {
    const xs = withFlags.map((b) => ({
      node: b.builtOn ?? b.node,
      v: b.flags?.[k] === undefined ? "(unset)" : String(b.flags[k]),
    }));
    if (new Set(xs.map((x) => x.v)).size > 1)
      found.push(`flag ${k}: ${vs(xs.map((x) => ({ ...x, v: `${k}=${x.v}` })))}`);
  }
  // The compiler by version AND binary digest, among the nodes that recorded a digest (state
  // from before the digests has none: "(none)" there is no evidence of a difference).
  const cxx = differs((b) =>
    b.compilerDigests?.cxx
      ? `${b.compiler ?? "c++"} sha256 ${short(b.compilerDigests.cxx)}…`
      : undefined,
  );
  const version = cxx ? undefined : differs((b) => b.compiler);
  if (cxx) found.push(`compiler ${vs(cxx)}`);
  else if (version) found.push(`compiler version ${vs(version)}`);
  // ggml's core is C: cc made half the objects. Compared only where recorded (newer state).
  const cc = differs((b) =>
    b.compilerDigests?.cc ? `cc sha256 ${short(b.compilerDigests.cc)}…` : undefined,
  );
  if (cc) found.push(`C compiler ${vs(cc)}`);
  const nvcc = differs((b) =>
    b.compilerDigests?.nvcc
      ? `${b.compilerDigests.nvccVersion || "nvcc"} sha256 ${short(b.compilerDigests.nvcc)}…`
      : undefined,
  );
  if (nvcc) found.push(`nvcc ${vs(nvcc)}`);
  return found;
}

/** Whether the nodes that compiled recorded their inputs (tree, flags, compiler) at all. */
function inputsRecorded(builds: readonly BuildInputs[]): boolean {
  const compiled = builds.filter((b) => b.builtBy !== "fan-out");
  return (
    new Set(compiled.map((b) => b.builtOn ?? b.node)).size > 1 &&
    compiled.every((b) => b.treeDigest && b.flags && b.compilerDigests?.cxx)
  );
}

/** Per compiling node, the build inputs its state does not record ("" when all are there). */
function unrecorded(
  builds: readonly BuildInputs[],
): { node: string; urn?: string; what: string[] }[] {
  return builds
    .filter((b) => b.builtBy !== "fan-out")
    .map((b) => ({
      node: b.node,
      ...(b.urn ? { urn: b.urn } : {}),
      what: [
        ...(b.treeDigest ? [] : ["tree digest"]),
        ...(b.flags ? [] : ["flags"]),
        ...(b.compiler ? [] : ["compiler version"]),
        ...(b.compilerDigests?.cxx ? [] : ["compiler sha256"]),
      ],
    }))
    .filter((u) => u.what.length > 0);
}

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
      if (causes.length > 0) {
        found.push(`${where}built from different inputs (${causes.join("; ")}).`);
      } else if (inputsRecorded(builds) && digests.every((d) => d.sha !== "")) {
        found.push(
          `${where}the nodes compiled it from equal inputs (tree digest, flags, compiler sha256), so ` +
            "the compiler's output is not reproducible across nodes (CUDA: nvcc's `_INTERNAL_<hash>` " +
            "names, bench/cuda-proof.md) and no rebuild fixes it: set sparkform:build.distribute: " +
            "fan-out, so the cache source builds and the others receive its verified artifacts.",
        );
      } else if (digests.every((d) => d.sha !== "") && unrecorded(builds).length > 0) {
        // Both built it, and what would say why is not in their state: name what is missing.
        const gaps = unrecorded(builds);
        const replace = gaps
          .map((g) =>
            g.urn ? `\`pulumi up --replace '${g.urn}'\`` : `the NativeBuild on ${g.node}`,
          )
          .join(", ");
        found.push(
          `${where}the evidence that would say why is not recorded: ` +
            `${gaps.map((g) => `${g.node} has no ${g.what.join(", ")}`).join("; ")} (state from ` +
            "before sparkform recorded its build inputs). Rebuild that node once so it records " +
            `them (${replace}); this check then names the cause (tree, flags or compiler).`,
        );
      } else {
        found.push(`${where}rebuild with \`pulumi up\` before any worker starts.`);
      }
    }
  }
  return found;
}

const str = (v: unknown) => (typeof v === "string" ? v : undefined);
const obj = (v: unknown) =>
  v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;

/** A NativeBuild's recorded build inputs from its raw props (unknown or absent fields left out). */
export function buildInputsOf(node: string, props: Record<string, unknown>): BuildInputs {
  const cd = obj(props.compilerDigests);
  const out: BuildInputs = { node };
  const set = <K extends keyof BuildInputs>(k: K, v: BuildInputs[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set("builtBy", str(props.builtBy));
  set("builtOn", str(props.builtOn));
  set("treeDigest", str(props.treeDigest));
  set("flags", obj(props.flags));
  set("compiler", str(props.compiler));
  if (cd) {
    const d: NonNullable<BuildInputs["compilerDigests"]> = {};
    if (str(cd.cxx) !== undefined) d.cxx = str(cd.cxx) as string;
    if (str(cd.cc) !== undefined) d.cc = str(cd.cc) as string;
    if (str(cd.nvcc) !== undefined) d.nvcc = str(cd.nvcc) as string;
    if (str(cd.nvccVersion) !== undefined) d.nvccVersion = str(cd.nvccVersion) as string;
    out.compilerDigests = d;
  }
  return out;
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
