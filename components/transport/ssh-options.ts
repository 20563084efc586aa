// Pure builders of ssh argv: the same options for `ssh`, for rsync's `-e`, for the
// single agent-forwarding command, and for a node that ssh-es to a peer. No I/O here
// except through the file paths the caller hands in.

import { hostKeyAlias, type SshTarget } from "./connection";
import { shJoin, sshTokenEscape } from "./quote";

/** Defaults, in seconds. Short on purpose: a node that does not answer should fail fast. */
export const DEFAULT_CONNECT_TIMEOUT_S = 10;
/**
 * Keepalives: ssh also uses interval × count as its packet timeout during key exchange and
 * authentication, so a node whose sshd accepts and then stalls (a home on a hung network
 * filesystem) ends after SERVER_ALIVE_INTERVAL_S × SERVER_ALIVE_COUNT_MAX seconds.
 */
export const SERVER_ALIVE_INTERVAL_S = 15;
export const SERVER_ALIVE_COUNT_MAX = 3;
export const CONTROL_PERSIST_S = 60;

/** Local files the options refer to (from control-master.ts, or test doubles). */
export interface SshFiles {
  readonly knownHosts: string;
  readonly jumpKnownHosts?: string;
  /** Temp copy of `privateKey`, when the spec has one. */
  readonly keyFile?: string;
  /** Undefined: no multiplexing (`ControlPath=none`). */
  readonly controlPath?: string;
}

/**
 * Options the local ssh may not know (an older OpenSSH fails on an unknown `-o`). An ssh that
 * does not know an option cannot be told it by an ssh_config either, so leaving it out is safe.
 * Default: all known (OpenSSH ≥ 8.7); ssh-capabilities.ts probes the real binary.
 */
export interface SshCapabilities {
  /** `KnownHostsCommand` (OpenSSH 8.5). */
  readonly knownHostsCommand: boolean;
  /** `SessionType`, `StdinNull` (OpenSSH 8.7). */
  readonly sessionType: boolean;
}

export const MODERN_SSH: SshCapabilities = { knownHostsCommand: true, sessionType: true };

export interface SshOptionChoices {
  readonly connectTimeoutS?: number;
  /**
   * Forward the agent at this socket for this one connection (`ForwardAgent=<socket>`): a
   * private agent holding only the cluster's key (agent-forward.ts), never the operator's.
   * Only meaningful without multiplexing.
   */
  readonly forwardAgent?: string;
  /**
   * A stdio forward for this one connection (`sparkform endpoint`, one per accepted client):
   * `-W host:port`, which implies ExitOnForwardFailure and ClearAllForwardings (ssh(1)), so
   * neither is set here. Through the ControlMaster when it is up (`ControlMaster=no` with its
   * ControlPath: this ssh never becomes a master that outlives the stream), else on a
   * connection of its own.
   */
  readonly stdioForward?: { readonly host: string; readonly port: number };
  readonly capabilities?: SshCapabilities;
}

function o(kv: string): string[] {
  return ["-o", kv];
}

/**
 * Host-key pinning. `StrictHostKeyChecking=yes` with a known_hosts that holds exactly the
 * pinned key under a `HostKeyAlias`, the global file disabled so nothing else can vouch for
 * the host, and no learning of keys (`UpdateHostKeys=no`). Never `no`/`accept-new`.
 */
function pinning(knownHosts: string, alias: string): string[] {
  return [
    ...o("StrictHostKeyChecking=yes"),
    ...o(`UserKnownHostsFile=${knownHosts}`),
    ...o("GlobalKnownHostsFile=/dev/null"),
    ...o(`HostKeyAlias=${alias}`),
    ...o("UpdateHostKeys=no"),
    ...o("CheckHostIP=no"),
  ];
}

function identity(file: string | undefined): string[] {
  // IdentitiesOnly: with many agent keys, offering them all first can hit MaxAuthTries.
  return file === undefined ? [] : ["-i", file, ...o("IdentitiesOnly=yes")];
}

