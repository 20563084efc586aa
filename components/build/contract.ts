// The environment contract: what a build, and any command a user runs on a node
// (`sparkform run`), gets — the build flags as environment (LLAMA_BACKEND, LLAMA_CPU_ARM_ARCH,
// LLAMA_CUDA_ARCH, CUDA_HOME, LLAMA_RPC, LLAMA_COMMIT), the toolchain's install directories
// and CUDA's bin on PATH, in a non-login shell (the runbook: DGX OS puts nvcc on the login
// PATH only, so a login shell would hide a missing contract).
import * as path from "node:path";
import { type BuildFlags, buildEnv } from "./flags";

/** PATH entries before the system's: the toolchain's install directories, then CUDA's bin. */
export function contractPath(flags: BuildFlags | undefined, binPaths: readonly string[]): string[] {
  const cuda = flags?.LLAMA_BACKEND === "cuda" && flags.CUDA_HOME;
  return [...binPaths, ...(cuda ? [path.posix.join(flags.CUDA_HOME as string, "bin")] : [])];
}

export interface CommandContractInput {
  /** The stack's build contract, when it builds. */
  readonly flags?: BuildFlags;
  /** The toolchain's install directories (absolute or `~/…`). */
  readonly binPaths: readonly string[];
  /** Where models live on the node (`~/models`): LLAMA_CACHE_DIR. */
  readonly modelsDir?: string;
  /** The stack's model file on this node, when it has it: LLAMA_MODEL_PATH, LLAMA_SMOKE_GEN_MODEL. */
  readonly modelFile?: string;
}

/** Environment and PATH for a command on a node under the contract (paths absolute or `~/…`). */
export function commandContract(input: CommandContractInput): {
  env: Record<string, string>;
  path: string[];
} {
  return {
    env: {
      ...(input.flags ? buildEnv(input.flags) : {}),
      ...(input.modelsDir ? { LLAMA_CACHE_DIR: input.modelsDir } : {}),
      ...(input.modelFile
        ? { LLAMA_MODEL_PATH: input.modelFile, LLAMA_SMOKE_GEN_MODEL: input.modelFile }
        : {}),
    },
    path: contractPath(input.flags, input.binPaths),
  };
}
