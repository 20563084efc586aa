// Running commands on nodes: the real `ssh` and `rsync` binaries of the control node,
// through execa, so a user's ssh_config, agent and keys work exactly as on the command
// line. Every call is independent (plain functions, plain data) so it can run inside a
// Pulumi dynamic-provider method; the only shared state is control-master.ts's registry.

import { execa } from "execa";
import * as fs from "node:fs";
import pLimit from "p-limit";
import { validateTarget, type SshTarget } from "./connection";
import {
  closeMasters,
  controlPath,
  knownHostsFile,
  privateKeyFile,
  registerMaster,
} from "./control-master";
import { classifySshFailure, RemoteCommandError, redact, type FailureKind } from "./errors";
import { assertOperand, rsyncRshJoin, shJoin, UnsafeArgumentError } from "./quote";
import { buildRemoteCommand, type RemoteCommand } from "./remote-command";
import { sshDestination, sshOptions, type SshOptionChoices } from "./ssh-options";

export type { SshTarget, SshJump } from "./connection";
export type { RemoteCommand, RemoteScript, EnvValue, PathEntry } from "./remote-command";
export { RemoteCommandError } from "./errors";

export interface RunOptions {
  /** What this command is for, as the error message should say it ("facts", "rsync tree"). */
  readonly step: string;
  /** Kill the command after this long. Default: no limit beyond ssh's keepalives. */
  readonly timeoutMs?: number;
  /** ssh ConnectTimeout in seconds (default 10). */
  readonly connectTimeoutS?: number;
  /** Exit codes that are results, not failures (e.g. [1] for a `test` probe). Default [0]. */
  readonly okExitCodes?: readonly number[];
  /** Each output line as it arrives (secrets redacted), e.g. for Pulumi log progress. */
  readonly onLine?: (line: string, stream: "stdout" | "stderr") => void;
}

export interface RunResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/** Environment for ssh/rsync children: ssh runs ProxyCommand with $SHELL, so make it sh. */
const CHILD_ENV = { SHELL: "/bin/sh" };

interface Invocation {
  readonly node: SshTarget;
  readonly step: string;
  readonly file: "ssh" | "rsync";
  readonly args: string[];
  readonly stdin: string | undefined;
  readonly display: string;
  readonly secrets: readonly string[];
  readonly opts: RunOptions;
}

function endpoint(t: SshTarget): string {
  return `${t.user}@${t.host}:${t.port}${t.jump ? ` via ${t.jump.user}@${t.jump.host}:${t.jump.port ?? 22}` : ""}`;
}

function secretsOf(t: SshTarget): string[] {
  return t.privateKey === undefined ? [] : [t.privateKey];
}

/** Local files and ssh options for `t`; multiplexed unless `multiplex` is false. */
function optionsFor(t: SshTarget, multiplex: boolean, choices: SshOptionChoices): string[] {
  validateTarget(t);
  const cp = multiplex ? controlPath(t) : undefined;
  const args = sshOptions(
    t,
    {
      knownHosts: knownHostsFile(t),
      jumpKnownHosts: t.jump ? knownHostsFile(t, "jump") : undefined,
      keyFile: privateKeyFile(t),
      controlPath: cp,
    },
    choices,
  );
  if (cp !== undefined)
    registerMaster(cp, ["ssh", "-F", "/dev/null", "-o", `ControlPath=${cp}`, "--", t.host]);
  return args;
}

function fail(
  inv: Invocation,
  kind: FailureKind,
  r: {
    stdout: string;
    stderr: string;
    combined?: string;
    exitCode?: number;
    signal?: string;
    cause?: string;
  },
): RemoteCommandError {
  return new RemoteCommandError(
    {
      node: inv.node.name,
      step: inv.step,
      command: inv.display,
      kind,
      exitCode: r.exitCode,
      signal: r.signal,
      timeoutMs: inv.opts.timeoutMs,
      endpoint: endpoint(inv.node),
      stdout: r.stdout,
      stderr: r.stderr,
      combined: r.combined,
      cause: r.cause,
    },
    inv.secrets,
  );
}

/**
 * Sessions one ControlMaster carries at once. sshd refuses a session beyond its MaxSessions
 * (default 10) with "mux_client_request_session: session request failed: Session open refused
 * by peer"; ssh then opens a connection of its own, and a burst of those meets MaxStartups
 * (default 10:30:100) and dies in "kex_exchange_identification: Connection reset by peer".
 * A refresh reads every resource of a node at once, so queue here instead, under the default.
 */
