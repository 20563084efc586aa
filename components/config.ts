// The stack's `sparkform:` configuration: one schema for every key (the secrets included),
// validated with zod before anything runs on a node. Every default is set here, every
// cross-reference (a node named by toolchain.source, build.cacheFrom or model.nodes exists,
// node paths do not overlap, …) is checked here, and all problems are reported together, one
// line each: `sparkform:<key.path>: what is wrong; the fix`.
//
//   readStackConfig(new pulumi.Config("sparkform"), { projectDir })   in a Pulumi program
//   parseStackConfig(raw, { projectDir })                              pure, for tests
import * as pulumi from "@pulumi/pulumi";
import { existsSync, statSync } from "node:fs";
import { isIP } from "node:net";
import * as path from "node:path";
import { z } from "zod";
import {
  type BuildConfig,
  type BuildDistribute,
  buildConfigSchema,
  buildDistribute,
  unexcludedCommandOutputs,
} from "./build/config";
import { DEFAULT_ARTIFACTS, DEFAULT_TARGETS } from "./build/plan";
import {
  ConfigError,
  configError,
  configErrorMap,
  configIssueLines,
  configKeyPath,
  shown,
} from "./config/errors";
import {
  type NodePath,
  nodePathRelation,
  nodePathSchema,
  normaliseNodePath,
} from "./config/node-path";
import { rssGuardKeys } from "./config/rss-guard";
import { type FabricConfig, fabricConfigSchema, railIssues } from "./fabric/config";
import { MODELS_DIR_DEFAULT, type ModelConfig, modelConfigSchema } from "./model/config";
import {
  isLoopback,
  SERVER_API_KEY_FIX,
  SERVER_BIND_DEFAULT,
  type ServerConfig,
  serverApiKeySchema,
  serverConfigSchema,
} from "./serving/config";
import { DEFAULT_PORT, unsafeBind } from "./rpc-worker/plan";
import type { SshTarget } from "./transport";

export { ConfigError, configError, configIssueLines } from "./config/errors";
export { type NodePath, NodePathError, normaliseNodePath } from "./config/node-path";
export { RSS_LIMIT_FLOOR } from "./config/rss-guard";
export {
  MODEL_ENDPOINT_DEFAULT,
  MODEL_RETRIES_DEFAULT,
  MODEL_VERIFY_DEFAULT,
  MODELS_DIR_DEFAULT,
} from "./model/config";

/** The ssh port unless a node says otherwise. */
export const SSH_PORT_DEFAULT = 22;
/** `sparkform:build.cacheFrom` value for "every node builds on its own, no cache seeding". */
export const CACHE_FROM_NONE = "none";
/**
 * sparkform's own directory on every node (build dirs and the compiler cache, see
 * components/build/plan.ts CACHE_REL): no configured node path may be in it or contain it.
 */
export const SPARKFORM_CACHE_DIR = "~/.cache/sparkform";

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Node names become host-key aliases, file names and resource names. */
const nodeName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/,
    "use letters, digits, '_', '.' and '-' (max 63), starting with a letter or digit; e.g. spark-1",
  );

const hostKey = z
  .string()
  .regex(
    /^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,2}( .*)?$/,
    "must be the node's public host key, '<type> <base64>'; copy it from the node's " +
      "/etc/ssh/ssh_host_ed25519_key.pub or `ssh-keyscan -t ed25519 <host>` (host key checking is never disabled)",
  );

/** Hostnames, IPv4, IPv6 (bare or bracketed), ssh_config aliases; as transport/connection.ts. */
const HOST = /^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|\[?[0-9A-Fa-f:.]+(?:%[A-Za-z0-9]+)?\]?)$/;

const host = z.string().refine((h) => HOST.test(h), {
  error: (iss) =>
    `${shown(iss.input)} is not a hostname, IP address or ssh_config alias; give the node's ` +
    "management address (e.g. 10.0.0.2) or a Host alias of the ssh_config",
});

/**
 * The node's fabric address: an IP literal only. It is the address rpc-server binds to and
 * peers connect to, so a name, a port or an ssh option here would reach the wrong place.
 */
