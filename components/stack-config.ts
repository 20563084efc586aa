// The stack's `sparkform:` configuration as a whole. Each stage owns its section
// (components/<stage>/config.ts: the zod schema, its type, its defaults and a cross-check
// over the other sections); this module only lists the sections, from which every key list is
// derived, holds the secrets, validates in two phases and resolves the defaults that depend on
// other sections. Phase one parses each section alone; phase two runs every section's
// cross-check over what the sections parse to (a failed field left out), so all problems come
// out together, one line each: `sparkform:<key.path>: what is wrong; the fix`.
//
//   readStackConfig(new pulumi.Config("sparkform"), { projectDir })   in a Pulumi program
//   parseStackConfig(raw, { projectDir })                              pure, for tests
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import * as build from "./build/config";
import {
  ConfigError,
  configError,
  configErrorMap,
  configIssueLines,
  configKeyPath,
} from "./config/errors";
import { CONTROL, nodePathOverlaps } from "./config/node-path";
import { type CheckContext, type Salvaged, salvage } from "./config/section";
import * as fabric from "./fabric/config";
import * as model from "./model/config";
import * as node from "./node/config";
import * as worker from "./rpc-worker/config";
import * as server from "./serving/config";
import * as toolchain from "./toolchain/config";
import * as tree from "./tree/config";

export { ConfigError, configError, configIssueLines } from "./config/errors";
export {
  type NodePath,
  NodePathError,
  normaliseNodePath,
  SPARKFORM_CACHE_DIR,
} from "./config/node-path";
export { RSS_LIMIT_FLOOR } from "./config/rss-guard";
export { CACHE_FROM_NONE, type StackBuild } from "./build/config";
export { type StackModel } from "./model/config";
export { type NodeConfig, SSH_PORT_DEFAULT, sshTarget } from "./node/config";
export { type StackWorker } from "./rpc-worker/config";
export { type StackServer } from "./serving/config";
export { type StackToolchain } from "./toolchain/config";
export { type Exclusion, type TreeConfig as StackTree } from "./tree/config";

/** Every non-secret key: its schema, and whether it is a YAML map or list (read with getObject). */
const SECTIONS = {
  nodes: { schema: node.nodesSchema, structured: true },
  /** Private key file on the control node for every node (else ssh's defaults / agent). */
  sshKeyPath: { schema: node.controlPathSchema.optional(), structured: false },
  /** An ssh_config to use instead of ~/.ssh/config. */
  sshConfigPath: { schema: node.controlPathSchema.optional(), structured: false },
  toolchain: { schema: toolchain.toolchainSchema.optional(), structured: true },
  tree: { schema: tree.treeSchema.optional(), structured: true },
  build: { schema: build.buildConfigSchema.optional(), structured: true },
  fabric: { schema: fabric.fabricConfigSchema.optional(), structured: true },
  model: { schema: model.modelConfigSchema.optional(), structured: true },
  /** More models staged beside `model`; `server.model` selects the served one. */
  models: { schema: model.modelsConfigSchema.optional(), structured: true },
  worker: { schema: worker.workerSchema.optional(), structured: true },
  server: { schema: server.serverConfigSchema.optional(), structured: true },
} as const;

type Key = keyof typeof SECTIONS;
type Parsed = { [K in Key]: z.output<(typeof SECTIONS)[K]["schema"]> };
/** Each section as far as it parses; undefined: not set. */
type Partial_ = { [K in Key]: Salvaged<NonNullable<Parsed[K]>> | undefined } & {
  nodes: Salvaged<node.NodeConfig[]>;
};
type Check<K extends Key> = (
  section: NonNullable<Partial_[K]>,
  ctx: CheckContext<Partial_>,
) => void;

/** Each section's cross-check, in the order its problems are listed. */
const CHECKS: { [K in Key]?: Check<K> } = {
  nodes: node.crossCheck,
  toolchain: toolchain.crossCheck,
  build: build.crossCheck,
  model: model.crossCheck,
  models: model.crossCheckStaged,
  fabric: fabric.crossCheck,
  worker: worker.crossCheck,
  server: server.crossCheck,
  tree: tree.crossCheck,
};

