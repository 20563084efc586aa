// `sparkform:toolchain`: a language toolchain one node has (e.g. ~/.asdf with Erlang and
// Elixir), copied to the others and put on PATH by install directory (no shims).
import { z } from "zod";
import { shown } from "../config/errors";
import { CONTROL, nodePathSchema } from "../config/node-path";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { nodeNameSchema } from "../node/config";

/** An install directory, relative to the toolchain's path: no way out of it, no surprises. */
const binDir = z.string().superRefine((d, ctx) => {
  const fail = (message: string) => ctx.addIssue({ code: "custom", message, input: d });
  const eg = "e.g. installs/elixir/1.18.4-otp-27/bin";
  if (d === "") return fail(`is empty; give a directory relative to toolchain.path, ${eg}`);
  if (CONTROL.test(d)) return fail("contains a control character; remove it");
  if (!/^[A-Za-z0-9._/+@-]+$/.test(d)) {
    return fail(`may contain only letters, digits and . _ / + @ -; ${eg}`);
  }
  if (d.startsWith("/") || d.startsWith("~")) {
    return fail(`${shown(d)} is absolute; give it relative to toolchain.path, ${eg}`);
  }
  if (d === ".") return;
  const parts = d.replace(/\/$/, "").split("/");
  if (parts.includes("..")) return fail(`must not contain '..'; stay inside toolchain.path, ${eg}`);
  if (parts.some((p) => p === "" || p === ".")) {
    return fail(`${shown(d)} has an empty or '.' part; write it as dir/sub, ${eg}`);
  }
  if (parts.some((p) => p.startsWith("-"))) {
    return fail("has a part starting with '-', which a command would read as an option; rename it");
  }
});

const argv = z
  .array(
    z
      .string()
      .min(1)
      .refine((a) => !a.includes("\0"), {
        message: "contains a NUL byte, which no argv can carry; remove it",
      }),
  )
  .min(1, "needs at least the program, e.g. [elixir, --version]");

export const toolchainSchema = z.strictObject({
  /** The toolchain directory on every node (Spark: ~/.asdf). */
  path: nodePathSchema,
  /** Node that has it and copies it to the others (default: the first node). */
  source: nodeNameSchema.optional(),
  /** Install directories, relative to `path`, put on PATH directly (no shims). */
  binDirs: z.array(binDir).min(1, "lists no directory; name the install's bin directories"),
  /** Version probe, run with binDirs on PATH (an argv, never a shell string). */
  probe: argv,
  /** Text the probe's output must contain (e.g. "Elixir 1.18"). */
  expect: z.string().min(1, "is empty; give text the probe prints (e.g. Elixir 1.18)"),
});

export type ToolchainConfig = z.infer<typeof toolchainSchema>;

/** `sparkform:toolchain`, with `source` resolved to a node name. */
export type StackToolchain = ToolchainConfig & {
  /** The node that has the toolchain and copies it to the others (default: the first node). */
  source: string;
  /** `path` joined with each of `binDirs`: the directories a command gets on PATH. */
  binPaths: string[];
};

/** The source names a configured node. */
export function crossCheck(tc: Salvaged<ToolchainConfig>, ctx: CheckContext): void {
  if (tc.source !== undefined && !ctx.isNode(tc.source)) {
    ctx.add(
      ["toolchain", "source"],
      `${JSON.stringify(tc.source)} is not one of the nodes (${ctx.list}); name the node that ` +
        "has the toolchain, or leave it out for the first node",
    );
  }
}

/** The defaults that depend on the nodes: the source is the first node unless named. */
export function resolve(tc: ToolchainConfig, first: string): StackToolchain {
  return {
    ...tc,
    source: tc.source ?? first,
    binPaths: tc.binDirs.map((d) => (d === "." ? tc.path : `${tc.path}/${d.replace(/\/$/, "")}`)),
  };
}

/** The toolchain stage: copied from its source node to the others. */
export const stage = {
  name: "toolchain",
  sections: [
    section({
      key: "toolchain",
      schema: toolchainSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (tc, ctx) => resolve(tc, ctx.first),
      nodePaths: (tc) => [{ key: ["toolchain", "path"], path: tc.path }],
    }),
  ],
  outputs: [{ key: "toolchain", type: "object" }],
} as const satisfies StageDescriptor;
