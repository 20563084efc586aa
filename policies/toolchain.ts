// Policies on the toolchain (Erlang/Elixir under ~/.asdf on a Spark): every node runs the
// same one, copied from the source node.
import type { StackValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { known, resourcesOf } from "./evidence";

/** One node's measured toolchain. */
export type ToolchainDigest = { node: string } & Pick<Evidence<"Toolchain">, "digest">;

/** Every node's toolchain has the same digest. */
export function checkToolchainsIdentical(toolchains: readonly ToolchainDigest[]): string[] {
  if (new Set(toolchains.map((t) => t.digest)).size <= 1) return [];
  return [
    `Toolchains differ between nodes: ${toolchains.map((t) => `${t.node}=${t.digest.slice(0, 12) || "(missing)"}`).join(", ")}. ` +
      `Run \`pulumi up\` to copy the source node's toolchain again.`,
  ];
}

/** Every node's toolchain has the same digest. */
export const toolchainsIdentical: StackValidationPolicy = {
  name: "toolchains-identical",
  description: "Every node has the same toolchain (by digest).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const toolchains = resourcesOf(args.resources, "Toolchain").flatMap((t) => {
      const m = known(t, "digest");
      return m ? [{ node: t.node, ...m }] : [];
    });
    checkToolchainsIdentical(toolchains).forEach((m) => reportViolation(m));
  },
};
