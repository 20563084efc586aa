// What a test needs from the machine (root, a compiler, sshd, the pulumi toolchain), said once
// per need. Locally a missing need skips with its reason printed; CI exports
// SPARKFORM_REQUIRE_ALL_TIERS=1, and there a missing need fails the file: a tier that silently
// passed empty would look the same as one that passed.

/** Set by .ci/run: every requirement must be met, none may skip. */
export const requireAllTiers = () => process.env.SPARKFORM_REQUIRE_ALL_TIERS === "1";

export const isRoot = process.getuid?.() === 0;

/**
 * Whether the tests that need `what` must skip here: false when `have`. Use as
 * `describe.skipIf(requireOrSkip("root", isRoot, "namespaces need it"))(…)`.
 * Throws (failing the file) when `have` is false and every tier is required.
 */
export function requireOrSkip(what: string, have: boolean, why: string): boolean {
  if (have) return false;
  const line = `${what} is missing: ${why}`;
  if (requireAllTiers()) {
    throw new Error(`${line} (SPARKFORM_REQUIRE_ALL_TIERS=1: a tier may not skip)`);
  }
  console.warn(`SKIPPED — ${line}`);
  return true;
}

/**
 * For a need no CI machine has (an NVIDIA compiler, say): always a skip with its reason, never
 * a failure, so that the one place tests decide to skip stays this module.
 */
export function optionalOrSkip(what: string, have: boolean, why: string): boolean {
  if (have) return false;
  console.warn(`SKIPPED — ${what} is missing (optional on every machine): ${why}`);
  return true;
}
