// The stack's `sparkform:` configuration, validated with zod before anything runs on a node.
// Errors name the config key and the fix (`pulumi config set ...`).
import { z } from "zod";
import { buildConfigSchema } from "./build/config";
import type { SshTarget } from "./transport/ssh";

/** Node names become host-key aliases, file names and resource names. */
const nodeName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, "use letters, digits, '_', '.' and '-' (max 63)");

const hostKey = z
  .string()
  .regex(
    /^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,2}( .*)?$/,
    "must be the node's public host key, '<type> <base64>' as in /etc/ssh/ssh_host_ed25519_key.pub (host key checking is never disabled)",
  );

/** A path on the node: absolute, or under the login user's home (`~/...`). */
const remotePath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith("/") || p === "~" || p.startsWith("~/"), {
    message: "must be absolute or start with ~/",
  })
  .refine((p) => !p.split("/").includes(".."), { message: "must not contain '..'" })
  // Paths end up in remote commands (quoted) and rsync arguments: keep them boring, so a
  // typo or a pasted shell fragment is an error here rather than a strange directory there.
  .refine((p) => /^[A-Za-z0-9._/~+@-]+$/.test(p), {
    message: "may contain only letters, digits and . _ / ~ + @ -",
  });

export const nodeSchema = z.strictObject({
  name: nodeName,
  /** Address or ssh_config alias the control node connects to (management network). */
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535).default(22),
  user: z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/, "is not a valid user name"),
  hostKey,
  /** The node's address on the fabric (node to node only: toolchain and model copies). */
  fabricAddress: z.string().min(1).optional(),
});

/** One rsync exclusion with the reason it exists; `path` is anchored, `name` matches anywhere. */
export const exclusionSchema = z
  .strictObject({
    path: z
      .string()
      .regex(/^[^*?[\]\\\n]+$/, "is a literal relative path (no wildcards)")
      .refine((p) => !p.startsWith("/") && !p.split("/").includes(".."), {
        message: "is relative to the tree, without '..'",
      })
      .optional(),
    name: z
      .string()
      .regex(/^[^/[\]\\\n]+$/, "is a base-name glob with * and ? only")
      .optional(),
    reason: z.string().min(1, "say why this is excluded"),
  })
  .refine((e) => (e.path === undefined) !== (e.name === undefined), {
    message: "give exactly one of path or name",
  });

export const toolchainSchema = z.strictObject({
  /** The toolchain directory on every node (Spark: ~/.asdf). */
  path: remotePath,
  /** Node that has it and copies it to the others (default: the first node). */
  source: nodeName.optional(),
  /** Install directories, relative to `path`, put on PATH directly (no shims). */
  binDirs: z.array(z.string().min(1)).min(1),
  /** Version probe, run with binDirs on PATH (an argv, never a shell string). */
  probe: z.array(z.string().min(1)).min(1),
  /** Text the probe's output must contain (e.g. "Elixir 1.18"). */
  expect: z.string().min(1),
});

export const treeSchema = z.strictObject({
  /** Directory on the control node, relative to the project or absolute. */
  source: z.string().min(1),
  /** Directory on every node. */
  dest: remotePath,
  exclude: z.array(exclusionSchema).default([]),
});

export const clusterConfigSchema = z
  .strictObject({
    nodes: z
      .array(nodeSchema)
      .min(1, "list at least one node")
      .max(8)
      .refine((ns) => new Set(ns.map((n) => n.name)).size === ns.length, {
        message: "node names must be unique",
      }),
    /** Private key file on the control node for every node (else ssh's defaults / agent). */
    sshKeyPath: z.string().min(1).optional(),
    /** An ssh_config to use instead of ~/.ssh/config. */
    sshConfigPath: z.string().min(1).optional(),
    toolchain: toolchainSchema.optional(),
    tree: treeSchema.optional(),
    /** The native build in the synced tree (needs `tree`); see components/build/config.ts. */
    build: buildConfigSchema.optional(),
  })
  .refine((c) => c.build === undefined || c.tree !== undefined, {
    message: "sparkform:build builds in the synced tree: set sparkform:tree too",
  });

export type ClusterConfig = z.infer<typeof clusterConfigSchema>;
export type NodeConfig = z.infer<typeof nodeSchema>;
export type Exclusion = z.infer<typeof exclusionSchema>;

/** The config keys this program reads (all under the `sparkform:` namespace). */
export const configKeys = [
  "nodes",
  "sshKeyPath",
  "sshConfigPath",
  "toolchain",
  "tree",
  "build",
] as const;

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Validate raw config values (as read with `config.getObject`); throws a ConfigError listing
 * every problem as `sparkform:<key>[i].field: message`.
 */
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

export function parseClusterConfig(raw: Record<string, unknown>): ClusterConfig {
  const result = clusterConfigSchema.safeParse(
    Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== "")),
  );
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const [key, ...rest] = issue.path;
    const where = `sparkform:${String(key ?? "")}${rest.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("")}`;
    return `  ${where}: ${issue.message}`;
  });
  return raiseConfig(lines);
}

function raiseConfig(lines: string[]): never {
  throw new ConfigError(
    `invalid stack configuration:\n${lines.join("\n")}\n` +
      `Fix it in stacks/Pulumi.<stack>.yaml or with \`pulumi config set --path sparkform:<key> <value>\`.`,
  );
}
