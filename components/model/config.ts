// The stack's `sparkform:model` section, validated with zod before anything connects. Errors
// name the key; the HF token is not here: it is the secret `sparkform:hfToken`
// (`pulumi config set --secret hfToken …`), read with config.getSecret.
import { z } from "zod";
import { configError, configErrorMap, configIssueLines } from "../config/errors";
import { CONTROL } from "../config/node-path";
import { nodePathSchema } from "../config/node-path";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { modelOutput } from "./output";
import { endpointProblem } from "./token-fetch";

/** Where models live on the nodes unless `sparkform:model.modelsDir` says otherwise. */
export const MODELS_DIR_DEFAULT = "~/models";
/** The refresh check unless `sparkform:model.verify` says otherwise. */
export const MODEL_VERIFY_DEFAULT = "fast";
/** Resumed download attempts within one `up` unless `sparkform:model.retries` says otherwise. */
export const MODEL_RETRIES_DEFAULT = 2;
/** The Hugging Face endpoint unless `sparkform:model.endpoint` says otherwise. */
export const MODEL_ENDPOINT_DEFAULT = "https://huggingface.co";

/** `name` or `org/name`, each part [A-Za-z0-9._-], not starting with '.'. */
export const repoIdSchema = z
  .string()
  .regex(
    /^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}\/)?[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}$/,
    "must be a Hugging Face repo id, 'org/name'; copy it from the model page (e.g. unsloth/Qwen3-235B-A22B-GGUF)",
  );

/** A file path inside the repo: relative, forward slashes, no '..', boring characters. */
export const repoFileSchema = z
  .string()
  .min(1)
  .regex(
    /^[A-Za-z0-9._+@=-]+(?:\/[A-Za-z0-9._+@=-]+)*$/,
    "must be a relative path in the repo; write it as the hub lists it (e.g. Q4_K_M/model-00001-of-00003.gguf)",
  )
  .refine((p) => !p.split("/").some((s) => s === "." || s === ".."), {
    message: "must not contain '.' or '..' segments; write the path as the hub lists it",
  })
  .refine((p) => !p.split("/").some((s) => s.startsWith("-")), {
    message:
      "has a part starting with '-', which a command would read as an option; check the name",
  })
  .refine((p) => !p.endsWith(".part"), {
    message: "must not end with .part (sparkform's partial downloads); name the finished file",
  });