/** Keys read with getSecret: their values are never part of the parsed data. */
export const secretConfigKeys = ["privateKey", "hfToken", "serverApiKey"] as const;
/** The config keys the cluster part reads (all under the `sparkform:` namespace). */
export const configKeys = (Object.keys(SECTIONS) as Key[]).filter(
  (k) => k !== "model" && k !== "models" && k !== "worker" && k !== "server",
);
/** Every key sparkform reads; any other `sparkform:` key is a typo or a leftover. */
export const stackConfigKeys: readonly string[] = [...Object.keys(SECTIONS), ...secretConfigKeys];
const structuredKeys = new Set<string>(
  (Object.keys(SECTIONS) as Key[]).filter((k) => SECTIONS[k].structured),
);

/**
 * The secrets' plain text, checked so a pasted-wrong key or token is a config error like any
 * other. Its messages never quote the value, and the value never joins the parsed data.
 */
const secretsSchema = z.object({
  privateKey: z
    .string({
      error:
        "must be text; set it with `pulumi config set --secret sparkform:privateKey < ~/.ssh/id_ed25519`",
    })
    .refine((k) => /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(k), {
      message:
        "is not a PEM/OpenSSH private key; set the key file's whole text with " +
        "`pulumi config set --secret sparkform:privateKey < ~/.ssh/id_ed25519`",
    })
    .optional(),
  hfToken: z
    .string({
      error: "must be text; set it with `pulumi config set --secret sparkform:hfToken hf_…`",
    })
    // It goes into an HTTP Authorization header: a newline there would start a new header.
    .refine((t) => !/\s/.test(t) && !CONTROL.test(t), {
      message:
        "contains whitespace or a control character; set the token alone with " +
        "`pulumi config set --secret sparkform:hfToken hf_…`",
    })
    .optional(),
  serverApiKey: server.serverApiKeySchema.optional(),
});

/** The whole `sparkform:` configuration, validated and with every default applied. */
export interface StackConfigData extends node.SshSettings {
  nodes: node.NodeConfig[];
  toolchain?: toolchain.StackToolchain;
  tree?: tree.TreeConfig;
  build?: build.StackBuild;
  model?: model.StackModel;
  /** Staged models by name (sorted), each with its nodes resolved (default: the model's nodes). */
  models?: Record<string, model.StackModel>;
  fabric?: fabric.FabricConfig;
  worker?: worker.StackWorker;
  server?: server.StackServer;
  /** Directories whose free space each node's fact sheet reports: the models dir, the tree. */
  diskPaths: string[];
}

/** StackConfigData plus the secrets, which stay Outputs (never plain data). */
export interface StackConfig extends StackConfigData {
  /** `sparkform:privateKey`: private key text for every node, if not given as a file. */
  privateKey?: pulumi.Output<string>;
  /** `sparkform:hfToken`: the Hugging Face token; only the downloading node sees it. */
  hfToken?: pulumi.Output<string>;
  /** `sparkform:serverApiKey`: llama-server's API key (required for a non-loopback bind). */
  serverApiKey?: pulumi.Output<string>;
}

export interface ParseOptions {
  /**
   * Directory that a relative tree.source is relative to (the project). When given, tree.source
   * is resolved against it and must be a directory.
   */
  readonly projectDir?: string;
}

/**
 * Phase two: every section's cross-check over the sections as far as they parse, then the node
 * paths, which belong to no one section. `reported` holds the key paths phase one reported.
 */
