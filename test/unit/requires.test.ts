// A test's missing need skips with its reason locally and fails the run where every tier must
// run (CI's SPARKFORM_REQUIRE_ALL_TIERS=1): a tier that passed empty in CI would hide a broken
// machine.
import { afterEach, describe, expect, it, vi } from "vitest";
import { optionalOrSkip, requireOrSkip } from "../support/requires";

const saved = process.env.SPARKFORM_REQUIRE_ALL_TIERS;
afterEach(() => {
  if (saved === undefined) delete process.env.SPARKFORM_REQUIRE_ALL_TIERS;
  else process.env.SPARKFORM_REQUIRE_ALL_TIERS = saved;
  vi.restoreAllMocks();
});

describe("requireOrSkip", () => {
  it("a need that is met runs the tests, wherever", () => {
    process.env.SPARKFORM_REQUIRE_ALL_TIERS = "1";
    expect(requireOrSkip("cc", true, "why")).toBe(false);
  });

  it("locally, a missing need skips and says why", () => {
    delete process.env.SPARKFORM_REQUIRE_ALL_TIERS;
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    expect(requireOrSkip("root", false, "namespaces need it")).toBe(true);
    expect(warn).toHaveBeenCalledWith("SKIPPED — root is missing: namespaces need it");
  });

  it("with every tier required, a missing need fails instead of skipping", () => {
    process.env.SPARKFORM_REQUIRE_ALL_TIERS = "1";
    expect(() => requireOrSkip("root", false, "namespaces need it")).toThrow(
      "root is missing: namespaces need it (SPARKFORM_REQUIRE_ALL_TIERS=1: a tier may not skip)",
    );
  });

  it("an optional need (no CI machine has it) skips even where every tier is required", () => {
    process.env.SPARKFORM_REQUIRE_ALL_TIERS = "1";
    vi.spyOn(console, "warn").mockImplementation(() => {});
    expect(optionalOrSkip("nvcc", false, "no CUDA toolkit")).toBe(true);
  });
});
