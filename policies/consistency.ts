// Policies on what every node must hold identically: the tree and the toolchain. The ggml RPC
// HELLO compares only major/minor, so nodes built from drifted trees connect and then misread
// each other's op codes; the proof is the digests the resources measured.
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import { kindOf } from "./kinds";

interface Measured {
  node: string;
  digest: string;
  expected?: string;
}

const SHA256 = /^[0-9a-f]{64}$/;

/**
 * The digests a kind of resource measured. Resources that this run will change have no
 * outputs yet (the provider re-measures them when it changes them): they are skipped.
 */
function measured(resources: PolicyResource[], kind: string, expectedKey?: string): Measured[] {
  return resources
    .filter((r) => kindOf(r.type, r.props) === kind)
    .filter((r) => r.props.digest === "" || SHA256.test(String(r.props.digest)))
    .map((r) => ({
      node: String((r.props.target as { name?: unknown } | undefined)?.name ?? r.name),
      digest: String(r.props.digest ?? ""),
      ...(expectedKey ? { expected: String(r.props[expectedKey] ?? "") } : {}),
    }));
}

/** Every node's synced tree has the control node's digest. */
export const treesIdentical: StackValidationPolicy = {
  name: "trees-identical",
  description: "Every node holds a byte-identical copy of the synced tree (by digest).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    for (const m of measured(args.resources, "TreeSync", "expectedDigest")) {
      if (m.digest !== m.expected) {
        reportViolation(
          `The tree on ${m.node} has digest ${m.digest || "(missing)"}, not the control node's ` +
            `${m.expected}: run \`pulumi up\` to re-sync it before building or serving.`,
        );
      }
    }
  },
};

/** Every node's toolchain has the same digest. */
export const toolchainsIdentical: StackValidationPolicy = {
  name: "toolchains-identical",
  description: "Every node has the same toolchain (by digest).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const all = measured(args.resources, "Toolchain");
    const digests = new Set(all.map((m) => m.digest));
    if (digests.size > 1) {
      reportViolation(
        `Toolchains differ between nodes: ${all.map((m) => `${m.node}=${m.digest.slice(0, 12) || "(missing)"}`).join(", ")}. ` +
          `Run \`pulumi up\` to copy the source node's toolchain again.`,
      );
    }
  },
};

/**
 * Every node's build has the same commit and byte-identical artifacts. The RPC HELLO compares
 * only major/minor: builds that differ connect and then misread each other's op codes.
 */
export const buildsIdentical: StackValidationPolicy = {
  name: "builds-identical",
  description: "Every node runs the same llama.cpp commit with byte-identical build artifacts.",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    const builds = args.resources
      .filter((r) => kindOf(r.type, r.props) === "NativeBuild")
      .map((r) => ({
        node: String((r.props.target as { name?: unknown } | undefined)?.name ?? r.name),
        commit: r.props.commit,
        artifacts: r.props.artifacts as Record<string, unknown> | undefined,
      }))
      // Builds this run will change have no outputs yet.
      .filter((b) => typeof b.commit === "string" && b.artifacts !== undefined);
    const commits = new Set(builds.map((b) => b.commit));
    if (commits.size > 1) {
      reportViolation(
        `Nodes build different llama.cpp commits (${builds.map((b) => `${b.node}=${String(b.commit).slice(0, 12)}`).join(", ")}): ` +
          "sync the same tree to every node and run `pulumi up`.",
      );
    }
    const paths = [...new Set(builds.flatMap((b) => Object.keys(b.artifacts ?? {})))].sort();
    for (const p of paths) {
      const digests = builds.map((b) => ({ node: b.node, sha: String(b.artifacts?.[p] ?? "") }));
      if (new Set(digests.map((d) => d.sha)).size > 1) {
        reportViolation(
          `${p} differs between nodes (${digests.map((d) => `${d.node}=${d.sha.slice(0, 12) || "(missing)"}`).join(", ")}): ` +
            "rebuild with `pulumi up` before any worker starts.",
        );
      }
    }
  },
};