const fabricAddress = z.string().refine((a) => /^[0-9A-Fa-f:.]+$/.test(a) && isIP(a) !== 0, {
  error: (iss) =>
    `${shown(iss.input)} is not an IP address; give the node's fabric IPv4 or IPv6 address, ` +
    "without port or brackets (e.g. 192.168.100.11 or fd00::11)",
});

/** A file on the control node (passed to ssh as an option value). */
const controlPath = z
  .string()
  .min(1)
  .refine((p) => !CONTROL.test(p), {
    message: "contains a control character; write the path on one line",
  })
  .refine((p) => !p.startsWith("-"), {
    message: "starts with '-', which ssh would read as an option; write it as ./-… or in full",
  });

export const nodeSchema = z.strictObject({
  name: nodeName,
  /** Address or ssh_config alias the control node connects to (management network). */
  host,
  /** Default 22. */
  port: z.number().int().min(1).max(65535).default(SSH_PORT_DEFAULT),
  user: z
    .string()
    .regex(
      /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/,
      "is not a valid user name; give the login user on the node (e.g. spark)",
    ),
  hostKey,
  /** The node's address on the fabric (node to node only: toolchain and model copies). */
  fabricAddress: fabricAddress.optional(),
});

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
  source: nodeName.optional(),
  /** Install directories, relative to `path`, put on PATH directly (no shims). */
  binDirs: z.array(binDir).min(1, "lists no directory; name the install's bin directories"),
  /** Version probe, run with binDirs on PATH (an argv, never a shell string). */
  probe: argv,
  /** Text the probe's output must contain (e.g. "Elixir 1.18"). */
  expect: z.string().min(1, "is empty; give text the probe prints (e.g. Elixir 1.18)"),
});

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

const MAX_NODES = 8;

/**
 * `sparkform:worker`: which node is the client and which run ggml-rpc-server
 * (components/rpc-worker/). Each worker binds only its `fabricAddress`.
 */
export const workerSchema = z.strictObject({
  /** The node that runs the client (default: the first node). */
  client: nodeName.optional(),
  /** The worker nodes (never the client). */
  nodes: z.array(nodeName).min(1, "list at least one worker node, e.g. [spark-2]"),
  port: z.number().int().min(1024).max(65535).default(DEFAULT_PORT),
  /** CPU threads for the server (0 = its default, half the cores). */
  threads: z.number().int().min(0).max(1024).default(0),
  /** Devices to expose (`-d`), e.g. [CUDA0]; default all accelerators, else the CPU. */
  devices: z
    .array(z.string().regex(/^[A-Za-z0-9_]+$/, "is not a device name like CUDA0"))
    .default([]),
  /** The tensor cache (`-c`, ~/.cache/llama.cpp/rpc). */
  cache: z.boolean().default(true),
  /** GGML_RPC_DEBUG=1 (the transport evidence needs it on real fabrics). */
  debug: z.boolean().default(true),
  /** The RSS guard beside the worker (components/config/rss-guard.ts). */
  ...rssGuardKeys("worker"),
});

/** The schema of every non-secret key, before the cross-checks. */
const sectionsSchema = z.object({
  nodes: z
    .array(nodeSchema)
    .min(1, "list at least one node; add each node's name, host, user and hostKey")
    .max(
      MAX_NODES,
      `lists more nodes than the ${MAX_NODES} sparkform supports; list at most ${MAX_NODES}`,
    ),
  /** Private key file on the control node for every node (else ssh's defaults / agent). */
  sshKeyPath: controlPath.optional(),
  /** An ssh_config to use instead of ~/.ssh/config. */
  sshConfigPath: controlPath.optional(),
  toolchain: toolchainSchema.optional(),
  tree: treeSchema.optional(),
  /** The native build in the synced tree (needs `tree`); see components/build/config.ts. */
  build: buildConfigSchema.optional(),
  model: modelConfigSchema.optional(),
  /** The fabric's rails per node, topology, RDMA fact source, thresholds (components/fabric). */
  fabric: fabricConfigSchema.optional(),
  /** ggml-rpc-server on the worker nodes (needs `build`); see components/rpc-worker/. */
  worker: workerSchema.optional(),
  /** llama-server on the client node (needs `build` and `model`); see components/serving/. */
  server: serverConfigSchema.optional(),
});

