// Policies are called directly with crafted resource arguments (awsguard's way); the real
// CLI run with --policy-pack is in test/foundation.
import type { ResourceValidationArgs } from "@pulumi/policy";
import { describe, expect, it } from "vitest";
import { digestPinned } from "../../policies/digests";

function violations(
  props: Record<string, unknown>,
  type = "pulumi-nodejs:dynamic:Resource",
): string[] {
  const found: string[] = [];
  const args = {
    type,
    props,
    urn: "urn:test",
    name: "r",
    opts: {},
  } as unknown as ResourceValidationArgs;
  const validate = digestPinned.validateResource;
  if (typeof validate !== "function") throw new Error("sha256-pinned has one validateResource");
  void validate(args, (message: string) => found.push(message));
  return found;
}

describe("sha256-pinned", () => {
  const pinned = "a".repeat(64);

  it.each([
    [
      "missing",
      undefined,
      "Pin the SHA-256 of /m/f: set pinnedSha256 to its 64-hex-digit digest (got null).",
    ],
    ["empty", "", 'Pin the SHA-256 of /m/f: set pinnedSha256 to its 64-hex-digit digest (got "").'],
    [
      "too short",
      "abc",
      'Pin the SHA-256 of /m/f: set pinnedSha256 to its 64-hex-digit digest (got "abc").',
    ],
    [
      "upper case",
      "A".repeat(64),
      `Pin the SHA-256 of /m/f: set pinnedSha256 to its 64-hex-digit digest (got "${"A".repeat(64)}").`,
    ],
  ])("reports a %s digest", (_case, value, message) => {
    expect(violations({ kind: "FileDigest", path: "/m/f", pinnedSha256: value })).toEqual([
      message,
    ]);
  });

  it("accepts a pinned digest", () => {
    expect(violations({ kind: "FileDigest", path: "/m/f", pinnedSha256: pinned })).toEqual([]);
  });

  it("ignores other resources", () => {
    expect(violations({ kind: "Other" })).toEqual([]);
    expect(violations({ kind: "FileDigest" }, "aws:s3/bucket:Bucket")).toEqual([]);
  });
});