function common(connectTimeoutS: number): string[] {
  return [
    ...o("BatchMode=yes"), // never prompt: there is no one to answer inside `pulumi up`
    ...o(`ConnectTimeout=${connectTimeoutS}`),
    ...o(`ServerAliveInterval=${SERVER_ALIVE_INTERVAL_S}`),
    ...o(`ServerAliveCountMax=${SERVER_ALIVE_COUNT_MAX}`),
    ...o("LogLevel=ERROR"), // keep warnings out of captured stderr; errors still show
    "-T",
  ];
}

/**
 * What an ssh_config (the user's, the system's, a node's) must not change. ssh takes the
 * FIRST value it obtains for an option and reads `-o` before any file, so each of these wins
 * over every config:
 * - `KnownHostsCommand`: its output is added to the known hosts, so it could vouch for a key
 *   that is not the pinned one (any matching line wins over a mismatching one);
 * - `VerifyHostKeyDNS`: SSHFP records could vouch for the host the same way;
 * - `RemoteCommand`: would replace (or, next to ours, refuse) the command we send;
 * - `PermitLocalCommand`: a `LocalCommand` runs on the control node after connecting;
 * - `SessionType`/`StdinNull`: `none`/`yes` would not run our command or not feed its stdin
 *   (secrets arrive on stdin), and the step would hang or fail obscurely;
 * - `ForwardX11`, `Tunnel`: nothing sparkform runs needs them, and both open channels back.
 * ProxyJump/ProxyCommand are set by `sshOptions` (off, or sparkform's own pinned jump host).
 */
/** `stdio`: no session at all, stdin is the `-W` forward's; else the default session. */
function hardening(caps: SshCapabilities, stdio = false): string[] {
  return [
    ...(caps.knownHostsCommand ? o("KnownHostsCommand=none") : []),
    ...o("VerifyHostKeyDNS=no"),
    ...o("RemoteCommand=none"),
    ...o("PermitLocalCommand=no"),
    ...(caps.sessionType
      ? [...o(`SessionType=${stdio ? "none" : "default"}`), ...o("StdinNull=no")]
      : []),
    ...o("ForwardX11=no"),
    ...o("Tunnel=no"),
  ];
}

/**
 * The ssh options (no destination) for reaching `t`. A jump host becomes an explicit
 * ProxyCommand rather than `-J`, because `-J` starts the hop's ssh without our `-o`
 * options, i.e. without pinning. Without a jump host, `ProxyJump=none`: a ProxyJump or
 * ProxyCommand from an ssh_config would run its own ssh (unpinned, with that config's
 * ForwardAgent) or any command; ssh lets the first of the two it reads exclude the other.
 */