export const sha256Schema = z
  .string()
  .regex(
    /^[0-9a-f]{64}$/,
    "must be 64 lowercase hex digits (a SHA-256); copy the file's SHA256 from the hub's file page",
  );

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
      .regex(
        /^[A-Za-z0-9._/-]+$/,
        "is not a git revision; pin the 40-hex commit (the hub's model page lists it)",
      )
      .refine((r) => !r.startsWith("-"), {
        message: "starts with '-', which git would read as an option; pin the 40-hex commit",
      }),
    /** Files of the model; one shard `…-00001-of-0000N.gguf` stands for all N shards. */
    files: z.array(repoFileSchema).min(1, "lists no file; name the .gguf file(s) of the model"),
    /** Expected SHA-256 per file (must agree with the hub's metadata; fail closed). */
    sha256: z.record(repoFileSchema, sha256Schema).default({}),
    /** Allow `revision` to be a branch or tag name. Default false: pin a commit. */
    allowBranch: z.boolean().default(false),
    /** HF_ENDPOINT-style base URL; default the public hub. */
    endpoint: z
      .string()
      .refine((u) => URL.canParse(u) && /^https?:\/\//.test(u), {
        message: "must be an http(s) URL; write it in full, e.g. https://huggingface.co",
      })
      // No user-info, no query string: the token is a secret of its own (token-fetch.ts).
      .superRefine((u, ctx) => {
        const problem = URL.canParse(u) && /^https?:\/\//.test(u) ? endpointProblem(u) : undefined;
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      })
      .default(MODEL_ENDPOINT_DEFAULT),
    /**
     * Send sparkform:hfToken to this model's endpoint although its origin is not the one the
     * token is for (sparkform:model.endpoint, default the public hub): the token then goes to
     * that endpoint, a third-party mirror included, at the resolve on the control node and in
     * the node's download. Default false: such an endpoint gets no token (token-origin.ts).
     */
    sendToken: z.boolean().default(false),
    /** Refresh check: "fast" (size + mtime) or "full" (re-hash every file on every refresh). */
    verify: z.enum(["fast", "full"]).default(MODEL_VERIFY_DEFAULT),
    /** Where models live on the nodes: `<modelsDir>/<repo>/<commit>/<file>`. */
    modelsDir: nodePathSchema.default(MODELS_DIR_DEFAULT),
    /** Download attempts after an interruption within one `up` (each resumes from the .part). */
    retries: z.number().int().min(0).max(20).default(MODEL_RETRIES_DEFAULT),
    /**
     * Nodes that get the model (default: all); the first downloads, the rest copy from it.
     * That each names a node of sparkform:nodes is checked with the whole stack config.
     */
    nodes: z
      .array(z.string().min(1))
      .min(1, "lists no node; name at least one of sparkform:nodes, or leave it out for all")
      .superRefine((ns, ctx) => {
        for (const [i, n] of ns.entries()) {
          if (ns.indexOf(n) < i) {
            ctx.addIssue({
              code: "custom",
              path: [i],
              message: `names ${JSON.stringify(n)} twice; list each node once`,
              input: n,
            });
          }
        }
      })
      .optional(),
  })
  .superRefine((m, ctx) => {
    for (const f of Object.keys(m.sha256)) {
      if (!m.files.includes(f) && !m.files.some((x) => sameShardSet(x, f))) {
        ctx.addIssue({
          code: "custom",
          path: ["sha256", f],
          message: `names a file that is not in files (${m.files.join(", ")}); add it to files or remove this entry`,
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

/**
 * Parse the section on its own (no check of `nodes` against sparkform:nodes: that needs the
 * whole config, see readStackConfig); throws a ConfigError whose lines name each key.
 */
export function parseModelConfig(raw: unknown): ModelConfig {
  const r = modelConfigSchema.safeParse(raw, { error: configErrorMap });
  if (r.success) return r.data;
  throw configError(configIssueLines(r.error.issues, ["model"]));
}

/** `sparkform:model`, with `nodes` resolved (default: all nodes, in their order). */
export type StackModel = ModelConfig & { nodes: string[] };

/**
 * Each node a model goes to is a configured node. `key` is where its section is, `leaveOut` what
 * leaving `nodes` out gives (the message's fix).
 */
function checkNodes(
  nodes: readonly string[] | undefined,
  key: readonly PropertyKey[],
  leaveOut: string,
  ctx: CheckContext,
): void {
  for (const [i, n] of (nodes ?? []).entries()) {
    if (!ctx.isNode(n)) {
      ctx.add(
        [...key, "nodes", i],
        `${JSON.stringify(n)} is not one of sparkform:nodes (${ctx.list}); name one of them, or leave ` +
          leaveOut,
      );
    }
  }
}

/** Each node the model goes to is a configured node. */
export function crossCheck(model: Salvaged<ModelConfig>, ctx: CheckContext): void {
  checkNodes(model.nodes, ["model"], "model.nodes out for all nodes", ctx);
}

/** Every node gets the model unless the section names some. */
export function resolve(model: ModelConfig, all: readonly string[]): StackModel {
  return { ...model, nodes: model.nodes ?? [...all] };
}

/**
 * A staged model's name: its key under `sparkform:models`, what `sparkform:server.model`
 * selects, and part of its resources' names (so it stays short and boring).
 */
export const stagedNameSchema = z
  .string()
  .regex(
    /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/,
    "must be a short name of lowercase letters, digits and '-' (1–32, e.g. qwen3-30b); it names the model's resources",
  );

/**
 * `sparkform:models`: more pinned models staged on the nodes beside `sparkform:model`, each
 * verified as that one is (same fields, same defaults), so `sparkform:server.model` can switch
 * the served one without a download and without restarting a worker.
 */
export const modelsConfigSchema = z.record(stagedNameSchema, modelConfigSchema);

export type ModelsConfig = z.infer<typeof modelsConfigSchema>;

/** How the summaries name a model: its config key (`model`, or `models.<name>`). */
export function stagedKey(name: string | undefined): string {
  return name === undefined ? "model" : `models.${name}`;
}

/**
 * Each staged model's nodes are configured nodes, sparkform:model is set beside them (it stays
 * the default served model), and no revision is staged twice: two resources would own one
 * directory, and deleting either would take the other's files. This compares the revisions as
 * spelled, so it only catches the plain repeat early; a branch and the sha it points at are
 * the same commit, which only the resolve knows: Model refuses that at preview, after
 * resolving (dir-claims.ts).
 */
export function crossCheckStaged(
  models: Salvaged<ModelsConfig>,
  ctx: CheckContext<{ model?: Salvaged<ModelConfig> }>,
): void {
  const primary = ctx.sections.model;
  if (primary === undefined)
    ctx.add(
      ["models"],
      "stages models beside sparkform:model, which is not set; set sparkform:model (the model " +
        "served unless sparkform:server.model names one of these)",
    );
  const seen = new Map<string, string>();
  if (primary?.repo !== undefined && primary.revision !== undefined)
    seen.set(`${primary.repo}@${primary.revision}`, "sparkform:model");
  for (const [name, m] of Object.entries(models)) {
    if (m === undefined) continue;
    checkNodes(
      m.nodes,
      ["models", name],
      `sparkform:models.${name}.nodes out for sparkform:model's nodes`,
      ctx,
    );
    if (m.repo === undefined || m.revision === undefined) continue;
    const id = `${m.repo}@${m.revision}`;
    const twice = seen.get(id);
    if (twice !== undefined)
      ctx.add(
        ["models", name],
        `is ${m.repo} at ${m.revision}, which ${twice} already stages; stage each revision ` +
          "once (both would own one directory on the nodes), and select it with sparkform:server.model",
      );
    else seen.set(id, `sparkform:models.${name}`);
  }
}

/** Every staged model with its nodes resolved, in name order (resource and pre-warm order). */
export function resolveStaged(
  models: ModelsConfig,
  all: readonly string[],
): Record<string, StackModel> {
  return Object.fromEntries(
    Object.keys(models)
      .sort()
      .map((k) => [k, resolve(models[k] as ModelConfig, all)]),
  );
}

/** `sparkform:hfToken`: it goes into an HTTP Authorization header, where a newline would start a new header. */
const hfTokenSchema = z
  .string({
    error: "must be text; set it with `pulumi config set --secret sparkform:hfToken hf_…`",
  })
  .refine((t) => !/\s/.test(t) && !CONTROL.test(t), {
    message:
      "contains whitespace or a control character; set the token alone with " +
      "`pulumi config set --secret sparkform:hfToken hf_…`",
  });

/** The model stage: the model (and the staged ones) downloaded once and fanned out. */
export const stage = {
  name: "model",
  sections: [
    section({
      key: "model",
      schema: modelConfigSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (m, ctx) => resolve(m, ctx.all),
      nodePaths: (m) => [{ key: ["model", "modelsDir"], path: m.modelsDir }],
    }),
    /** More models staged beside `model`; `server.model` selects the served one. */
    section({
      key: "models",
      schema: modelsConfigSchema.optional(),
      structured: true,
      crossCheck: crossCheckStaged,
      // Staged models go to the model's nodes; without the model there is none to stage beside.
      resolve: (models, ctx) => {
        const primary = ctx.resolved.model as StackModel | undefined;
        return primary && resolveStaged(models, primary.nodes);
      },
      // Staged models may share the model's directory (each lives under <repo>/<commit>).
      nodePaths: (models) =>
        Object.entries(models).map(([k, m]) => ({
          key: ["models", k, "modelsDir"],
          path: m?.modelsDir,
        })),
    }),
  ],
  secrets: { hfToken: hfTokenSchema },
  outputs: [
    { key: "model", type: "object", cut: modelOutput },
    { key: "models", type: "object" },
  ],
} as const satisfies StageDescriptor;