export const SESSIONS_PER_MASTER = 8;

const masterQueues = new Map<string, ReturnType<typeof pLimit>>();

/** Run `task` in the session queue of `node`'s ControlMaster. */
function throughMaster<T>(node: SshTarget, task: () => Promise<T>): Promise<T> {
  const cp = controlPath(node);
  let queue = masterQueues.get(cp);
  if (!queue) {
    queue = pLimit(SESSIONS_PER_MASTER);
    masterQueues.set(cp, queue);
  }
  return queue(task);
}

/** Lines kept for the error tail, both streams in arrival order. */
const KEEP_LINES = 200;

async function invoke(inv: Invocation): Promise<RunResult> {
  const { onLine } = inv.opts;
  const recent: string[] = [];
  const tap = (stream: "stdout" | "stderr") =>
    function* (line: unknown) {
      const text = String(line);
      recent.push(text);
      if (recent.length > KEEP_LINES) recent.shift();
      onLine?.(redact(text, inv.secrets), stream);
      yield line;
    };
  const sub = execa(inv.file, inv.args, {
    env: CHILD_ENV,
    input: inv.stdin,
    stdin: inv.stdin === undefined ? "ignore" : undefined,
    reject: false,
    stripFinalNewline: false,
    maxBuffer: 256 * 1024 * 1024,
    stdout: tap("stdout"),
    stderr: tap("stderr"),
  });
  let timedOut = false;
  const timer =
    inv.opts.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          sub.kill("SIGKILL");
          // A multiplexed ssh hands its pipes to the ControlMaster, which holds them until
          // the remote command ends; so stop waiting for them rather than for the process.
          sub.stdout?.destroy();
          sub.stderr?.destroy();
        }, inv.opts.timeoutMs);
  const r = await sub.finally(() => clearTimeout(timer));
  const stdout = typeof r.stdout === "string" ? r.stdout : "";
  const stderr = typeof r.stderr === "string" ? r.stderr : "";
  const out = { stdout, stderr, combined: recent.join("\n") };
  if (timedOut) throw fail(inv, "timeout", out);
  if (r.exitCode === undefined) {
    if (r.signal) throw fail(inv, "signal", { ...out, signal: r.signal });
    // Could not spawn (ENOENT, …): execa's cause names it.
    const cause =
      r.cause instanceof Error ? r.cause.message : String(r.originalMessage ?? "unknown");
    throw fail(inv, "spawn", { ...out, cause: `${inv.file}: ${cause}` });
  }
  const ok = inv.opts.okExitCodes ?? [0];
  if (!ok.includes(r.exitCode)) {
    const kind =
      inv.file === "ssh" ? classifySshFailure(r.exitCode, stderr) : rsyncKind(r.exitCode, stderr);
    throw fail(inv, kind, { ...out, exitCode: r.exitCode });
  }
  return { stdout, stderr, exitCode: r.exitCode };
}

function rsyncKind(exitCode: number, stderr: string): FailureKind {
  // rsync reports its remote shell's failure as exit 255 (or 12 after a partial handshake).
  const ssh = classifySshFailure(255, stderr);
  return ssh === "exit" || ssh === "ssh" ? (exitCode === 255 ? "ssh" : "exit") : ssh;
}

const contacts = new Map<string, Promise<void>>();

/**
 * Before the first multiplexed command to a node, one connection authenticates and becomes
 * the ControlMaster while the others wait for it: sshd drops concurrent unauthenticated
 * connections beyond MaxStartups (default 10:30:100, "kex_exchange_identification: Connection
 * closed"), and a refresh reads every resource of a node at once. A failure here is not
 * reported: the command itself then connects on its own and reports it.
 */
async function firstContact(node: SshTarget, connectTimeoutS: number | undefined): Promise<void> {
  const cp = controlPath(node);
  if (fs.existsSync(cp)) return;
  let pending = contacts.get(cp);
  if (!pending) {
    pending = invoke({
      node,
      step: "connect",
      file: "ssh",
      args: [...optionsFor(node, true, { connectTimeoutS }), ...sshDestination(node), "true"],
      stdin: undefined,
      display: "true",
      secrets: secretsOf(node),
      opts: { step: "connect", timeoutMs: 60_000 },
    }).then(
      () => undefined,
      () => undefined,
    );
    contacts.set(cp, pending);
    void pending.then(() => contacts.delete(cp));
  }
  await pending;
}

