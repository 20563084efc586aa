// The stack's `sparkform:build` section: which flags, targets and artifacts NativeBuild uses.
//
//   sparkform:build:
//     preset: spark            # spark (default) or sim: the flag defaults below
//     flags:                   # overrides on the preset, named after the env variables;
//       LLAMA_BACKEND: cpu     # null removes a preset value
//     targets: [ggml-rpc-server, llama-completion]
//     artifacts: [bin/ggml-rpc-server, bin/llama-completion, ggml/src/libggml-cpu.a]
//     commit: <40 hex>         # default: the commit of the tree's .git on the control node
//     cacheFrom: spark-1       # the node whose compiler cache seeds the others (default: the
//                              # first node); `none` builds every node on its own
//     jobs: 20                 # ninja -j (default: ninja's own)
//     distribute: fan-out      # fan-out: only the cache source compiles, the others receive
//                              # its verified artifacts; build-each: every node compiles
//                              # (default: fan-out for CUDA builds, build-each otherwise)
//     command:                 # the project's own build instead of sparkform's CMake one
//       run: [mix, compile]    #   argv, run in the tree (or `workdir`, relative to it)
//       buildDir: _build/dev/lib/llama_cpp_ex/obj/llama_build-*   # its CMake build dir,
//                              #   verified; `*` in the last part picks the newest match
//                              # with a command, `artifacts` are relative to the tree and
//                              # required, and `targets` is not used
//
// Real Sparks (llama_cpp_ex): preset spark, command [mix, compile] with the buildDir above,
// artifacts such as _build/dev/lib/llama_cpp_ex/priv/<the NIF>.so, and the toolchain's
// install directories on PATH (cluster.ts adds sparkform:toolchain's binDirs to a command's
// PATH), so `mix` runs from the copied ~/.asdf without shims.
//
// Presets (runbook "Build flags"):
//   spark  LLAMA_BACKEND=cuda LLAMA_CPU_ARM_ARCH=armv9.2-a+dotprod+i8mm+fp16+bf16+sve2
//          LLAMA_CUDA_ARCH=121a-real CUDA_HOME=/usr/local/cuda LLAMA_RPC=1
//          LLAMA_RPC_RDMA=1 (the fabric needs it; LLAMA_CUDA_NCCL absent: off, one GPU a node)
//   sim    LLAMA_BACKEND=cpu LLAMA_CPU_X86_MARCH=x86-64-v3 LLAMA_RPC=1
// Validation is flags.ts's: e.g. a CPU arch without a CUDA arch on a CUDA build is refused
// with the runbook's reason, before anything runs.
import { z } from "zod";
import {
  type BuildFlags,
  checkBuildFlags,
  issueText,
  SIM_X86_MARCH,
  SPARK_CPU_ARM_ARCH,
  SPARK_CUDA_ARCH,
  SPARK_CUDA_HOME,
} from "./flags";
import { ConfigError, configError, configErrorMap, configIssueLines } from "../config/errors";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { buildsOutput } from "./output";
import type { Exclusion, TreeConfig } from "../tree/config";
import { isExcluded } from "../tree/digest";
import {
  checkArtifact,
  checkBuildDirPattern,
  checkTarget,
  checkWorkdir,
  DEFAULT_ARTIFACTS,
  DEFAULT_TARGETS,
} from "./plan";

/** `sparkform:build.cacheFrom` value for "every node builds on its own, no cache seeding". */
export const CACHE_FROM_NONE = "none";

export const BUILD_PRESETS = {
  spark: {
    LLAMA_BACKEND: "cuda",
    LLAMA_CPU_ARM_ARCH: SPARK_CPU_ARM_ARCH,
    LLAMA_CUDA_ARCH: SPARK_CUDA_ARCH,
    CUDA_HOME: SPARK_CUDA_HOME,
    LLAMA_RPC: "1",
    LLAMA_RPC_RDMA: "1",
  },
  sim: { LLAMA_BACKEND: "cpu", LLAMA_CPU_X86_MARCH: SIM_X86_MARCH, LLAMA_RPC: "1" },
} as const satisfies Record<string, Partial<BuildFlags>>;

const safe = (check: (v: string) => string) => (v: string) => {
  try {
    check(v);
    return true;
  } catch {
    return false;
  }
};

const commandSchema = z.strictObject({
  run: z
    .array(
      z
        .string()
        .min(1)
        .refine((a) => !a.includes("\0"), {
          message: "contains a NUL byte, which no argv can carry; remove it",
        }),
    )
    .min(1, "needs at least the program, e.g. [mix, compile]"),
  workdir: z
    .string()
    .refine(safe(checkWorkdir), {
      message: 'must be "." or a path relative to the tree, no ".."; e.g. "." or apps/server',
    })
    .default("."),
  buildDir: z.string().refine(safe(checkBuildDirPattern), {
    message:
      "must be the CMake build directory the command makes, relative to the tree, `*` only in " +
      "the last part (e.g. _build/dev/lib/llama_cpp_ex/obj/llama_build-*)",
  }),
});

