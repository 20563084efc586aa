// The shapes of a node's name, login, address and host key, written once: the config refuses
// them before anything runs, the transport before it builds an ssh command line, and the
// host-key-pinned policy in state. Three copies of these patterns had already drifted (one
// took a comment after the key, one did not). At the bottom: the transport imports nothing
// above it, so everything above may import this.

/** Node names become host-key aliases, file names and resource names: keep them boring. */
export const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** POSIX-ish user names; ssh would also refuse most others. */
export const USER_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

/**
 * Hostnames, IPv4, IPv6 (bare or bracketed, with a zone), ssh_config aliases; no shell or
 * ssh_config metacharacters.
 */
export const HOST_NAME =
  /^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|\[?[0-9A-Fa-f:.]+(?:%[A-Za-z0-9]+)?\]?)$/;

/** The host key types ssh pins (no DSA). */
export const HOST_KEY_TYPES = [
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa",
  "sk-ssh-ed25519@openssh.com",
  "sk-ecdsa-sha2-nistp256@openssh.com",
] as const;

const types = HOST_KEY_TYPES.map((t) => t.replace(/[.]/g, "\\.")).join("|");

/** A pinned host key, `<type> <base64>`, as ssh-keyscan prints its two fields. */
export const HOST_KEY = new RegExp(`^(?:${types}) [A-Za-z0-9+/]+={0,2}$`);

/** A host key line as a `.pub` file has it: `<type> <base64>`, then an optional comment. */
export const HOST_KEY_LINE = new RegExp(`^(?:${types}) [A-Za-z0-9+/]+={0,2}(?: .*)?$`);