export function sshOptions(
  t: SshTarget,
  files: SshFiles,
  choices: SshOptionChoices = {},
): string[] {
  const timeout = choices.connectTimeoutS ?? DEFAULT_CONNECT_TIMEOUT_S;
  const caps = choices.capabilities ?? MODERN_SSH;
  const args: string[] = [];
  if (t.sshConfigPath !== undefined) args.push("-F", t.sshConfigPath);
  args.push(...common(timeout), ...pinning(files.knownHosts, hostKeyAlias(t.name)));
  const w = choices.stdioForward;
  args.push(...hardening(caps, w !== undefined));
  // A user's LocalForward/RemoteForward must not collide across masters. (Not on the jump
  // hop, nor on our own -W: ClearAllForwardings also clears a -W stdio forward, which implies
  // it anyway.)
  if (w !== undefined)
    args.push("-W", `${w.host.includes(":") ? `[${w.host}]` : w.host}:${w.port}`);
  else args.push(...o("ClearAllForwardings=yes"));
  args.push(...identity(t.identityFile), ...identity(files.keyFile));
  if (files.controlPath !== undefined && w !== undefined) {
    args.push(...o("ControlMaster=no"), ...o(`ControlPath=${files.controlPath}`));
  } else if (files.controlPath !== undefined) {
    args.push(
      ...o("ControlMaster=auto"),
      ...o(`ControlPath=${files.controlPath}`),
      ...o(`ControlPersist=${CONTROL_PERSIST_S}`),
    );
  } else {
    args.push(...o("ControlMaster=no"), ...o("ControlPath=none"));
  }
  // A user's config may say ForwardAgent yes; only forwardAgentOnce may forward, and only a
  // private agent's socket (ForwardAgent takes a socket path since OpenSSH 8.2).
  args.push(
    ...(choices.forwardAgent !== undefined
      ? ["-A", ...o(`ForwardAgent=${choices.forwardAgent}`)]
      : o("ForwardAgent=no")),
  );
  if (t.jump === undefined) args.push(...o("ProxyJump=none"));
  else {
    const j = t.jump;
    if (files.jumpKnownHosts === undefined) throw new Error("jump host needs its known_hosts file");
    const hop = [
      "ssh",
      ...(t.sshConfigPath !== undefined ? ["-F", t.sshConfigPath] : []),
      ...common(timeout),
      ...pinning(files.jumpKnownHosts, hostKeyAlias(t.name, "jump")),
      ...hardening(caps),
      ...o("ProxyJump=none"), // the hop connects directly: no chain from an ssh_config
      ...identity(j.identityFile ?? t.identityFile),
      ...identity(files.keyFile),
      ...o("ControlMaster=no"),
      ...o("ControlPath=none"),
      ...o("ForwardAgent=no"),
      "-p",
      String(j.port ?? 22),
      "-l",
      j.user,
      "-W",
      "[%h]:%p",
      "--",
      j.host,
    ];
    // ssh runs ProxyCommand through $SHELL -c (we set SHELL=/bin/sh) after expanding %-tokens:
    // quote for sh, then escape our own `%` (the -W argument keeps its tokens).
    const cmd = hop
      .map((a) => (a === "[%h]:%p" ? "'[%h]:%p'" : sshTokenEscape(shJoin([a]))))
      .join(" ");
    args.push(...o(`ProxyCommand=${cmd}`)); // ssh itself prefixes "exec "
  }
  return args;
}

/** Destination part: `-p port -l user -- host`. `--` so no host can be read as an option. */
export function sshDestination(t: SshTarget): string[] {
  return ["-p", String(t.port), "-l", t.user, "--", t.host];
}

/**
 * The argv a NODE uses to ssh to a peer over the fabric (for node-to-node copies with a
 * forwarded agent): the same pinning, with a known_hosts file the caller has written on
 * that node (content: `knownHostsLine(hostKeyAlias(peer.name), peer.hostKey)`).
 * `peerHost` is the peer's fabric address as seen from the node.
 *
 * `-F /dev/null`: no ssh_config at all, neither the node user's ~/.ssh/config nor the node's
 * /etc/ssh/ssh_config (ssh skips the system file when given -F), so nothing on the node can
 * add a KnownHostsCommand, a ProxyJump or a RemoteCommand; the overrides follow anyway. The
 * node's ssh version is unknown, so `IgnoreUnknown` (safe here: there is no config of the
 * user's for it to shadow) lets an older ssh skip the options it does not have.
 */
export function peerSshArgv(
  peer: Pick<SshTarget, "name" | "port" | "user">,
  peerHost: string,
  remoteKnownHostsPath: string,
  connectTimeoutS = DEFAULT_CONNECT_TIMEOUT_S,
): string[] {
  return [
    "ssh",
    "-F",
    "/dev/null",
    ...o("IgnoreUnknown=KnownHostsCommand,SessionType,StdinNull"),
    ...common(connectTimeoutS),
    ...pinning(remoteKnownHostsPath, hostKeyAlias(peer.name)),
    ...hardening(MODERN_SSH),
    ...o("ProxyJump=none"),
    ...o("ControlMaster=no"),
    ...o("ControlPath=none"),
    ...o("ForwardAgent=no"),
    "-p",
    String(peer.port),
    "-l",
    peer.user,
    "--",
    peerHost,
  ];
}
