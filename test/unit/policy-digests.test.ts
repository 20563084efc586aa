// Policies are called directly with crafted resource arguments (awsguard's way); the real
// CLI run with --policy-pack is in test/integration/foundation.
import { describe, expect, it } from "vitest";
import { LEGACY_TYPE } from "../../components/kinds";
import { modelPinned } from "../../policies/model";
import { digestPinned } from "../integration/foundation/proof-policies/digest";
import { resourceViolations, sparkform } from "../support/policy";

// sha256-pinned guards FileDigest, which only the proof stack creates: it is the proof stack's
// own pack (test/integration/foundation/proof-policies).
describe("sha256-pinned", () => {
  const pinned = "a".repeat(64);
  const violations = (props: Record<string, unknown>, type: string = LEGACY_TYPE) =>
    resourceViolations(digestPinned, { type, props });

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

describe.each([
  ["its type token", false],
  ["the legacy type and kind", true],
])("model-pinned, a replica by %s", (_by, legacy) => {
  const replica = (commit: unknown, files: unknown) =>
    sparkform("ModelReplica", { repo: "org/m", commit, files }, { legacy });
  const ok = [{ path: "m.gguf", size: 1, sha256: "b".repeat(64) }];
  const check = (r: ReturnType<typeof replica>) => resourceViolations(modelPinned, r);

  it("accepts a commit and known digests", () => {
    expect(check(replica("c".repeat(40), ok))).toEqual([]);
  });
  it("names a revision that is not a commit and a file without a digest", () => {
    expect(check(replica("main", [{ path: "m.gguf", size: 1, sha256: "" }]))).toEqual([
      'Pin model org/m to a commit: "main" is not a 40-hex commit sha.',
      "Model org/m file m.gguf has no known SHA-256: give it in sparkform:model.sha256 or use a hub whose metadata carries it (LFS).",
    ]);
  });
  it("waits for values that are not known yet", () => {
    expect(check(replica(undefined, undefined))).toEqual([]);
  });
});
