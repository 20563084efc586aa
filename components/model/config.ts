// The stack's `sparkform:model` section, validated with zod before anything connects. Errors
// name the key; the HF token is not here: it is the secret `sparkform:hfToken`
// (`pulumi config set --secret hfToken …`), read with config.getSecret.
import { z } from "zod";
import { ConfigError } from "../config";

/** `name` or `org/name`, each part [A-Za-z0-9._-], not starting with '.'. */
export const repoIdSchema = z
  .string()
  .regex(
    /^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}\/)?[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}$/,
    "must be a Hugging Face repo id, 'org/name'",
  );

/** A file path inside the repo: relative, forward slashes, no '..', boring characters. */
export const repoFileSchema = z
  .string()
  .min(1)
  .regex(/^[A-Za-z0-9._+@=-]+(?:\/[A-Za-z0-9._+@=-]+)*$/, "must be a relative path in the repo")
  .refine((p) => !p.split("/").some((s) => s === "." || s === ".."), {
    message: "must not contain '.' or '..' segments",
  })
  .refine((p) => !p.endsWith(".part"), { message: "must not end with .part" });

export const sha256Schema = z
  .string()
  .regex(/^[0-9a-f]{64}$/, "must be 64 lowercase hex digits (a SHA-256)");

export const modelConfigSchema = z
  .strictObject({
    /** Hugging Face repo id, e.g. `unsloth/Qwen3-235B-A22B-GGUF`. */
    repo: repoIdSchema,
    /**
     * A 40-hex commit sha (pinned), or a branch/tag name when `allowBranch` is true: then the
     * sha it resolves to is recorded, and the branch moving shows up in preview as a replace.
     */
    revision: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[A-Za-z0-9._/-]+$/, "is not a git revision"),
    /** Files of the model; one shard `…-00001-of-0000N.gguf` stands for all N shards. */
    files: z.array(repoFileSchema).min(1),
    /** Expected SHA-256 per file (must agree with the hub's metadata; fail closed). */
    sha256: z.record(repoFileSchema, sha256Schema).default({}),
    /** Allow `revision` to be a branch or tag name. Default false: pin a commit. */
    allowBranch: z.boolean().default(false),
    /** HF_ENDPOINT-style base URL; default the public hub. */
    endpoint: z
      .string()
      .url()
      .refine((u) => /^https?:\/\//.test(u), { message: "must be an http(s) URL" })
      .default("https://huggingface.co"),
    /** Refresh check: "fast" (size + mtime) or "full" (re-hash every file on every refresh). */
    verify: z.enum(["fast", "full"]).default("fast"),
    /** Where models live on the nodes: `<modelsDir>/<repo>/<commit>/<file>`. */
    modelsDir: z
      .string()
      .regex(/^(~|~\/[A-Za-z0-9._/@+-]+|\/[A-Za-z0-9._/@+-]+)$/, "must be absolute or ~/...")
      .refine((p) => !p.split("/").includes(".."), { message: "must not contain '..'" })
      .default("~/models"),
    /** Download attempts after an interruption within one `up` (each resumes from the .part). */
    retries: z.number().int().min(0).max(20).default(2),
    /** Nodes that get the model (default: all); the first downloads, the rest copy from it. */
    nodes: z.array(z.string().min(1)).min(1).optional(),
  })
  .superRefine((m, ctx) => {
    for (const f of Object.keys(m.sha256)) {
      if (!m.files.includes(f) && !m.files.some((x) => sameShardSet(x, f))) {
        ctx.addIssue({
          code: "custom",
          path: ["sha256", f],
          message: `names a file that is not in files (${m.files.join(", ")})`,
        });
      }
    }
    if (!m.allowBranch && !/^[0-9a-f]{40}$/.test(m.revision)) {
      ctx.addIssue({
        code: "custom",
        path: ["revision"],
        message:
          `${JSON.stringify(m.revision)} is not a commit sha: pin the 40-hex commit ` +
          "(the hub's model page lists it), or set allowBranch: true to follow a branch",
      });
    }
  });

export type ModelConfig = z.infer<typeof modelConfigSchema>;

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

function sameShardSet(a: string, b: string): boolean {
  const x = SHARD.exec(a);
  const y = SHARD.exec(b);
  return !!x && !!y && x[1] === y[1] && x[3] === y[3];
}

/** Parse the section; throws a ConfigError whose message names each offending key. */
export function parseModelConfig(raw: unknown): ModelConfig {
  const r = modelConfigSchema.safeParse(raw);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => {
    const at = i.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("");
    return `sparkform:model${at}: ${i.message}`;
  });
  throw new ConfigError(
    `invalid stack configuration:\n${lines.join("\n")}\n` +
      "Fix it in stacks/Pulumi.<stack>.yaml (the sparkform:model section).",
  );
}