type Sections = z.infer<typeof sectionsSchema>;
export type NodeConfig = z.infer<typeof nodeSchema>;
export type Exclusion = z.infer<typeof exclusionSchema>;

/** `sparkform:toolchain`, with `source` resolved to a node name. */
export type StackToolchain = z.infer<typeof toolchainSchema> & {
  /** The node that has the toolchain and copies it to the others (default: the first node). */
  source: string;
  /** `path` joined with each of `binDirs`: the directories a command gets on PATH. */
  binPaths: string[];
};
/** `sparkform:tree`; `source` is absolute when parsed with a projectDir. */
export type StackTree = z.infer<typeof treeSchema>;
/** `sparkform:build`, with the node and target defaults resolved. */
export type StackBuild = BuildConfig & {
  /** The node whose compiler cache seeds the others (default: the first node), or "none". */
  cacheFrom: string;
  /** CMake targets (default DEFAULT_TARGETS; [] with a build command). */
  targets: string[];
  /** Artifacts (default DEFAULT_ARTIFACTS; relative to the tree with a build command). */
  artifacts: string[];
  /** fan-out or build-each (default: fan-out for CUDA builds; build/config.ts buildDistribute). */
  distribute: BuildDistribute;
};
/** `sparkform:worker`, with `client` resolved (default: the first node). */
export type StackWorker = z.infer<typeof workerSchema> & { client: string };
/** `sparkform:model`, with `nodes` resolved (default: all nodes, in their order). */
export type StackModel = ModelConfig & { nodes: string[] };
/**
 * `sparkform:server`, with `node` resolved: default sparkform:worker.client, else the first
 * node. The API key is not here: it is the secret StackConfig.serverApiKey.
 */
export type StackServer = ServerConfig & { node: string };

/** The whole `sparkform:` configuration, validated and with every default applied. */
export interface StackConfigData {
  nodes: NodeConfig[];
  sshKeyPath?: string;
  sshConfigPath?: string;
  toolchain?: StackToolchain;
  tree?: StackTree;
  build?: StackBuild;
  model?: StackModel;
  fabric?: FabricConfig;
  worker?: StackWorker;
  server?: StackServer;
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

/** The config keys the cluster part reads (all under the `sparkform:` namespace). */
export const configKeys = [
  "nodes",
  "sshKeyPath",
  "sshConfigPath",
  "toolchain",
  "tree",
  "build",
  "fabric",
] as const;
/** Keys read with getSecret: their values are never part of the parsed data. */
export const secretConfigKeys = ["privateKey", "hfToken", "serverApiKey"] as const;
/** Every key sparkform reads; any other `sparkform:` key is a typo or a leftover. */
export const stackConfigKeys = [
  ...configKeys,
  "model",
  "worker",
  "server",
  ...secretConfigKeys,
] as const;
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
  serverApiKey: serverApiKeySchema.optional(),
});

/** Keys whose values are YAML maps or lists (read with getObject); the rest are strings. */
const structuredKeys = new Set<string>([
  "nodes",
  "toolchain",
  "tree",
  "build",
  "model",
  "fabric",
  "worker",
  "server",
]);

export interface ParseOptions {
  /**
   * Directory that a relative tree.source is relative to (the project). When given, tree.source
   * is resolved against it and must be a directory.
   */
  readonly projectDir?: string;
}

/** The value of `schema` for `v`, or undefined if it does not parse (its issues are reported). */
function valid<S extends z.ZodType>(schema: S, v: unknown): z.output<S> | undefined {
  const r = schema.safeParse(v);
  return r.success ? r.data : undefined;
}

/** `v[key]` when `v` is a map, else undefined: reading raw fields of a section that may be invalid. */
function field(v: unknown, key: string): unknown {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)[key]
    : undefined;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function nodePathOrUndefined(p: unknown): NodePath | undefined {
  if (typeof p !== "string") return undefined;
  try {
    return normaliseNodePath(p);
  } catch {
    return undefined; // the field's own schema reports it
  }
}

