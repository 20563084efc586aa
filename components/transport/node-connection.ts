// One connection object per node and process. `openNode(target)` validates the target, writes
// its pinned known_hosts file(s) and private key copy, and computes its ssh options ONCE; the
// object then owns its ControlMaster (started by the first command, ended by `close`) and the
// session queue in front of it. Every remote command of a provider goes through it:
// `run`, `rsync`, `forwardAgentOnce` (node-to-node copies use it: components/peer-copy/).
//
// Dynamic-provider methods run in their own process and cannot share objects with the
// program, so providers receive the plain `SshTarget` in their inputs and call
// `openNode(inputs.target)`: the per-process cache (keyed by the whole target, private key
// included, by digest) hands every method of that process the same connection.
//
// Closed on every way out: explicitly (`close`, `closeAll`), on process exit, and on SIGINT,
// SIGTERM and SIGHUP (after which the signal is re-raised, so the process still ends by it).

import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import pLimit from "p-limit";
import {
  startPrivateAgent,
  stopAllPrivateAgents,
  unloadableReason,
  type PrivateAgent,
} from "./agent-forward";
import { hostKeyAlias, knownHostsLine, validateTarget, type SshTarget } from "./connection";
import {
  checkedControlPath,
  endMaster,
  removeSessionDir,
  sessionDir,
  writePrivate,
} from "./control-master";
import { RemoteCommandError, type FailureKind } from "./errors";
import { fail, invoke, type Invocation, type RunOptions, type RunResult } from "./exec";
import { homeRelative } from "./paths";
import { assertOperand, rsyncRshJoin, shJoin, UnsafeArgumentError } from "./quote";
import { buildRemoteCommand, type RemoteCommand } from "./remote-command";
import { sshCapabilities } from "./ssh-capabilities";
import {
  DEFAULT_CONNECT_TIMEOUT_S,
  SERVER_ALIVE_COUNT_MAX,
  SERVER_ALIVE_INTERVAL_S,
  sshDestination,
  sshOptions,
  type SshFiles,
  type SshOptionChoices,
} from "./ssh-options";
import { childEnv } from "./child-env";

/**
 * Sessions one ControlMaster carries at once. sshd refuses a session beyond its MaxSessions
 * (default 10) with "mux_client_request_session: session request failed: Session open refused
 * by peer"; ssh then opens a connection of its own, and a burst of those meets MaxStartups
 * (default 10:30:100) and dies in "kex_exchange_identification: Connection reset by peer".
 * A refresh reads every resource of a node at once, so queue here instead, under the default.
 */
export const SESSIONS_PER_MASTER = 8;

/**
 * Time limits. Every remote step has one: a node that hangs must fail `up`, not stall it.
 * A command's limit holds on both sides (the node runs it under `timeout`, remote-command.ts);
 * an rsync has an overall limit here and `--timeout` (no data moved for RSYNC_IO_TIMEOUT_S
 * seconds), which rsync also hands to its other end, so the node's rsync ends by itself.
 */
export const DEFAULT_RUN_TIMEOUT_MS = 10 * 60_000;
/** Long: a model relayed through a slow control node; a stall ends sooner, by --timeout. */
export const DEFAULT_RSYNC_TIMEOUT_MS = 6 * 3600_000;
export const RSYNC_IO_TIMEOUT_S = 120;
/**
 * Connecting (TCP, banner, key exchange, authentication, the master): ssh gives up on its own
 * after ConnectTimeout plus the keepalive bound; this is the outer limit on top.
 */
export const CONTACT_TIMEOUT_MS =
  (DEFAULT_CONNECT_TIMEOUT_S + SERVER_ALIVE_INTERVAL_S * SERVER_ALIVE_COUNT_MAX + 5) * 1000;
/** The node's limit is the control node's plus this, so the control node reports first. */
export const NODE_LIMIT_GRACE_S = 2;

/** The limit a node applies to a step the control node gives `timeoutMs`. */
export function nodeLimitS(timeoutMs: number): number {
  return Math.ceil(timeoutMs / 1000) + NODE_LIMIT_GRACE_S;
}