function crossChecks(
  values: Record<string, unknown>,
  reported: readonly (readonly PropertyKey[])[],
  opts: ParseOptions,
  secrets: ReadonlySet<string>,
): string[] {
  const lines: string[] = [];
  const add = (p: readonly PropertyKey[], message: string) =>
    lines.push(`${configKeyPath(p)}: ${message}`);
  const s = Object.fromEntries(
    (Object.keys(SECTIONS) as Key[]).map((k) => [k, salvage(SECTIONS[k].schema, values[k])]),
  ) as Partial_;
  s.nodes = Array.isArray(s.nodes) ? s.nodes : [];
  const names = s.nodes.flatMap((n) => (n.name === undefined ? [] : [n.name]));
  const ctx: CheckContext<Partial_> = {
    sections: s,
    names,
    isNode: (n) => names.length === 0 || names.includes(n),
    list: [...new Set(names)].join(", "),
    first: s.nodes[0]?.name,
    add,
    reported: (p) => reported.some((r) => p.every((x, i) => r[i] === x)),
    ...(opts.projectDir !== undefined ? { projectDir: opts.projectDir } : {}),
    secrets,
  };
  for (const k of Object.keys(CHECKS) as Key[]) {
    const section = s[k];
    if (section !== undefined) (CHECKS[k] as Check<Key>)(section as never, ctx);
  }
  const overlaps = nodePathOverlaps([
    { key: ["toolchain", "path"], path: s.toolchain?.path },
    { key: ["tree", "dest"], path: s.tree?.dest },
    { key: ["model", "modelsDir"], path: s.model?.modelsDir },
  ]);
  // Staged models may share the model's directory (each lives under <repo>/<commit>), but not
  // the toolchain's, the tree's or sparkform's cache.
  for (const [k, m] of Object.entries(s.models ?? {}))
    overlaps.push(
      ...nodePathOverlaps([
        { key: ["toolchain", "path"], path: s.toolchain?.path },
        { key: ["tree", "dest"], path: s.tree?.dest },
        { key: ["models", k, "modelsDir"], path: m?.modelsDir },
      ]).filter((o) => o.key[0] === "models"),
    );
  for (const o of overlaps) add(o.key, o.message);
  return lines;
}

/** Defaults that depend on other sections, applied once the whole config is valid. */
function resolve(c: Parsed, opts: ParseOptions): StackConfigData {
  const all = c.nodes.map((n) => n.name);
  const first = all[0] as string;
  const w = c.worker ? worker.resolve(c.worker, first) : undefined;
  const m = c.model ? model.resolve(c.model, all) : undefined;
  return {
    nodes: c.nodes,
    ...(c.sshKeyPath !== undefined ? { sshKeyPath: c.sshKeyPath } : {}),
    ...(c.sshConfigPath !== undefined ? { sshConfigPath: c.sshConfigPath } : {}),
    ...(c.toolchain ? { toolchain: toolchain.resolve(c.toolchain, first) } : {}),
    ...(c.tree ? { tree: tree.resolve(c.tree, opts.projectDir) } : {}),
    ...(c.build ? { build: build.resolve(c.build, first) } : {}),
    ...(m ? { model: m } : {}),
    ...(c.models && m ? { models: model.resolveStaged(c.models, m.nodes) } : {}),
    ...(c.fabric ? { fabric: c.fabric } : {}),
    ...(w ? { worker: w } : {}),
    ...(c.server ? { server: server.resolve(c.server, w, first) } : {}),
    diskPaths: [c.model?.modelsDir ?? model.MODELS_DIR_DEFAULT, c.tree?.dest ?? "~"],
  };
}

/** The line for `sparkform:` keys this program does not read (the message index.ts had). */
function unknownKeysLine(unknown: readonly string[]): string {
  // `pulumi config set sparkform:server.model b` (no --path) makes a key with a dot in its name.
  const dotted = unknown.filter((k) => stackConfigKeys.includes(k.split(".")[0] ?? ""));
  return (
    `unknown stack configuration ${unknown.map((k) => `sparkform:${k}`).join(", ")}: sparkform reads ` +
    `${stackConfigKeys.map((k) => `sparkform:${k}`).join(", ")}. ` +
    (dotted.length > 0
      ? `${dotted.map((k) => `sparkform:${k}`).join(", ")} ${dotted.length === 1 ? "is a key" : "are keys"} with a dot in ` +
        `the name, set without --path: remove with \`pulumi config rm sparkform:${dotted[0]}\` and set it again with ` +
        `\`pulumi config set --path sparkform:${dotted[0]} <value>\`.`
      : "Fix the name, or remove it with `pulumi config rm`.")
  );
}

/**
 * Validate raw config values (structured keys as parsed YAML, the rest as strings; unset or
 * empty values are left out). Returns the config with every default applied; throws one
 * ConfigError listing every problem, `sparkform:<key>[i].field: what is wrong; the fix`.
 * Secret keys' text is checked (privateKey is a private key, hfToken one word) but is not
 * part of the result: readStackConfig hands the secrets out as Outputs.
 */
