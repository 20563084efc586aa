// Renders NativeBuild's exact CUDA build (components/build/plan.ts buildPlan, flags.ts) for
// bench/archive/cuda-proof.sh, as a bash file of arrays that the script sources: the machine that runs
// the proof needs no node. Flags: the x86-64 analogue of the Spark preset (one CUDA
// architecture, real code only; -march named; RDMA on, NCCL off), or a variant of it:
//
//   pinned     what NativeBuild renders
//   noprefix   pinned without the -Xcompiler prefix maps (to measure what they change)
//   fat        pinned without -DCMAKE_CUDA_ARCHITECTURES (CMake's own list: the fat binary)
//   cpu        the CPU backend with RDMA pinned off (NEEDED without libibverbs)
//
// Usage: npx tsx bench/archive/cuda-proof-plan.ts --home DIR --tree DIR --variant V --out FILE
//          [--arch 90a-real] [--march x86-64-v3] [--rdma 1] [--nccl 0] [--jobs N] [--commit SHA]
//        npx tsx bench/archive/cuda-proof-plan.ts judge EVIDENCE.json...   (verify.ts's verdict on
//          what native/verify-build.sh printed there, against the pinned flags)
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { type BuildFlags, parseBuildFlags } from "../../components/build/flags";
import { buildPlan, DEFAULT_ARTIFACTS, DEFAULT_TARGETS } from "../../components/build/plan";
import { evaluate, formatVerdict, parseEvidence } from "../../components/build/verify";

const COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";
const VARIANTS = ["pinned", "noprefix", "fat", "cpu"] as const;
type Variant = (typeof VARIANTS)[number];

/** A bash word: single-quoted, `'` as `'\''`. */
function q(s: string): string {
  return `'${s.replace(/'/g, "'\\''")}'`;
}

export function renderProofPlan(o: {
  home: string;
  tree: string;
  variant: Variant;
  arch: string;
  march: string;
  rdma: "0" | "1";
  nccl: "0" | "1";
  jobs?: number;
  commit: string;
}): string {
  const cuda = o.variant !== "cpu";
  const flags: BuildFlags = parseBuildFlags({
    LLAMA_BACKEND: cuda ? "cuda" : "cpu",
    LLAMA_CPU_X86_MARCH: o.march,
    LLAMA_RPC: "1",
    LLAMA_RPC_RDMA: cuda ? o.rdma : "0",
    LLAMA_COMMIT: o.commit,
    ...(cuda
      ? { LLAMA_CUDA_ARCH: o.arch, CUDA_HOME: "/usr/local/cuda", LLAMA_CUDA_NCCL: o.nccl }
      : {}),
  });
  const plan = buildPlan({
    home: o.home,
    tree: o.tree,
    flags,
    targets: DEFAULT_TARGETS,
    artifacts: DEFAULT_ARTIFACTS,
    jobs: o.jobs,
  });
  let configure = [...plan.configure];
  if (o.variant === "fat") {
    configure = configure.filter((a) => !a.startsWith("-DCMAKE_CUDA_ARCHITECTURES="));
  }
  if (o.variant === "noprefix") {
    configure = configure.map((a) =>
      a.startsWith("-DCMAKE_CUDA_FLAGS=")
        ? a
            .split(" ")
            .filter((w) => !w.startsWith("-Xcompiler=-ffile-prefix-map="))
            .join(" ")
        : a,
    );
  }
  const arr = (name: string, xs: readonly string[]) => `${name}=(${xs.map(q).join(" ")})`;
  return [
    `# ${o.variant}: rendered by bench/archive/cuda-proof-plan.ts from buildPlan(); key ${plan.key}`,
    `PLAN_VARIANT=${q(o.variant)}`,
    `PLAN_KEY=${q(plan.key)}`,
    `PLAN_TREE=${q(plan.tree)}`,
    `PLAN_BUILD_DIR=${q(plan.buildDir)}`,
    `PLAN_CCACHE_DIR=${q(plan.ccacheDir)}`,
    arr(
      "PLAN_ENV",
      Object.entries(plan.env).map(([k, v]) => `${k}=${v}`),
    ),
    arr("PLAN_PATH", plan.path),
    arr("PLAN_CONFIGURE", configure),
    arr("PLAN_BUILD", plan.build),
    arr("PLAN_ARTIFACTS", DEFAULT_ARTIFACTS),
    "",
  ].join("\n");
}

/** The pinned proof flags (what every variant but `fat` and `cpu` builds with). */
export function proofFlags(arch = "90a-real", march = "x86-64-v3"): BuildFlags {
  return parseBuildFlags({
    LLAMA_BACKEND: "cuda",
    LLAMA_CPU_X86_MARCH: march,
    LLAMA_CUDA_ARCH: arch,
    CUDA_HOME: "/usr/local/cuda",
    LLAMA_RPC: "1",
    LLAMA_RPC_RDMA: "1",
    LLAMA_CUDA_NCCL: "0",
    LLAMA_COMMIT: COMMIT,
  });
}

function judge(files: string[]): void {
  for (const f of files) {
    const ev = parseEvidence(fs.readFileSync(f, "utf8"), "cuda-proof");
    console.log(`== ${f.split("/").pop()}`);
    console.log(formatVerdict(evaluate(ev, proofFlags())));
    for (const a of ev.artifacts) {
      console.log(
        `  ${a.path} ${a.sha256 ?? "-"} ${a.size ?? "-"} needed=${JSON.stringify(a.needed)}`,
      );
    }
  }
}

if (require.main === module && process.argv[2] === "judge") {
  judge(process.argv.slice(3));
} else if (require.main === module) {
  const { values } = parseArgs({
    options: {
      home: { type: "string" },
      tree: { type: "string" },
      variant: { type: "string", default: "pinned" },
      out: { type: "string" },
      arch: { type: "string", default: "90a-real" },
      march: { type: "string", default: "x86-64-v3" },
      rdma: { type: "string", default: "1" },
      nccl: { type: "string", default: "0" },
      jobs: { type: "string" },
      commit: { type: "string", default: COMMIT },
    },
  });
  const variant = values.variant as Variant;
  if (!values.home || !values.tree || !values.out || !VARIANTS.includes(variant)) {
    console.error(
      `usage: cuda-proof-plan.ts --home DIR --tree DIR --variant ${VARIANTS.join("|")} --out FILE`,
    );
    process.exit(2);
  }
  const sw = (v: string | undefined) => (v === "1" ? "1" : "0");
  fs.writeFileSync(
    values.out,
    renderProofPlan({
      home: values.home,
      tree: values.tree,
      variant,
      arch: values.arch ?? "90a-real",
      march: values.march ?? "x86-64-v3",
      rdma: sw(values.rdma),
      nccl: sw(values.nccl),
      jobs: values.jobs ? Number(values.jobs) : undefined,
      commit: values.commit ?? COMMIT,
    }),
  );
}