/**
 * The checks across keys. They run even when some field failed (zod skips an object's
 * refinements then) and read each field they need on its own, so that every problem comes out
 * together: a bad probe does not hide a toolchain.source that names no node.
 */
function crossChecks(
  v: Record<string, unknown>,
  ctx: z.RefinementCtx,
  opts: ParseOptions,
  secrets: ReadonlySet<string>,
): void {
  const add = (p: PropertyKey[], message: string) =>
    ctx.addIssue({ code: "custom", path: p, message, input: v });
  const names = Array.isArray(v.nodes) ? v.nodes.map((n) => str(field(n, "name"))) : undefined;
  const known = names?.filter((n): n is string => n !== undefined) ?? [];
  const list = [...new Set(known)].join(", ");

  const seen = new Set<string>();
  for (const n of known) {
    if (seen.has(n)) {
      add(["nodes"], `node names must be unique: ${JSON.stringify(n)} is given twice; rename one`);
    }
    seen.add(n);
  }
  // A reference is only judged against a list of nodes that is there.
  const isNode = (n: string) => known.length === 0 || known.includes(n);

  const source = str(field(v.toolchain, "source"));
  if (source !== undefined && !isNode(source)) {
    add(
      ["toolchain", "source"],
      `${JSON.stringify(source)} is not one of the nodes (${list}); name the node that ` +
        "has the toolchain, or leave it out for the first node",
    );
  }
  const cacheFrom = str(field(v.build, "cacheFrom"));
  if (cacheFrom !== undefined && cacheFrom !== CACHE_FROM_NONE && !isNode(cacheFrom)) {
    add(
      ["build", "cacheFrom"],
      `${JSON.stringify(cacheFrom)} is not one of the nodes (${list}), nor "none"; name the ` +
        'node whose compiler cache seeds the others, or "none" to build each node on its own',
    );
  }
  const modelNodes = field(v.model, "nodes");
  for (const [i, n] of (Array.isArray(modelNodes) ? modelNodes : []).entries()) {
    if (typeof n === "string" && n !== "" && !isNode(n)) {
      add(
        ["model", "nodes", i],
        `${JSON.stringify(n)} is not one of sparkform:nodes (${list}); name one of them, or leave ` +
          "model.nodes out for all nodes",
      );
    }
  }

  const fabric = valid(fabricConfigSchema, v.fabric);
  if (fabric && known.length > 0) {
    for (const i of railIssues(fabric.rails, known)) add(["fabric", ...i.path], i.message);
  }

  // The worker section: its nodes and client are configured nodes, with fabric addresses.
  if (v.worker !== undefined) {
    const client = str(field(v.worker, "client"));
    if (client && !isNode(client)) {
      add(
        ["worker", "client"],
        `${JSON.stringify(client)} is not one of the nodes (${list}); name the node that runs the client`,
      );
    }
    const first = Array.isArray(v.nodes) ? str(field(v.nodes[0], "name")) : undefined;
    const workerNodes = field(v.worker, "nodes");
    for (const [i, n] of (Array.isArray(workerNodes) ? workerNodes : []).entries()) {
      if (typeof n !== "string" || n === "") continue;
      if (!isNode(n)) {
        add(
          ["worker", "nodes", i],
          `${JSON.stringify(n)} is not one of sparkform:nodes (${list}); name one of them`,
        );
      } else if (n === (client ?? first)) {
        add(
          ["worker", "nodes", i],
          `${JSON.stringify(n)} is the client node; list only the other nodes, or set worker.client`,
        );
      }
    }
    if (v.build === undefined) {
      add(
        ["worker"],
        "runs the build's ggml-rpc-server, but sparkform:build is not set; set sparkform:build too",
      );
    }
    const port = field(v.worker, "port");
    workerAddressChecks(v, add, {
      client: client ?? first,
      workers: workerNodes,
      port: typeof port === "number" ? port : DEFAULT_PORT,
    });
  }

  if (v.server !== undefined) serverChecks(v, add, { isNode, list, secrets });

  if (v.build !== undefined && v.tree === undefined) {
    add(
      ["build"],
      "builds in the synced tree, but sparkform:tree is not set; set sparkform:tree too",
    );
  }
  const build = valid(buildConfigSchema, v.build);
  const exclude = valid(treeSchema.shape.exclude, field(v.tree, "exclude"));
  if (build && exclude) {
    const problem = unexcludedCommandOutputs(build, exclude);
    if (problem !== undefined) add(["build", "command"], problem);
  }
  const treeSource = str(field(v.tree, "source"));
  if (treeSource && opts.projectDir !== undefined) {
    const resolved = path.resolve(opts.projectDir, treeSource);
    if (!existsSync(resolved) || !statSync(resolved).isDirectory()) {
      add(
        ["tree", "source"],
        `${JSON.stringify(treeSource)} is not a directory (resolved to ${resolved}); point it at ` +
          "the working tree to sync",
      );
    }
  }

  // Node paths that sparkform syncs (--delete), replaces or removes must not share a directory.
  const dirs: { key: PropertyKey[]; path: NodePath }[] = [];
  const dir = (key: PropertyKey[], p: NodePath | undefined) => {
    if (p !== undefined) dirs.push({ key, path: p });
  };
  dir(["toolchain", "path"], nodePathOrUndefined(field(v.toolchain, "path")));
  dir(["tree", "dest"], nodePathOrUndefined(field(v.tree, "dest")));
  if (v.model !== undefined) {
    const modelsDir = field(v.model, "modelsDir");
    dir(["model", "modelsDir"], nodePathOrUndefined(modelsDir ?? MODELS_DIR_DEFAULT));
  }
  const cache = normaliseNodePath(SPARKFORM_CACHE_DIR);
  const words = { same: "is the same directory as", inside: "is inside", contains: "contains" };
  for (const [j, b] of dirs.entries()) {
    for (const a of dirs.slice(0, j)) {
      const rel = nodePathRelation(b.path, a.path);
      if (rel === "apart") continue;
      add(
        b.key,
        `${JSON.stringify(b.path.canonical)} ${words[rel]} ${configKeyPath(a.key)} ` +
          `(${JSON.stringify(a.path.canonical)}), and sparkform syncs, replaces or removes each on ` +
          "its own; give each its own directory, neither inside the other",
      );
    }
    const rel = nodePathRelation(b.path, cache);
    if (rel !== "apart") {
      add(
        b.key,
        `${JSON.stringify(b.path.canonical)} ${words[rel]} ${SPARKFORM_CACHE_DIR}, sparkform's ` +
          "build cache on each node; pick a directory outside it",
      );
    }
  }
}

