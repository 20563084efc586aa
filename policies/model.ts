// Policies on the model on each node: what the cluster serves must be identified by content,
// not by name.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { asKind } from "./evidence";

type ModelEvidence = Evidence<"ModelReplica">;

const SHA256 = /^[0-9a-f]{64}$/;

/** What model-pinned judges of one replica; a field left out is not known yet in this run. */
export interface ModelPinEvidence {
  repo: ModelEvidence["repo"];
  commit?: ModelEvidence["commit"];
  files?: readonly Pick<ModelEvidence["files"][number], "path" | "sha256">[];
}

/**
 * A model replica is pinned: a commit (a branch followed with allowBranch is recorded as the
 * commit it resolved to) and the SHA-256 of every file.
 */
export function checkModelPinned({ repo, commit, files = [] }: ModelPinEvidence): string[] {
  const found: string[] = [];
  if (commit !== undefined && !/^[0-9a-f]{40}$/.test(commit)) {
    found.push(
      `Pin model ${String(repo)} to a commit: ${JSON.stringify(commit)} is not a 40-hex commit sha.`,
    );
  }
  for (const f of files) {
    // Typed as the provider writes it; a replica made another way may lack the digest.
    if (typeof f.sha256 !== "string" || !SHA256.test(f.sha256)) {
      found.push(
        `Model ${String(repo)} file ${String(f.path)} has no known SHA-256: give it in ` +
          "sparkform:model.sha256 or use a hub whose metadata carries it (LFS).",
      );
    }
  }
  return found;
}

/**
 * Every model replica is pinned: a commit and the SHA-256 of every file, so a node never
 * serves bytes that nobody can name.
 */
export const modelPinned: ResourceValidationPolicy = {
  name: "model-pinned",
  description: "Every model on a node is a pinned commit with the SHA-256 of every file known.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const replica = asKind(args, "ModelReplica");
    if (replica === undefined) return;
    const { repo, commit, files } = replica.props;
    checkModelPinned({
      repo: String(repo),
      ...(commit !== undefined ? { commit } : {}),
      ...(files !== undefined ? { files } : {}),
    }).forEach((m) => reportViolation(m));
  },
};
