// Policies on pinned digests: what the cluster runs must be identified by content, not by name.
import { EnforcementLevel, ResourceValidationPolicy } from "@pulumi/policy";
import { kindOf } from "./kinds";

const sha256Pattern = /^[0-9a-f]{64}$/;

/**
 * Every digest-evidence resource (a file, later a model file) carries a pinned SHA-256, so a
 * swapped or re-uploaded artifact cannot pass as the one that was reviewed.
 */
export const digestPinned: ResourceValidationPolicy = {
  name: "sha256-pinned",
  description: "Files the cluster depends on are pinned by SHA-256.",
  enforcementLevel: "mandatory" satisfies EnforcementLevel,
  validateResource: (args, reportViolation) => {
    if (args.type !== "pulumi-nodejs:dynamic:Resource") return;
    const props = args.props as { kind?: unknown; path?: unknown; pinnedSha256?: unknown };
    if (props.kind !== "FileDigest") return;
    const pinned = props.pinnedSha256;
    if (typeof pinned !== "string" || !sha256Pattern.test(pinned)) {
      reportViolation(
        `Pin the SHA-256 of ${String(props.path)}: set pinnedSha256 to its 64-hex-digit digest ` +
          `(got ${JSON.stringify(pinned ?? null)}).`,
      );
    }
  },
};

/**
 * Every model replica is pinned: a commit (a branch followed with allowBranch is recorded as
 * the commit it resolved to) and the SHA-256 of every file, so a node never serves bytes that
 * nobody can name.
 */
export const modelPinned: ResourceValidationPolicy = {
  name: "model-pinned",
  description: "Every model on a node is a pinned commit with the SHA-256 of every file known.",
  enforcementLevel: "mandatory" satisfies EnforcementLevel,
  validateResource: (args, reportViolation) => {
    if (kindOf(args.type, args.props) !== "ModelReplica") return;
    const { repo, commit, files } = args.props as {
      repo?: unknown;
      commit?: unknown;
      files?: unknown;
    };
    // Values not known yet (a first preview) are judged when they are.
    if (typeof commit === "string" && !/^[0-9a-f]{40}$/.test(commit)) {
      reportViolation(
        `Pin model ${String(repo)} to a commit: ${JSON.stringify(commit)} is not a 40-hex commit sha.`,
      );
    }
    for (const f of Array.isArray(files) ? (files as { path?: unknown; sha256?: unknown }[]) : []) {
      if (typeof f.sha256 !== "string" || !sha256Pattern.test(f.sha256)) {
        reportViolation(
          `Model ${String(repo)} file ${String(f.path)} has no known SHA-256: give it in ` +
            "sparkform:model.sha256 or use a hub whose metadata carries it (LFS).",
        );
      }
    }
  },
};
