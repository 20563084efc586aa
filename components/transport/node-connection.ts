// One connection object per node and process. `openNode(target)` validates the target, writes
// its pinned known_hosts file(s) and private key copy, and computes its ssh options ONCE; the
// object then owns its ControlMaster (started by the first command, ended by `close`) and the
// session queue in front of it. Every remote command of a provider goes through it:
// `run`, `rsync`, `forwardAgentOnce`, `copyFromPeer`.
//
// Dynamic-provider methods run in their own process and cannot share objects with the
// program, so providers receive the plain `SshTarget` in their inputs and call
// `openNode(inputs.target)`: the per-process cache (keyed by the whole target, private key
// included, by digest) hands every method of that process the same connection.
//
// Closed on every way out: explicitly (`close`, `closeAll`), on process exit, and on SIGINT,
// SIGTERM and SIGHUP (after which the signal is re-raised, so the process still ends by it).

import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import pLimit from "p-limit";
import { hostKeyAlias, knownHostsLine, validateTarget, type SshTarget } from "./connection";
import {
  checkedControlPath,
  endMaster,
  removeSessionDir,
  sessionDir,
  writePrivate,
} from "./control-master";
import { fail, invoke, type Invocation, type RunOptions, type RunResult } from "./exec";
import { homeRelative } from "./paths";
import { peerCopyCommand, type Peer, type PeerCopy } from "./peer";
import { assertOperand, rsyncRshJoin, shJoin, UnsafeArgumentError } from "./quote";
import { buildRemoteCommand, type RemoteCommand } from "./remote-command";
import { sshDestination, sshOptions, type SshFiles, type SshOptionChoices } from "./ssh-options";

/**
 * Sessions one ControlMaster carries at once. sshd refuses a session beyond its MaxSessions
 * (default 10) with "mux_client_request_session: session request failed: Session open refused
 * by peer"; ssh then opens a connection of its own, and a burst of those meets MaxStartups
 * (default 10:30:100) and dies in "kex_exchange_identification: Connection reset by peer".
 * A refresh reads every resource of a node at once, so queue here instead, under the default.
 */
export const SESSIONS_PER_MASTER = 8;

/** One side of an rsync: a local path, or a path on the node. */
export type RsyncPath = string | { readonly remote: string };

export interface RsyncOptions extends RunOptions {
  /** `--delete`: remove files on the receiver that the sender does not have. */
  readonly delete?: boolean;
  /** `--exclude=` patterns (rsync filter syntax), one argument each. */
  readonly excludes?: readonly string[];
  /** `-z` (default true). */
  readonly compress?: boolean;
  /** `-n`. */
  readonly dryRun?: boolean;
  /** More rsync options, placed before `--`. Code-level only: never from stack config. */
  readonly extraArgs?: readonly string[];
}

/** Whether an ssh agent is available to forward (SSH_AUTH_SOCK names an existing socket). */
export function agentAvailable(env: NodeJS.ProcessEnv = process.env): boolean {
  const sock = env.SSH_AUTH_SOCK;
  if (!sock) return false;
  try {
    return fs.statSync(sock).isSocket();
  } catch {
    return false;
  }
}

/**
 * The identity of a connection spec: every field that changes how ssh connects. Two specs
 * with the same identity share a connection; any other difference (another key, another jump
 * host) gets its own master, so a master authenticated one way never serves a spec meant to
 * authenticate another. A digest, so no secret is kept as a map key.
 */
export function connectionIdentity(t: SshTarget): string {
  const j = t.jump;
  return createHash("sha256")
    .update(
      JSON.stringify([
        t.name,
        t.host,
        t.port,
        t.user,
        t.hostKey,
        t.identityFile ?? null,
        t.privateKey ?? null,
        t.sshConfigPath ?? null,
        j ? [j.host, j.port ?? 22, j.user, j.hostKey, j.identityFile ?? null] : null,
      ]),
    )
    .digest("hex");
}

/**
 * A remote rsync path. `~/x` becomes `x` (the remote rsync starts in $HOME); the path is
 * sent with `-s` (protect-args), so no remote shell re-parses it, and rsync's own wildcard
 * characters are refused rather than expanded.
 */
