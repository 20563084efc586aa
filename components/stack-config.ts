// The stack's `sparkform:` configuration as a whole. Each stage owns its sections and secrets
// (components/<stage>/config.ts: the zod schema, its type, its defaults and a cross-check
// over the other sections), and components/stages.ts lists the stages; this module derives
// every key list from that list, validates in two phases and resolves the defaults that depend
// on other sections, in stage order. Phase one parses each section alone; phase two runs every section's
// cross-check over what the sections parse to (a failed field left out), so all problems come
// out together, one line each: `sparkform:<key.path>: what is wrong; the fix`.
//
//   readStackConfig(new pulumi.Config("sparkform"), { projectDir })   in a Pulumi program
//   parseStackConfig(raw, { projectDir })                              pure, for tests
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import {
  brandValidated,
  type OwnedNodePath,
  type ResolveContext,
  type Validated,
} from "./config/descriptor";
import {
  ConfigError,
  configError,
  configErrorMap,
  configIssueLines,
  configKeyPath,
} from "./config/errors";
import { nodePathOverlaps } from "./config/node-path";
import { type CheckContext, salvage } from "./config/section";
import { MODELS_DIR_DEFAULT, type StackModel } from "./model/config";
import type { NodeConfig } from "./node/config";
import { DESCRIPTORS, type ResolvedSections, SECRETS, type SecretKey, SECTIONS } from "./stages";

export { ConfigError, configError, configIssueLines } from "./config/errors";
export type { Validated } from "./config/descriptor";
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

/** Keys read with getSecret: their values are never part of the parsed data. */
export const secretConfigKeys = Object.keys(SECRETS) as SecretKey[];
/** Every key sparkform reads; any other `sparkform:` key is a typo or a leftover. */
export const stackConfigKeys: readonly string[] = [
  ...SECTIONS.map((s) => s.key),
  ...secretConfigKeys,
];
const structuredKeys = new Set<string>(SECTIONS.filter((s) => s.structured).map((s) => s.key));

/**
 * The secrets' plain text, checked so a pasted-wrong key or token is a config error like any
 * other. Its messages never quote the value, and the value never joins the parsed data.
 */
const secretsSchema = z.object(
  Object.fromEntries(Object.entries(SECRETS).map(([k, schema]) => [k, schema.optional()])),
);

/**
 * Each section as parseStackConfig hands it out: branded Validated, so a stage's `config:`
 * accepts only what went through the schema, the cross-checks and the resolve (a staged model
 * is branded on its own: each is a Model stage's config).
 */
export type ValidatedSections = {
  [K in keyof ResolvedSections]?: K extends "models"
    ? Record<string, Validated<StackModel>>
    : Validated<NonNullable<ResolvedSections[K]>>;
};

/** The whole `sparkform:` configuration, validated and with every default applied. */
export interface StackConfigData extends Omit<ValidatedSections, "nodes"> {
  nodes: Validated<NodeConfig[]>;
  /** Directories whose free space each node's fact sheet reports: the models dir, the tree. */
  diskPaths: string[];
}

/** StackConfigData plus the secrets, which stay Outputs (never plain data). */
// privateKey: key text for every node, if not given as a file; hfToken: the Hugging Face token
// (only the downloading node sees it); serverApiKey: llama-server's API key (required for a
// non-loopback bind).
export type StackConfig = StackConfigData & { [K in SecretKey]?: pulumi.Output<string> };

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
  const s: Record<string, unknown> = Object.fromEntries(
    SECTIONS.map((sec) => [sec.key, salvage(sec.schema, values[sec.key])]),
  );
  const nodes = (Array.isArray(s.nodes) ? s.nodes : []) as Partial<NodeConfig>[];
  s.nodes = nodes;
  const names = nodes.flatMap((n) => (n.name === undefined ? [] : [n.name]));
  const ctx: CheckContext<never> = {
    sections: s as never,
    names,
    isNode: (n) => names.length === 0 || names.includes(n),
    list: [...new Set(names)].join(", "),
    first: nodes[0]?.name,
    add,
    reported: (p) => reported.some((r) => p.every((x, i) => r[i] === x)),
    ...(opts.projectDir !== undefined ? { projectDir: opts.projectDir } : {}),
    secrets,
  };
  for (const sec of SECTIONS) {
    const section = s[sec.key];
    if (section !== undefined) sec.crossCheck?.(section, ctx);
  }
  for (const o of pathOverlaps(s)) add(o.key, o.message);
  return lines;
}

/**
 * The node paths each stage owns, none overlapping another stage's nor sparkform's cache: each
 * path against the other stages' paths before it. A stage's own paths may share a directory
 * (staged models live beside the model, each under <repo>/<commit>).
 */
function pathOverlaps(
  s: Record<string, unknown>,
): { key: readonly PropertyKey[]; message: string }[] {
  const owned = DESCRIPTORS.flatMap((stage) =>
    stage.sections.flatMap((sec) => {
      const value = s[sec.key];
      return sec.nodePaths && value !== undefined
        ? sec.nodePaths(value).map((p: OwnedNodePath) => ({ stage: stage.name, ...p }))
        : [];
    }),
  );
  return owned.flatMap((b, j) =>
    nodePathOverlaps([...owned.slice(0, j).filter((a) => a.stage !== b.stage), b]).filter(
      (o) => o.key === b.key,
    ),
  );
}

/** Defaults that depend on other sections, applied once the whole config is valid. */
function resolve(parsed: Record<string, unknown>, opts: ParseOptions): StackConfigData {
  const nodes = parsed.nodes as NodeConfig[];
  const all = nodes.map((n) => n.name);
  const resolved: Record<string, unknown> = {};
  const ctx: ResolveContext = {
    all,
    first: all[0] as string,
    ...(opts.projectDir !== undefined ? { projectDir: opts.projectDir } : {}),
    resolved,
  };
  for (const sec of SECTIONS) {
    const value = parsed[sec.key];
    if (value === undefined) continue;
    const r = sec.resolve ? sec.resolve(value, ctx) : value;
    if (r !== undefined) resolved[sec.key] = r;
  }
  // Branded only now, with every section checked and resolved: the stages trust it.
  const branded = Object.fromEntries(
    Object.entries(resolved).map(([k, v]) => [
      k,
      k === "models"
        ? brandValidated(
            Object.fromEntries(
              Object.entries(v as Record<string, unknown>).map(([n, m]) => [n, brandValidated(m)]),
            ),
          )
        : brandValidated(v),
    ]),
  );
  const model = parsed.model as { modelsDir?: string } | undefined;
  const tree = parsed.tree as { dest?: string } | undefined;
  return {
    ...(branded as ValidatedSections),
    nodes: brandValidated(nodes),
    diskPaths: [model?.modelsDir ?? MODELS_DIR_DEFAULT, tree?.dest ?? "~"],
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
  for (const { key: k, schema } of SECTIONS) {
    const r = schema.safeParse(values[k], { error: configErrorMap });
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
  return resolve(parsed, opts);
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
  const held = secretConfigKeys.flatMap((k) => {
    const v = present.includes(k) ? config.getSecret(k) : undefined;
    return v ? [[k, v] as const] : [];
  });
  return { ...data, ...Object.fromEntries(held) };
}
