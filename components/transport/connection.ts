// The connection spec for one node, its validation, and the pinned known_hosts line.
// Plain data only: these objects cross into Pulumi dynamic-provider processes.

import { assertOperand, UnsafeArgumentError } from "./quote";
import { HOST_KEY_TYPES as KEY_TYPES, HOST_NAME, NODE_NAME, USER_NAME } from "./names";

/** A host that ssh hops through to reach the node (ssh `-J`), with its own pinned key. */
export interface SshJump {
  readonly host: string;
  /** Default 22. */
  readonly port?: number;
  readonly user: string;
  /** Pinned public host key, `"<type> <base64>"` (a trailing comment is ignored). */
  readonly hostKey: string;
  readonly identityFile?: string;
}

/** How to reach one node. */
export interface SshTarget {
  /** The node's name in the stack (`spark-1`): used in messages and as the host-key alias. */
  readonly name: string;
  /** Address or ssh_config alias. */
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** Pinned public host key, `"ssh-ed25519 AAAA…"`. Strict checking against exactly this key. */
  readonly hostKey: string;
  /** Private key file on the control node (`ssh -i`). */
  readonly identityFile?: string;
  /**
   * Private key PEM/OpenSSH text (a Pulumi secret). Written to a 0600 file in the run's
   * private directory, removed when the transport closes; never logged.
   */
  readonly privateKey?: string;
  /** An ssh_config to read instead of ~/.ssh/config (`ssh -F`). */
  readonly sshConfigPath?: string;
  readonly jump?: SshJump;
}

const HOST_KEY_TYPES: ReadonlySet<string> = new Set(KEY_TYPES);

/** Parse and normalise a pinned host key to `"<type> <base64>"`; throws naming `what`. */
export function parseHostKey(hostKey: string, what: string): { type: string; key: string } {
  const parts = hostKey.trim().split(/\s+/);
  const [type, key] = parts;
  if (type === undefined || key === undefined || !HOST_KEY_TYPES.has(type)) {
    throw new UnsafeArgumentError(
      `${what} must be "<type> <base64>" with type one of ${[...HOST_KEY_TYPES].join(", ")} ` +
        `(as printed by ssh-keyscan or /etc/ssh/ssh_host_ed25519_key.pub), got ${JSON.stringify(hostKey.slice(0, 40))}`,
    );
  }
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key)) {
    throw new UnsafeArgumentError(`${what} has a key part that is not base64`);
  }
  return { type, key };
}

function validPort(port: number, what: string): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new UnsafeArgumentError(`${what} must be an integer 1-65535, got ${String(port)}`);
  }
}

function validHost(host: string, what: string): void {
  assertOperand(host, what);
  if (!HOST_NAME.test(host)) {
    throw new UnsafeArgumentError(
      `${what} ${JSON.stringify(host)} is not a hostname, IP address or ssh_config alias`,
    );
  }
}

function validUser(user: string, what: string): void {
  assertOperand(user, what);
  if (!USER_NAME.test(user)) {
    throw new UnsafeArgumentError(`${what} ${JSON.stringify(user)} is not a valid user name`);
  }
}

function validPath(path: string, what: string): void {
  assertOperand(path, what);
}

/** Validate a connection spec before anything runs; errors name the node and the field. */
export function validateTarget(t: SshTarget): void {
  if (!NODE_NAME.test(t.name)) {
    throw new UnsafeArgumentError(
      `node name ${JSON.stringify(t.name)} must be 1-63 characters of letters, digits, "_", "." and "-"`,
    );
  }
  const at = (field: string) => `node "${t.name}" ${field}`;
  validHost(t.host, at("host"));
  validPort(t.port, at("port"));
  validUser(t.user, at("user"));
  parseHostKey(t.hostKey, at("hostKey"));
  if (t.identityFile !== undefined) validPath(t.identityFile, at("identityFile"));
  if (t.sshConfigPath !== undefined) validPath(t.sshConfigPath, at("sshConfigPath"));
  if (t.privateKey !== undefined && !/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(t.privateKey)) {
    // Say what is wrong without echoing any of the secret.
    throw new UnsafeArgumentError(`${at("privateKey")} is not a PEM/OpenSSH private key`);
  }
  if (t.jump !== undefined) {
    validHost(t.jump.host, at("jump.host"));
    validPort(t.jump.port ?? 22, at("jump.port"));
    validUser(t.jump.user, at("jump.user"));
    parseHostKey(t.jump.hostKey, at("jump.hostKey"));
    if (t.jump.identityFile !== undefined) validPath(t.jump.identityFile, at("jump.identityFile"));
  }
}

/**
 * The alias the pinned key is filed under (ssh `HostKeyAlias`). With an alias ssh looks the
 * key up by this exact string, not by `host` or `[host]:port`, so one known_hosts line per
 * node is unambiguous whatever address or port reaches it.
 */
export function hostKeyAlias(name: string, role: "node" | "jump" = "node"): string {
  return role === "node" ? `sparkform.${name}` : `sparkform.${name}.jump`;
}

/** The single known_hosts line that pins `hostKey` under `alias`. */
export function knownHostsLine(alias: string, hostKey: string): string {
  const { type, key } = parseHostKey(hostKey, `host key for ${alias}`);
  return `${alias} ${type} ${key}\n`;
}