/**
 * The worker's addresses at preview, naming the key: each worker binds its node's fabricAddress
 * (the RpcWorker's own check, unsafeBind, on the same values), and ggml-rpc at the pinned
 * llama.cpp cannot carry an IPv6 endpoint between a worker and its client.
 */
function workerAddressChecks(
  v: Record<string, unknown>,
  add: (p: PropertyKey[], message: string) => void,
  o: { client: string | undefined; workers: unknown; port: number },
): void {
  const { client } = o;
  const nodes = Array.isArray(v.nodes) ? v.nodes : [];
  const workers = Array.isArray(o.workers) ? o.workers.filter((n) => n !== client) : [];
  for (const [i, n] of nodes.entries()) {
    const name = str(field(n, "name"));
    const address = str(field(n, "fabricAddress"));
    if (name === undefined || address === undefined || isIP(address) === 0) continue;
    const isWorker = workers.includes(name);
    if (!isWorker && name !== client) continue;
    const key = ["nodes", i, "fabricAddress"];
    const why = isWorker
      ? unsafeBind(address, {
          managementAddress: str(field(n, "host")) ?? "",
          remoteClient: true,
        })
      : undefined;
    if (why !== undefined) {
      add(
        key,
        `the worker on ${name} binds it, and it must not: ${why}; give ${name}'s fabric address ` +
          "(its own link to the other nodes): ggml-rpc-server has no authentication",
      );
    } else if (isIP(address) === 6) {
      add(
        key,
        `${JSON.stringify(address)} is IPv6, and ${name} is in sparkform:worker: the pinned ` +
          "llama.cpp's ggml-rpc splits an endpoint at its first ':', so an IPv6 one " +
          `(--rpc ${address}:${o.port}) fails when the model loads; give ${name} an IPv4 ` +
          "fabric address (e.g. 192.168.100.11) until the pinned llama.cpp parses IPv6 endpoints",
      );
    }
  }
}