/**
 * What the first contact's failure says about the node. `true` itself never fails, so an ssh
 * that ends 255 without a word after the keepalive bound gave up on a silent node: at
 * LogLevel=ERROR ssh does not print its "Connection to H port P timed out" (an INFO line). The
 * contact's own limit elapsing means the same.
 */
function contactFailure(
  e: RemoteCommandError,
  started: number,
): { kind: FailureKind; outputTail: string } {
  const silentFor = Date.now() - started;
  const keepaliveBoundMs = SERVER_ALIVE_INTERVAL_S * SERVER_ALIVE_COUNT_MAX * 1000;
  const silent = e.exitCode === 255 && e.outputTail.trim() === "";
  if (e.kind === "timeout") {
    return {
      kind: "stalled",
      outputTail: [
        e.outputTail.trim(),
        `ssh: no working session within ${Math.round(silentFor / 1000)} s ` +
          "(the login, the node's shell or its home directory hung)",
      ]
        .filter((l) => l !== "")
        .join("\n"),
    };
  }
  if (silent && silentFor >= keepaliveBoundMs - 1000) {
    return {
      kind: "stalled",
      outputTail:
        `ssh: no answer from the node for ${Math.round(silentFor / 1000)} s after it accepted ` +
        `the connection (keepalive bound ${SERVER_ALIVE_INTERVAL_S} s × ${SERVER_ALIVE_COUNT_MAX})`,
    };
  }
  return { kind: e.kind, outputTail: e.outputTail };
}