export const buildConfigSchema = z
  .strictObject({
    preset: z.enum(["spark", "sim"]).default("spark"),
    flags: z.record(z.string(), z.string().nullable()).default({}),
    targets: z
      .array(
        z.string().refine(safe(checkTarget), {
          message: "is not a cmake target name (letters, digits, _ . + -); e.g. ggml-rpc-server",
        }),
      )
      .min(1, "lists no target; name one (e.g. ggml-rpc-server) or leave it out for the defaults")
      .optional(),
    artifacts: z
      .array(
        z.string().refine(safe(checkArtifact), {
          message:
            "must be a relative path without '..': to the build directory (e.g. bin/ggml-rpc-server), or with build.command to the tree",
        }),
      )
      .min(1, "lists no file; name one (e.g. bin/ggml-rpc-server) or leave it out for the defaults")
      .optional(),
    commit: z
      .string()
      .regex(
        /^[0-9a-f]{40}$/,
        "must be the full 40-hex llama.cpp commit; `git rev-parse HEAD` in the tree prints it",
      )
      .optional(),
    /** Checked against sparkform:nodes with the whole stack config (see readStackConfig). */
    cacheFrom: z.string().min(1).optional(),
    jobs: z.number().int().min(1).max(512).optional(),
    command: commandSchema.optional(),
    /**
     * How the nodes get their build. `build-each`: every node compiles in its own tree (the
     * others' compiler caches seeded from the cache source). `fan-out`: only the cache source
     * (`cacheFrom`, default the first node) compiles, verifies and installs; every other node
     * copies its installed artifacts node to node, checks each file's sha256 against the
     * source's and installs them atomically, so the builds are identical by construction.
     * Default (buildDistribute): `fan-out` for CUDA builds (LLAMA_BACKEND cuda, e.g. preset
     * spark), whose objects differ between build directories and machines (nvcc's
     * `_INTERNAL_<hash>` names, bench/cuda-proof.md); `build-each` otherwise.
     */
    distribute: z.enum(["build-each", "fan-out"]).optional(),
  })
  .superRefine((b, ctx) => {
    if (!b.command) return;
    if (b.targets) {
      ctx.addIssue({
        code: "custom",
        path: ["targets"],
        message:
          "is for sparkform's own CMake build; with build.command the command decides what it builds: remove it",
      });
    }
    if (!b.artifacts) {
      ctx.addIssue({
        code: "custom",
        path: ["artifacts"],
        message:
          "is required with build.command: the files it makes, relative to the tree (e.g. _build/dev/lib/llama_cpp_ex/priv/<the NIF>.so)",
      });
    }
  });

export type BuildConfig = z.infer<typeof buildConfigSchema>;

/** How the nodes get their build (see `distribute` in buildConfigSchema). */
export type BuildDistribute = NonNullable<BuildConfig["distribute"]>;

/**
 * The one place `sparkform:build.distribute`'s default is decided: as configured, else
 * `fan-out` when the build's backend (the preset's LLAMA_BACKEND, or the flags' override) is
 * cuda, else `build-each`.
 */
export function buildDistribute(
  config: Pick<BuildConfig, "distribute" | "preset" | "flags">,
): BuildDistribute {
  if (config.distribute) return config.distribute;
  const override = config.flags?.LLAMA_BACKEND;
  const backend =
    override !== undefined ? override : BUILD_PRESETS[config.preset ?? "spark"].LLAMA_BACKEND;
  return backend === "cuda" ? "fan-out" : "build-each";
}

/**
 * A build command writes inside the synced tree (its build directory, often its artifacts):
 * those paths must be excluded from TreeSync, or every sync deletes them (`rsync --delete`)
 * and every refresh reports the tree as drifted. Throws BuildConfigError naming each path.
 */
export function checkCommandOutputsExcluded(
  config: BuildConfig,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): void {
  const problem = unexcludedCommandOutputs(config, exclude);
  if (problem === undefined) return;
  throw new BuildConfigError(`invalid stack configuration: sparkform:build.command ${problem}`);
}

/**
 * What is wrong when a build command's outputs are not excluded from the tree sync, and the
 * fix, as the text after `sparkform:build.command `; undefined when all are excluded.
 */
export function unexcludedCommandOutputs(
  config: Pick<BuildConfig, "command" | "artifacts">,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): string | undefined {
  if (!config.command) return undefined;
  const written = [config.command.buildDir, ...(config.artifacts ?? [])];
  const missing = written.filter((p) => !isExcluded(p, exclude));
  if (missing.length === 0) return undefined;
  const tops = [...new Set(missing.map((p) => p.split("/")[0] ?? p))];
  return (
    `writes ${missing.join(", ")} in the ` +
    "synced tree, and sparkform:tree.exclude does not exclude it. Without the exclusion every " +
    "sync deletes the build's output (rsync --delete) and refresh reports the tree as drifted. " +
    `Add to sparkform:tree.exclude: ${tops.map((t) => `{path: ${t}, reason: "build output, made on each node"}`).join(", ")}`
  );
}