function remotePath(p: string, what: string): string {
  const rel = homeRelative(p);
  assertOperand(rel, what);
  if (/[*?[\\]/.test(rel)) {
    throw new UnsafeArgumentError(
      `${what} ${JSON.stringify(p)} contains a wildcard character (* ? [ \\)`,
    );
  }
  return rel;
}

function hostForRsync(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

export class NodeConnection {
  /** The pinned known_hosts file(s), the key copy and the ControlPath, written at open. */
  readonly files: SshFiles & { readonly controlPath: string };
  private readonly secrets: readonly string[];
  private readonly queue = pLimit(SESSIONS_PER_MASTER);
  private readonly options = new Map<string, readonly string[]>();
  private contact: Promise<void> | undefined;
  private closed = false;

  /** Use `openNode`: it validates `target` and keeps one connection per identity. */
  constructor(
    readonly target: SshTarget,
    private readonly identity: string,
  ) {
    const dir = sessionDir();
    const tag = identity.slice(0, 10);
    const knownHosts = path.join(dir, `kh-${tag}`);
    writePrivate(knownHosts, knownHostsLine(hostKeyAlias(target.name), target.hostKey));
    let jumpKnownHosts: string | undefined;
    if (target.jump) {
      jumpKnownHosts = path.join(dir, `kh-${tag}-j`);
      writePrivate(
        jumpKnownHosts,
        knownHostsLine(hostKeyAlias(target.name, "jump"), target.jump.hostKey),
      );
    }
    let keyFile: string | undefined;
    if (target.privateKey !== undefined) {
      keyFile = path.join(dir, `id-${tag}`);
      // ssh rejects a key file without a trailing newline in some formats.
      const k = target.privateKey;
      writePrivate(keyFile, k.endsWith("\n") ? k : `${k}\n`);
    }
    this.files = {
      knownHosts,
      ...(jumpKnownHosts ? { jumpKnownHosts } : {}),
      ...(keyFile ? { keyFile } : {}),
      controlPath: checkedControlPath(path.join(dir, `c-${tag}`)),
    };
    this.secrets = target.privateKey === undefined ? [] : [target.privateKey];
  }

  /** ssh options (no destination), computed once per choice of timeout/multiplexing/agent. */
  private sshArgs(multiplex: boolean, choices: SshOptionChoices): readonly string[] {
    this.assertOpen();
    const key = JSON.stringify([
      multiplex,
      choices.connectTimeoutS ?? null,
      !!choices.forwardAgent,
    ]);
    let args = this.options.get(key);
    if (!args) {
      const { controlPath: _multiplexed, ...unmultiplexed } = this.files;
      args = sshOptions(this.target, multiplex ? this.files : unmultiplexed, choices);
      this.options.set(key, args);
    }
    return args;
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new Error(
        `the connection to node "${this.target.name}" was closed; open it again with openNode(target)`,
      );
    }
  }

  /**
   * Before the first multiplexed command, one connection authenticates and becomes the
   * ControlMaster while the others wait for it: sshd drops concurrent unauthenticated
   * connections beyond MaxStartups (default 10:30:100, "kex_exchange_identification:
   * Connection closed"), and a refresh reads every resource of a node at once. A failure here
   * is not reported: the command itself then connects on its own and reports it. Repeated
   * when the socket is gone (the master ended after ControlPersist idle seconds).
   */
  private async firstContact(connectTimeoutS: number | undefined): Promise<void> {
    if (fs.existsSync(this.files.controlPath)) return;
    if (!this.contact) {
      const pending = invoke({
        node: this.target,
        step: "connect",
        file: "ssh",
        args: [...this.sshArgs(true, { connectTimeoutS }), ...sshDestination(this.target), "true"],
        stdin: undefined,
        display: "true",
        secrets: this.secrets,
        opts: { step: "connect", timeoutMs: 60_000 },
      }).then(
        () => undefined,
        () => undefined,
      );
      this.contact = pending;
      void pending.then(() => {
        if (this.contact === pending) this.contact = undefined;
      });
    }
    await this.contact;
  }

  /**
   * Run `command` on the node under the environment contract (remote-command.ts), through
   * the master's session queue. Throws RemoteCommandError naming node, step, command and the
   * last output lines.
   */
  async run(command: RemoteCommand, opts: RunOptions): Promise<RunResult> {
    const built = buildRemoteCommand(command);
    this.assertOpen();
    await this.firstContact(opts.connectTimeoutS);
    const args = [
      ...this.sshArgs(true, { connectTimeoutS: opts.connectTimeoutS }),
      ...sshDestination(this.target),
      built.commandLine,
    ];
    return this.queue(() =>
      invoke({
        node: this.target,
        step: opts.step,
        file: "ssh",
        args,
        stdin: built.stdin,
        display: built.display,
        secrets: [...built.secrets, ...this.secrets],
        opts,
      }),
    );
  }

  /**
   * Run ONE command with the local agent forwarded, for node-to-node copies (nodes hold no
   * keys for each other). Uses its own connection (`ControlPath=none`): `-A` on a session
   * multiplexed over an existing master does nothing, since forwarding is decided when the
   * master connects. Throws RemoteCommandError (kind "spawn") without connecting when no
   * agent is available, so the caller can fall back to relaying.
   */
  async forwardAgentOnce(command: RemoteCommand, opts: RunOptions): Promise<RunResult> {
    const built = buildRemoteCommand(command, true);
    const inv: Omit<Invocation, "args"> = {
      node: this.target,
      step: opts.step,
      file: "ssh",
      stdin: built.stdin,
      display: built.display,
      secrets: [...built.secrets, ...this.secrets],
      opts,
    };
    if (!agentAvailable()) {
      throw fail(inv, "spawn", {
        stdout: "",
        stderr: "",
        cause: "no ssh agent to forward (SSH_AUTH_SOCK is unset or not a socket)",
      });
    }
    const args = [
      ...this.sshArgs(false, { connectTimeoutS: opts.connectTimeoutS, forwardAgent: true }),
      ...sshDestination(this.target),
      built.commandLine,
    ];
    return invoke({ ...inv, args });
  }

  /** Run `copy` on this node, pulling from `peer` over the fabric with the agent forwarded. */
  async copyFromPeer(peer: Peer, copy: PeerCopy): Promise<RunResult> {
    return this.forwardAgentOnce(peerCopyCommand(peer, copy), {
      step: copy.step,
      timeoutMs: copy.timeoutMs,
    });
  }

  /**
   * `rsync -a` between the control node and this node; exactly one of `src`/`dest` is
   * remote. The remote shell (`-e`) is ssh with the same options as `run` (pinning,
   * multiplexing), and the transfer takes a place in the same session queue.
   */
  async rsync(src: RsyncPath, dest: RsyncPath, opts: RsyncOptions): Promise<RunResult> {
    if ((typeof src === "string") === (typeof dest === "string")) {
      throw new UnsafeArgumentError("rsync: exactly one of src and dest must be {remote: path}");
    }
    const node = this.target;
    const side = (p: RsyncPath, what: string): string =>
      typeof p === "string"
        ? assertOperand(p, `rsync ${what}`)
        : `${hostForRsync(node.host)}:${remotePath(p.remote, `rsync ${what}`)}`;
    const source = side(src, "source");
    const destination = side(dest, "destination");
    for (const e of opts.excludes ?? []) {
      if (/[\n\r\0]/.test(e))
        throw new UnsafeArgumentError(`rsync exclude ${JSON.stringify(e)} contains a line break`);
    }
    this.assertOpen();
    await this.firstContact(opts.connectTimeoutS);
    const rsh = [
      "ssh",
      ...this.sshArgs(true, { connectTimeoutS: opts.connectTimeoutS }),
      "-p",
      String(node.port),
      "-l",
      node.user,
    ];
    const args = [
      "-a",
      "-s",
      ...(opts.compress === false ? [] : ["-z"]),
      ...(opts.delete ? ["--delete"] : []),
      ...(opts.dryRun ? ["-n"] : []),
      ...(opts.excludes ?? []).map((e) => `--exclude=${e}`),
      ...(opts.extraArgs ?? []),
      "-e",
      rsyncRshJoin(rsh),
      "--",
      source,
      destination,
    ];
    const display = shJoin([
      "rsync",
      ...args.filter((_, i) => args[i - 1] !== "-e" && args[i] !== "-e"),
    ]);
    return this.queue(() =>
      invoke({
        node,
        step: opts.step,
        file: "rsync",
        args,
        stdin: undefined,
        display,
        secrets: this.secrets,
        opts,
      }),
    );
  }

  /** End the master and delete this connection's files. Idempotent; synchronous (exit hook). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (open.get(this.identity) === this) open.delete(this.identity);
    endMaster(this.files.controlPath, [
      "ssh",
      "-F",
      "/dev/null",
      "-o",
      `ControlPath=${this.files.controlPath}`,
      "--",
      this.target.host,
    ]);
    for (const f of [this.files.knownHosts, this.files.jumpKnownHosts, this.files.keyFile]) {
      if (f !== undefined) fs.rmSync(f, { force: true });
    }
  }
}

const open = new Map<string, NodeConnection>();

/**
 * The connection to `target` in this process: made (validated, files written) on first use,
 * the same object afterwards. Throws UnsafeArgumentError naming the field of an invalid target.
 */
export function openNode(target: SshTarget): NodeConnection {
  const identity = connectionIdentity(target);
  let c = open.get(identity);
  if (!c) {
    validateTarget(target);
    installExitHooks();
    c = new NodeConnection(target, identity);
    open.set(identity, c);
  }
  return c;
}

/** Close every connection of this process and delete its private directory. Idempotent. */
export function closeAll(): void {
  for (const c of [...open.values()]) c.close();
  open.clear();
  removeSessionDir();
}

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
let hooked = false;

function onSignal(signal: NodeJS.Signals): void {
  closeAll();
  for (const s of SIGNALS) process.removeListener(s, onSignal);
  // With no other listener, node's default for the signal (end the process) was replaced by
  // ours: restore it and re-raise, so the process still ends by that signal. With others,
  // they decide, as they would have without us.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function installExitHooks(): void {
  if (hooked) return;
  hooked = true;
  // A dynamic-provider process may end without calling closeAll(): still remove the key copies.
  process.once("exit", closeAll);
  for (const s of SIGNALS) process.once(s, onSignal);
}
