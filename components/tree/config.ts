// `sparkform:tree`: the working tree on the control node that every node gets a copy of
// (rsync --delete, proven by digest), and the exclusions, each with the reason it exists.
import { existsSync, statSync } from "node:fs";
import * as path from "node:path";
import { z } from "zod";
import { CONTROL, nodePathSchema } from "../config/node-path";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";

/** rsync reads a leading `!` (clear the list), `+ `/`- ` (include/exclude) as filter rules. */
const RULE_PREFIX = /^[!+-]/;

const exclusionText = (what: "path" | "name") =>
  z
    .string()
    .min(1)
    .refine((p) => !CONTROL.test(p), {
      message: `contains a control character (\\r, \\n, NUL, …), which rsync and the digest script split or stop at; remove it`,
    })
    .refine((p) => !RULE_PREFIX.test(p), {
      error: (iss) =>
        `starts with ${JSON.stringify(String(iss.input).charAt(0))}, which rsync reads as a filter rule ` +
        `('!' clears the exclusions, '+ ' includes, '- ' excludes) or an option; ` +
        (what === "name"
          ? "match that character with '?' instead"
          : "exclude it with name: and '?' for that character instead"),
    });

/** One rsync exclusion with the reason it exists; `path` is anchored, `name` matches anywhere. */
export const exclusionSchema = z
  .strictObject({
    path: exclusionText("path")
      .regex(/^[^*?[\]\\]+$/, "is a literal relative path (no wildcards); use name: for a glob")
      .refine((p) => !p.startsWith("/") && !p.split("/").includes(".."), {
        message: "is relative to the tree, without '..'; e.g. build or .git",
      })
      .refine(
        // An absolute path has its own message above.
        (p) =>
          p.startsWith("/") ||
          !p
            .replace(/\/$/, "")
            .split("/")
            .some((s) => s === "" || s === "."),
        {
          message: "has an empty or '.' part; write it as dir/sub",
        },
      )
      .optional(),
    name: exclusionText("name")
      .regex(
        /^[^/[\]\\]+$/,
        "is a base-name glob with * and ? only; no '/', '[' or '\\' (use path: for a path)",
      )
      .refine((n) => !n.includes("**"), {
        message: "has '**', which rsync matches across directories; use a single '*'",
      })
      .refine((n) => n !== "." && n !== "..", {
        message: "would match the tree itself; name the files or directories to leave out",
      })
      .optional(),
    reason: z
      .string({
        error: (iss) =>
          iss.input === undefined ? "is missing; say why this is excluded" : undefined,
      })
      .min(1, "is empty; say why this is excluded"),
  })
  .refine((e) => (e.path === undefined) !== (e.name === undefined), {
    message:
      "give exactly one of path or name; path: for an anchored path, name: for a base-name glob",
  });

export type Exclusion = z.infer<typeof exclusionSchema>;

export const treeSchema = z.strictObject({
  /** Directory on the control node, relative to the project or absolute. */
  source: z
    .string()
    .min(
      1,
      "is empty; give the directory to sync, relative to the project (e.g. .sparkform/llama.cpp)",
    )
    .refine((p) => !CONTROL.test(p), {
      message: "contains a control character; write the path on one line",
    }),
  /** Directory on every node. */
  dest: nodePathSchema,
  exclude: z.array(exclusionSchema).default([]),
});

/** `sparkform:tree`; `source` is absolute when parsed with a projectDir. */
export type TreeConfig = z.infer<typeof treeSchema>;

/** With the project known, the source is a directory there (checked before anything syncs). */
export function crossCheck(tree: Salvaged<TreeConfig>, ctx: CheckContext): void {
  if (!tree.source || ctx.projectDir === undefined) return;
  const resolved = path.resolve(ctx.projectDir, tree.source);
  if (!existsSync(resolved) || !statSync(resolved).isDirectory()) {
    ctx.add(
      ["tree", "source"],
      `${JSON.stringify(tree.source)} is not a directory (resolved to ${resolved}); point it at ` +
        "the working tree to sync",
    );
  }
}

/** The source made absolute against the project, when it is known. */
export function resolve(tree: TreeConfig, projectDir: string | undefined): TreeConfig {
  return projectDir === undefined
    ? tree
    : { ...tree, source: path.resolve(projectDir, tree.source) };
}

/** The tree stage: the working tree synced to every node and proven by digest. */
export const stage = {
  name: "tree",
  sections: [
    section({
      key: "tree",
      schema: treeSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (tree, ctx) => resolve(tree, ctx.projectDir),
      nodePaths: (tree) => [{ key: ["tree", "dest"], path: tree.dest }],
    }),
  ],
  outputs: [{ key: "tree", type: "object" }],
} as const satisfies StageDescriptor;
