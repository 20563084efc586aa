// `sparkform:nodes`, `sshKeyPath` and `sshConfigPath`: how the control node reaches each node
// (management address, login, pinned host key) and where the nodes reach each other (the
// fabric address). The node stage owns these keys; the name, host and host-key shapes are the
// transport's (transport/names.ts), so config and ssh refuse the same values.
import { isIP } from "node:net";
import { z } from "zod";
import { shown } from "../config/errors";
import { CONTROL } from "../config/node-path";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { factsOutput } from "./output";
import { HOST_KEY_LINE, HOST_NAME, NODE_NAME, USER_NAME } from "../transport";
import type { SshTarget } from "../transport";

/** The ssh port unless a node says otherwise. */
export const SSH_PORT_DEFAULT = 22;
/** sparkform drives up to this many nodes (the pair-and-rail probes grow with the square). */
export const MAX_NODES = 8;

/** Node names become host-key aliases, file names and resource names. */
export const nodeNameSchema = z
  .string()
  .regex(
    NODE_NAME,
    "use letters, digits, '_', '.' and '-' (max 63), starting with a letter or digit; e.g. spark-1",
  );

const hostKey = z
  .string()
  .regex(
    HOST_KEY_LINE,
    "must be the node's public host key, '<type> <base64>'; copy it from the node's " +
      "/etc/ssh/ssh_host_ed25519_key.pub or `ssh-keyscan -t ed25519 <host>` (host key checking is never disabled)",
  );

const host = z.string().refine((h) => HOST_NAME.test(h), {
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
export const controlPathSchema = z
  .string()
  .min(1)
  .refine((p) => !CONTROL.test(p), {
    message: "contains a control character; write the path on one line",
  })
  .refine((p) => !p.startsWith("-"), {
    message: "starts with '-', which ssh would read as an option; write it as ./-… or in full",
  });

export const nodeSchema = z.strictObject({
  name: nodeNameSchema,
  /** Address or ssh_config alias the control node connects to (management network). */
  host,
  /** Default 22. */
  port: z.number().int().min(1).max(65535).default(SSH_PORT_DEFAULT),
  user: z
    .string()
    .regex(USER_NAME, "is not a valid user name; give the login user on the node (e.g. spark)"),
  hostKey,
  /** The node's address on the fabric (node to node only: toolchain and model copies). */
  fabricAddress: fabricAddress.optional(),
});

/** `sparkform:nodes`: the cluster, in order; the first is the default source of copies. */
export const nodesSchema = z
  .array(nodeSchema)
  .min(1, "list at least one node; add each node's name, host, user and hostKey")
  .max(
    MAX_NODES,
    `lists more nodes than the ${MAX_NODES} sparkform supports; list at most ${MAX_NODES}`,
  );

export type NodeConfig = z.infer<typeof nodeSchema>;

/** The cluster-wide ssh settings: a key file and an ssh_config, both on the control node. */
export interface SshSettings {
  /** `sparkform:sshKeyPath`: private key file for every node (else ssh's defaults / agent). */
  sshKeyPath?: string;
  /** `sparkform:sshConfigPath`: an ssh_config to use instead of ~/.ssh/config. */
  sshConfigPath?: string;
}

/** Node names are keys everywhere (resources, files, references): each is given once. */
export function crossCheck(nodes: Salvaged<NodeConfig[]>, ctx: CheckContext): void {
  const seen = new Set<string>();
  for (const n of nodes) {
    if (n.name === undefined) continue;
    if (seen.has(n.name)) {
      ctx.add(
        ["nodes"],
        `node names must be unique: ${JSON.stringify(n.name)} is given twice; rename one`,
      );
    }
    seen.add(n.name);
  }
}

/** How the control node reaches `node`: its pinned connection plus the cluster's ssh settings. */
export function sshTarget(node: NodeConfig, config: SshSettings): SshTarget {
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

/** `sparkform:privateKey`: private key text for every node, if not given as a file. */
const privateKeySchema = z
  .string({
    error:
      "must be text; set it with `pulumi config set --secret sparkform:privateKey < ~/.ssh/id_ed25519`",
  })
  .refine((k) => /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(k), {
    message:
      "is not a PEM/OpenSSH private key; set the key file's whole text with " +
      "`pulumi config set --secret sparkform:privateKey < ~/.ssh/id_ed25519`",
  });

/** The node stage: the nodes, the cluster-wide ssh settings, their fact sheets. */
export const stage = {
  name: "node",
  sections: [
    section({ key: "nodes", schema: nodesSchema, structured: true, required: true, crossCheck }),
    /** Private key file on the control node for every node (else ssh's defaults / agent). */
    section({ key: "sshKeyPath", schema: controlPathSchema.optional(), structured: false }),
    /** An ssh_config to use instead of ~/.ssh/config. */
    section({ key: "sshConfigPath", schema: controlPathSchema.optional(), structured: false }),
  ],
  secrets: { privateKey: privateKeySchema },
  outputs: [{ key: "facts", type: "object", cut: factsOutput }],
} as const satisfies StageDescriptor;
