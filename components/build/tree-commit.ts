// The build contract for a stack, which needs the tree's commit: read with git on the control
// node, so it lives apart from config.ts, which stays pure (the import-layers rule keeps
// child_process out of every config.ts).
import { spawnSync } from "node:child_process";
import type { Exclusion } from "../tree/config";
import { childEnv } from "../transport";
import {
  type BuildConfig,
  BuildConfigError,
  buildFlagsFromConfig,
  checkCommandOutputsExcluded,
} from "./config";
import type { BuildFlags } from "./flags";

/**
 * The commit of a checkout on the control node (the synced tree has no .git on the nodes, so
 * the control node says which commit it is). Throws when `dir` is not a git checkout and no
 * `sparkform:build.commit` is set.
 */
export function treeCommit(dir: string): string {
  const r = spawnSync("git", ["-C", dir, "rev-parse", "--verify", "HEAD^{commit}"], {
    encoding: "utf8",
    env: childEnv(), // git must not inherit PULUMI_CONFIG (decrypted secrets)
  });
  const commit = (r.stdout ?? "").trim();
  if (r.status !== 0 || !/^[0-9a-f]{40}$/.test(commit)) {
    throw new BuildConfigError(
      `cannot tell the llama.cpp commit of ${dir} (git: ${(r.stderr ?? String(r.error ?? "")).trim() || "no commit"}); ` +
        "set sparkform:build.commit to the full 40-hex commit",
    );
  }
  return commit;
}

/**
 * The build contract for a stack: its build config against the tree it builds (`source` on
 * the control node, synced with `exclude`). Checks that a build command's output is excluded
 * from the sync, then renders the flags with the commit set in config, else the one the
 * stack's builds recorded (`recordedCommit`: no git), else the one read from `source`.
 */
export function stackBuildFlags(
  config: BuildConfig,
  tree: { source: string; exclude: readonly Pick<Exclusion, "path" | "name">[] },
  recordedCommit?: string,
): BuildFlags {
  checkCommandOutputsExcluded(config, tree.exclude);
  return buildFlagsFromConfig(config, config.commit ?? recordedCommit ?? treeCommit(tree.source));
}
