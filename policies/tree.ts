// Policies on the synced tree: every node must hold it byte for byte. The ggml RPC HELLO
// compares only major/minor, so nodes built from drifted trees connect and then misread each
// other's op codes; the proof is the digests the resources measured.
import type { StackValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { known, resourcesOf } from "./evidence";

/** One node's measured tree. */
export type TreeDigest = { node: string } & Pick<Evidence<"TreeSync">, "digest" | "expectedDigest">;

/** Every node's tree has the control node's digest. */
export function checkTreesIdentical(trees: readonly TreeDigest[]): string[] {
  return trees
    .filter((t) => t.digest !== t.expectedDigest)
    .map(
      (t) =>
        `The tree on ${t.node} has digest ${t.digest || "(missing)"}, not the control node's ` +
        `${t.expectedDigest}: run \`pulumi up\` to re-sync it before building or serving.`,
    );
}

/** Every node's synced tree has the control node's digest. */
export const treesIdentical: StackValidationPolicy = {
  name: "trees-identical",
  description: "Every node holds a byte-identical copy of the synced tree (by digest).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const trees = resourcesOf(args.resources, "TreeSync").flatMap((t) => {
      const m = known(t, "digest", "expectedDigest");
      return m ? [{ node: t.node, ...m }] : [];
    });
    checkTreesIdentical(trees).forEach((m) => reportViolation(m));
  },
};