/**
 * Run `command` on `node` under the environment contract (remote-command.ts).
 * Throws RemoteCommandError naming node, step, command and the last output lines.
 */
export async function run(
  node: SshTarget,
  command: RemoteCommand,
  opts: RunOptions,
): Promise<RunResult> {
  const built = buildRemoteCommand(command);
  await firstContact(node, opts.connectTimeoutS);
  const args = [
    ...optionsFor(node, true, { connectTimeoutS: opts.connectTimeoutS }),
    ...sshDestination(node),
    built.commandLine,
  ];
  return throughMaster(node, () =>
    invoke({
      node,
      step: opts.step,
      file: "ssh",
      args,
      stdin: built.stdin,
      display: built.display,
      secrets: [...built.secrets, ...secretsOf(node)],
      opts,
    }),
  );
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
 * Run ONE command on `node` with the local agent forwarded, for node-to-node copies
 * (nodes hold no keys for each other). Uses its own connection (`ControlPath=none`):
 * `-A` on a session multiplexed over an existing master does nothing, since forwarding is
 * decided when the master connects. Throws RemoteCommandError (kind "spawn") without
 * connecting when no agent is available, so the caller can fall back to relaying.
 */
export async function forwardAgentOnce(
  node: SshTarget,
  command: RemoteCommand,
  opts: RunOptions,
): Promise<RunResult> {
  const built = buildRemoteCommand(command, true);
  const inv: Omit<Invocation, "args"> = {
    node,
    step: opts.step,
    file: "ssh",
    stdin: built.stdin,
    display: built.display,
    secrets: [...built.secrets, ...secretsOf(node)],
    opts,
  };
  if (!agentAvailable()) {
    throw fail({ ...inv, args: [] }, "spawn", {
      stdout: "",
      stderr: "",
      cause: "no ssh agent to forward (SSH_AUTH_SOCK is unset or not a socket)",
    });
  }
  const args = [
    ...optionsFor(node, false, { connectTimeoutS: opts.connectTimeoutS, forwardAgent: true }),
    ...sshDestination(node),
    built.commandLine,
  ];
  return invoke({ ...inv, args });
}

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

/**
 * A remote rsync path. `~/x` becomes `x` (the remote rsync starts in $HOME); the path is
 * sent with `-s` (protect-args), so no remote shell re-parses it, and rsync's own wildcard
 * characters are refused rather than expanded.
 */
function remotePath(p: string, what: string): string {
  const rel = p === "~" ? "." : p.startsWith("~/") ? p.slice(2) || "." : p;
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

/**
 * `rsync -a` between the control node and `node`; exactly one of `src`/`dest` is remote.
 * The remote shell (`-e`) is ssh with the same options as `run` (pinning, multiplexing).
 */
export async function rsync(
  node: SshTarget,
  src: RsyncPath,
  dest: RsyncPath,
  opts: RsyncOptions,
): Promise<RunResult> {
  if ((typeof src === "string") === (typeof dest === "string")) {
    throw new UnsafeArgumentError("rsync: exactly one of src and dest must be {remote: path}");
  }
  const side = (p: RsyncPath, what: string): string =>
    typeof p === "string"
      ? assertOperand(p, `rsync ${what}`)
      : `${hostForRsync(node.host)}:${remotePath(p.remote, `rsync ${what}`)}`;
  await firstContact(node, opts.connectTimeoutS);
  const rsh = [
    "ssh",
    ...optionsFor(node, true, { connectTimeoutS: opts.connectTimeoutS }),
    "-p",
    String(node.port),
    "-l",
    node.user,
  ];
  for (const e of opts.excludes ?? []) {
    if (/[\n\r\0]/.test(e))
      throw new UnsafeArgumentError(`rsync exclude ${JSON.stringify(e)} contains a line break`);
  }
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
    side(src, "source"),
    side(dest, "destination"),
  ];
  const display = shJoin([
    "rsync",
    ...args.filter((_, i) => args[i - 1] !== "-e" && args[i] !== "-e"),
  ]);
  return throughMaster(node, () =>
    invoke({
      node,
      step: opts.step,
      file: "rsync",
      args,
      stdin: undefined,
      display,
      secrets: secretsOf(node),
      opts,
    }),
  );
}

/** End this process's ControlMasters and delete its private files (keys, known_hosts). */
export function close(): void {
  masterQueues.clear();
  closeMasters();
}
