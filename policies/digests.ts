// Policies on pinned digests: what the cluster runs must be identified by content, not by name.
import { EnforcementLevel, ResourceValidationPolicy } from "@pulumi/policy";

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