/** Failures of connecting that no retry of the same command would change. */
const CONNECTION_KINDS: ReadonlySet<FailureKind> = new Set<FailureKind>([
  "host-key",
  "auth",
  "unreachable",
  "stalled",
  "timeout",
]);

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
  /** rsync `--timeout`: end when no data moved for this long (default RSYNC_IO_TIMEOUT_S). */
  readonly ioTimeoutS?: number;
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
  private contact: Promise<{ kind: FailureKind; outputTail: string } | undefined> | undefined;
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
      choices.forwardAgent ?? null,
    ]);
    let args = this.options.get(key);
    if (!args) {
      const { controlPath: _multiplexed, ...unmultiplexed } = this.files;
      args = sshOptions(this.target, multiplex ? this.files : unmultiplexed, {
        ...choices,
        capabilities: sshCapabilities(),
      });
      // A private agent's socket is used once: do not keep its options.
      if (choices.forwardAgent === undefined) this.options.set(key, args);
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
   * Connection closed"), and a refresh reads every resource of a node at once. Repeated
   * when the socket is gone (the master ended after ControlPersist idle seconds).
   *
   * A failure of connecting (host key, auth, unreachable, stalled) is the step's failure and is
   * thrown for it (as `inv`): retrying the command would only wait out the same bound again.
   * Any other failure is not reported: the command itself then connects on its own and
   * reports it. Each waiter waits at most `limitMs` (its own step's limit).
   */
  private async firstContact(
    connectTimeoutS: number | undefined,
    inv: Omit<Invocation, "args">,
    limitMs: number,
  ): Promise<void> {
    if (fs.existsSync(this.files.controlPath)) return;
    if (!this.contact) {
      const started = Date.now();
      const pending = invoke({
        node: this.target,
        step: "connect",
        file: "ssh",
        args: [...this.sshArgs(true, { connectTimeoutS }), ...sshDestination(this.target), "true"],
        stdin: undefined,
        display: "true",
        secrets: this.secrets,
        opts: { step: "connect", timeoutMs: CONTACT_TIMEOUT_MS },
      }).then(
        () => undefined,
        (e: unknown) => (e instanceof RemoteCommandError ? contactFailure(e, started) : undefined),
      );
      this.contact = pending;
      void pending.then(() => {
        if (this.contact === pending) this.contact = undefined;
      });
    }
    // The contact ends by CONTACT_TIMEOUT_MS by itself; a step with a shorter limit stops
    // waiting at its own.
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<"limit">((resolve) => {
      if (limitMs < CONTACT_TIMEOUT_MS) timer = setTimeout(() => resolve("limit"), limitMs);
    });
    const outcome = await Promise.race([this.contact, waited]).finally(() => clearTimeout(timer));
    if (outcome === "limit") {
      throw fail(inv, "timeout", {
        stdout: "",
        stderr: "",
        combined: `no session with ${this.target.host} within the limit (ssh handshake unfinished)`,
      });
    }
    if (outcome !== undefined && CONNECTION_KINDS.has(outcome.kind)) {
      throw fail(inv, outcome.kind, { stdout: "", stderr: "", combined: outcome.outputTail });
    }
  }

  /**
   * Run `command` on the node under the environment contract (remote-command.ts), through
   * the master's session queue. Throws RemoteCommandError naming node, step, command and the
   * last output lines.
   */
  async run(command: RemoteCommand, runOpts: RunOptions): Promise<RunResult> {
    const opts = { ...runOpts, timeoutMs: runOpts.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS };
    const built = buildRemoteCommand(command, false, nodeLimitS(opts.timeoutMs));
    this.assertOpen();
    const inv: Omit<Invocation, "args"> = {
      node: this.target,
      step: opts.step,
      file: "ssh",
      stdin: built.stdin,
      display: built.display,
      secrets: [...built.secrets, ...this.secrets],
      opts,
    };
    await this.firstContact(opts.connectTimeoutS, inv, opts.timeoutMs);
    const args = [
      ...this.sshArgs(true, { connectTimeoutS: opts.connectTimeoutS }),
      ...sshDestination(this.target),
      built.commandLine,
    ];
    return this.queue(() => invoke({ ...inv, args }));
  }

  /**
   * One stream to `host:port` as the node sees it (`ssh -W`), for a caller that owns the
   * listening socket and pipes one accepted connection into the child's stdin and out of its
   * stdout (`sparkform endpoint`). Through the ControlMaster when it is up (a `run` first makes
   * it), else on a connection of its own; never a master itself. The stack's pinning and key,
   * the minimal environment, nothing secret in argv.
   */
  stdioForward(host: string, port: number): ChildProcess {
    this.assertOpen();
    assertOperand(host, "forward host");
    if (!/^[A-Za-z0-9._:-]+$/.test(host) || !Number.isInteger(port) || port < 1 || port > 65535)
      throw new UnsafeArgumentError(
        `forward ${JSON.stringify(host)}:${String(port)} is not a host and a port 1-65535`,
      );
    const args = [
      ...sshOptions(this.target, this.files, {
        stdioForward: { host, port },
        capabilities: sshCapabilities(),
      }),
      ...sshDestination(this.target),
    ];
    return spawn("ssh", args, {
      env: childEnv({ agent: true, set: { SHELL: "/bin/sh" } }),
      stdio: ["pipe", "pipe", "pipe"],
    });
  }

  /**
   * Run ONE command with an agent forwarded that holds only the key sparkform connects to
   * `keyOf` with (default this node; for a peer copy, the peer): a private ssh-agent started
   * for this command and killed when it ends (agent-forward.ts). Uses its own connection
   * (`ControlPath=none`): `-A` on a session multiplexed over an existing master does nothing,
   * since forwarding is decided when the master connects. Throws RemoteCommandError (kind
   * "spawn") without connecting when there is no such key (see `forwardableKey`), so the caller
   * can relay instead. The operator's own agent is never forwarded.
   */
  async forwardAgentOnce(
    command: RemoteCommand,
    runOpts: RunOptions,
    keyOf: SshTarget = this.target,
  ): Promise<RunResult> {
    const opts = { ...runOpts, timeoutMs: runOpts.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS };
    const built = buildRemoteCommand(command, true, nodeLimitS(opts.timeoutMs));
    const inv: Omit<Invocation, "args"> = {
      node: this.target,
      step: opts.step,
      file: "ssh",
      stdin: built.stdin,
      display: built.display,
      secrets: [...built.secrets, ...this.secrets],
      opts,
    };
    const key = forwardableKey(keyOf);
    if ("reason" in key) {
      throw fail(inv, "spawn", {
        stdout: "",
        stderr: "",
        cause: `no agent forwarded: ${key.reason}`,
      });
    }
    this.assertOpen();
    let agent: PrivateAgent;
    try {
      // The key lives in the agent a minute longer than the command may run.
      agent = await startPrivateAgent(key.file, nodeLimitS(opts.timeoutMs) + 60, sessionDir());
    } catch (e) {
      throw fail(inv, "spawn", { stdout: "", stderr: "", cause: String((e as Error).message) }, e);
    }
    try {
      const args = [
        ...this.sshArgs(false, {
          connectTimeoutS: opts.connectTimeoutS,
          forwardAgent: agent.socket,
        }),
        ...sshDestination(this.target),
        built.commandLine,
      ];
      // ssh forwards `ForwardAgent=<socket>` only when it has an agent of its own
      // (SSH_AUTH_SOCK); without the operator's, give it the private one.
      return await invoke({
        ...inv,
        args,
        ...(agentAvailable() ? {} : { agentSocket: agent.socket }),
      });
    } finally {
      agent.stop();
    }
  }

  /**
   * `rsync -a` between the control node and this node; exactly one of `src`/`dest` is
   * remote. The remote shell (`-e`) is ssh with the same options as `run` (pinning,
   * multiplexing), and the transfer takes a place in the same session queue.
   */
  async rsync(src: RsyncPath, dest: RsyncPath, rsyncOpts: RsyncOptions): Promise<RunResult> {
    const opts = { ...rsyncOpts, timeoutMs: rsyncOpts.timeoutMs ?? DEFAULT_RSYNC_TIMEOUT_MS };
    const ioTimeoutS = opts.ioTimeoutS ?? RSYNC_IO_TIMEOUT_S;
    if (!(Number.isInteger(ioTimeoutS) && ioTimeoutS > 0)) {
      throw new UnsafeArgumentError(
        `rsync ioTimeoutS ${String(ioTimeoutS)} must be a positive integer`,
      );
    }
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
      `--timeout=${ioTimeoutS}`,
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
    const inv: Omit<Invocation, "args"> = {
      node,
      step: opts.step,
      file: "rsync",
      stdin: undefined,
      display,
      secrets: this.secrets,
      opts,
    };
    await this.firstContact(opts.connectTimeoutS, inv, opts.timeoutMs);
    return this.queue(() => invoke({ ...inv, args }));
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
 * The key a forwarded agent for reaching `target` may hold: the temp copy of its privateKey,
 * else its identityFile, when the operator runs an agent (their consent to node-to-node copies,
 * as before), the key loads without a passphrase, and the local ssh can forward a chosen socket
 * (ForwardAgent=<path>, OpenSSH 8.2). Otherwise the reason there is none; the caller then
 * relays instead of forwarding (the operator's agent is never forwarded).
 */
export function forwardableKey(target: SshTarget): { file: string } | { reason: string } {
  // Running an agent is how an operator says node-to-node copies may ride one (as before);
  // what rides is still only the private agent below, never theirs.
  if (!agentAvailable()) {
    return {
      reason:
        "no ssh agent on the control node (SSH_AUTH_SOCK): copies are relayed through it; with " +
        "one running, nodes copy from each other with a private agent holding only the cluster's key",
    };
  }
  const file = openNode(target).files.keyFile ?? target.identityFile;
  if (file === undefined) {
    return {
      reason:
        `node "${target.name}" has no identityFile or privateKey of sparkform's own, and the ` +
        "operator's agent is never forwarded",
    };
  }
  if (!sshCapabilities().forwardAgentPath) {
    return {
      reason:
        "the local ssh cannot forward a chosen agent (ForwardAgent=<socket> needs OpenSSH 8.2)",
    };
  }
  const why = unloadableReason(file);
  return why === undefined ? { file } : { reason: `node "${target.name}" ${why}` };
}

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
  stopAllPrivateAgents();
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