/** A ConfigError about `sparkform:build` (a program catching ConfigError catches it too). */
export class BuildConfigError extends ConfigError {
  override name = "BuildConfigError";
}

/** Validate the raw `sparkform:build` value; throws BuildConfigError naming each key. */
export function parseBuildConfig(raw: unknown): BuildConfig {
  const r = buildConfigSchema.safeParse(raw ?? {}, { error: configErrorMap });
  if (r.success) return r.data;
  const e = configError(configIssueLines(r.error.issues, ["build"]));
  throw new BuildConfigError(e.message, e.lines);
}

/** The preset, then the overrides (null removes a preset value), then the commit. */
function mergedFlags(config: BuildConfig, commit: string): Record<string, string> {
  const merged: Record<string, string> = { ...BUILD_PRESETS[config.preset] };
  for (const [k, v] of Object.entries(config.flags)) {
    if (v === null) delete merged[k];
    else merged[k] = v;
  }
  merged.LLAMA_COMMIT = config.commit ?? commit;
  return merged;
}

/**
 * The build contract for this config and commit: the preset, then the overrides (null
 * removes a preset value), validated by flags.ts. Errors name `sparkform:build.flags.<VAR>`.
 */
export function buildFlagsFromConfig(config: BuildConfig, commit: string): BuildFlags {
  const r = checkBuildFlags(mergedFlags(config, commit));
  // `in`, not `r.ok`: the narrowing must also hold under Pulumi's non-strict ts-node.
  if (!("issues" in r)) return r.flags;
  throw new BuildConfigError(
    `invalid stack configuration (sparkform:build, preset ${config.preset}):\n` +
      r.issues.map((i) => `  sparkform:build.flags.${issueText(i)}`).join("\n"),
  );
}

/** `sparkform:build`, with the node and target defaults resolved. */
export type StackBuild = BuildConfig & {
  /** The node whose compiler cache seeds the others (default: the first node), or "none". */
  cacheFrom: string;
  /** CMake targets (default DEFAULT_TARGETS; [] with a build command). */
  targets: string[];
  /** Artifacts (default DEFAULT_ARTIFACTS; relative to the tree with a build command). */
  artifacts: string[];
  /** fan-out or build-each (default: fan-out for CUDA builds; buildDistribute). */
  distribute: BuildDistribute;
};

// The flags are checked before the commit is known (reading it runs git in the tree): any
// well-formed commit stands in, and the real one is checked again when the flags are rendered.
const SOME_COMMIT = "0".repeat(40);

/**
 * The build's references: the tree it builds in, the node that seeds the caches, the command's
 * outputs excluded from the sync, and the flags (preset plus overrides) as the contract takes
 * them, so a bad flag is a config error before any stage plans anything.
 */
export function crossCheck(
  build: Salvaged<BuildConfig>,
  ctx: CheckContext<{ tree?: Salvaged<TreeConfig> }>,
): void {
  const { tree } = ctx.sections;
  if (tree === undefined) {
    ctx.add(
      ["build"],
      "builds in the synced tree, but sparkform:tree is not set; set sparkform:tree too",
    );
  }
  const { cacheFrom } = build;
  if (cacheFrom !== undefined && cacheFrom !== CACHE_FROM_NONE && !ctx.isNode(cacheFrom)) {
    ctx.add(
      ["build", "cacheFrom"],
      `${JSON.stringify(cacheFrom)} is not one of the nodes (${ctx.list}), nor "none"; name the ` +
        'node whose compiler cache seeds the others, or "none" to build each node on its own',
    );
  }
  const whole = buildConfigSchema.safeParse(build);
  if (!whole.success) return; // its own parse reported why
  if (tree?.exclude !== undefined) {
    const problem = unexcludedCommandOutputs(whole.data, tree.exclude);
    if (problem !== undefined) ctx.add(["build", "command"], problem);
  }
  const flags = checkBuildFlags(mergedFlags(whole.data, whole.data.commit ?? SOME_COMMIT));
  for (const i of "issues" in flags ? flags.issues : [])
    ctx.add(i.field ? ["build", "flags", i.field] : ["build", "flags"], i.message);
}

/** The defaults that depend on the nodes and on whether a command builds. */
export function resolve(b: BuildConfig, first: string): StackBuild {
  return {
    ...b,
    cacheFrom: b.cacheFrom ?? first,
    targets: b.command ? [] : [...(b.targets ?? DEFAULT_TARGETS)],
    artifacts: [...(b.artifacts ?? (b.command ? [] : DEFAULT_ARTIFACTS))],
    distribute: buildDistribute(b),
  };
}

/** The build stage: llama.cpp built and verified on every node. */
export const stage = {
  name: "build",
  sections: [
    section({
      key: "build",
      schema: buildConfigSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (b, ctx) => resolve(b, ctx.first),
    }),
  ],
  outputs: [{ key: "build", type: "object", cut: buildsOutput }],
} as const satisfies StageDescriptor;