/** The server section's cross-references: its node, the memory it declares, its API key. */
function serverChecks(
  v: Record<string, unknown>,
  add: (p: PropertyKey[], message: string) => void,
  o: { isNode: (n: string) => boolean; list: string; secrets: ReadonlySet<string> },
): void {
  const first = Array.isArray(v.nodes) ? str(field(v.nodes[0], "name")) : undefined;
  const node = str(field(v.server, "node")) ?? str(field(v.worker, "client")) ?? first;
  const named = str(field(v.server, "node"));
  if (named !== undefined && named !== "" && !o.isNode(named)) {
    add(
      ["server", "node"],
      `${JSON.stringify(named)} is not one of the nodes (${o.list}); name the node that runs ` +
        "llama-server (the RPC client), or leave it out for sparkform:worker.client",
    );
  }
  const memory = field(v.server, "memory");
  if (memory !== null && typeof memory === "object" && !Array.isArray(memory)) {
    for (const n of Object.keys(memory)) {
      if (!o.isNode(n))
        add(
          ["server", "memory", n],
          `names ${JSON.stringify(n)}, which is not one of the nodes (${o.list}); declare the ` +
            "usable bytes of a configured node, or remove this entry",
        );
    }
  }
  const bind = str(field(v.server, "bind")) ?? SERVER_BIND_DEFAULT;
  if (isIP(bind) !== 0 && !isLoopback(bind) && !o.secrets.has("serverApiKey")) {
    add(
      ["server", "bind"],
      `${bind} is not loopback, so every host that reaches it could use the server, and ` +
        "llama-server has no authentication of its own without a key; set the secret with " +
        `\`${SERVER_API_KEY_FIX}\`, or bind 127.0.0.1 (the default)`,
    );
  }
  if (v.build === undefined)
    add(
      ["server"],
      "runs the build's llama-server, but sparkform:build is not set; set sparkform:build too",
    );
  if (v.model === undefined) {
    add(["server"], "serves sparkform:model, which is not set; set sparkform:model too");
  } else {
    const modelNodes = field(v.model, "nodes");
    if (node !== undefined && Array.isArray(modelNodes) && !modelNodes.includes(node))
      add(
        ["server"],
        `runs on ${node}, which is not in sparkform:model.nodes (${modelNodes.join(", ")}); ` +
          `add ${node} there (llama-server loads the model from its own disk)`,
      );
  }
  if (node !== undefined && v.worker !== undefined) {
    const client = str(field(v.worker, "client")) ?? first;
    if (client !== undefined && node !== client)
      add(
        ["server", "node"],
        `${JSON.stringify(node)} is not the RPC client (sparkform:worker.client is ${client}); ` +
          "llama-server is the client of the workers, so run it there: leave server.node out",
      );
  }
}

/** Defaults that depend on other keys, applied once the whole config is valid. */
function resolve(c: Sections, opts: ParseOptions): StackConfigData {
  const all = c.nodes.map((n) => n.name);
  const first = all[0] as string;
  const tc = c.toolchain;
  const b = c.build;
  return {
    nodes: c.nodes,
    ...(c.sshKeyPath !== undefined ? { sshKeyPath: c.sshKeyPath } : {}),
    ...(c.sshConfigPath !== undefined ? { sshConfigPath: c.sshConfigPath } : {}),
    ...(tc
      ? {
          toolchain: {
            ...tc,
            source: tc.source ?? first,
            binPaths: tc.binDirs.map((d) =>
              d === "." ? tc.path : `${tc.path}/${d.replace(/\/$/, "")}`,
            ),
          },
        }
      : {}),
    ...(c.tree
      ? {
          tree: {
            ...c.tree,
            ...(opts.projectDir !== undefined
              ? { source: path.resolve(opts.projectDir, c.tree.source) }
              : {}),
          },
        }
      : {}),
    ...(b
      ? {
          build: {
            ...b,
            cacheFrom: b.cacheFrom ?? first,
            targets: b.command ? [] : [...(b.targets ?? DEFAULT_TARGETS)],
            artifacts: [...(b.artifacts ?? (b.command ? [] : DEFAULT_ARTIFACTS))],
            distribute: buildDistribute(b),
          },
        }
      : {}),
    ...(c.model ? { model: { ...c.model, nodes: c.model.nodes ?? all } } : {}),
    ...(c.fabric ? { fabric: c.fabric } : {}),
    ...(c.worker ? { worker: { ...c.worker, client: c.worker.client ?? first } } : {}),
    ...(c.server
      ? { server: { ...c.server, node: c.server.node ?? c.worker?.client ?? first } }
      : {}),
    diskPaths: [c.model?.modelsDir ?? MODELS_DIR_DEFAULT, c.tree?.dest ?? "~"],
  };
}

