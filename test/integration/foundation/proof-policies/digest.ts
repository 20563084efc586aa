// sha256-pinned, the proof pack's one policy (./index.ts), kept apart from the PolicyPack so
// that unit tests can call it without starting a pack.
import type { ResourceValidationPolicy } from "@pulumi/policy";

const sha256Pattern = /^[0-9a-f]{64}$/;

/** A FileDigest resource: the proof stack's ManagedFile (the SDK's default dynamic type). */
function isFileDigest(type: string, props: Record<string, unknown>): boolean {
  return type === "pulumi-nodejs:dynamic:Resource" && props.kind === "FileDigest";
}

/** A file's pinned SHA-256 is 64 lower-case hex digits. */
export function checkDigestPinned(file: { path: unknown; pinnedSha256: unknown }): string[] {
  const pinned = file.pinnedSha256;
  if (typeof pinned === "string" && sha256Pattern.test(pinned)) return [];
  return [
    `Pin the SHA-256 of ${String(file.path)}: set pinnedSha256 to its 64-hex-digit digest ` +
      `(got ${JSON.stringify(pinned ?? null)}).`,
  ];
}

/**
 * Every FileDigest carries a pinned SHA-256, so a swapped or re-uploaded file cannot pass as
 * the one that was reviewed.
 */
export const digestPinned: ResourceValidationPolicy = {
  name: "sha256-pinned",
  description: "Files the proof stack manages are pinned by SHA-256.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    if (!isFileDigest(args.type, args.props)) return;
    const { path, pinnedSha256 } = args.props as { path?: unknown; pinnedSha256?: unknown };
    checkDigestPinned({ path, pinnedSha256 }).forEach((m) => reportViolation(m));
  },
};