export function parseStackConfig(
  raw: Record<string, unknown>,
  opts: ParseOptions = {},
): StackConfigData {
  const known = new Set<string>(stackConfigKeys);
  const unknown = Object.keys(raw)
    .filter((k) => !known.has(k))
    .sort();
  const secrets = new Set<string>(secretConfigKeys);
  // Which secrets are set (not their values): a non-loopback bind needs serverApiKey.
  const present = new Set<string>(
    secretConfigKeys.filter((k) => raw[k] !== undefined && raw[k] !== null && raw[k] !== ""),
  );
  const values = Object.fromEntries(
    Object.entries(raw).filter(
      ([k, v]) => known.has(k) && !secrets.has(k) && v !== undefined && v !== "",
    ),
  );
  // Phase one: each section alone.
  const parsed: Record<string, unknown> = {};
  const issues: string[] = [];
  const reported: PropertyKey[][] = [];
  for (const k of Object.keys(SECTIONS) as Key[]) {
    const r = SECTIONS[k].schema.safeParse(values[k], { error: configErrorMap });
    if (r.success) {
      parsed[k] = r.data;
      continue;
    }
    issues.push(...configIssueLines(r.error.issues, [k]));
    reported.push(...r.error.issues.map((i) => [k, ...i.path]));
  }
  // The secrets are checked on their own schema, and only its messages are kept.
  const s = secretsSchema.safeParse(
    Object.fromEntries(secretConfigKeys.map((k) => [k, raw[k] === "" ? undefined : raw[k]])),
  );
  const lines = [
    ...(unknown.length > 0 ? [unknownKeysLine(unknown)] : []),
    ...issues,
    ...crossChecks(values, reported, opts, present),
    ...(s.success ? [] : configIssueLines(s.error.issues)),
  ];
  if (lines.length > 0) throw configError(lines);
  return resolve(parsed as Parsed, opts);
}

/**
 * Read and validate the stack's `sparkform:` configuration in a Pulumi program: structured
 * keys with getObject, plain strings with get, the secrets with getSecret (they stay
 * Outputs), any other key present in the stack is an error. A config mistake throws a
 * pulumi.RunError (printed without a stack trace) carrying the ConfigError's lines.
 */
export function readStackConfig(config: pulumi.Config, opts: ParseOptions = {}): StackConfig {
  const prefix = `${config.name}:`;
  const all = pulumi.runtime.allConfig();
  const present = Object.keys(all)
    .filter((k) => k.startsWith(prefix))
    .map((k) => k.slice(prefix.length));
  const secrets = new Set<string>(secretConfigKeys);
  const known = new Set<string>(stackConfigKeys);
  const raw: Record<string, unknown> = {};
  const unreadable: string[] = [];
  for (const k of present) {
    if (secrets.has(k)) {
      // Plain text only to check it (allConfig, as config.get would warn about a secret);
      // parseStackConfig keeps none of it, and the program gets the Output below.
      raw[k] = all[`${prefix}${k}`];
      continue;
    }
    if (!known.has(k)) {
      // Never read: a mistyped key may hold a secret. Its name is enough for the error.
      raw[k] = null;
    } else if (structuredKeys.has(k)) {
      try {
        raw[k] = config.getObject<unknown>(k);
      } catch {
        unreadable.push(
          `sparkform:${k}: is not a YAML map or list; write it as YAML in stacks/Pulumi.<stack>.yaml, ` +
            `or set its fields with \`pulumi config set --path sparkform:${k}.<field> <value>\``,
        );
      }
    } else {
      raw[k] = config.get(k);
    }
  }
  let data: StackConfigData;
  try {
    if (unreadable.length > 0) {
      try {
        parseStackConfig(raw, opts);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        throw configError([...unreadable, ...err.lines]);
      }
      throw configError(unreadable);
    }
    data = parseStackConfig(raw, opts);
  } catch (err) {
    if (err instanceof ConfigError) throw new pulumi.RunError(err.message);
    throw err;
  }
  const secret = (k: (typeof secretConfigKeys)[number]) =>
    present.includes(k) ? config.getSecret(k) : undefined;
  const privateKey = secret("privateKey");
  const hfToken = secret("hfToken");
  const serverApiKey = secret("serverApiKey");
  return {
    ...data,
    ...(privateKey ? { privateKey } : {}),
    ...(hfToken ? { hfToken } : {}),
    ...(serverApiKey ? { serverApiKey } : {}),
  };
}