/** The line for `sparkform:` keys this program does not read (the message index.ts had). */
function unknownKeysLine(unknown: readonly string[]): string {
  return (
    `unknown stack configuration ${unknown.map((k) => `sparkform:${k}`).join(", ")}: sparkform reads ` +
    `${stackConfigKeys.map((k) => `sparkform:${k}`).join(", ")}. ` +
    "Fix the name, or remove it with `pulumi config rm`."
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
  const present = new Set(
    secretConfigKeys.filter((k) => raw[k] !== undefined && raw[k] !== null && raw[k] !== ""),
  );
  const values = Object.fromEntries(
    Object.entries(raw).filter(
      ([k, v]) => known.has(k) && !secrets.has(k) && v !== undefined && v !== "",
    ),
  );
  const schema = sectionsSchema
    .superRefine((v, ctx) => crossChecks(v as Record<string, unknown>, ctx, opts, present), {
      when: () => true,
    })
    .transform((c) => resolve(c, opts));
  const r = schema.safeParse(values, { error: configErrorMap });
  // The secrets are checked on their own schema, and only its messages are kept.
  const s = secretsSchema.safeParse(
    Object.fromEntries(secretConfigKeys.map((k) => [k, raw[k] === "" ? undefined : raw[k]])),
  );
  const lines = [
    ...(unknown.length > 0 ? [unknownKeysLine(unknown)] : []),
    ...(r.success ? [] : configIssueLines(r.error.issues)),
    ...(s.success ? [] : configIssueLines(s.error.issues)),
  ];
  if (lines.length > 0 || !r.success) throw configError(lines);
  return r.data;
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
  const privateKey = present.includes("privateKey") ? config.getSecret("privateKey") : undefined;
  const hfToken = present.includes("hfToken") ? config.getSecret("hfToken") : undefined;
  const serverApiKey = present.includes("serverApiKey")
    ? config.getSecret("serverApiKey")
    : undefined;
  return {
    ...data,
    ...(privateKey ? { privateKey } : {}),
    ...(hfToken ? { hfToken } : {}),
    ...(serverApiKey ? { serverApiKey } : {}),
  };
}

// ---- The interface before readStackConfig, kept while callers move over. ----

/** The cluster part of the config (everything but the model and the secrets). */
export type ClusterConfig = Omit<StackConfigData, "model" | "diskPaths">;

/**
 * Validate the cluster keys (as read with `config.getObject`); throws a ConfigError listing
 * every problem. Prefer parseStackConfig / readStackConfig.
 */
export function parseClusterConfig(raw: Record<string, unknown>): ClusterConfig {
  const { model: _model, diskPaths: _disk, ...cluster } = parseStackConfig(raw);
  return cluster;
}

/** How the control node reaches `node`: its pinned connection plus the cluster's ssh settings. */
export function sshTarget(
  node: NodeConfig,
  config: Pick<ClusterConfig, "sshKeyPath" | "sshConfigPath">,
): SshTarget {
  return {
    name: node.name,
    host: node.host,
    port: node.port,
    user: node.user,
    hostKey: node.hostKey,
    ...(config.sshKeyPath ? { identityFile: config.sshKeyPath } : {}),
    ...(config.sshConfigPath ? { sshConfigPath: config.sshConfigPath } : {}),
  };
}
