// Pure builders of ssh argv: the same options for `ssh`, for rsync's `-e`, for the
// single agent-forwarding command, and for a node that ssh-es to a peer. No I/O here
// except through the file paths the caller hands in.

import { hostKeyAlias, type SshTarget } from "./connection";
import { shJoin, sshTokenEscape } from "./quote";

/** Defaults, in seconds. Short on purpose: a node that does not answer should fail fast. */
export const DEFAULT_CONNECT_TIMEOUT_S = 10;
export const SERVER_ALIVE_INTERVAL_S = 15;
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

export interface SshOptionChoices {
  readonly connectTimeoutS?: number;
  /** Forward the agent for this one connection (`-A`). Only meaningful without multiplexing. */
  readonly forwardAgent?: boolean;
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
    ...o("ServerAliveCountMax=3"),
    ...o("LogLevel=ERROR"), // keep warnings out of captured stderr; errors still show
    "-T",
  ];
}

/**
 * The ssh options (no destination) for reaching `t`. A jump host becomes an explicit
 * ProxyCommand rather than `-J`, because `-J` starts the hop's ssh without our `-o`
 * options, i.e. without pinning.
 */
export function sshOptions(
  t: SshTarget,
  files: SshFiles,
  choices: SshOptionChoices = {},
): string[] {
  const timeout = choices.connectTimeoutS ?? DEFAULT_CONNECT_TIMEOUT_S;
  const args: string[] = [];
  if (t.sshConfigPath !== undefined) args.push("-F", t.sshConfigPath);
  args.push(...common(timeout), ...pinning(files.knownHosts, hostKeyAlias(t.name)));
  // A user's LocalForward/RemoteForward must not collide across masters. (Not on the jump
  // hop: ClearAllForwardings also clears its -W stdio forward.)
  args.push(...o("ClearAllForwardings=yes"));
  args.push(...identity(t.identityFile), ...identity(files.keyFile));
  if (files.controlPath !== undefined) {
    args.push(
      ...o("ControlMaster=auto"),
      ...o(`ControlPath=${files.controlPath}`),
      ...o(`ControlPersist=${CONTROL_PERSIST_S}`),
    );
  } else {
    args.push(...o("ControlMaster=no"), ...o("ControlPath=none"));
  }
  // A user's config may say ForwardAgent yes; only forwardAgentOnce may forward.
  args.push(...(choices.forwardAgent ? ["-A", ...o("ForwardAgent=yes")] : o("ForwardAgent=no")));
  if (t.jump !== undefined) {
    const j = t.jump;
    if (files.jumpKnownHosts === undefined) throw new Error("jump host needs its known_hosts file");
    const hop = [
      "ssh",
      ...(t.sshConfigPath !== undefined ? ["-F", t.sshConfigPath] : []),
      ...common(timeout),
      ...pinning(files.jumpKnownHosts, hostKeyAlias(t.name, "jump")),
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
 */
export function peerSshArgv(
  peer: Pick<SshTarget, "name" | "port" | "user">,
  peerHost: string,
  remoteKnownHostsPath: string,
  connectTimeoutS = DEFAULT_CONNECT_TIMEOUT_S,
): string[] {
  return [
    "ssh",
    ...common(connectTimeoutS),
    ...pinning(remoteKnownHostsPath, hostKeyAlias(peer.name)),
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
