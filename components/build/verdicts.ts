// What a NativeBuild diff counts as a rebuild: the inputs that change what is built, and
// installed artifacts that drifted on the node; and one digest of a set of artifacts.
import { createHash } from "node:crypto";
import type { NativeBuildOutputs } from "./state";

/** The inputs whose change means a rebuild (cacheFrom is how, not what: not among them). */
export const REBUILD_KEYS = [
  "providerVersion",
  "target",
  "tree",
  "treeDigest",
  "flags",
  "targets",
  "artifactPaths",
  "jobs",
  "command",
  "path",
  "fanOutFrom",
] as const;

/** Artifacts whose measured digest differs from the installed one (deleted or modified). */
export function driftedArtifacts(
  olds: Pick<NativeBuildOutputs, "installed" | "artifacts" | "artifactPaths">,
): string[] {
  return (olds.artifactPaths ?? []).filter(
    (a) => !olds.installed?.[a] || olds.artifacts?.[a] !== olds.installed[a],
  );
}

/** A short, stable digest of a set of artifact digests (for messages and comparisons). */
export function artifactSetDigest(digests: Readonly<Record<string, string>>): string {
  const canonical = JSON.stringify(
    Object.keys(digests)
      .sort()
      .map((k) => [k, digests[k]]),
  );
  return createHash("sha256").update(canonical).digest("hex").slice(0, 12);
}
